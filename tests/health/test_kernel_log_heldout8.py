"""An eighth held-out set of kernel logs (tests/data/xid_heldout8: GitHub threads none of the other
kernel-log sets or shared/fixtures cite), aimed at the 2024-2026 drivers: a Talos remote log with
nanosecond ISO stamps (Xid 45/74/154 and the _kgspLogXid119 banner), a journal's Xid 109/62/45
chain, bare Xid 32 lines of 590, a Blackwell laptop's GSP boot failure with a CrashCat report and
Xid 120, a GSP watchdog report alone, nvidia-modeset display-engine timeouts (dmesg, journal,
indented), an Xid 79 in a lower-case-month journal, a healthy 595 open-module boot behind a
prompt, RmInitAdapter in a VMware guest, and look-alikes (amdgpu resets, an i915 hang with a
time-only prefix, nouveau's probe failure). The scanner folds exactly the Xids read by hand;
``doctor --from`` gives the codes written down (the GSP crash report and the display-engine
timeouts are findings: gsp-firmware-crash, display-engine-hang) and nothing above info on every
look-alike; the indented nvidia-modeset paste and the time-only journal copy are read as kernel
logs, while prose, Markdown and JSON quoting those lines are not."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given

from gpuwarden.cli.main import main
from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.types.health import Severity
from tests.health.kernel_log_sets import (
    BUG_REPORT_SOURCES,
    PAYLOAD_DECIDED,
    ExcerptSet,
    Row,
    assert_joined_keep_every_xid,
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

SET = ExcerptSet("xid_heldout8")
ROWS = SET.rows
TEXTS = SET.texts()
EXCERPT = SET.excerpts()
FUZZ = fuzz(max_examples=60)
EARLIER_SETS = sets_before(8)
PCIE_AER_SOURCES = SET.data.parent / "pcie_aer_public" / "SOURCES.md"


def test_the_set_is_new_varied_and_names_its_sources() -> None:
    SET.assert_names_its_sources()
    SET.assert_cites_only_new_sources(EARLIER_SETS, [BUG_REPORT_SOURCES, PCIE_AER_SOURCES])
    assert 12 <= len(ROWS) <= 20
    assert sum(not row["fault"] for row in ROWS) >= 5  # look-alikes and a healthy boot
    assert len({x["xid"] for row in ROWS for x in row["xids"]}) >= 8


def test_no_excerpt_repeats_a_line_of_another_set() -> None:
    assert_no_line_of_earlier_sets(TEXTS, EARLIER_SETS, ("NVRM", "nvidia", "amdgpu", "i915"))


test_scanner_finds_exactly_what_was_read = scanner_check(SET, bus=printed_bus)
test_severity_is_the_catalogs = severity_check(SET, PAYLOAD_DECIDED)
test_doctor_gives_the_codes = doctor_check(SET)


@pytest.mark.parametrize("row", ROWS, ids=SET.ids())
def test_each_xid_group_spans_the_lines_read(row: Row) -> None:
    groups = {g.xid: g for g in SET.scan(row).groups}
    assert {xid: [g.first_line, g.last_line] for xid, g in groups.items()} == {
        x["xid"]: x["lines"] for x in row["xids"]
    }


@pytest.mark.parametrize("row", SET.doctor_params(), ids=SET.ids())
def test_the_worst_severity_is_the_rows(row: Row, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--from", str(SET.path(row)), "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    ranks = {s.value: s.rank for s in Severity}
    worst = max((f["severity"] for f in findings), key=ranks.__getitem__, default=None)
    assert worst == row["worst_severity"]


def test_a_talos_iso_stamp_with_nanoseconds_dates_the_xid() -> None:
    """vllm#40652: '[2026-04-22T21:26:20.599488292Z]' after the node's address and 'kern:
    warning:' is the Xid's wall-clock time, to the microsecond (a float holds no more)."""
    groups = {g.xid: g for g in scan_kernel_log(EXCERPT["01"]).groups}
    nvlink, recovery = groups[74], groups[154]
    expected = datetime(2026, 4, 22, 21, 26, 20, 599716, tzinfo=UTC).timestamp()
    assert nvlink.first_seen_s == pytest.approx(expected, abs=1e-5)
    assert recovery.first_seen_s is not None and nvlink.first_seen_s < recovery.first_seen_s
    assert nvlink.first_uptime_s is None  # Talos prints no uptime


def test_the_gsp_timeout_banner_makes_no_xid_and_the_header_names_the_other_gpu() -> None:
    """The _kgspLogXid119 banner is not an Xid line; the 'GPU at PCI:0000:0b:00' header after it
    names 0b:00, not the GPU of the Xids above (48:00)."""
    report = scan_kernel_log(EXCERPT["01"])
    assert {g.pci_bus_id for g in report.groups} == {"0000:48:00.0"}
    assert all(g.uuid is None for g in report.groups) and report.unparsed_xid_lines == 0


def test_nouveau_and_other_drivers_probe_failures_are_not_nvidias() -> None:
    """nouveau's 'probe with driver nouveau failed with error -2' (Dasharo#1597) is the kernel's
    probe-failure line of another driver: no driver-probe-failed."""
    report = scan_kernel_log(EXCERPT["15"])
    assert report.other == () and report.groups == ()


@FUZZ
@given(text=spliced(TEXTS), sizes=feed_sizes())
def test_cut_and_spliced_excerpts_read_consistently(text: str, sizes: list[int]) -> None:
    assert_read_alike_in_pieces(text, sizes)


@FUZZ
@given(order=excerpt_orders(len(ROWS)))
def test_whole_excerpts_joined_keep_every_xid(order: list[int]) -> None:
    assert_joined_keep_every_xid(scan_kernel_log(joined(TEXTS, order)), ROWS, order)


def test_a_gsp_crash_with_its_xid_120_raises_one_alarm(capsys: pytest.CaptureFixture[str]) -> None:
    """ogkm#876: the CrashCat report carries Xid 120 -- doctor's critical findings are the probe
    failure and the Xid; the crash report is an info finding that names the Xid."""
    [row] = [row for row in ROWS if row["prefix"] == "04"]
    assert main(["doctor", "--from", str(SET.path(row)), "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    by_severity = sorted((f["severity"], f["code"]) for f in findings)
    assert by_severity == [
        ("critical", "driver-probe-failed"),
        ("critical", "xid"),
        ("info", "gsp-firmware-crash"),
    ]


@pytest.mark.parametrize("prefix", ["08", "13"])
def test_an_indented_modeset_paste_and_a_time_only_copy_are_kernel_logs(prefix: str) -> None:
    assert classify(EXCERPT[prefix]) is CaptureKind.KERNEL_LOG


@pytest.mark.parametrize(
    "text",
    [
        # prose and Markdown quoting the lines, a JSON value, a table row, a sentence with a time
        "After resume I get `nvidia-modeset: ERROR: GPU:0: Idling display engine timed out`.\n",
        '{"message": "nvidia-modeset: ERROR: GPU:0: Error while waiting for GPU progress"}\n',
        "| 16:29:33 | kernel | nvidia-modeset: ERROR: GPU:0: Idling display engine timed out |\n",
        "At 22:39:31 the kernel: froze and the screen went black.\n",
        "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms\n",
    ],
)
def test_text_quoting_modeset_lines_is_no_kernel_log(text: str) -> None:
    assert classify(text) is None
