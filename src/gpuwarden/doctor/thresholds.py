"""Health thresholds from a user's TOML file (the rules themselves read only the dataclass)."""

from __future__ import annotations

from gpuwarden.errors import InputError, naming
from gpuwarden.files import CaptureTooLargeError, read_capped
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS, Thresholds, thresholds_from_toml

# A thresholds file is a few dozen lines; anything this big is the wrong file.
MAX_THRESHOLDS_BYTES = 1 << 20


def load_thresholds(path: str | None) -> Thresholds:
    """The defaults, or the defaults overridden by the TOML file at ``path``."""
    if path is None:
        return DEFAULT_THRESHOLDS
    try:
        raw, _ = read_capped(path, MAX_THRESHOLDS_BYTES)
    except OSError as exc:
        raise InputError(
            f"cannot read the thresholds file {path!r}: {exc.strerror or exc}",
            reference="thresholds-unreadable",
            hint="pass a readable TOML file to --thresholds "
            "(README: verdict codes, health thresholds)",
        ) from None
    except CaptureTooLargeError:
        raise InputError(
            f"the thresholds file {path!r} is larger than {MAX_THRESHOLDS_BYTES >> 20} MiB",
            reference="thresholds-invalid",
            hint="a thresholds file holds a few TOML keys; check the path",
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(
            f"the thresholds file {path!r} is not UTF-8 text",
            reference="thresholds-invalid",
            hint="write the thresholds as TOML (README: verdict codes, health thresholds)",
        ) from None
    with naming(path):
        return thresholds_from_toml(text)
