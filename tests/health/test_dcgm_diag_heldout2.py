"""`dcgmi diag` held-out set 2 (tests/data/dcgmi_diag2: real outputs, their expected values read
by hand from the text in expected.json before the parser ran on them): recognised as a dcgmi
diag report, read into tests and statuses, and judged into the findings DCGM's documentation
gives — none above info for a healthy report or a skip the environment caused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.errors import CorruptInputError
from gpuwarden.health.dcgm_diag import parse_dcgm_diag
from gpuwarden.health.dcgm_diag_findings import dcgm_diag_check, dcgm_diag_findings
from gpuwarden.types.health import CheckStatus, Severity

DATA = Path(__file__).resolve().parents[1] / "data" / "dcgmi_diag2"
EXPECTED: dict[str, dict[str, object]] = {
    name: value
    for name, value in json.loads((DATA / "expected.json").read_text()).items()
    if not name.startswith("_")
}
# what the parser still gets wrong, each with the reason (strict: a fix must remove it)
STILL_WRONG: dict[str, str] = {}


def _cases() -> list[object]:
    return [
        pytest.param(
            name,
            marks=pytest.mark.xfail(strict=True, reason=STILL_WRONG[name])
            if name in STILL_WRONG
            else (),
        )
        for name in sorted(EXPECTED)
    ]


def _sample(name: str) -> str:
    return (DATA / name).read_text()


def test_the_set_is_what_sources_md_lists() -> None:
    listed = (DATA / "SOURCES.md").read_text()
    assert len(EXPECTED) >= 10
    assert all(name in listed for name in EXPECTED)


@pytest.mark.parametrize("name", _cases())
def test_doctor_recognises_the_report(name: str) -> None:
    assert (classify(_sample(name)) is CaptureKind.DCGM_DIAG) == EXPECTED[name]["recognised"]


@pytest.mark.parametrize("name", _cases())
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
        got = {gpu: status.value for gpu, status in tests[test_name].gpu_status}
        assert got == {int(gpu): status for gpu, status in per_gpu.items()} or all(
            got.get(int(gpu)) == status for gpu, status in per_gpu.items()
        ), test_name


@pytest.mark.parametrize("name", _cases())
def test_the_findings_are_the_ones_dcgm_documents(name: str) -> None:
    expected = EXPECTED[name]
    report = parse_dcgm_diag(_sample(name))
    findings = dcgm_diag_findings(report, source=name)
    above_info = {
        (f.code, f.device.index if f.device else None, f.severity.value)
        for f in findings
        if f.severity is not Severity.INFO
    }
    wanted = {tuple(f) for f in expected["findings"]}  # type: ignore[attr-defined]
    assert above_info == wanted
    info = {(f.code, f.device.index if f.device else None) for f in findings}
    for code, gpu in expected["info_codes"]:  # type: ignore[attr-defined]
        assert (code, gpu) in info
    if not expected["fault"]:
        assert not above_info, "a healthy report gives no finding above info"
    check = dcgm_diag_check(report, findings, name)
    assert (check.status in (CheckStatus.FAIL, CheckStatus.WARN)) == bool(above_info)


def test_a_cuda_driver_mismatch_is_said_to_be_the_setup_not_the_gpu() -> None:
    name = "02__cn-gpu-operator-notes__rtx3090x8-3.3.0-r2-pcie-unsupported-driver-cuda.txt"
    (finding,) = dcgm_diag_findings(parse_dcgm_diag(_sample(name)), source=name)
    assert "did not judge the hardware" in finding.cause
    assert finding.remedy.startswith("install the DCGM and CUDA packages that match the driver")
    assert "RMA" not in finding.remedy  # nothing says the GPU is bad
    assert "unsupported display driver / cuda driver combination" in finding.evidence[0].detail


def test_other_json_with_results_is_not_taken_for_a_diag_report() -> None:
    other = '{"results": [{"status": "ok", "name": "lint"}], "status": "done"}'
    assert classify(other) is not CaptureKind.DCGM_DIAG


_RESULT = st.fixed_dictionaries(
    {"entity_group": st.sampled_from(["GPU", "NvSwitch", ""]), "entity_id": st.integers(-2, 9)},
    optional={
        "status": st.sampled_from(["Pass", "Fail", "Warn", "Skip", "x"]),
        "warnings": st.lists(st.text(max_size=20), max_size=2),
        "info": st.text(max_size=20),
    },
)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=12), st.lists(_RESULT, max_size=4), st.sampled_from(["", ",", "\n"]))
def test_a_pasted_test_object_parses_or_is_refused_plainly(
    name: str, results: list[dict[str, object]], tail: str
) -> None:
    text = json.dumps({"name": name, "results": results}, indent=8) + tail
    try:
        report = parse_dcgm_diag(text)
    except CorruptInputError:
        return
    assert [t.name for t in report.tests] == [name.strip()]
    dcgm_diag_findings(report, source="fuzz")
