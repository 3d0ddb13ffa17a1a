"""The pages test_page_variants serves of real scrapes (DCGM 4.6's field names, OpenMetrics
counters, federated pages with the target's pod labels, ...), cut, spliced and bit-flipped: each
reads or is refused as bad input (GpuwardenError), never another exception. The readers of
those spellings (telemetry.dcgm.scrape: renamed fields and labels, ``_total`` counters, a field
given under two names, target pods) see only unbroken pages in test_page_variants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.errors import GpuwardenError
from gpuwarden.report.snapshot_document import snapshot_document
from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.telemetry.dcgm.fields import DCGM4_RENAMED
from tests.telemetry.dcgm.test_page_variants import A100, H100_MIG_PODS, T4, VARIANTS, _families

_FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def served(fixtures: Path) -> list[str]:
    """Every variant of three real pages (a MIG page, a MIG page with pods, a plain one)."""
    pages = [
        (fixtures / "dcgm" / name).read_text(encoding="utf-8") for name in (A100, H100_MIG_PODS, T4)
    ]
    return [variant(*_families(page)) for page in pages for variant in VARIANTS.values()]


def _reads_or_is_refused(text: str) -> None:
    """A Snapshot whose JSON is strict (no NaN/Infinity), or bad input refused as such; any
    other exception fails the test."""
    try:
        scrape = parse_scrape(text, "fuzz", 0.0)
    except GpuwardenError:
        return
    json.dumps(snapshot_document(scrape.snapshot), allow_nan=False)


# each name of a field DCGM 4.6 renamed, to its other name
_OTHER_NAME = {**DCGM4_RENAMED, **{old: new for new, old in DCGM4_RENAMED.items()}}


def _respelled(line: str) -> str:
    for name, other in _OTHER_NAME.items():
        if name in line:
            return line.replace(name, other)
    return line


@_FUZZ
@given(which=st.integers(0, 29), cut=st.floats(0, 1))
def test_a_served_page_cut_anywhere(served: list[str], which: int, cut: float) -> None:
    page = served[which % len(served)]
    _reads_or_is_refused(page[: int(len(page) * cut)])


@_FUZZ
@given(which=st.integers(0, 29), data=st.data())
def test_a_served_page_with_its_lines_repeated_elsewhere(
    served: list[str], which: int, data: st.DataObject
) -> None:
    """A line given again elsewhere (with another value, under the field's other name): the
    page repeats itself or contradicts itself."""
    lines = served[which % len(served)].splitlines()
    repeated = data.draw(st.lists(st.integers(0, len(lines) - 1), min_size=1, max_size=6))
    for at in repeated:
        line = lines[at]
        value = data.draw(st.sampled_from(["", "0", "1", "-1", "NaN", "+Inf", "1e400", "x"]))
        if value and " " in line:
            line = line.rsplit(" ", 1)[0] + " " + value
        if data.draw(st.booleans()):  # under the field's other name (DCGM 4.6 renamed it)
            line = _respelled(line)
        lines.insert(data.draw(st.integers(0, len(lines))), line)
    _reads_or_is_refused("\n".join(lines))


@_FUZZ
@given(
    which=st.integers(0, 29),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_a_served_page_with_bytes_flipped(
    served: list[str], which: int, flips: list[tuple[float, int]]
) -> None:
    data = bytearray(served[which % len(served)].encode())
    for where, byte in flips:
        data[min(int(where * len(data)), len(data) - 1)] = byte
    _reads_or_is_refused(data.decode("utf-8", errors="replace"))
