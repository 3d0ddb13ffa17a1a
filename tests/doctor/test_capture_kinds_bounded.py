"""Telling a capture's kind is linear in its head: the kernel-log line pattern's "any prefix, then
NVRM" alternatives ran on across line ends, so at every one of 64 Ki blank lines they scanned 160
characters of the lines below (a second per 64 KiB, quadratic in the blank run's length)."""

from __future__ import annotations

import time

import pytest

from gpuwarden.doctor.captures import classify


@pytest.mark.parametrize("blank", ["\n", " \n", "x\n"])
def test_a_head_of_blank_or_bare_lines_is_told_apart_quickly(blank: str) -> None:
    text = blank * ((1 << 18) // len(blank))  # 256 KiB: seconds each when the search was quadratic
    started = time.perf_counter()
    assert classify(text) is None
    assert time.perf_counter() - started < 5.0


def test_a_record_after_a_prefix_on_its_own_line_still_reads_as_a_kernel_log() -> None:
    """The line-bound prefix still finds an NVRM record behind a remote syslog's prefix."""
    text = "\n" * 1000 + "<4>gpu-node-7 NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off\n"
    kind = classify(text)
    assert kind is not None and kind.value == "kernel-log"
