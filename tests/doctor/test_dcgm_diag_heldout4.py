"""`dcgmi diag` held-out set 4 (tests/data/dcgmi_diag4: real outputs sampled as the searches gave
them, their expected values read by hand from the text in expected.json before the parser ran on
them): recognised — an excerpt cut below the header too, by dcgmi's own row widths —, read into
tests and per-GPU statuses, and judged into the findings DCGM's documentation gives, none above
info for a healthy report; and `doctor --from` on them end to end."""

from __future__ import annotations

import pytest

from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.health import dcgm_diag
from gpuwarden.health.dcgm_diag import looks_like_dcgm_diag, parse_dcgm_diag
from tests.doctor.test_doctor import doctor_json
from tests.health.dcgm_diag_sets import DiagSet, diag_set_checks

SET = DiagSet("dcgmi_diag4")
DATA = SET.data
# what the parser still gets wrong, each with the reason (strict: a fix must remove it)
STILL_WRONG: dict[str, str] = {}
THERMAL_EXCERPT = "02__ml-engineering-debug-guide__8gpu-r2-gpu-memory-fail-gpu0-thermal-excerpt.txt"
EUD_RUN = "01__ib-perf-blog__h100x8-3.3.9-r-eud-pass-no-section-headings.txt"
JOB_OUTPUT = "03__uber-prof-training-job__2.x-r1-slurm-prolog-pass-inside-job-output.txt"


def test_the_set_is_what_sources_md_lists() -> None:
    """Every output is named in SOURCES.md; the searches gave four (the set's SOURCES.md counts
    what they gave and what was set aside)."""
    SET.assert_listed_in_sources(least=4)
    SET.assert_holds_only_its_outputs()


(
    test_doctor_recognises_the_report,
    test_the_report_reads_as_printed,
    test_the_findings_are_the_ones_dcgm_documents,
) = diag_set_checks(SET, STILL_WRONG, every_gpu_listed=True, quotes_failure_messages=True)


def test_an_excerpt_cut_below_the_header_is_judged_by_doctor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The pasted rows carry no header and no section heading (refused before: exit 2,
    capture-not-recognised); GPU 0 failed GPU Memory on thermal violations."""
    code, document = doctor_json(capsys, "--from", str(DATA / THERMAL_EXCERPT))
    assert code == 0
    assert [i["kind"] for i in document["inputs"]] == ["dcgmi-diag"]
    findings = document["findings"]
    assert [(f["code"], f["severity"], f["device"]["index"]) for f in findings] == [
        ("thermal-slowdown", "warning", 0)
    ]
    assert "13.3 seconds started at 9.7 seconds" in findings[0]["evidence"][0]["detail"]


@pytest.mark.parametrize(
    "row",
    [
        # another tool's table with dcgmi's result words, in its own widths
        "| HBM Check            | Warn - All           |",
        "| Memory                    | Pass   |",
        # dcgmi's widths, but not a result
        "| GPU Device IDs Detected   | 2330,2330                                      |",
    ],
)
def test_a_row_in_other_widths_or_without_a_result_is_no_dcgmi_excerpt(row: str) -> None:
    assert classify(row + "\n") is not CaptureKind.DCGM_DIAG


def test_metadata_rows_without_their_heading_are_read_and_the_eud_version_is_no_test() -> None:
    """`dcgmi diag -r eud` (DCGM 3.3.9) prints the metadata rows with no Metadata heading, and
    an 'EUD Test Version' row beside them."""
    report = parse_dcgm_diag(SET.sample(EUD_RUN))
    assert (report.dcgm_version, report.driver_version) == ("3.3.9", "550.90.07")
    assert report.device_ids == ("2330",) * 8
    assert [(t.name, t.status.value, t.category) for t in report.tests] == [
        ("EUD Test", "pass", None)
    ]


def test_a_job_output_reads_only_the_diag_table_in_it() -> None:
    """A Slurm job's output: nvidia-smi's and dcgmi's setup lines, the diag table, then the
    training log and a `dcgmi stats` table, whose rows are no tests."""
    report = parse_dcgm_diag(SET.sample(JOB_OUTPUT))
    assert [t.category for t in report.tests] == ["Deployment"] * 9
    assert report.tests[0].name == "Blacklist"


# a row of each kind the table's patterns find at a line's start (LINE_INDENT), in dcgmi's own
# widths (Diag.cpp's DIAG_DATA stencil: 25 and 46 columns)
_RESULT = f"| {'Blacklist':<25} | {'Pass':<46} |"
_TABLE_ROWS = {
    "_TABLE_HEADER": f"| {'Diagnostic':<25} | {'Result':<46} |",
    "_SECTION": "|-----  Deployment  --------+" + "-" * 48 + "|",
    "_RESULT_ROW": _RESULT,
    "_STENCIL_RESULT_ROW": _RESULT,
}


@pytest.mark.parametrize("blank", ["\n", " \n", "\t\n"])
@pytest.mark.parametrize("pattern", sorted(_TABLE_ROWS))
def test_a_row_s_indent_stays_on_its_line(blank: str, pattern: str) -> None:
    """A line's indent stays on its line: a heading pattern whose indent ran on through the blank
    lines above a row took seconds on 64 KiB of them (quadratic); checked without a clock (a
    wall-clock bound fails under load): such an indent matched from the first blank line, and
    the match would start there, not at the row's line."""
    above = blank * 200
    found = getattr(dcgm_diag, pattern).search(above + "  " + _TABLE_ROWS[pattern] + "\n")
    assert found is not None and found.start() == len(above)


@pytest.mark.parametrize("blank", ["\n", " \n", "\t\n"])
def test_a_text_of_blank_lines_is_told_apart(blank: str) -> None:
    """64 KiB of blank lines, with a bar at their end (so the table's patterns are searched: a
    text without one is ruled out before them), is no dcgmi diag output."""
    assert not looks_like_dcgm_diag(blank * (65536 // len(blank)))
    assert not looks_like_dcgm_diag(blank * (65536 // len(blank)) + "a | b\n")
