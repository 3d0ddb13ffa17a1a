"""Review r29 of the fourteenth stop's readings and refactors: a message named as fixed beside the
same message raised, and a reading printed against its limit when the two round alike."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.evaluate import HealthResult, evaluate_snapshot
from gpuwarden.health.explain import match
from gpuwarden.health.explain.text import read_paste
from gpuwarden.health.rules.common import compared_fractions
from gpuwarden.telemetry.open import open_backend
from gpuwarden.types.health import Confidence
from gpuwarden.types.telemetry import DeviceSample, Snapshot
from tests.health.explain_sets import cause_readings, never_raise

ARCH = "gpu-arch-unsupported"
CUTLASS = "RuntimeError: cutlassF: no kernel found to launch!"
NVCC_ARCH = "nvcc fatal   : Value 'sm_86' is not defined for option 'gpu-architecture'"
H100_LOAD = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
MIB = 1 << 20


# --- a message named as fixed, and the same message raised ------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # an issue that says what the user tried, then pastes the error it still raises
        f'I upgraded torch to avoid the "cutlassF: no kernel found to launch!" error, still:\n'
        f"{CUTLASS}",
        # the raised line first, the prose about a fix after it
        f"{CUTLASS}\nThe release notes say 0.0.23 fixed the cutlassF: no kernel found error",
    ],
)
def test_a_raised_message_is_read_beside_its_mention_as_fixed(text: str) -> None:
    assert cause_readings(text)[0] == (ARCH, Confidence.MEDIUM)


@pytest.mark.parametrize(
    "text",
    [
        # code naming what it avoids (the look-alike the reading was written against)
        '# To prevent "cutlassF: no kernel found to launch!" error\nq = q.to(torch.float16)',
        # a changelog naming nvcc's refusal as fixed: no nvcc ran
        "- build: fixes the \"Value 'sm_86' is not defined for option 'gpu-architecture'\" "
        "error of CUDA 11.0 toolkits (#812)",
    ],
)
def test_a_message_only_named_as_fixed_is_not_read(text: str) -> None:
    assert ARCH not in {cause for cause, _ in cause_readings(text)}


def test_the_nvcc_refusal_raised_is_still_read() -> None:
    assert cause_readings(NVCC_ARCH)[0] == (ARCH, Confidence.MEDIUM)


def test_mentions_named_as_fixed_are_looked_before_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """100 KB of one message named as fixed: each signature looks before its first mentions only
    (``raised_mentions``), not before every one of the thousands."""
    looks: list[int] = []

    class Counting:
        def search(self, before: str) -> re.Match[str] | None:
            looks.append(len(before))
            return re.search(r"fixed the\W+$", before)

    monkeypatch.setattr(match, "_QUOTED_AS_FIXED", Counting())
    one = 'fixed the "cutlassF: no kernel found to launch!"\n'
    paste = read_paste(one * (100_000 // len(one)))
    assert match.signature_votes(paste) == []
    assert 0 < len(looks) <= match._MENTIONS_READ


test_signatures_beside_fix_prose_never_raise = never_raise(
    [
        CUTLASS,
        "cutlassF: no kernel found",
        NVCC_ARCH,
        "fixed the ",
        "to avoid: ",
        'prevent "',
        "resolves the RuntimeError: ",
        "\n",
        "API call is not supported in the installed CUDA driver",
        "cuGraphLaunch failed. CUresult=700",
    ]
)


# --- a reading and its limit, when they round alike ----------------------------------------------


@pytest.mark.parametrize(
    ("value", "limit", "expected"),
    [
        # 1 MiB over 95 % of an 80 GiB H100: equal to two decimals when rounded
        (0.95 + MIB / (81559 * MIB), 0.95, ("95.01 %", "95.00 %")),
        (0.95004, 0.95, ("95.01 %", "95.00 %")),
        # a mean SM active just under the fake-load limit: shown under it
        (0.19996, 0.2, ("19.99 %", "20.00 %")),
        # the cases the rounding already told apart keep their text
        (0.954, 0.95, ("95.4 %", "95.0 %")),
        (1.0, 0.95, ("100 %", "95 %")),
        (0.0, 0.2, ("0 %", "20 %")),
        (0.9551, 0.955, ("95.51 %", "95.50 %")),
    ],
)
def test_a_reading_is_never_printed_equal_to_the_limit_it_crossed(
    value: float, limit: float, expected: tuple[str, str]
) -> None:
    assert compared_fractions(value, limit) == expected


def _percent(text: str) -> float:
    return float(text.removesuffix(" %"))


@settings(max_examples=300, deadline=None)
@given(
    st.floats(min_value=0.0, max_value=1.5, allow_nan=False),
    # a limit as thresholds are written: a percentage with at most two decimals (95 %, 95.5 %)
    st.integers(min_value=1, max_value=10_000),
)
def test_the_printed_reading_stays_on_its_side_of_the_limit(value: float, steps: int) -> None:
    limit = steps / 10_000
    shown, bound = compared_fractions(value, limit)
    if value > limit:
        assert _percent(shown) > _percent(bound)
    elif value < limit:
        assert _percent(shown) < _percent(bound)
    # never further from the reading than one and a half steps of the last decimal printed
    decimals = len(shown.removesuffix(" %").partition(".")[2])
    assert math.isclose(_percent(shown), 100 * value, abs_tol=1.5 * 10.0**-decimals)


@pytest.fixture(scope="module")
def h100(fixtures: Path) -> DeviceSample:
    return open_backend("smi", str(fixtures / "nvidia-smi" / H100_LOAD)).read().samples[0]


def _judge(sample: DeviceSample) -> HealthResult:
    snapshot = Snapshot(sample.timestamp_s, "host-a", "smi", False, (sample,), source="/x/q.txt")
    return evaluate_snapshot(snapshot)


def test_memory_one_mib_over_the_limit_does_not_read_equal_to_it(h100: Any) -> None:
    total = h100.info.memory_total_bytes
    assert total is not None
    used = math.ceil(total * 0.95 / MIB) * MIB + MIB  # nvidia-smi counts whole MiB
    result = _judge(dataclasses.replace(h100, memory_used_bytes=used))
    (finding,) = [f for f in result.findings if f.code == "memory-nearly-full"]
    shown, _, rest = finding.evidence[0].detail.partition(" > ")
    assert shown == "95.01 %" and rest.startswith("95.00 % of ")
    assert "(95.01 %)" in finding.title
