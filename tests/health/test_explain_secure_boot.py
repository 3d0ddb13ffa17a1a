"""Secure Boot refusing the nvidia module: the kernel's EKEYREJECTED / ENOKEY as modprobe prints
them, and nvidia-installer's own sentence, read as driver-module-unsigned — a rebuild (the
driver-not-loaded fix) is signed with the same untrusted key and refused again."""

from __future__ import annotations

import pytest

from gpuwarden.health.explain import BY_CODE
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings


@pytest.mark.parametrize(
    "text",
    [
        "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service",
        "modprobe: ERROR: could not insert 'nvidia_drm': Required key not available",
        "ERROR: The kernel module failed to load. Secure boot is enabled on this system, so this "
        "is likely because it was not signed by a key that is trusted by the kernel. Please try "
        "installing the driver again with the '--module-signing-secret-key' and "
        "'--module-signing-public-key' options",
    ],
)
def test_a_refused_signature_reads_the_unsigned_module(text: str) -> None:
    assert cause_readings(text) == [("driver-module-unsigned", Confidence.HIGH)]


def test_the_fix_enrols_a_key_rather_than_rebuilding() -> None:
    fixes = " ".join(BY_CODE["driver-module-unsigned"].fixes)
    assert "mokutil --import" in fixes and "Secure Boot off" in fixes


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        # another module refused under Secure Boot is not the GPU driver (set 11's unknowns)
        ("modprobe: ERROR: could not insert 'xpad': Key was rejected by service", None),
        # a module that loads but finds no GPU is still the driver not loaded
        ("modprobe: ERROR: could not insert 'nvidia': No such device", "driver-not-loaded"),
    ],
)
def test_other_refusals_keep_their_reading(text: str, cause: str | None) -> None:
    readings = cause_readings(text)
    assert (readings[0][0] if readings else None) == cause
