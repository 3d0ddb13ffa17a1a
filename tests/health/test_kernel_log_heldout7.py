"""A seventh held-out set of kernel logs (tests/data/xid_heldout7: GitHub threads none of the other
kernel-log sets or shared/fixtures cite), aimed at the IOMMU: AMD-Vi IO_PAGE_FAULT records of an
NVIDIA GPU doing peer-to-peer DMA (syslog with a host, a dmesg quoted in Markdown), and the same
faults of an NVMe drive, a Wi-Fi card, a NIC, AMD and Intel GPUs, a switch ASIC and another
vendor's accelerator in every format the kernel printed them (4.x "device=" inside the brackets,
the pre-4.x event split over two lines, VT-d with and without PASID, "0x"-prefixed buses,
scalable-mode reasons, indented pastes), plus healthy journalctl boots with hosts and a localised
month, a ppc64le driver debug log and a confidential-computing guest's assertions. The scanner
folds exactly the faults read by hand; ``doctor --from`` gives ``iommu-fault`` only where the log
ties the faulting bus to NVIDIA, and nothing above info on every look-alike."""

from __future__ import annotations

import json

import pytest
from hypothesis import given

from gpuwarden.cli.main import main
from gpuwarden.health.iommu_findings import iommu_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from gpuwarden.types.health import Confidence, Severity
from tests.health.kernel_log_sets import (
    BUG_REPORT_SOURCES,
    PAYLOAD_DECIDED,
    ExcerptSet,
    Row,
    assert_no_line_of_earlier_sets,
    assert_read_alike_in_pieces,
    doctor_check,
    excerpt_orders,
    feed_sizes,
    fuzz,
    joined,
    printed_bus,
    scanner_check,
    sets_before,
    severity_check,
    spliced,
)

SET = ExcerptSet("xid_heldout7")
ROWS = SET.rows
TEXTS = SET.texts()
EXCERPT = SET.excerpts()
FUZZ = fuzz(max_examples=60)
EARLIER_SETS = sets_before(7)
PCIE_AER_SOURCES = SET.data.parent / "pcie_aer_public" / "SOURCES.md"


def _iommu(row: Row) -> list[tuple[str, str, int, str | None]]:
    """The row's IOMMU groups: (bus, IOMMU, faults, how the log ties the bus to NVIDIA)."""
    return sorted((g["bus"], g["iommu"], g["faults"], g["nvidia"]) for g in row["iommu"])


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    SET.assert_names_its_sources()
    SET.assert_cites_only_new_sources(EARLIER_SETS, [BUG_REPORT_SOURCES, PCIE_AER_SOURCES])
    assert 12 <= len(ROWS) <= 20
    assert sum(not row["fault"] for row in ROWS) >= 8  # look-alikes and healthy boots
    assert sum(bool(row["iommu"]) and not row["doctor_codes"] for row in ROWS) >= 6


def test_no_excerpt_repeats_a_line_of_another_set() -> None:
    assert_no_line_of_earlier_sets(TEXTS, EARLIER_SETS, ("NVRM", "DMAR", "AMD-Vi", "nvidia"))


