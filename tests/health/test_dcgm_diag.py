"""`dcgmi diag` reports (tests/data/dcgmi_diag: real pastes, their expected values read by hand
in expected.json before the parser ran) read into tests, statuses and findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError
from gpuwarden.health.dcgm_diag import DiagStatus, parse_dcgm_diag, parse_diag_table
from gpuwarden.health.dcgm_diag_findings import dcgm_diag_check, dcgm_diag_findings
from gpuwarden.types.health import CheckStatus, Severity

DATA = Path(__file__).resolve().parents[1] / "data" / "dcgmi_diag"
EXPECTED: dict[str, dict[str, object]] = {
    name: value
    for name, value in json.loads((DATA / "expected.json").read_text()).items()
    if not name.startswith("_")
}


def _sample(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_report_reads_as_printed(name: str) -> None:
    expected = EXPECTED[name]
    report = parse_dcgm_diag(_sample(name))
    assert report.form == expected["format"]
    assert report.dcgm_version == expected["dcgm_version"]
    assert report.driver_version == expected["driver_version"]
    assert {t.name: t.status.value for t in report.tests} == expected["tests"]
    tests = {t.name: t for t in report.tests}
    gpu_status = expected["gpu_status"]
    assert isinstance(gpu_status, dict)
    for test_name, per_gpu in gpu_status.items():
        got = dict(tests[test_name].gpu_status)
        for gpu, status in per_gpu.items():
            assert got[int(gpu)].value == status, (test_name, gpu)
    for test_name, ids in dict(expected.get("error_ids", {})).items():  # type: ignore[call-overload]
        assert [m.error_id for m in tests[test_name].messages if m.error_id] == ids


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_findings_are_the_ones_dcgm_documents(name: str) -> None:
    expected = EXPECTED[name]
    report = parse_dcgm_diag(_sample(name))
    findings = dcgm_diag_findings(report, source=name)
    above_info = {
        (f.code, f.device.index if f.device else None, f.severity.value)
        for f in findings
        if f.severity is not Severity.INFO
    }
    for code, gpu, severity in expected["findings"]:  # type: ignore[attr-defined]
        assert (code, gpu, severity) in above_info
    wanted_codes = {code for code, _, _ in expected["findings"]}  # type: ignore[attr-defined]
    assert {code for code, _, _ in above_info} == wanted_codes
    info = {(f.code, f.device.index if f.device else None) for f in findings}
    for code, gpu in expected["info_codes"]:  # type: ignore[attr-defined]
        assert (code, gpu) in info
    if not expected["fault"]:
        assert not above_info, "a healthy report gives no finding above info"
    check = dcgm_diag_check(report, findings, name)
    assert (check.status in (CheckStatus.FAIL, CheckStatus.WARN)) == bool(above_info)


def test_every_finding_carries_dcgms_own_words() -> None:
    name = "07__DCGM-49__a100-pcie-2.4.6-r2-nvlink-down-excerpt.txt"
    (finding,) = dcgm_diag_findings(parse_dcgm_diag(_sample(name)), source=name)
    # the wrapped cell text is joined back where DCGM cut it mid-word ("curren" + "tly down")
    assert "NvLink link 4 is currently down" in finding.evidence[0].detail
    assert finding.evidence[0].field == "dcgmi-diag:PCIe"


def test_a_json_error_id_decides_the_code_and_is_named() -> None:
    text = json.dumps(
        {
            "DCGM Diagnostic": {
                "test_categories": [
                    {
                        "category": "Hardware",
                        "tests": [
                            {
                                "name": "memory",
                                "results": [
                                    {
                                        "entity_group": "GPU",
                                        "entity_id": 3,
                                        "status": "Fail",
                                        "warnings": [{"error_id": 85, "warning": "text"}],
                                    },
                                    {"entity_group": "GPU", "entity_id": 2, "status": "Pass"},
                                ],
                            }
                        ],
                    }
                ]
            }
        }
    )
    report = parse_dcgm_diag(text)
    (finding,) = dcgm_diag_findings(report, source="x")
    assert (finding.code, finding.device and finding.device.index) == ("row-remap-pending", 3)
    assert "DCGM_FR_PENDING_ROW_REMAP (85)" in finding.evidence[0].detail
    assert dict(report.tests[0].gpu_status) == {2: DiagStatus.PASS, 3: DiagStatus.FAIL}


def test_a_warn_without_a_known_meaning_is_a_warning_about_the_node() -> None:
    table = (
        "+-----  Stress  ------------+------------------------------------------------+\n"
        "| Targeted Power            | Warn - All                                     |\n"
        "| Warning                   | Unable to reach target power in the time given |\n"
    )
    (finding,) = dcgm_diag_findings(parse_diag_table(table), source="x")
    assert (finding.code, finding.device, finding.severity) == (
        "dcgm-diag-failed",
        None,
        Severity.WARNING,
    )
    assert "cooling" in finding.remedy


@pytest.mark.parametrize(
    "text",
    [
        "",
        "+---+\n| Diagnostic | Result |\n+===+\n",
        '{"DCGM GPU Diagnostic": {"test_categories": []}}',
        '{"DCGM GPU Diagnostic": {"test_categories": [',
        '{"other": 1}',
    ],
)
def test_a_report_without_results_is_refused_plainly(text: str) -> None:
    with pytest.raises(CorruptInputError) as caught:
        parse_dcgm_diag(text)
    assert caught.value.reference == "dcgm-diag-unreadable"


_LINES = st.sampled_from(
    [
        "| Diagnostic                | Result                                         |",
        "+-----  Hardware  ----------+------------------------------------------------+",
        "| GPU Memory                | Fail - GPU: 0                                  |",
        "| memory                    | Pass                                           |",
        "|                           | GPU0: Warn                                     |",
        "| Warning                   | GPU 1 double-bit ECC error                     |",
        "|                           | tly down Run a field diagnostic on the GPU.,   ",
        "| Info                      | GPU 1 Allocated 15568304202 bytes (98.3%)      |",
        '{"DCGM Diagnostic": {"tests": [{"name": "x", "results": [{"status": "Fail"}]}]}}',
        "| DCGM Version              | 4.4.2                                          |",
    ]
)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(_LINES, st.text(max_size=60)), max_size=25))
def test_any_text_parses_or_is_refused_plainly(lines: list[str]) -> None:
    try:
        report = parse_dcgm_diag("\n".join(lines))
    except CorruptInputError:
        return
    assert report.tests
    dcgm_diag_findings(report, source="fuzz")


@settings(max_examples=50, deadline=None)
@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=8),
        lambda c: (
            st.lists(c)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "name",
                        "results",
                        "status",
                        "gpu_ids",
                        "entity_id",
                        "warnings",
                        "tests",
                        "test_categories",
                        "info",
                    ]
                ),
                c,
            )
        ),
        max_leaves=30,
    )
)
def test_any_json_shape_parses_or_is_refused_plainly(shape: object) -> None:
    text = json.dumps({"DCGM Diagnostic": shape})
    try:
        report = parse_dcgm_diag(text)
    except CorruptInputError:
        return
    dcgm_diag_findings(report, source="fuzz")
