"""Held-out set 21: nvidia-smi outputs printed by 2025-2026 drivers (R570 to R610: the banner's
Driver or KMD Version 570.x-610.x) that GitHub issue threads of 2025-2026 paste, in the order the
issues corpus gave them, as its stored excerpts hold them (tests/data/smi_heldout21/: SOURCES.md
lists the searches, what was kept and what was skipped and why; expected.json holds the values
read off each sample by hand). Healthy GPUs get nothing above info.

Measured before any change: every screen read to the values printed, both banner-only excerpts
refused clearly, doctor gave no finding above info anywhere: no reader change came of this set.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.types.telemetry import DeviceSample
from tests.telemetry.smi.heldout import (
    load_set,
    mixed_set_checks,
    sample_gpus,
    samples_read_as,
    snapshot_json_devices,
)

DATA, SAMPLES = load_set("smi_heldout21")

# Samples a parser still cannot read or doctor cannot judge as an engineer does, and why: none.
READ_XFAIL: dict[str, str] = {}
DOCTOR_XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_printed_values,
    test_what_holds_no_gpu_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = mixed_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=10)

SCREENS = samples_read_as(SAMPLES, "smi")
_IDS = [s["file"] for s in SCREENS]


def _screen_cells(device: DeviceSample) -> dict[str, Any]:
    """The further cells of a default screen expected.json records per GPU, as read."""
    return {
        "pci_bus_id": device.info.pci_bus_id,
        "persistence_mode": device.persistence_mode,
        "pstate": device.pstate,
        "fan_pct": device.fan_speed_percent,
        "ecc_uncorrected_volatile": device.ecc_errors_uncorrected_volatile,
        "mig_mode": device.mig_mode,
    }


@pytest.mark.parametrize("sample", SCREENS, ids=_IDS)
def test_reads_the_other_cells_of_each_gpu(sample: dict[str, Any]) -> None:
    assert [_screen_cells(d) for d in sample_gpus(DATA, sample)] == sample["screen"]


@pytest.mark.parametrize("sample", SCREENS, ids=_IDS)
def test_reads_the_cuda_version_of_either_banner(sample: dict[str, Any]) -> None:
    """R610 prints 'KMD Version' / 'CUDA UMD Version' where earlier branches print 'Driver
    Version' / 'CUDA Version' (nvidia-smi's release notes: the old names are deprecated)."""
    assert {d.info.cuda_driver_version for d in sample_gpus(DATA, sample)} == {sample["cuda"]}


@pytest.mark.parametrize("sample", SCREENS, ids=_IDS)
def test_snapshot_json_prints_the_same_driver_and_gpus(
    sample: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    printed = snapshot_json_devices(DATA / sample["file"], capsys)
    assert [d["name"] for d in printed] == [g["name"] for g in sample["gpus"]]
    assert {d["driver_version"] for d in printed} == {sample["driver"]}
    assert {d["cuda_driver_version"] for d in printed} == {sample["cuda"]}
