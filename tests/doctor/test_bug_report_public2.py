"""`doctor --from` on a second held-out set of real nvidia-bug-report.log pastes
(tests/data/bug_report_public2: whole-report prefixes and single parts pasted on their own, 2007 to
2015, scripts 4401223 to 7129089, a quote marker on the first separator). Each file's parts,
script version, date, module version and Xids were read by eye and written down in
expected.json before doctor ran; a healthy paste gives no finding above info."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.doctor.bug_report import read_bug_report, report_time, split_bug_report
from gpuwarden.doctor.captures import read_capture
from gpuwarden.doctor.node import DoctorOptions, DoctorReport, diagnose_captures
from gpuwarden.errors import GpuwardenError
from tests.doctor.judged import assert_judged_or_refused

SET = Path(__file__).resolve().parents[1] / "data" / "bug_report_public2"
EXPECTED: list[dict[str, Any]] = json.loads((SET / "expected.json").read_text())
# /proc/driver/nvidia/version of the 1.0-xxxx drivers (2006) reads "NVIDIA Linux x86 Kernel
# Module  1.0-9631": doctor.environment.parse_nvrm_version takes only "NVIDIA UNIX" and dotted
# versions (not a file of this module; see the h36b report).
LEGACY_MODULE = "fx5200-feisty-2007.proc-version.part.log"


def _by_file(legacy_xfail: bool) -> list[Any]:
    marks = {
        LEGACY_MODULE: pytest.mark.xfail(
            strict=True, reason="legacy 'NVIDIA Linux x86 Kernel Module 1.0-9631' not read"
        )
    }
    return [
        pytest.param(e, id=e["file"], marks=marks.get(e["file"], ()) if legacy_xfail else ())
        for e in EXPECTED
    ]


def _above_info(report: DoctorReport) -> list[str]:
    return sorted(f.code for f in report.findings if f.severity.rank > 0)


def _judged(path: str) -> DoctorReport | GpuwardenError:
    try:
        return diagnose_captures([path], DoctorOptions())
    except GpuwardenError as refused:
        return refused


@pytest.mark.parametrize("expected", _by_file(False))
def test_each_paste_is_read_as_its_kind(expected: dict[str, Any]) -> None:
    found = read_capture(str(SET / expected["file"]))
    kind = getattr(found, "kind", None)
    assert (kind.value if kind is not None else None) == expected["kind"]


@pytest.mark.parametrize(
    "expected", [e for e in EXPECTED if e["bug_report"]], ids=lambda e: e["file"]
)
def test_a_report_splits_into_the_parts_seen(expected: dict[str, Any]) -> None:
    text = (SET / expected["file"]).read_text()
    assert [s.name for s in split_bug_report(text)] == expected["sections"]
    reading = read_bug_report(expected["file"], text, 0.0)
    assert reading.script_version == expected["script_version"]
    when = report_time(text)
    date = None if when is None else datetime.fromtimestamp(when, UTC).isoformat()
    assert date == expected["date_utc"]
    assert reading.captures == () and reading.unread == ()


@pytest.mark.parametrize("expected", _by_file(True))
def test_doctor_reads_the_values_and_gives_no_false_alarm(expected: dict[str, Any]) -> None:
    report = _judged(str(SET / expected["file"]))
    if isinstance(report, GpuwardenError):
        # only a paste of a part doctor has no reader for may be refused, and as exit 2
        assert expected["kind"] is None
        assert (report.exit_code, bool(report.hint)) == (2, True)
        return
    env = report.environment
    assert (env.kernel_module_version if env else None) == expected["module_version"]
    assert sorted({g.xid for k in report.kernel_logs for g in k.report.groups}) == expected["xids"]
    assert _above_info(report) == expected["codes_above_info"]
    assert expected["fault"] or _above_info(report) == []


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e["file"])
def test_cut_pastes_never_give_a_traceback(expected: dict[str, Any]) -> None:
    text = (SET / expected["file"]).read_text()
    for cut in (len(text) // 3, len(text) // 2, len(text) - 7):
        assert_judged_or_refused(text[:cut], "nvidia-bug-report.log")
        assert_judged_or_refused(text[cut:], "nvidia-bug-report.log")
