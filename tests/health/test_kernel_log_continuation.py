"""Records wrapped onto indented continuation lines (terminals, issue trackers, ``dmesg`` without
-x, journalctl's multi-line messages): the scanner joins such a line to the record before it when
that record visibly stops short, and never joins another record, a shell prompt or a line no
deeper than the record. The real wrapped records come from the held-out sets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.health.kernel_log import (
    MAX_CONTINUATION_LINES,
    KernelLogScanner,
    scan_kernel_log,
    with_continuation,
)
from tests.health.kernel_log_sets import (
    DATA,
    ExcerptSet,
    assert_read_alike_in_pieces,
    feed_sizes,
    fuzz,
)

HELDOUT11 = ExcerptSet("xid_heldout11").excerpts()
# the real wrapped records: Xid 154 without its target (heldout11/06), an Xid 31 ending in ","
# (heldout5/02), an Xid 13 whose last field waits for its value (xid_public/15)
WRAPPED_154 = HELDOUT11["06"]
WRAPPED_31 = ExcerptSet("xid_heldout5").excerpts()["02"]
WRAPPED_13 = ExcerptSet("xid_public").excerpts()["15"]
RECORD_154 = "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None)"


def _group(text: str, xid: int) -> tuple[tuple[str, str], ...]:
    (group,) = (g for g in scan_kernel_log(text).groups if g.xid == xid)
    return group.decoded


def test_xid_154s_target_on_the_continuation_line_is_read() -> None:
    """'... changed from 0x0 (None)' / '      to 0x2 (Node Reboot Required)': a reboot."""
    report = scan_kernel_log(WRAPPED_154)
    (group,) = (g for g in report.groups if g.xid == 154)
    assert dict(group.decoded) == {"recovery_action": "reboot", "recovery_action_from": "none"}
    assert group.lines[0].endswith("from 0x0 (None) to 0x2 (Node Reboot Required)")
    assert (group.first_line, group.last_line, report.lines_scanned) == (4, 4, 5)


@pytest.mark.parametrize(
    ("text", "xid", "ending"),
    [
        (
            WRAPPED_31,
            31,
            "channel 0x00000002, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC0 "
            "GPCCLIENT_T1_0 faulted",
        ),
        (WRAPPED_13, 13, "Offset 00000000, Data 00000000"),
    ],
    ids=["ends-with-comma", "field-without-value"],
)
def test_a_record_left_unfinished_takes_its_continuation(text: str, xid: int, ending: str) -> None:
    """An Xid 31 ending in ',' takes its next indented line, not the one after it ('faulted'
    finishes a sentence); an Xid 13 whose last field 'Data' has no value takes ' 00000000'."""
    (group,) = (g for g in scan_kernel_log(text).groups if g.xid == xid)
    assert group.lines[0].endswith(ending)


def test_a_wrapped_driver_message_is_read_whole() -> None:
    """A notable NVRM message cut after a dangling word reads as the message it is."""
    text = "[  41.2] NVRM: GPU at PCI:0000:3b:00: GPU has fallen off the\n                 bus.\n"
    assert [g.pci_bus_id for g in scan_kernel_log(text).fallen_off_bus] == ["0000:3b:00.0"]


@pytest.mark.parametrize(
    "after",
    [
        "    [ 12.6] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.",
        "    Jul 09 10:42:47 node kernel: pcieport 0000:00:01.0: AER: Corrected error",
        "    2025-01-21T04:41:44,283302+00:00 node kernel: usb 1-1: new device",
        "    $ nvidia-smi -q | grep -i recovery",
        "    root@node:~# journalctl -k",
        "    > quoted to 0x2 (Node Reboot Required)",
        "    kernel: to 0x2 (Node Reboot Required)",
        "   ",
    ],
)
def test_a_following_record_prompt_or_blank_is_never_joined(after: str) -> None:
    report = scan_kernel_log(f"{RECORD_154}\n{after}\n")
    (group,) = (g for g in report.groups if g.xid == 154)
    assert dict(group.decoded) == {"recovery_action": "undecoded"}
    assert group.lines == (RECORD_154,)


def test_a_line_no_deeper_than_the_record_is_another_line() -> None:
    """A paste indented as a whole (a Markdown code block): its lines share one indentation."""
    text = f"    {RECORD_154}\n    to 0x2 (Node Reboot Required)\n"
    assert dict(_group(text, 154)) == {"recovery_action": "undecoded"}
    assert dict(_group(f"    {RECORD_154}\n      to 0x2 (Reboot)\n", 154))["recovery_action"] == (
        "reboot"
    )


def test_a_finished_record_keeps_its_next_indented_line_out() -> None:
    text = (
        "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
        "(GPU Reset Required)\n      to 0x2 (Node Reboot Required)\n"
    )
    assert dict(_group(text, 154))["recovery_action"] == "reset"


def test_at_most_max_continuation_lines_join() -> None:
    text = "NVRM: Xid (PCI:0000:01:00): 31, a," + "\n   b," * (MAX_CONTINUATION_LINES + 2) + "\n"
    (group,) = scan_kernel_log(text).groups
    assert group.lines[0].count("b,") == MAX_CONTINUATION_LINES


def test_with_continuation_stops_at_a_line_not_all_there() -> None:
    """A continuation without its newline may go on in the next chunk: not joined yet (the
    scanner holds complete lines back, so this happens only at a text's very end)."""
    assert with_continuation("   to 0x2 (Reboot)", 0, RECORD_154) == RECORD_154
    assert with_continuation("   to 0x2 (Reboot)\n", 0, RECORD_154).endswith("to 0x2 (Reboot)")


@pytest.mark.parametrize("size", [1, 2, 7, 40])
def test_a_wrapped_record_fed_in_chunks_reads_as_it_does_whole(size: int) -> None:
    for text in (WRAPPED_154, WRAPPED_31, WRAPPED_13):
        scanner = KernelLogScanner()
        for at in range(0, len(text), size):
            scanner.feed(text[at : at + size])
        assert scanner.finish() == scan_kernel_log(text)


def test_lines_scanned_is_the_same_with_or_without_a_last_newline() -> None:
    text = (DATA / "xid_heldout11").glob("06__*.log").__next__().read_text(encoding="utf-8")
    assert scan_kernel_log(text).lines_scanned == scan_kernel_log(text.rstrip("\n")).lines_scanned


_PIECES = [
    RECORD_154,
    "      to 0x2 (Node Reboot Required)",
    "NVRM: Xid (PCI:0000:02:00): 31, pid=1, name=x, channel 0x1,",
    "  intr 0. MMU Fault: ENGINE GRAPHICS",
    "[ 1.5] NVRM: Xid (PCI:0000:03:00): 13, Graphics Exception: Offset 0, Data",
    "    00000000",
    "    $ dmesg",
    "",
]


@fuzz(max_examples=80)
@given(
    lines=st.lists(st.sampled_from(_PIECES), min_size=1, max_size=12),
    ending=st.sampled_from(["\n", "\r\n"]),
    sizes=feed_sizes(),
)
def test_wrapped_records_read_alike_in_any_chunks(
    lines: list[str], ending: str, sizes: list[int]
) -> None:
    assert_read_alike_in_pieces(ending.join(lines), sizes)
