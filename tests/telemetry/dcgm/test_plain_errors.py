"""The dcgm readers raise plainly (the line and the problem, never the page's name); the entry
point that knows the page names it once: ``parse_scrape`` / ``parse_exposition`` for a caller
with a name (the backend's file or URL), doctor for its captures. What a user reads stays what it
was, less the name said twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.dcgm import open_dcgm, parse_scrape
from gpuwarden.telemetry.dcgm.exposition import (
    ScrapeError,
    Tally,
    parse_exposition,
    read_exposition,
)
from gpuwarden.telemetry.dcgm.scrape import read_scrape

DATA = Path(__file__).resolve().parents[2] / "data"
FIXTURES = Path(__file__).resolve().parents[4] / "shared" / "fixtures"
# real pages the reader refuses (their SOURCES.md say where they come from)
ELIDED_LABELS = (
    DATA / "dcgm_public5" / "04__viettel-ai-conformance__l40s-x2-580.126.09-elided-labels.prom"
)
WITHOUT_VALUE = (
    DATA / "dcgm_public7" / "01__dcgm-exporter-418__h100-series-listed-without-value.prom"
)
HELP_TYPE_ONLY = (
    DATA / "dcgm_public4" / "05__dcgm-exporter-222__gke-time-sharing-help-type-only.prom"
)
T4_PAGE = FIXTURES / "dcgm" / "datadog-integrations-core__tesla-t4__metrics.prom"

ELIDED_PROBLEM = "line 3: bad label name at column 31"
HELP_TYPE_PROBLEM = (
    "no metrics at all: 24 HELP/TYPE line(s) but no sample (dcgm-exporter declared its families "
    "and served no reading of any GPU)"
)


def _t4_with_a_word_for_its_index() -> tuple[str, str]:
    """The real T4 page with its first series' ``gpu`` label damaged: refused by the scrape's
    device reader (not the exposition's), at that series' line."""
    text = T4_PAGE.read_text(encoding="utf-8")
    lines = text.splitlines()
    number = next(i for i, line in enumerate(lines, start=1) if 'gpu="0"' in line)
    first = lines[number - 1]
    lines[number - 1] = first.replace('gpu="0"', 'gpu="zero"', 1)
    name = first.split("{", 1)[0]
    return "\n".join(lines) + "\n", f"line {number}: {name}: gpu label 'zero' is not a number"


@pytest.mark.parametrize(
    ("text", "plain", "reference"),
    [
        (ELIDED_LABELS.read_text(encoding="utf-8"), ELIDED_PROBLEM, "dcgm-scrape-unreadable"),
        (
            WITHOUT_VALUE.read_text(encoding="utf-8"),
            "line 1: DCGM_FI_DEV_GPU_UTIL: expected a value after the labels",
            "dcgm-scrape-unreadable",
        ),
        (HELP_TYPE_ONLY.read_text(encoding="utf-8"), HELP_TYPE_PROBLEM, "dcgm-scrape-no-gpus"),
        (*_t4_with_a_word_for_its_index(), "dcgm-scrape-unreadable"),
    ],
    ids=["exposition", "cut-sample", "no-gpu", "device-label"],
)
def test_a_refused_page_says_its_line_and_problem_and_its_name_once(
    text: str, plain: str, reference: str
) -> None:
    """``read_scrape`` says where and what, not which page; ``parse_scrape`` puts the name in
    front once, as "page, line N: ..." (or "page: ..." with no line)."""
    with pytest.raises(ScrapeError) as plainly:
        read_scrape(text, 0.0)
    assert (plainly.value.message, plainly.value.reference) == (plain, reference)
    with pytest.raises(CorruptInputError) as named:
        parse_scrape(text, "scrape.prom", 0.0)
    separator = ", " if plain.startswith("line ") else ": "
    assert named.value.message == f"scrape.prom{separator}{plain}"
    assert (named.value.reference, named.value.hint) == (reference, plainly.value.hint)


def test_the_exposition_reader_raises_plainly_and_its_entry_point_names_the_page() -> None:
    text = ELIDED_LABELS.read_text(encoding="utf-8")
    with pytest.raises(ScrapeError) as plainly:
        list(read_exposition(text, Tally()))
    assert plainly.value.message == ELIDED_PROBLEM
    with pytest.raises(CorruptInputError) as named:
        parse_exposition(text, "page.prom")
    assert named.value.message == f"page.prom, {ELIDED_PROBLEM}"


def test_the_backend_names_its_file_once(tmp_path: Path) -> None:
    saved = tmp_path / "scrape.prom"
    saved.write_text(ELIDED_LABELS.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(CorruptInputError) as named:
        open_dcgm(str(saved))
    assert named.value.message == f"{saved}, {ELIDED_PROBLEM}"


def test_the_page_name_is_the_reading_s_source_set_by_the_entry_point() -> None:
    """The Snapshot's ``source`` is data: the plain reader leaves it to its caller."""
    text = T4_PAGE.read_text(encoding="utf-8")
    plain = read_scrape(text, 0.0).snapshot
    named = parse_scrape(text, "t4.prom", 0.0).snapshot
    assert (plain.source, named.source) == (None, "t4.prom")
    assert named.samples == plain.samples and len(named.samples) == 2


def test_doctor_lists_a_refused_page_of_a_bundle_without_its_name_twice(tmp_path: Path) -> None:
    """A page of a folder the reader refuses is listed after its name with the reader's plain
    message ("skipped elided.prom: line 3: ..."), not "elided.prom: elided.prom, line 3: ..."."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "elided.prom").write_text(ELIDED_LABELS.read_text(encoding="utf-8"))
    (bundle / "t4.prom").write_text(T4_PAGE.read_text(encoding="utf-8"))
    report = diagnose_captures([str(bundle)], DoctorOptions(read_kernel_log=False))
    assert [(Path(s.path).name, s.reason) for s in report.skipped] == [
        ("elided.prom", ELIDED_PROBLEM)
    ]


def test_doctor_refuses_a_page_named_alone_with_its_name_once() -> None:
    with pytest.raises(CorruptInputError) as refused:
        diagnose_captures([str(ELIDED_LABELS)], DoctorOptions(read_kernel_log=False))
    assert refused.value.message == f"{ELIDED_LABELS}, {ELIDED_PROBLEM}"
