"""The data-center driver branches NVIDIA's "Supported Drivers and CUDA Toolkit Versions" tables
list, each with its designation and end of life, and what doctor then says of a real capture on
that branch: an info finding (README: `driver-branch-eol` is info), no alarm."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.catalog.compat import PB, driver_branch
from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.health.versions import _branch_end_of_life
from gpuwarden.types.health import Evidence, Severity

DATA = Path(__file__).resolve().parents[1] / "data"
# real nvidia-smi screens on R570 (their folders' SOURCES.md say where they come from)
R570_CAPTURES = (
    DATA / "smi_heldout12" / "table__nccl-tests-333__8x-b200-prompt__570.158.01.txt",
    DATA / "smi_heldout9" / "table__slurm-l40s-guide-ja__l40s-misaligned__570.124.06.txt",
    DATA / "smi_xml_public" / "telegraf__rtx-3060__v12__570.124.04.xml",
)


def test_r570_is_a_production_branch_that_ended_in_february_2026() -> None:
    """The R580 edition of the table: R570, Production Branch, end of life February 2026."""
    branch = driver_branch("570.133.20")
    assert branch is not None
    assert (branch.branch, branch.designation, branch.end_of_life) == (570, PB, "2026-02")
    assert "supported-drivers-and-cuda-toolkit-versions" in branch.source


@pytest.mark.parametrize("path", R570_CAPTURES, ids=lambda p: p.name)
def test_doctor_says_a_real_r570_capture_is_past_its_branch_end_of_life(path: Path) -> None:
    """Read after February 2026 (doctor says a branch's end of life at its run's month): the
    one new finding is info, and the capture's verdict stays what its other findings say."""
    report = diagnose_captures([str(path)], DoctorOptions(read_kernel_log=False))
    [eol] = [f for f in report.findings if f.code == "driver-branch-eol"]
    driver = path.stem.rsplit("__", 1)[-1].removesuffix(".partial")
    assert eol.title == (
        f"driver {driver} is on R570, a production branch whose end of life was 2026-02: it "
        "gets no security or bug fixes now"
    )
    assert eol.severity is Severity.INFO
    assert [f.code for f in report.findings if f.severity is not Severity.INFO] == []


@pytest.mark.parametrize(
    ("this_month", "said"),
    [("2026-02", "end of life is 2026-02"), ("2026-03", "end of life was 2026-02: it gets no")],
)
def test_r570_is_said_past_from_march_2026(this_month: str, said: str) -> None:
    proof = Evidence("driver", "570.158.01", "nvidia-smi")
    [finding] = _branch_end_of_life("570.158.01", proof, this_month)
    assert said in finding.title and finding.severity is Severity.INFO


@pytest.mark.parametrize("driver", ["550.54.15", "560.35.03", "565.57.01", "575.57.08"])
def test_a_branch_the_table_ends_without_a_month_has_no_record(driver: str) -> None:
    """The same table says every branch it does not list (R575, R565, R560, R550, ...) is end of
    life, but gives no designation nor month for them: none is made up."""
    assert driver_branch(driver) is None
