"""Held-out set 16: every nvidia-smi output (table, topo -m, CSV query, -L, -q -x, "No devices
were found") that 2025-2026 issue threads of repositories sets 12-15 did not sample paste (NVIDIA's
open-gpu-kernel-modules, SGLang, Unsloth, Jan, Triton server, 1Panel, devcontainers ...), in the
order the issues corpus gave them, as its stored excerpts hold them (tests/data/smi_heldout16/:
SOURCES.md says where each comes from and what was skipped, expected.json holds the values read off
each by hand). Healthy GPUs get nothing above info.

Also here: a GPU nvidia-smi names above its table as one NVML may not open for this user or
container ("Unable to determine the device handle for GPU...: Insufficient Permissions",
NVML_ERROR_NO_PERMISSION) is reported as not read (information, no fault) and the devices check
does not pass as if every GPU had been read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog.nvml_enums import INSUFFICIENT_PERMISSIONS
from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.health.checks import DEVICE_NOT_READ, status_of
from gpuwarden.types.health import CheckStatus, Finding, Severity
from tests.telemetry.smi.heldout import (
    DATA_ROOT,
    load_set,
    matrix_check,
    mixed_set_checks,
)

DATA, SAMPLES = load_set("smi_heldout16")

# Samples a parser still cannot read or doctor cannot judge as an engineer does, and why: none.
READ_XFAIL: dict[str, str] = {}
DOCTOR_XFAIL: dict[str, str] = {}


(
    test_the_set_is_the_one_described,
    test_reads_the_printed_values,
    test_what_holds_no_gpu_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = mixed_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=15)


test_reads_the_matrix = matrix_check(DATA, SAMPLES)


# --- a GPU NVML may not open for this user or container

# A real R610 screen (smi_heldout14) whose GPU 1 nvidia-smi could not open ("Unknown Error", a
# GPU that stopped answering) and a real healthy R580 screen of this set.
_R610_UNOPENED = (
    DATA_ROOT
    / "smi_heldout14"
    / "table__dfch-llmops__gpu1-unknown-error-above-3x-rtx-pro-6000__610.57.04.txt"
)
_R610_LINE = "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n"
_HEALTHY_R580 = DATA / next(s["file"] for s in SAMPLES if s["file"].startswith("table__aikitoria"))


def _doctor(tmp_path: Path, text: str) -> tuple[list[Finding], dict[str, Any]]:
    path = tmp_path / "screen.txt"
    path.write_text(text)
    report = diagnose_captures([str(path)], DoctorOptions())
    devices = next(c for c in report.checks if c.name == "devices")
    return list(report.findings), {"status": devices.status, "detail": devices.detail}


def _above_info(findings: list[Finding]) -> list[tuple[str, int | None]]:
    return sorted(
        (f.code, f.device.index if f.device else None)
        for f in findings
        if f.severity.rank > Severity.INFO.rank
    )


def test_a_gpu_nvml_refuses_this_user_is_reported_not_read_and_not_lost(tmp_path: Path) -> None:
    """NVML's string for NVML_ERROR_NO_PERMISSION in the line R610 prints for a GPU it cannot
    open: information about GPU 1 (its bus id from the line), no gpu-lost; the warnings are the
    other GPUs' own, the same as with the line gone; the devices check skips, naming GPU 1."""
    screen = _R610_UNOPENED.read_text()
    refused = screen.replace(
        _R610_LINE, _R610_LINE.replace("Unknown Error", INSUFFICIENT_PERMISSIONS)
    )
    findings, devices = _doctor(tmp_path, refused)
    (denied,) = [f for f in findings if f.code == DEVICE_NOT_READ]
    assert denied.severity is Severity.INFO
    assert denied.device is not None
    assert (denied.device.index, denied.device.pci_bus_id) == (1, "00000000:34:00.0")
    assert INSUFFICIENT_PERMISSIONS in str(denied.evidence[0].detail)
    assert "gpu-lost" not in {f.code for f in findings}
    without_line, _ = _doctor(tmp_path, screen.replace(_R610_LINE, ""))
    assert (
        _above_info(findings)
        == _above_info(without_line)
        == [
            ("temperature-high", 0),
            ("temperature-high", 2),
        ]
    )
    assert devices["status"] is CheckStatus.SKIP
    assert devices["detail"].startswith("GPU 1 was not read")


def test_a_gpu_nvml_refuses_beside_healthy_ones_gives_no_warning(tmp_path: Path) -> None:
    """The R5xx line (bus id alone) above a healthy screen: the unlisted GPU takes the next index;
    nothing above info, and the devices check does not pass."""
    line = (
        f"Unable to determine the device handle for GPU 0000:3B:00.0: {INSUFFICIENT_PERMISSIONS}\n"
    )
    findings, devices = _doctor(tmp_path, line + _HEALTHY_R580.read_text())
    assert _above_info(findings) == []
    assert [
        (f.device.index if f.device else None) for f in findings if f.code == DEVICE_NOT_READ
    ] == [2]
    assert devices["status"] is CheckStatus.SKIP


def test_a_gpu_that_does_not_answer_is_still_lost(tmp_path: Path) -> None:
    """The real line, as printed ("Unknown Error"): gpu-lost, the devices check fails."""
    findings, devices = _doctor(tmp_path, _R610_UNOPENED.read_text())
    assert ("gpu-lost", 1) in _above_info(findings)
    assert DEVICE_NOT_READ not in {f.code for f in findings}
    assert devices["status"] is CheckStatus.FAIL


def _finding(code: str, severity: Severity) -> Finding:
    return Finding(code=code, severity=severity, title=code, cause="", remedy="")


@pytest.mark.parametrize(
    ("findings", "status"),
    [
        ([_finding(DEVICE_NOT_READ, Severity.INFO)], CheckStatus.SKIP),
        ([_finding("persistence-off", Severity.INFO)], CheckStatus.PASS),
        (
            [_finding(DEVICE_NOT_READ, Severity.INFO), _finding("gpu-lost", Severity.CRITICAL)],
            CheckStatus.FAIL,
        ),
    ],
)
def test_a_check_beside_a_gpu_not_read_does_not_pass(
    findings: list[Finding], status: CheckStatus
) -> None:
    assert status_of(findings) is status
