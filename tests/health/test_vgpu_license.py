"""vGPU licensing (brief h35c): nvidia-smi's "vGPU Software Licensed Product / License Status"
read into DeviceSample.vgpu_license_status (-q text and XML), kept by the store, and judged by the
``vgpu-license`` rule: an unlicensed guest is a ``vgpu-unlicensed`` warning (restricted, or
restricted once its 20-minute grace period is over), one in its grace period ("Unlicensed
(Unrestricted)") is info, a licensed guest, a host and bare metal get nothing.

The held-out set is tests/data/vgpu_license (its SOURCES.md) and the two vGPU guests of
tests/data/smi_heldout7, read in place."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.rules.common import Context
from gpuwarden.health.rules.vgpu import LICENSE
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.smi.builder import to_vgpu_license_status
from gpuwarden.telemetry.store import Store
from gpuwarden.types.health import Severity
from gpuwarden.types.telemetry import DeviceSample, Snapshot
from tests.conftest import FIXTURES
from tests.telemetry.smi.heldout import (
    DATA_ROOT,
    assert_doctor_finds,
    assert_set_is_described,
    load_set,
)

SET, SAMPLES = load_set("vgpu_license")
READ = [s for s in SAMPLES if s["reads"] == "smi"]
HELDOUT7 = DATA_ROOT / "smi_heldout7"
# the two vGPU guests of smi_heldout7, read in place: (file, state read by hand, doctor above info)
GUESTS7 = (
    ("q__cuda-error-4-vgpu-readme__rtxa6000-24q-vgpu-unlicensed__535.183.06.txt", "unlicensed"),
    ("q__vgpu-dls-guide-ja__grid-a100-4c-licensed__510.47.03.fragment.txt", "licensed"),
)


def _read(path: Path) -> Snapshot:
    (snap,) = parse_smi_output(path.read_text(), path.name, 0.0)
    return snap


def test_the_set_is_described_and_new() -> None:
    assert_set_is_described(SET, SAMPLES)
    shared = "\n".join(
        p.read_text(errors="replace") for p in (FIXTURES / "nvidia-smi").rglob("*") if p.is_file()
    )
    for sample in SAMPLES:
        text = (SET / sample["file"]).read_text()
        assert "vgpu" in text.lower()  # a vGPU guest's or host's output
        uuid_or_status = [line for line in text.splitlines() if "UUID" in line or "Expiry" in line]
        assert not any(line.strip() and line in shared for line in uuid_or_status)


@pytest.mark.parametrize("sample", READ, ids=[s["file"] for s in READ])
def test_each_capture_reads_its_license_state(sample: dict[str, Any]) -> None:
    snap = _read(SET / sample["file"])
    assert [d.vgpu_license_status for d in snap.samples] == sample["license"]
    assert {d.info.driver_version for d in snap.samples} == {sample["driver"]}


@pytest.mark.parametrize("sample", SAMPLES, ids=[s["file"] for s in SAMPLES])
def test_doctor_names_only_what_is_wrong(sample: dict[str, Any]) -> None:
    assert_doctor_finds(SET / sample["file"], sample["doctor_codes"])


@pytest.mark.parametrize(("file", "state"), GUESTS7, ids=[f for f, _ in GUESTS7])
def test_the_smi_heldout7_guests(file: str, state: str) -> None:
    (sample,) = _read(HELDOUT7 / file).samples
    assert sample.vgpu_license_status == state
    findings = list(LICENSE.judge(sample, _context()))
    if state == "licensed":
        assert findings == []
        return
    (finding,) = findings
    assert (finding.code, finding.severity) == ("vgpu-unlicensed", Severity.WARNING)
    assert finding.device is not None and finding.device.name == "NVIDIA RTXA6000-24Q"


def test_the_unlicensed_rtxa6000_guest_is_a_warning_in_doctor() -> None:
    """The README's guest: CUDA refused with 'operation not supported' while unlicensed."""
    assert_doctor_finds(HELDOUT7 / GUESTS7[0][0], ["vgpu-unlicensed"])


