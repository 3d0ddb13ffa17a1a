"""The held-out `dcgmi diag` sets (tests/data/dcgmi_diag2, dcgmi_diag3: real outputs, their
expected values read by hand from the text in expected.json before the parser ran on them):
loading a set, and the checks every set gets, as parametrized tests a module takes by name —
recognised as a dcgmi diag report, read into tests and per-GPU statuses, judged into the
findings DCGM's documentation gives."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.health.dcgm_diag import parse_dcgm_diag
from gpuwarden.health.dcgm_diag_findings import dcgm_diag_check, dcgm_diag_findings
from gpuwarden.types.health import CheckStatus, Severity

DATA = Path(__file__).resolve().parents[1] / "data"

TestFn = Callable[..., None]


class DiagSet:
    """One folder of `dcgmi diag` outputs and what its ``expected.json`` reads in each, by file
    name (keys starting with '_' describe the fields)."""

    def __init__(self, folder: str) -> None:
        self.data = DATA / folder
        self.expected: dict[str, dict[str, Any]] = {
            name: value
            for name, value in json.loads((self.data / "expected.json").read_text()).items()
            if not name.startswith("_")
        }

    def sample(self, name: str) -> str:
        return (self.data / name).read_text()

    def cases(self, still_wrong: Mapping[str, str]) -> list[Any]:
        """One case a file, in name order; one ``still_wrong`` names is a strict xfail."""
        return [
            pytest.param(
                name,
                marks=pytest.mark.xfail(strict=True, reason=still_wrong[name])
                if name in still_wrong
                else (),
            )
            for name in sorted(self.expected)
        ]

    def assert_listed_in_sources(self, least: int = 10) -> None:
        """At least ``least`` outputs, each named in the set's SOURCES.md."""
        listed = (self.data / "SOURCES.md").read_text()
        assert len(self.expected) >= least
        assert all(name in listed for name in self.expected)

    def assert_holds_only_its_outputs(self) -> None:
        """The folder's outputs and expected.json are exactly the files expected.json reads."""
        held = sorted(p.name for p in self.data.iterdir() if p.suffix in (".txt", ".json"))
        assert held == sorted([*self.expected, "expected.json"])


def diag_set_checks(
    diag_set: DiagSet,
    still_wrong: Mapping[str, str],
    *,
    every_gpu_listed: bool,
    quotes_failure_messages: bool,
) -> tuple[TestFn, TestFn, TestFn]:
    """The three checks every set runs on each output, as test functions for its module: doctor
    recognises it (or not) as written down; it reads into the tests, statuses and versions
    printed (``every_gpu_listed``: a test's per-GPU statuses are exactly the row's, else each GPU
    the row names has its status); its findings above info are exactly the row's, its info codes
    among them, none above info for a healthy report, and the check fails or warns exactly when
    there is one (``quotes_failure_messages``: each failure message the row lists is quoted in
    its GPU's evidence)."""
    cases = diag_set.cases(still_wrong)

    @pytest.mark.parametrize("name", cases)
    def test_doctor_recognises_the_report(name: str) -> None:
        recognised = classify(diag_set.sample(name)) is CaptureKind.DCGM_DIAG
        assert recognised == diag_set.expected[name]["recognised"]

    @pytest.mark.parametrize("name", cases)
    def test_the_report_reads_as_printed(name: str) -> None:
        expected = diag_set.expected[name]
        report = parse_dcgm_diag(diag_set.sample(name))
        assert report.form == expected["format"]
        assert report.dcgm_version == expected["dcgm_version"]
        assert report.driver_version == expected["driver_version"]
        assert {t.name: t.status.value for t in report.tests} == expected["tests"]
        tests = {t.name: t for t in report.tests}
        gpu_status = expected["gpu_status"]
        assert isinstance(gpu_status, dict)
        for test_name, per_gpu in gpu_status.items():
            got = {gpu: status.value for gpu, status in tests[test_name].gpu_status}
            wanted = {int(gpu): status for gpu, status in per_gpu.items()}
            if every_gpu_listed:
                assert got == wanted, test_name
            else:
                assert all(got.get(gpu) == status for gpu, status in wanted.items()), test_name

    @pytest.mark.parametrize("name", cases)
    def test_the_findings_are_the_ones_dcgm_documents(name: str) -> None:
        expected = diag_set.expected[name]
        report = parse_dcgm_diag(diag_set.sample(name))
        findings = dcgm_diag_findings(report, source=name)
        above_info = {
            (f.code, f.device.index if f.device else None, f.severity.value)
            for f in findings
            if f.severity is not Severity.INFO
        }
        assert above_info == {tuple(f) for f in expected["findings"]}
        info = {(f.code, f.device.index if f.device else None) for f in findings}
        for code, gpu in expected["info_codes"]:
            assert (code, gpu) in info
        for test_name, gpu, phrase in (
            expected["failure_messages"] if quotes_failure_messages else ()
        ):
            quoted = {
                (e.field, e.detail)
                for f in findings
                if f.device is not None and f.device.index == gpu
                for e in f.evidence
            }
            assert any(
                field == f"dcgmi-diag:{test_name}" and phrase in detail for field, detail in quoted
            ), (test_name, gpu, phrase)
        if not expected["fault"]:
            assert not above_info, "a healthy report gives no finding above info"
        check = dcgm_diag_check(report, findings, name)
        assert (check.status in (CheckStatus.FAIL, CheckStatus.WARN)) == bool(above_info)

    return (
        test_doctor_recognises_the_report,
        test_the_report_reads_as_printed,
        test_the_findings_are_the_ones_dcgm_documents,
    )
