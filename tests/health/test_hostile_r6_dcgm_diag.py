"""Issue 13, round 6: `dcgmi diag` tables a Markdown renderer re-laid (health.dcgm_diag's section
headings), adversarial pipes and dashes, and a megabyte of separator rows.

Seeds: every real table of the held-out sets (tests/data/dcgmi_diag*/*.txt). A formatter that
aligns a Markdown table pads each cell with as many spaces as its column needs, so the heading
`|-----  Deployment  ---+---|` can come out as `|   -----  Deployment  ---+---   |`: its tests
must keep their section, as with dcgmi's own layout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.captures import classify
from gpuwarden.errors import CorruptInputError
from gpuwarden.health.dcgm_diag import DiagReport, parse_dcgm_diag

DATA = Path(__file__).resolve().parents[1] / "data"
TABLES = sorted(DATA.glob("dcgmi_diag*/*.txt"))
SEPARATOR = "+---------------------------+------------------------------------------------+\n"


def _relaid(text: str, padding: int) -> str:
    """Each `|` row's cells trimmed and padded with ``padding`` spaces, as a Markdown table."""
    lines = []
    for line in text.splitlines():
        row = line.strip()
        if row.startswith("|") and row.endswith("|") and len(row) > 1:
            cells = (" " * padding + cell.strip() + " " * padding for cell in row[1:-1].split("|"))
            lines.append("|" + "|".join(cells) + "|")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def _summary(report: DiagReport) -> list[tuple[str, str | None, str]]:
    return [(t.name, t.category, t.status.value) for t in report.tests]


def test_the_seeds_are_there() -> None:
    assert len(TABLES) >= 20


@pytest.mark.parametrize("padding", [2, 3, 8])
def test_a_table_relaid_with_any_padding_keeps_its_sections(padding: int) -> None:
    changed = {}
    for path in TABLES:
        text = path.read_text(encoding="utf-8")
        expected = _summary(parse_dcgm_diag(text))
        got = _summary(parse_dcgm_diag(_relaid(text, padding)))
        if got != expected:
            changed[path.name] = got[:2]
    assert changed == {}


def _parse_seconds(text: str) -> float:
    start = time.process_time()  # its own CPU time: the other test worker's load does not count
    classify(text[: 64 * 1024])
    with pytest.raises(CorruptInputError):
        parse_dcgm_diag(text)
    return time.process_time() - start


def test_a_megabyte_of_separator_rows_is_read_in_linear_time() -> None:
    megabyte = SEPARATOR * (1_000_000 // len(SEPARATOR))
    half = _parse_seconds(megabyte[: len(megabyte) // 2])
    whole = _parse_seconds(megabyte)
    assert whole < 4 * half + 0.05  # twice the text, not four times the time


_HOSTILE = st.lists(
    st.sampled_from(["|", "-", "+", " ", "\t", "\n", "Deployment", "Pass", "GPU 0:"]),
    max_size=200,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(_HOSTILE)
def test_pipes_and_dashes_are_read_or_refused_plainly(text: str) -> None:
    classify(text)
    try:
        report = parse_dcgm_diag(text)
    except CorruptInputError:
        return
    assert all(t.name for t in report.tests)
