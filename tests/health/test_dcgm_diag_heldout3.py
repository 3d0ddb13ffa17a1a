"""`dcgmi diag` held-out set 3 (tests/data/dcgmi_diag3: real outputs sampled as the searches gave
them, their expected values read by hand from the text in expected.json before the parser ran on
them): recognised, read into tests and per-GPU statuses, and judged into the findings DCGM's
documentation gives — none above info for a healthy report or a skip."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError
from gpuwarden.health import dcgm_diag
from gpuwarden.health.dcgm_diag import parse_dcgm_diag
from gpuwarden.health.dcgm_diag_findings import dcgm_diag_findings
from gpuwarden.types.health import Confidence, Severity
from tests.health.dcgm_diag_sets import DiagSet, diag_set_checks

SET = DiagSet("dcgmi_diag3")
DATA, EXPECTED = SET.data, SET.expected
# what the parser still gets wrong, each with the reason (strict: a fix must remove it)
STILL_WRONG: dict[str, str] = {}


def test_the_set_is_what_sources_md_lists() -> None:
    SET.assert_listed_in_sources()
    assert sorted(p.name for p in DATA.iterdir() if p.suffix in (".txt", ".json")) == sorted(
        [*EXPECTED, "expected.json"]
    )


(
    test_doctor_recognises_the_report,
    test_the_report_reads_as_printed,
    test_the_findings_are_the_ones_dcgm_documents,
) = diag_set_checks(SET, STILL_WRONG, every_gpu_listed=True, quotes_failure_messages=True)


def test_a_missed_power_target_is_a_warning_to_check_limits_first() -> None:
    """DCGM grades DCGM_FR_TARGET_POWER 'monitor' (dcgm_errors.cpp): not an RMA on first sight."""
    name = "05__sagemaker-health-check__a10gx4-3.3.9-r3-targeted-power-fail-gpu1.txt"
    (finding,) = dcgm_diag_findings(parse_dcgm_diag(SET.sample(name)), source=name)
    assert (finding.severity, finding.confidence) == (Severity.WARNING, Confidence.MEDIUM)
    assert "DCGM grades 'monitor'" in finding.cause
    assert finding.remedy.startswith("check the GPU's enforced power limit")
    assert "224.1" in finding.evidence[0].detail


def test_two_runs_in_one_paste_read_as_the_later_one() -> None:
    name = "07__v100-dcgm-notes__v100pcie-3.3.9-r1-and-r2-one-paste-cut.txt"
    report = parse_dcgm_diag(SET.sample(name))
    assert len(report.tests) == 11  # -r 2's eleven, not -r 1's nine again beside them
    assert [t.name for t in report.tests].count("Denylist") == 1


def test_an_elided_json_paste_reads_the_test_objects_it_holds_whole() -> None:
    name = "02__DCGM-139__t400-3.x-json-r3-all-skip-elided-cut.json"
    report = parse_dcgm_diag(SET.sample(name))
    assert [(t.category, t.name) for t in report.tests][:2] == [
        ("Integration", "PCIe"),
        ("Hardware", "GPU Memory"),
    ]


def test_a_json_of_nothing_but_open_test_objects_is_refused_quickly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checked without a clock (a wall-clock bound fails under load): each test object the
    salvage tries to decode may read to the end of the text, so it gives up after
    _MAX_SALVAGE_MISSES objects that do not decode; trying each of the 20,000 open ones read
    the text 20,000 times (quadratic)."""
    tries = 0
    decoded_object = dcgm_diag._decoded_object

    def counting(decoder: json.JSONDecoder, text: str, start: int) -> tuple[object, int] | None:
        nonlocal tries
        tries += 1
        assert tries <= dcgm_diag._MAX_SALVAGE_MISSES + 1, "the salvage did not give up"
        return decoded_object(decoder, text, start)

    monkeypatch.setattr(dcgm_diag, "_decoded_object", counting)
    hostile = '{"DCGM GPU Diagnostic": [' + '{"name": "x", "results": [' * 20_000
    with pytest.raises(CorruptInputError):
        parse_dcgm_diag(hostile)
    assert tries == dcgm_diag._MAX_SALVAGE_MISSES + 1


