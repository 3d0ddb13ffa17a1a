"""`dcgmi diag` held-out set 5 (tests/data/dcgmi_diag5: real outputs sampled as the searches gave
them, their expected values read by hand from the text in expected.json before the parser ran on
them): recognised, read into tests and per-GPU statuses, judged into the findings DCGM's
documentation gives (none above info for these healthy reports), and `doctor --from` on them end
to end. The searches gave two outputs not already held (SOURCES.md counts what was set aside)."""

from __future__ import annotations

import pytest

from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.health.dcgm_diag import parse_dcgm_diag
from tests.doctor.test_doctor import doctor_json
from tests.health.dcgm_diag_sets import DiagSet, diag_set_checks

SET = DiagSet("dcgmi_diag5")
DATA = SET.data
# what the parser still gets wrong, each with the reason (strict: a fix must remove it)
STILL_WRONG: dict[str, str] = {}
CUT_EXCERPT = "01__DCGM-198__h100nvl-3.3.7-r2-nvlinks-down-deployment-pass-cut.txt"
RELAID_TABLE = (
    "02__smol-training-playbook-zh__h100x8-3.3.1-r2-verbose-pass-whitespace-collapsed.txt"
)
DEPLOYMENT_TESTS = 9  # DCGM 3.x's Deployment rows, Denylist to Inforom


def test_the_set_is_what_sources_md_lists() -> None:
    """Every output is named in SOURCES.md; the searches gave two (the frame ran dry: the set's
    SOURCES.md counts what they gave and what was set aside)."""
    SET.assert_listed_in_sources(least=2)
    SET.assert_holds_only_its_outputs()


(
    test_doctor_recognises_the_report,
    test_the_report_reads_as_printed,
    test_the_findings_are_the_ones_dcgm_documents,
) = diag_set_checks(SET, STILL_WRONG, every_gpu_listed=True, quotes_failure_messages=True)


@pytest.mark.parametrize(("name", "tests"), [(CUT_EXCERPT, 2), (RELAID_TABLE, 11)])
def test_doctor_judges_each_report_healthy(
    name: str, tests: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """A healthy report gives no finding and a passing dcgm-diag check counting its tests (01's
    thread has every NVLink down, which the level-2 run passed and the excerpt does not reach)."""
    code, document = doctor_json(capsys, "--from", str(DATA / name))
    assert code == 0
    assert [i["kind"] for i in document["inputs"]] == ["dcgmi-diag"]
    assert document["findings"] == []
    (check,) = [c for c in document["checks"] if c["name"] == "dcgm-diag"]
    assert check["status"] == "pass"
    assert f"{tests} test(s)" in check["detail"]


def test_an_excerpt_cut_inside_a_row_keeps_the_result_it_shows() -> None:
    """DCGM issue 198's stored paste ends at '| NVML Library | Pass' (the row's padding cut)."""
    report = parse_dcgm_diag(SET.sample(CUT_EXCERPT))
    assert report.device_ids == ("2321", "2321")
    assert [(t.name, t.category) for t in report.tests] == [
        ("Denylist", "Deployment"),
        ("NVML Library", "Deployment"),
    ]


def test_a_table_a_markdown_renderer_relaid_keeps_its_sections() -> None:
    """A page that renders dcgmi's table as a Markdown table trims each cell to one space of
    padding, so the `|-----  Deployment  ---|` heading becomes `| -----  Deployment  --- |`;
    the tests under it are still Deployment's (read as no section before)."""
    report = parse_dcgm_diag(SET.sample(RELAID_TABLE))
    assert [t.category for t in report.tests] == [
        *["Deployment"] * DEPLOYMENT_TESTS,
        "Integration",
        "Hardware",
    ]
    assert report.device_ids == ("2330",) * 8


@pytest.mark.parametrize(
    "row",
    [
        # a Markdown table's separator row and a row naming a section, in another tool's table
        "| --- | --- |\n| Deployment | Pass |\n",
        "| ----- Deployment ----- |\n| Check | Pass |\n",
    ],
)
def test_other_tables_with_dashes_are_no_section_heading(row: str) -> None:
    assert classify(row) is not CaptureKind.DCGM_DIAG
