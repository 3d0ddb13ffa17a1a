"""`doctor --from` on a third held-out set of real nvidia-bug-report.log excerpts
(tests/data/bug_report_public3: contiguous cuts of five whole reports committed to public GitHub
repositories, scripts 20083567 to 34614034, drivers 352 to 550, 2015-2024; dates in en, zh_CN and
fr_FR locales; `/proc/driver/nvidia/./version` as the script prints it; the kernel-log scan of an
A100 whose GPU fell off the bus). Each file's parts, script version, date, module version, Xids
and buses were read by eye and written down in expected.json before doctor ran; a paste that
shows no fault gives no finding above info."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.bug_report import read_bug_report, report_time, split_bug_report
from gpuwarden.doctor.captures import CaptureKind, read_capture
from gpuwarden.doctor.node import DoctorOptions, DoctorReport, diagnose_captures
from tests.doctor.judged import assert_judged_or_refused

SET = Path(__file__).resolve().parents[1] / "data" / "bug_report_public3"
EXPECTED: list[dict[str, Any]] = json.loads((SET / "expected.json").read_text())
REPORTS = [e for e in EXPECTED if e["bug_report"]]


def _iso(when: float | None) -> str | None:
    return None if when is None else datetime.fromtimestamp(when, UTC).isoformat()


def _above_info(report: DoctorReport) -> list[str]:
    return sorted({f.code for f in report.findings if f.severity.rank > 0})


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e["file"])
def test_each_excerpt_is_read_as_its_kind(expected: dict[str, Any]) -> None:
    found = read_capture(str(SET / expected["file"]))
    kind = getattr(found, "kind", None)
    assert (kind.value if kind is not None else None) == expected["kind"]


@pytest.mark.parametrize("expected", REPORTS, ids=lambda e: e["file"])
def test_a_report_splits_into_the_parts_seen(expected: dict[str, Any]) -> None:
    text = (SET / expected["file"]).read_text()
    assert [s.name for s in split_bug_report(text)] == expected["sections"]
    reading = read_bug_report(expected["file"], text, 0.0)
    assert reading.script_version == expected["script_version"]
    assert _iso(report_time(text)) == expected["date_utc"]
    assert reading.unread == ()
    kinds = [c.kind for c in reading.captures]
    assert kinds == ([CaptureKind.DRIVER_VERSION] if expected["module_version"] else [])


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e["file"])
def test_doctor_reads_the_values_and_gives_no_false_alarm(expected: dict[str, Any]) -> None:
    report = diagnose_captures([str(SET / expected["file"])], DoctorOptions())
    env = report.environment
    assert (env.kernel_module_version if env else None) == expected["module_version"]
    groups = [g for k in report.kernel_logs for g in k.report.groups]
    assert sorted({g.xid for g in groups}) == expected["xids"]
    assert sorted({g.pci_bus_id for g in groups if g.pci_bus_id}) == expected["xid_buses"]
    assert _above_info(report) == expected["codes_above_info"]
    assert expected["fault"] or _above_info(report) == []


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e["file"])
def test_cut_excerpts_never_give_a_traceback(expected: dict[str, Any]) -> None:
    text = (SET / expected["file"]).read_text()
    for cut in (len(text) // 3, len(text) // 2, len(text) - 7):
        assert_judged_or_refused(text[:cut], "nvidia-bug-report.log")
        assert_judged_or_refused(text[cut:], "nvidia-bug-report.log")


# ---- the Date: line in the locales `date` prints ---------------------------------------------


def test_dates_in_the_glibc_locales_are_read() -> None:
    def iso(line: str) -> str | None:
        return _iso(report_time(line))

    assert iso("Date: 2024年 12月 20日 星期五 18:35:26 CST") == "2024-12-20T18:35:26+00:00"
    assert iso("Date: 2024年 12月 20日 金曜日 18:35:26 +0900") == "2024-12-20T09:35:26+00:00"
    assert iso("Date: jeu. 25 août 2022 20:30:39 CEST") == "2022-08-25T20:30:39+00:00"
    assert iso("Date: vie 02 dic 2022 10:00:00 -03") == "2022-12-02T13:00:00+00:00"
    # a dotted time, an unknown month, no year, de_DE's year last: not a date this reads
    assert iso("Date: mar 13 set 2011, 23.11.55, CEST") is None
    assert iso("Date: jeu. 25 xyz 2022 20:30:39 CEST") is None
    assert iso("Date: jeu. 25 août 20:30:39 CEST") is None
    assert iso("Date: Fr 10. Sep 04:31:01 CEST 2010") == "2010-09-10T04:31:01+00:00"  # de_DE
    assert iso("Date: Mi 3. Dez 23:05:00 +0100 2025") == "2025-12-03T22:05:00+00:00"
    assert iso("Date: 2024年 2月 31日 星期五 18:35:26 CST") is None


@settings(max_examples=80, deadline=None)
@given(
    year=st.integers(1970, 2100),
    month=st.integers(1, 12),
    day=st.integers(1, 28),
    hms=st.tuples(st.integers(0, 23), st.integers(0, 59), st.integers(0, 59)),
    junk=st.text(max_size=40),
)
def test_report_time_reads_generated_dates_and_never_raises(
    year: int, month: int, day: int, hms: tuple[int, int, int], junk: str
) -> None:
    clock = "{:02d}:{:02d}:{:02d}".format(*hms)
    when = report_time(f"Date: {year}年 {month:02d}月 {day:02d}日 星期五 {clock} UTC\n")
    assert _iso(when) == datetime(year, month, day, *hms, tzinfo=UTC).isoformat()
    report_time(f"Date: {junk}\n")
    report_time(f"Date: x {day} {junk} {year} {clock} {junk}\n")