_TEST = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["PCIe", "GPU Memory", "Diagnostic", "memory", "pcie"]),
        "results": st.lists(
            st.fixed_dictionaries(
                {
                    "gpu_id": st.sampled_from(["0", "1", "2"]),
                    "status": st.sampled_from(["Pass", "Fail", "Skip", "Warn"]),
                }
            ),
            min_size=1,
            max_size=3,
        ),
    }
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(_TEST, min_size=1, max_size=5),
    st.sampled_from(['{"..."}', "...", "{ ... }"]),
    st.integers(0, 2_000),
)
def test_an_elided_or_cut_json_paste_parses_or_is_refused_plainly(
    tests: list[dict[str, object]], elision: str, cut: int
) -> None:
    category = {"category": "Hardware", "tests": tests}
    body = json.dumps({"DCGM GPU Diagnostic": {"test_categories": [category]}}, indent="\t")
    text = body.replace('"test_categories": [', f'"test_categories": [\n{elision},', 1)
    text = text[: max(1, len(text) - cut)]
    try:
        report = parse_dcgm_diag(text)
    except CorruptInputError:
        return
    # every test read is one the paste holds, with its results as written (a GPU's later
    # result over its earlier one, as the reader keeps them)
    written = [
        (t["name"], {int(r["gpu_id"]): r["status"].lower() for r in t["results"]})  # type: ignore[attr-defined]
        for t in tests
    ]
    assert len(report.tests) <= len(tests)
    for test in report.tests:
        read = {gpu: status.value for gpu, status in test.gpu_status}
        assert (test.name, read) in written
    dcgm_diag_findings(report, source="fuzz")


def _one_gpu_run(gpu: int, memory: str, warning: str | None) -> str:
    """`dcgmi diag -r 1 -i <gpu>` as DCGM 3.3 prints it: "All" names no GPU, and "GPU Device IDs
    Detected" is the PCI device id, the same for every GPU of a model."""
    rows = [
        f"# dcgmi diag -r 2 -i {gpu}",
        "+---------------------------+------------------------------------------------+",
        "| Diagnostic                | Result                                         |",
        "+===========================+================================================+",
        "|-----  Metadata  ----------+------------------------------------------------|",
        "| DCGM Version              | 3.3.9                                          |",
        "| GPU Device IDs Detected   | 20b5                                           |",
        "+-----  Hardware  ----------+------------------------------------------------+",
        f"| GPU Memory                | {memory:<47}|",
    ]
    if warning is not None:
        rows.append(f"| Warning                   | {warning:<47}|")
    rows.append("+---------------------------+------------------------------------------------+")
    return "\n".join(rows) + "\n"


def test_a_later_run_does_not_erase_an_earlier_failure() -> None:
    """Two runs in one paste may be on different GPUs (`-i 0`, then `-i 1`), which the table
    cannot tell apart: a later pass must not hide the earlier run's failure (review r8a)."""
    failed = "GPU 0 Error using CUDA API cuInit"
    paste = _one_gpu_run(0, "Fail - All", failed) + _one_gpu_run(1, "Pass - All", None)
    report = parse_dcgm_diag(paste)
    assert [(t.name, t.status.value) for t in report.tests] == [
        ("GPU Memory", "fail"),
        ("GPU Memory", "pass"),
    ]
    findings = dcgm_diag_findings(report, source="diag.txt")
    assert [(f.severity, f.device.index if f.device else None) for f in findings] == [
        (Severity.CRITICAL, 0)
    ]


def test_a_later_run_replaces_an_earlier_pass() -> None:
    paste = _one_gpu_run(0, "Pass - All", None) + _one_gpu_run(0, "Fail - All", "GPU 0 Error")
    assert [t.status.value for t in parse_dcgm_diag(paste).tests] == ["fail"]
