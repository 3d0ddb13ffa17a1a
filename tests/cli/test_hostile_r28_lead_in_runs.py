"""Issue 13: patterns the package-wide regex probe never entered (its runs come after a word or at
the start), each met by a long run of blanks after the words it begins with.

An experiment that put the probe's runs after a string matching each pattern's first items found
these four quadratic: vLLM's negative KV-cache size and the vGPU grace period
("\\s*:?\\s*": a run of blanks split n ways), a PCIe AER status bit's name (a lazy name that may
end in blanks, then blanks on both sides of an optional "(First)"), a `topo -m` legend's meaning
(lazy, before "\\s*$"): 2.4-3.2 s at 20,000 blanks, 66-87 s at 100,000. Measured as the probe
measures, the pattern's own CPU at two lengths: a linear search takes about five times as long
at five times the run, a quadratic one 25 times.
"""

from __future__ import annotations

import re
import time

import pytest

from gpuwarden.health import pcie_aer
from gpuwarden.health.explain import oom_parse, vgpu_license
from gpuwarden.telemetry.smi import topo

RUN = 100_000


def _cpu_s(pattern: re.Pattern[str], text: str) -> float:
    best = float("inf")
    for _ in range(2):  # the faster of two: a stall slows one timing, backtracking both
        start = time.process_time()
        pattern.search(text)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize(
    ("pattern", "lead_in", "read"),
    [
        (
            oom_parse.VLLM_NEGATIVE,
            "Available KV cache memory",
            "Available KV cache memory: -1.5 GiB",
        ),
        (
            vgpu_license._GRACE,
            "License Status",
            "License Status                    : Unlicensed (Unrestricted)",
        ),
        (pcie_aer._STATUS_BIT, "[ 0] A", "[ 0] RxErr                  (First)"),
        (topo._LEGEND, "a = a", "  NV#  = Connection traversing a bonded set of # NVLinks"),
    ],
    ids=["vllm-negative", "vgpu-grace", "aer-status-bit", "topo-legend"],
)
@pytest.mark.parametrize("blank", [" ", "\t"])
def test_a_long_run_of_blanks_after_the_lead_in_is_read_in_linear_time(
    pattern: re.Pattern[str], lead_in: str, read: str, blank: str
) -> None:
    assert pattern.search(read) is not None  # the wording it is for still reads
    short = _cpu_s(pattern, lead_in + blank * (RUN // 5) + "\x01")
    long = _cpu_s(pattern, lead_in + blank * RUN + "\x01")
    assert long < 10 * short + 0.05, (short, long)
