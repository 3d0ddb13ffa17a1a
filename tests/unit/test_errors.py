from __future__ import annotations

import pytest

from gpuwarden.errors import (
    CorruptInputError,
    GpuwardenError,
    InputError,
    InvalidConfigError,
    MissingExtraError,
    UnknownNameError,
)


def test_every_error_class_has_a_kebab_reference_and_an_exit_code() -> None:
    for cls in (GpuwardenError, InputError, InvalidConfigError, CorruptInputError):
        err = cls("boom", hint="do this")
        assert err.reference.replace("-", "").isalnum()
        assert err.exit_code in {1, 2}
        assert err.to_dict()["hint"] == "do this"


def test_reference_must_be_kebab_case() -> None:
    with pytest.raises(ValueError, match="kebab-case"):
        InputError("x", reference="Not_Kebab")


def test_unknown_name_suggests_or_points_at_the_catalog() -> None:
    err = UnknownNameError("gpu", "H10", ["H100 SXM5 80GB"])
    assert err.reference == "unknown-gpu"
    assert err.hint is not None and "H100 SXM5 80GB" in err.hint
    bare = UnknownNameError("model", "zzz")
    assert bare.hint == "run `gpuwarden catalog models` to list the known names"


def test_missing_extra_names_the_extra() -> None:
    err = MissingExtraError("exact mode", "torch", "torch")
    assert err.exit_code == 3
    assert err.hint == "pip install 'gpuwarden[torch]'"
