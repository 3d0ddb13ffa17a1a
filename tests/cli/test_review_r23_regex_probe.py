"""Review r23 of the backtracking probe (test_hostile_r9_regex_probe): its verdict on scripted
timings, so what a loaded runner does to it is tested, not hoped for.

Measured on the probe before: one stall of the runner during one 20,000-character timing (a
search that took 1.5 s once and microseconds after) failed a linear pattern — a timing at or
above PROBE_BUDGET_S was slow enough to fail without a second look, and a stall during the
RUN-character timing failed it too. A quadratic pattern is as slow every time it is timed: the
faster of two timings keeps it caught.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import pytest

from tests.cli import test_hostile_r9_regex_probe as probe_module
from tests.cli.test_hostile_r9_regex_probe import PROBE_LENGTH, Probe, _slow_runs

# a pattern of one probe run: its runs are PROBE_RUNS, each searched after "Key"
LINEAR = Probe("review_r23.LINEAR", re.compile(r"Key=(\w+)"), anchored=False)
LINEAR_S_PER_CHAR = 0.0005 / PROBE_LENGTH  # 0.5 ms at 20,000 characters


def _scripted(times: Callable[[int, int], float]) -> Callable[[Probe, str], float]:
    """A clock for ``_seconds``: ``times(nth, length)`` seconds for the nth timing (from 0) of a
    text of that length."""
    timed: Counter[int] = Counter()

    def seconds(_probe: Probe, text: str) -> float:
        nth = timed[len(text)]
        timed[len(text)] += 1
        return times(nth, len(text))

    return seconds


def _linear(length: int) -> float:
    return LINEAR_S_PER_CHAR * length


def _is_long(length: int) -> bool:
    return length > 2 * PROBE_LENGTH  # a text of RUN characters, not of PROBE_LENGTH


# (the nth timing, of a long text?) → seconds: where the runner stalls; every other timing
# takes the linear search's time
STALLS = {
    "one stall in a first timing": {(0, False): 1.5},
    "a suspect, one stall in its long timing": {(0, False): 0.5, (1, False): 0.5, (0, True): 6.0},
}


@pytest.mark.parametrize("stalls", STALLS.values(), ids=STALLS.keys())
def test_one_stall_of_the_runner_does_not_fail_a_linear_pattern(
    monkeypatch: pytest.MonkeyPatch, stalls: dict[tuple[int, bool], float]
) -> None:
    def times(nth: int, length: int) -> float:
        return stalls.get((nth, _is_long(length)), _linear(length))

    monkeypatch.setattr(probe_module, "_seconds", _scripted(times))
    assert _slow_runs(LINEAR) == []


def test_steady_load_does_not_fail_a_linear_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    # a runner 200 times slower throughout: 0.1 s at 20,000 characters, 0.5 s at 100,000
    monkeypatch.setattr(probe_module, "_seconds", _scripted(lambda _, n: 200 * _linear(n)))
    assert _slow_runs(LINEAR) == []


@pytest.mark.parametrize("at_probe_length_s", [0.05, 0.3, 2.0])
def test_a_quadratic_pattern_is_still_caught(
    monkeypatch: pytest.MonkeyPatch, at_probe_length_s: float
) -> None:
    def quadratic(_call: int, length: int) -> float:
        return at_probe_length_s * (length / PROBE_LENGTH) ** 2

    monkeypatch.setattr(probe_module, "_seconds", _scripted(quadratic))
    slow = _slow_runs(LINEAR)
    assert slow and len(slow) == len(probe_module._runs_for(LINEAR.pattern))


def test_the_probe_still_times_real_searches() -> None:
    # the real clock: a linear pattern is not slow (its verdict does not rest on the script)
    assert _slow_runs(LINEAR) == []
