"""A GPU lost said only by the driver's NV_ERR_GPU_IS_LOST status (no Xid 79, no "fallen off the
bus" line) is a fact the scanner records on the group (``XidGroup.lost_by_status``), not a guess
made again from the few lines the group keeps: a reader that cuts or filters those lines (a
display of the first line, a redaction) leaves the verdict as the scan gave it.

Before the field, ``lost_by_status`` re-read ``group.lines``: the status-only loss of xid_heldout18
row 02 with its lines left out read as a GPU "fallen off the bus" at high confidence, and the
three-line "fallen off the bus" of bumblebee #905 cut to its first line read as a status-only
loss at medium confidence. Both tests below failed then."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from gpuwarden.types.health import Finding, KernelLogReport, XidGroup

DATA = Path(__file__).resolve().parents[1] / "data"
# an LLM engine's hard crash: GSP RPCs fail with status 0x0000000f (NV_ERR_GPU_IS_LOST), no Xid
STATUS_ONLY = (
    DATA / "xid_heldout18" / "02__ninfer-12__journal-gsp-rpc-gpu-lost-gsprmfree-assertions.log"
)
# the driver's three-line message: "The NVIDIA GPU 0000:01:00.0" ... "fallen off the bus"
THREE_LINE_FALLEN = next(DATA.glob("xid_*/*bumblebee-905__dmesg-vgaarb-then-three-line-fallen*"))


def _lost(path: Path) -> tuple[KernelLogReport, XidGroup]:
    report = scan_kernel_log(path.read_text())
    (group,) = report.fallen_off_bus
    return report, group


def _verdict(report: KernelLogReport, group: XidGroup) -> tuple[str, str, str, str]:
    kept = dataclasses.replace(report, fallen_off_bus=(group,))
    (finding,) = xid_findings(kept, source="kernel-log")
    return _said(finding)


def _said(finding: Finding) -> tuple[str, str, str, str]:
    return finding.code, finding.severity.value, finding.confidence.value, finding.title


def test_a_status_only_loss_stays_one_whatever_lines_are_kept() -> None:
    report, group = _lost(STATUS_ONLY)
    assert group.lost_by_status
    scanned = _verdict(report, group)
    assert scanned[:3] == ("gpu-lost", "critical", "medium")
    assert "NV_ERR_GPU_IS_LOST" in scanned[3]
    for kept in ((), group.lines[:1], ("NVRM: GPU0 (line redacted)",)):
        cut = dataclasses.replace(group, lines=kept)
        assert cut.lost_by_status
        assert _verdict(report, cut) == scanned


def test_a_gpu_fallen_off_the_bus_stays_one_whatever_lines_are_kept() -> None:
    report, group = _lost(THREE_LINE_FALLEN)
    assert (group.pci_bus_id, group.lost_by_status, len(group.lines)) == ("0000:01:00.0", False, 3)
    scanned = _verdict(report, group)
    assert scanned[:3] == ("gpu-lost", "critical", "high")
    assert scanned[3].startswith("GPU 0000:01:00.0 has fallen off the bus")
    # its first line alone ("NVRM: The NVIDIA GPU 0000:01:00.0") says no loss: still not a status
    first = dataclasses.replace(group, lines=group.lines[:1])
    assert not first.lost_by_status
    assert _verdict(report, first)[:3] == scanned[:3]
