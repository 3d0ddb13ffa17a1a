"""Telling a capture's kind is linear in its head: the kernel-log line pattern's "any prefix, then
NVRM" alternatives ran on across line ends, so at every one of 64 Ki blank lines they scanned 160
characters of the lines below (a second per 64 KiB, quadratic in the blank run's length)."""

from __future__ import annotations

import pytest

from gpuwarden.doctor import captures
from gpuwarden.doctor.captures import classify

# A record of each kind the "any prefix, then the record" alternatives read, after a prefix of
# its own line (a remote syslog's host): the alternatives that ran on across line ends.
_PREFIXED_RECORDS = (
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.",
    "nvidia-nvswitch0: SXid (PCI:0000:01:00.0): 12028, Non-fatal, Link 32",
    "nvidia 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer",
    "DMAR: [DMA Read NO_PASID] Request device [41:00.0] fault addr 0x0",
    "nvidia-modeset: ERROR: GPU:0: Idling display engine timed out",
    '(54 minutes ago) "NVRM: Xid (PCI:0000:3b:00): 79, pid=0',
    "XidCriticalError: Xid=79 on Device=GPU-0d3a6f2b",
    "nvidia: loading out-of-tree module taints kernel.",
    "[drm:nv_drm_atomic_commit [nvidia_drm]] *ERROR* [nvidia-drm] [GPU ID 0x100] Flip timeout",
)


@pytest.mark.parametrize("blank", ["\n", " \n", "x\n"])
@pytest.mark.parametrize("record", _PREFIXED_RECORDS)
def test_a_prefix_before_a_record_stays_on_the_record_s_line(blank: str, record: str) -> None:
    """What kept the search linear, checked without a clock (a wall-clock bound failed under
    load): each alternative's prefix stops at its line's start, so a search starting at each of
    the lines above scans that line alone. A prefix that ran on across line ends matched from a
    line up to 160 characters above the record (the regression: quadratic in a run of blank
    lines), and the match would start there."""
    above = blank * 200
    found = captures._KERNEL_LINE.search(above + "gpu-node-7 " + record + "\n")
    assert found is not None and (found.start(), "\n" in found[0]) == (len(above), False)


@pytest.mark.parametrize("blank", ["\n", " \n", "x\n"])
def test_a_head_of_blank_or_bare_lines_is_told_apart_quickly(blank: str) -> None:
    """A head of blank or bare lines (64 KiB, the head doctor classifies) is no capture; what
    keeps it quick is checked above, without a clock."""
    assert classify(blank * ((1 << 16) // len(blank))) is None


def test_a_record_after_a_prefix_on_its_own_line_still_reads_as_a_kernel_log() -> None:
    """The line-bound prefix still finds an NVRM record behind a remote syslog's prefix."""
    text = "\n" * 1000 + "<4>gpu-node-7 NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off\n"
    kind = classify(text)
    assert kind is not None and kind.value == "kernel-log"
