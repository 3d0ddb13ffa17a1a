"""A sixth held-out set of kernel logs (tests/data/xid_heldout6: GitHub issues and forum archives
none of the other kernel-log sets or shared/fixtures cite), aimed at what the others lack: PCIe
AER and IOMMU lines around a GPU, an NVSwitch's SXid records, the kernel driver core's own probe
failure ("nvidia: probe of ... failed with error -1", "probe with driver nvidia failed") alone,
explained by NVRM lines before it, or harmless (a chipset co-processor, a legacy GPU the driver
ignores), RmInitAdapter failures, an installer log wrapped at 80 columns, Xid 119/120 in PCI domain
000f and prose about Xid 120. The scanner finds exactly what was read by hand; ``doctor --from``
gives the diagnosis.md codes, refuses what is no capture, and nothing above info where the
excerpt shows no GPU fault or diagnosis.md has no code for what it shows."""

from __future__ import annotations

from hypothesis import given

from gpuwarden.health.kernel_log import scan_kernel_log
from tests.health.kernel_log_sets import (
    BUG_REPORT_SOURCES,
    PAYLOAD_DECIDED,
    ExcerptSet,
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

SET = ExcerptSet("xid_heldout6")
ROWS = SET.rows
TEXTS = SET.texts()
EXCERPT = SET.excerpts()
FUZZ = fuzz(max_examples=60)
EARLIER_SETS = sets_before(6)


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    SET.assert_names_its_sources()
    SET.assert_cites_only_new_sources(EARLIER_SETS, [BUG_REPORT_SOURCES])
    assert 15 <= len(ROWS) <= 25
    assert sum(not row["fault"] for row in ROWS) >= 4
    assert sum(row["doctor_exit"] == 2 for row in ROWS) >= 1  # text that is no kernel log


def test_no_excerpt_repeats_a_line_of_another_set() -> None:
    assert_no_line_of_earlier_sets(TEXTS, EARLIER_SETS, ("NVRM", "Xid", "probe"))


# each row also gives its count of lines that say Xid without being a readable driver Xid line
test_scanner_finds_exactly_what_was_read = scanner_check(SET, bus=printed_bus)
test_severity_is_the_catalogs = severity_check(SET, PAYLOAD_DECIDED)
test_doctor_gives_the_diagnosis_code = doctor_check(SET)


def test_the_kernels_probe_failure_alone_is_a_probe_failure() -> None:
    """drivers/base/dd.c prints "<driver>: probe of <dev> failed with error <n>" (since Linux 6.x
    "<dev>: probe with driver <driver> failed with error <n>") when a driver's probe returns an
    error: with no NVRM line saying why, the GPU is still one the driver could not take."""
    report = scan_kernel_log(EXCERPT["07"])
    assert dict(report.other) == {"probe-failed": 1}


def test_a_probe_failure_the_driver_explains_counts_once_under_its_reason() -> None:
    """nv-pci.c says why it refuses a device (an invalid BAR, a memory region another driver
    holds) before the kernel's line: the reason is the message, not a second failure."""
    assert dict(scan_kernel_log(EXCERPT["10"]).other) == {"request-mem-region-failed": 1}
    assert "probe-failed" not in dict(scan_kernel_log(EXCERPT["11"]).other)


def test_a_device_the_driver_skipped_before_loading_is_no_failure() -> None:
    """The module prints its "loading NVIDIA UNIX" banner only once a GPU came up: a probe
    failure before it with no NVRM reason is a device the driver declined (the nForce chipset's
    co-processor, a GPU of a legacy branch), not a GPU it failed to take."""
    for prefix in ("08", "09"):
        assert dict(scan_kernel_log(EXCERPT[prefix]).other) == {"driver-loaded": 1}


@FUZZ
@given(text=spliced(TEXTS), sizes=feed_sizes())
def test_cut_and_spliced_excerpts_read_consistently(text: str, sizes: list[int]) -> None:
    assert_read_alike_in_pieces(text, sizes)


@FUZZ
@given(order=excerpt_orders(len(ROWS)))
def test_whole_excerpts_joined_keep_every_xid(order: list[int]) -> None:
    report = scan_kernel_log(joined(TEXTS, order))
    assert sum(g.count for g in report.groups) == sum(
        x["count"] for i in order for x in ROWS[i]["xids"]
    )
    assert report.unparsed_xid_lines == sum(ROWS[i]["unparsed"] for i in order)
