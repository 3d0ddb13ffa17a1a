"""Review r26b of the PCI core's "nvidia <bus>: Unable to change power state from D3cold to D0,
device inaccessible" (kernel_log ``_inaccessible``, held-out set 20).

1. The line quoted inside prose ("Look for `nvidia 0000:01:00.0: Unable to change power state
   ...` in dmesg") is a runbook's or an issue's example, not a record of this log: it lost no GPU,
   as a quoted Xid line records no Xid (``_quoted_in_prose``). Before: a critical gpu-lost.
2. "device inaccessible" is a marker now, so another device's line of it reaches the AER and
   IOMMU readers: one put anywhere inside the real AER excerpts changes no finding.
"""

from __future__ import annotations

import pytest

from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from gpuwarden.types.health import Finding
from tests.health.kernel_log_sets import ExcerptSet

THE_LINE = (
    "nvidia 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible"
)


@pytest.mark.parametrize(
    "text",
    [
        f"Look for `{THE_LINE}` in dmesg: the GPU did not wake from D3cold",
        f"- I see lines like `{THE_LINE}` on the other machines, not this one",
    ],
)
def test_the_line_quoted_in_prose_loses_no_gpu(text: str) -> None:
    report = scan_kernel_log(text + "\n")
    assert report.fallen_off_bus == ()
    assert xid_findings(report, source="kernel-log") == ()


def test_the_line_pasted_alone_or_in_a_code_span_is_still_read() -> None:
    for text in (f"[   12.345678] {THE_LINE}", f"`{THE_LINE}`"):
        report = scan_kernel_log(text + "\n")
        (lost,) = report.fallen_off_bus
        assert (lost.pci_bus_id, lost.count) == ("0000:01:00.0", 1), text


OTHER_DEVICES = (
    "pcieport 0000:00:01.2: Unable to change power state from D3hot to D0, device inaccessible",
    "snd_hda_intel 0000:63:00.1: Unable to change power state from D3cold to D0, device "
    "inaccessible",
    "xhci_hcd 0000:63:00.2: Unable to change power state from D3cold to D0, device inaccessible",
)


@pytest.mark.parametrize("folder", ["pcie_aer_public", "pcie_aer_public2", "pcie_aer_public3"])
def test_another_devices_line_inside_an_aer_record_changes_no_finding(folder: str) -> None:
    for name, text in ExcerptSet(folder).excerpts().items():
        lines = text.splitlines()
        expected = xid_findings(scan_kernel_log(text), source="kernel-log")
        for at in range(len(lines) + 1):
            for other in OTHER_DEVICES:
                mixed = "\n".join([*lines[:at], other, *lines[at:]]) + "\n"
                found = xid_findings(scan_kernel_log(mixed), source="kernel-log")
                assert _read(found) == _read(expected), (name, at, other)


def _read(findings: tuple[Finding, ...]) -> list[tuple[str, str, str]]:
    """What a finding says (its evidence's line numbers move with the line put in)."""
    return [(f.code, f.severity.value, f.title) for f in findings]