test_scanner_finds_exactly_what_was_read = scanner_check(SET, bus=printed_bus)
test_severity_is_the_catalogs = severity_check(SET, PAYLOAD_DECIDED)
test_doctor_gives_the_codes = doctor_check(SET)


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_the_iommu_faults_are_folded_per_device(row: Row) -> None:
    report = SET.scan(row)
    found = sorted((g.pci_bus_id, g.iommu, g.faults, g.nvidia) for g in report.iommu_faults)
    assert found == _iommu(row)


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_the_worst_severity_is_the_rows(row: Row, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--from", str(SET.path(row)), "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    ranks = {s.value: s.rank for s in Severity}
    worst = max((f["severity"] for f in findings), key=ranks.__getitem__, default=None)
    assert worst == row["worst_severity"]


def test_a_gpus_peer_dma_fault_is_a_warning_with_its_evidence() -> None:
    """cuda-samples#48: the AMD-Vi records name the nvidia driver's device, flags 0x0020 (RW:
    a write to a page not present): one warning for the GPU, high confidence, the fixes cited."""
    report = scan_kernel_log(EXCERPT["01"])
    (group,) = report.iommu_faults
    assert (group.accesses, group.reasons, group.first_line, group.last_line) == (
        ("write",),
        ("IO_PAGE_FAULT",),
        1,
        9,
    )
    (finding,) = xid_findings(report, source="kernel-log:test")
    assert (finding.code, finding.severity, finding.confidence) == (
        "iommu-fault",
        Severity.WARNING,
        Confidence.HIGH,
    )
    assert finding.device is not None and finding.device.pci_bus_id == "0000:07:00.0"
    assert "iommu=pt" in finding.remedy and finding.count == 9


def test_the_iommus_fault_reason_and_access_are_kept() -> None:
    """VT-d's reason words, with and without PASID, and the "0x"-prefixed bus of 5.13-5.15."""
    (marvell,) = scan_kernel_log(EXCERPT["09"]).iommu_faults
    assert (marvell.reasons, marvell.accesses) == (("PTE Read access is not set",), ("read",))
    (igpu,) = scan_kernel_log(EXCERPT["08"]).iommu_faults
    assert (igpu.pci_bus_id, igpu.reasons) == ("0000:00:02.0", ("Next page table ptr is invalid",))


# Lines in the kernel's own formats (dmar.c, amd/iommu.c, probe.c, arm-smmu-v3.c), to show how a
# bus that names no driver is tied to NVIDIA by the rest of the log; the held-out excerpts hold no
# such NVIDIA DMAR fault.
_DMAR_41 = (
    "[  812.305871] DMAR: [DMA Read NO_PASID] Request device [41:00.0] fault addr 0x7f2c1000 "
    "[fault reason 0x06] PTE Read access is not set\n"
)
_XID_41 = "[  812.9] NVRM: Xid (PCI:{domain}:41:00): 31, pid=4242, name=python3, Ch 00000008\n"


def test_a_dmar_fault_is_a_gpus_when_an_xid_names_its_bus() -> None:
    report = scan_kernel_log(_DMAR_41 + _XID_41.format(domain="0000"))
    (group,) = report.iommu_faults
    assert (group.pci_bus_id, group.nvidia) == ("0000:41:00.0", "xid")
    (finding,) = iommu_findings(report.iommu_faults, source="t")
    assert finding.confidence is Confidence.HIGH


def test_a_dmar_bus_without_its_domain_matches_one_gpu_less_surely() -> None:
    """VT-d prints no PCI segment: an Xid on 0002:41:00 is the only GPU with that bus."""
    (group,) = scan_kernel_log(_DMAR_41 + _XID_41.format(domain="0002")).iommu_faults
    assert group.nvidia == "xid (bus printed without its PCI domain)"
    (finding,) = iommu_findings([group], source="t")
    assert finding.confidence is Confidence.MEDIUM


def test_the_pci_cores_enumeration_ties_only_an_nvidia_display_controller() -> None:
    gpu = "[    1.2] pci 0000:41:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint\n"
    audio = "[    1.2] pci 0000:41:00.1: [10de:22e8] type 00 class 0x040300 PCIe Endpoint\n"
    (tied,) = scan_kernel_log(gpu + _DMAR_41).iommu_faults
    assert tied.nvidia == "vendor 10de"
    on_audio = _DMAR_41.replace("[41:00.0]", "[41:00.1]")
    (untied,) = scan_kernel_log(audio + on_audio).iommu_faults
    assert untied.nvidia is None


def test_a_fault_alone_names_no_gpu() -> None:
    (group,) = scan_kernel_log(_DMAR_41).iommu_faults
    assert group.nvidia is None and xid_findings(scan_kernel_log(_DMAR_41), source="t") == ()


def test_an_smmu_fault_names_its_client() -> None:
    line = (
        "[  90.1] arm-smmu-v3 arm-smmu-v3.6.auto: event: F_TRANSLATION client: 0019:01:00.0 "
        "sid: 0x10100 ssid: 0x0 iova: 0x7f0000 ipa: 0x0\n"
    )
    xid = "[  91.0] NVRM: Xid (PCI:0019:01:00): 31, pid=7, name=a.out, Ch 00000002\n"
    (group,) = scan_kernel_log(line + xid).iommu_faults
    assert (group.pci_bus_id, group.iommu, group.reasons, group.nvidia) == (
        "0019:01:00.0",
        "smmu-v3",
        ("F_TRANSLATION",),
        "xid",
    )


@FUZZ
@given(text=spliced(TEXTS), sizes=feed_sizes())
def test_cut_and_spliced_excerpts_read_consistently(text: str, sizes: list[int]) -> None:
    report = assert_read_alike_in_pieces(text, sizes)
    assert all(g.faults >= 1 and g.first_line <= g.last_line for g in report.iommu_faults)


@FUZZ
@given(order=excerpt_orders(len(ROWS)))
def test_whole_excerpts_joined_keep_every_fault(order: list[int]) -> None:
    report = scan_kernel_log(joined(TEXTS, order))
    faults: dict[tuple[str, str], int] = {}
    for i in order:
        for bus, iommu, count, _ in _iommu(ROWS[i]):
            faults[(bus, iommu)] = faults.get((bus, iommu), 0) + count
    assert {(g.pci_bus_id, g.iommu): g.faults for g in report.iommu_faults} == faults