# --- the four NVML states, as the -q text prints them -------------------------------------------


def _guest(state: str) -> DeviceSample:
    """The RTXA6000-24Q guest with its License Status line saying ``state``."""
    text = (HELDOUT7 / GUESTS7[0][0]).read_text()
    line = "        License Status                    : Unlicensed\n"
    assert text.count(line) == 1
    return _read_text(text.replace(line, line.replace("Unlicensed", state)))


def _read_text(text: str) -> DeviceSample:
    (snap,) = parse_smi_output(text, "guest.txt", 0.0)
    (sample,) = snap.samples
    return sample


def _context() -> Context:
    return Context(Thresholds(), None, "smi:test")


@pytest.mark.parametrize(
    ("printed", "state", "severity"),
    [
        ("Unlicensed (Restricted)", "unlicensed-restricted", Severity.WARNING),
        ("Unlicensed", "unlicensed", Severity.WARNING),
        ("Unlicensed (Unrestricted)", "unlicensed-unrestricted", Severity.INFO),
        ("Licensed (Expiry: 2025-11-19 6:36:54 GMT)", "licensed", None),
        ("Licensed", "licensed", None),
        ("N/A", None, None),
    ],
)
def test_each_state_is_judged(printed: str, state: str | None, severity: Severity | None) -> None:
    sample = _guest(printed)
    assert sample.vgpu_license_status == state
    findings = list(LICENSE.judge(sample, _context())) if LICENSE.reports(sample) else []
    assert [f.severity for f in findings] == ([] if severity is None else [severity])
    assert all(f.code == "vgpu-unlicensed" and f.action is None for f in findings)


def test_xml_reads_the_same_element() -> None:
    text = (SET / READ[1]["file"]).read_text()
    licensed = "Licensed (Expiry: 2026-7-7 16:1:44 GMT)"
    assert licensed in text
    sample = _read_text(text.replace(licensed, "Unlicensed (Restricted)"))
    assert sample.vgpu_license_status == "unlicensed-restricted"


def test_a_hosts_guest_states_are_not_the_host_gpus() -> None:
    """`nvidia-smi vgpu -q` nests each guest's License Status under its "vGPU ID": the -q reader
    reads only the GPU's own "vGPU Software Licensed Product" block."""
    text = (SET / SAMPLES[3]["file"]).read_text()
    assert "Unlicensed (Unrestricted)" in text
    host = (SET / SAMPLES[2]["file"]).read_text()
    sample = _read_text(host.rstrip("\n") + "\n" + text.split("\n", 1)[1])
    assert sample.vgpu_license_status is None


@pytest.mark.parametrize(
    ("cell", "state"),
    [
        ("N/A (Expiry: N/A)", None),
        ("  Unlicensed   (Restricted) ", "unlicensed-restricted"),
        ("Licensed (Expiry: N/A)", "licensed"),
        ("Unknown", "unknown"),
        (None, None),
    ],
)
def test_license_cells(cell: str | None, state: str | None) -> None:
    assert to_vgpu_license_status(cell) == state


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=60))
def test_any_cell_reads_as_words_or_nothing(cell: str) -> None:
    state = to_vgpu_license_status(cell)
    assert state is None or (state and state == state.lower() and " " not in state)


def test_code_row_states_the_documented_restriction() -> None:
    row = CODES["vgpu-unlicensed"]
    assert row.severity is Severity.WARNING and row.action is None
    assert "20-minute" in row.cause and "3 fps" in row.cause and "CUDA disabled" in row.cause


def test_the_store_keeps_the_state(tmp_path: Path) -> None:
    sample = dataclasses.replace(_guest("Unlicensed (Restricted)"), timestamp_s=1_700_000_000.0)
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        store.write(Snapshot(1_700_000_000.0, "guest", "smi", False, (sample,)))
    with Store.open(path, readonly=True) as store:
        (back,) = store.samples()
    assert back.vgpu_license_status == "unlicensed-restricted"
