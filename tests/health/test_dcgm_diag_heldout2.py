"""`dcgmi diag` held-out set 2 (tests/data/dcgmi_diag2: real outputs, their expected values read
by hand from the text in expected.json before the parser ran on them): recognised as a dcgmi
diag report, read into tests and statuses, and judged into the findings DCGM's documentation
gives — none above info for a healthy report or a skip the environment caused."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.errors import CorruptInputError
from gpuwarden.health.dcgm_diag import parse_dcgm_diag
from gpuwarden.health.dcgm_diag_findings import dcgm_diag_findings
from tests.health.dcgm_diag_sets import DiagSet, diag_set_checks

SET = DiagSet("dcgmi_diag2")
# what the parser still gets wrong, each with the reason (strict: a fix must remove it)
STILL_WRONG: dict[str, str] = {}


def test_the_set_is_what_sources_md_lists() -> None:
    SET.assert_listed_in_sources()


(
    test_doctor_recognises_the_report,
    test_the_report_reads_as_printed,
    test_the_findings_are_the_ones_dcgm_documents,
) = diag_set_checks(SET, STILL_WRONG, every_gpu_listed=False, quotes_failure_messages=False)


def test_a_cuda_driver_mismatch_is_said_to_be_the_setup_not_the_gpu() -> None:
    name = "02__cn-gpu-operator-notes__rtx3090x8-3.3.0-r2-pcie-unsupported-driver-cuda.txt"
    (finding,) = dcgm_diag_findings(parse_dcgm_diag(SET.sample(name)), source=name)
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
