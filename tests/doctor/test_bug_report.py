"""`doctor --from nvidia-bug-report.log(.gz)`: real reports (tests/data/bug_report_public, verbatim
prefixes of reports pasted in public threads) split into the parts seen by eye and give no alarm;
reports assembled in the script's own layout from real captures read exactly as those captures
read alone (devices, driver, module version, Xids); gzip (one member per part, as the script
writes it) reads as the text; gzip bombs and truncated .gz are exit-2 errors; cut and spliced
reports never give a traceback."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.doctor import captures as captures_module
from gpuwarden.doctor.bug_report import (
    read_bug_report,
    report_time,
    section_kind,
    split_bug_report,
)
from gpuwarden.doctor.captures import CaptureKind, read_capture
from gpuwarden.doctor.node import DoctorOptions, DoctorReport, diagnose_captures
from gpuwarden.report.doctor_document import doctor_document
from tests.doctor.judged import assert_judged_or_refused

DATA = Path(__file__).resolve().parents[1] / "data"
PUBLIC = DATA / "bug_report_public"
EXPECTED = json.loads((PUBLIC / "expected.json").read_text())
SEPARATOR = "_" * 44
H100_Q = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
H100_NVLINK = "topo/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.nvlink-s.txt"
H100_TOPO = "topo/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.topo-m.txt"
PROC_VERSION = DATA / "environment" / "proc-version.proprietary-550.90.07.txt"
HEALTHY_DMESG = (
    DATA / "xid_public" / "29__open-gpu-kernel-modules-120__healthy-boot-3070-mobile.log"
)
DBE_DMESG = DATA / "xid_public" / "37__nvidia-docker-849__dmesg-T-xid48-63-dbe-390.log"
PROLOGUE = """Start of NVIDIA bug report log file.  Please include this file, along
with a detailed description of your problem, when reporting a graphics
driver bug via the NVIDIA Linux forum (see forums.developer.nvidia.com)
or by sending email to 'linux-bugs@nvidia.com'.

nvidia-bug-report.sh Version: 31831145

Date: Thu Oct 27 08:50:11 PM -03 2022
uname: Linux node 6.0.1 #1 SMP x86_64 GNU/Linux
command line flags: """


def _above_info(report: DoctorReport) -> list[str]:
    return [f.code for f in report.findings if f.severity.rank > 0]


# ---- real reports -------------------------------------------------------------------------------


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e["file"])
def test_real_report_splits_into_the_parts_seen(expected: dict[str, Any]) -> None:
    text = (PUBLIC / expected["file"]).read_text()
    sections = split_bug_report(text)
    assert [s.name for s in sections] == expected["sections"]
    reading = read_bug_report(expected["file"], text, 0.0)
    assert reading.script_version == expected["script_version"]
    assert [c.path.split("#", 1)[1] for c in reading.captures] == expected["captures"]
    when = report_time(text)
    stamp = None if when is None else datetime.fromtimestamp(when, UTC).isoformat()
    assert stamp == expected["date_utc"]


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e["file"])
def test_real_report_is_read_as_one_and_gives_no_alarm(expected: dict[str, Any]) -> None:
    path = PUBLIC / expected["file"]
    assert read_capture(str(path)).kind is CaptureKind.BUG_REPORT  # type: ignore[union-attr]
    report = diagnose_captures([str(path)], DoctorOptions())
    assert [(i.source, i.kind) for i in report.inputs] == [(str(path), "nvidia-bug-report")]
    assert f"{len(expected['sections'])} part(s)" in report.inputs[0].detail
    assert _above_info(report) == []
    assert not report.samples and not report.judged  # no GPU reading in these parts: no verdict
    xid = next(c for c in report.checks if c.name == "xid")
    assert xid.status.value == "skip"


# ---- reports assembled from real captures, in the script's layout -------------------------------


def _file_part(path: str, text: str) -> str:
    listing = f"*** ls: -r--r--r-- 1 root root 0 2022-10-27 20:48:33.974169298 -0300 {path}"
    return f"*** {path}\n{listing}\n{text.rstrip()}\n"


def _report(*parts: str) -> str:
    """A report as the script writes it: each part after a separator and a blank line."""
    blocks = [PROLOGUE, *parts, "End of NVIDIA bug report log file."]
    return "".join(f"{SEPARATOR}\n\n{block}\n\n" for block in blocks)


def _smi_part(fixtures: Path) -> str:
    q = (fixtures / H100_Q).read_text().rstrip()
    nvlink = (fixtures / H100_NVLINK).read_text().rstrip()
    topo = (fixtures / H100_TOPO).read_text().rstrip()
    # report_command: the command, a blank line, its output, a blank line -- no separators;
    # `--query --unit` is the S-class unit query (its text looks like -q's: it must not count)
    return "\n\n".join(
        [
            "/usr/bin/nvidia-smi --query",
            q,
            "/usr/bin/nvidia-smi --query --unit",
            q.split("Attached GPUs")[0].rstrip(),
            "/usr/bin/nvidia-smi nvlink --errorcounters",
            "/usr/bin/nvidia-smi nvlink --status",
            nvlink,
            "/usr/bin/nvidia-smi topo -m",
            topo,
        ]
    )


def _scan_part(log: str) -> str:
    nvrm = "\n".join(line for line in log.splitlines() if "NVRM" in line)
    return (
        "Scanning kernel log files for NVIDIA kernel messages:\n\n"
        f"  /var/log/kern.log:\n{nvrm}\n\n  journalctl -b -0:\n{nvrm}"
    )


def _assembled(fixtures: Path, dmesg: Path, *, module_version: bool = True) -> str:
    """Real captures in the script's order. The only real /proc/driver/nvidia/version at hand
    (550.90.07) is not the H100 capture's driver (590.48.01): with it, the report shows a
    driver/module mismatch, as the same files read alone do."""
    log = dmesg.read_text()
    version = _file_part("/proc/driver/nvidia/version", PROC_VERSION.read_text())
    return _report(
        _file_part("/sys/bus/pci/devices/0000:01:00.0/power/control", "auto"),
        "journalctl -b -0 _COMM=Xorg\n\n-- No entries --",
        _scan_part(log),
        f"dmesg:\n\n{log}",
        *([version] if module_version else ["*** /proc/driver/nvidia/version does not exist"]),
        _smi_part(fixtures),
    )


def _write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def _essentials(report: DoctorReport) -> dict[str, Any]:
    env = report.environment
    return {
        "gpus": [(s.info.uuid, s.info.name, s.info.driver_version) for s in report.samples],
        "module": env.kernel_module_version if env else None,
        "findings": sorted((f.code, f.severity.value, f.title) for f in report.findings),
        "checks": sorted((c.name, c.status.value) for c in report.checks),
        "xids": sorted({(g.xid, g.count) for k in report.kernel_logs for g in k.report.groups}),
    }


@pytest.mark.parametrize("dmesg", [HEALTHY_DMESG, DBE_DMESG], ids=["healthy", "dbe"])
def test_a_report_reads_as_its_parts_read_alone(
    fixtures: Path, tmp_path: Path, dmesg: Path
) -> None:
    report_path = _write(tmp_path, "nvidia-bug-report.log", _assembled(fixtures, dmesg))
    report = diagnose_captures([report_path], DoctorOptions())
    alone = diagnose_captures(
        [
            str(fixtures / H100_Q),
            str(fixtures / H100_NVLINK),
            str(fixtures / H100_TOPO),
            str(PROC_VERSION),
            str(dmesg),
        ],
        DoctorOptions(),
    )
    assert _essentials(report) == _essentials(alone)
    read = [(i.source.split("#")[-1].removeprefix(f"{tmp_path}/"), i.kind) for i in report.inputs]
    assert read == [
        ("nvidia-bug-report.log", "nvidia-bug-report"),
        ("/proc/driver/nvidia/version", "driver-version"),
        ("/usr/bin/nvidia-smi --query", "nvidia-smi"),
        ("/usr/bin/nvidia-smi nvlink --status", "nvlink-status"),
        ("/usr/bin/nvidia-smi topo -m", "topo"),
        ("/var/log/kern.log", "kernel-log"),
        ("journalctl -b -0", "kernel-log"),
        ("dmesg", "kernel-log"),
    ]
    env = report.environment
    assert env is not None and env.kernel_module_version == "550.90.07"
    assert [s.info.driver_version for s in report.samples] == ["590.48.01"]
    assert [s.info.name for s in report.samples] == ["NVIDIA H100 80GB HBM3"]


def test_a_report_finds_exactly_the_xids_of_its_kernel_logs(fixtures: Path, tmp_path: Path) -> None:
    expected = next(
        e
        for e in json.loads((DATA / "xid_public" / "expected.json").read_text())
        if e["prefix"] == "37"
    )
    want = sorted((x["xid"], x["count"]) for x in expected["xids"])
    path = _write(tmp_path, "nvidia-bug-report.log", _assembled(fixtures, DBE_DMESG))
    report = diagnose_captures([path], DoctorOptions())
    assert len(report.kernel_logs) == 3  # kern.log and journalctl -b -0 (grepped), dmesg
    # the same records in the three logs: each event counted once, in the first log holding it
    first, *later = report.kernel_logs
    assert sorted((g.xid, g.count) for g in first.report.groups) == want
    assert all(not log.report.groups for log in later)
    repeated = [i.detail for i in report.inputs if i.kind == "kernel-log"][1:]
    assert all("an earlier log holds, counted there" in detail for detail in repeated)
    assert {f.code for f in report.findings if f.severity.rank > 0} >= set(expected["doctor_codes"])


def test_a_healthy_assembled_report_gives_no_alarm(fixtures: Path, tmp_path: Path) -> None:
    text = _assembled(fixtures, HEALTHY_DMESG, module_version=False)
    report = diagnose_captures([_write(tmp_path, "nvidia-bug-report.log", text)], DoctorOptions())
    assert _above_info(report) == []
    assert report.judged
    mismatched = _write(tmp_path, "other.log", _assembled(fixtures, HEALTHY_DMESG))
    report = diagnose_captures([mismatched], DoctorOptions())
    assert _above_info(report) == ["nvml-driver-mismatch"]  # 550.90.07 loaded, 590.48.01 used


def test_a_failed_nvidia_smi_part_is_read_as_the_failure(tmp_path: Path) -> None:
    # what nvidia-smi prints where the driver is not loaded (its own words, see diagnosis.md)
    failed = (
        "/usr/bin/nvidia-smi --query\n\nNVIDIA-SMI has failed because it couldn't communicate "
        "with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
    )
    path = _write(tmp_path, "nvidia-bug-report.log", _report(failed))
    report = diagnose_captures([path], DoctorOptions())
    assert report.skipped == () and not report.samples
    assert _above_info(report) == ["driver-not-loaded"]
    # a part that says something else is still listed as unread, with what it says
    other = "/usr/bin/nvidia-smi --query\n\nSegmentation fault (core dumped)"
    report = diagnose_captures(
        [_write(tmp_path, "other-report.log", _report(other))], DoctorOptions()
    )
    assert [s.path.split("#")[-1] for s in report.skipped] == ["/usr/bin/nvidia-smi --query"]
    assert "Segmentation fault" in report.skipped[0].reason


def test_section_kinds_follow_the_headers_the_script_prints() -> None:
    assert section_kind("/usr/bin/nvidia-smi --query") is CaptureKind.NVIDIA_SMI
    assert section_kind("/usr/bin/nvidia-smi -q") is CaptureKind.NVIDIA_SMI  # before ~2012
    assert section_kind("/usr/bin/nvidia-smi -q -u") is None
    assert section_kind("/usr/bin/nvidia-smi --query --unit") is None
    assert section_kind("/usr/bin/nvidia-smi nvlink --errorcounters") is CaptureKind.NVLINK_COUNTERS
    assert section_kind("dmesg") is CaptureKind.KERNEL_LOG
    assert section_kind("journalctl -b -1") is CaptureKind.KERNEL_LOG
    assert section_kind("journalctl -b -0 _COMM=Xorg") is None
    assert section_kind("/var/log/Xorg.0.log") is None
    assert section_kind("/proc/driver/nvidia/version") is CaptureKind.DRIVER_VERSION


def test_a_paste_of_part_of_a_report_without_its_prologue(tmp_path: Path) -> None:
    part = f"{SEPARATOR}\n\n{_file_part('/proc/driver/nvidia/version', PROC_VERSION.read_text())}"
    text = part + f"\n{SEPARATOR}\n\n*** /etc/issue does not exist\n"
    path = _write(tmp_path, "paste.txt", text)
    assert read_capture(path).kind is CaptureKind.BUG_REPORT  # type: ignore[union-attr]
    report = diagnose_captures([path], DoctorOptions())
    assert report.environment is not None
    assert report.environment.kernel_module_version == "550.90.07"


# ---- gzip ---------------------------------------------------------------------------------------


def _gzip_like_the_script(text: str) -> bytes:
    """One gzip member per part, appended (`( ... ) | gzip -c >> $LOG_FILENAME`)."""
    first, *rest = text.split(SEPARATOR)
    parts = [first, *(SEPARATOR + part for part in rest)]
    return b"".join(gzip.compress(part.encode()) for part in parts if part)


def test_a_gzipped_report_reads_as_its_text(fixtures: Path, tmp_path: Path) -> None:
    text = _assembled(fixtures, DBE_DMESG)
    plain = tmp_path / "nvidia-bug-report.log"
    plain.write_text(text)
    packed = tmp_path / "nvidia-bug-report.log.gz"
    packed.write_bytes(_gzip_like_the_script(text))
    assert gzip.decompress(packed.read_bytes()).decode() == text
    one = doctor_document(diagnose_captures([str(plain)], DoctorOptions()))
    two = doctor_document(diagnose_captures([str(packed)], DoctorOptions()))
    rename = json.dumps(two).replace(str(packed), str(plain))
    assert json.loads(rename) == one


def test_a_real_report_gzipped_reads_as_its_text(tmp_path: Path) -> None:
    source = PUBLIC / "rtx3060-laptop-arch-2022.prefix.log"
    packed = tmp_path / "nvidia-bug-report.log.gz"
    packed.write_bytes(_gzip_like_the_script(source.read_text()))
    found = read_capture(str(packed))
    assert found.kind is CaptureKind.BUG_REPORT  # type: ignore[union-attr]
    assert found.text == source.read_text()  # type: ignore[union-attr]


def test_a_gzipped_kernel_log_is_read_as_a_kernel_log(tmp_path: Path) -> None:
    packed = tmp_path / "kern.log.2.gz"
    packed.write_bytes(gzip.compress(DBE_DMESG.read_bytes()))
    report = diagnose_captures([str(packed)], DoctorOptions())
    assert sorted(g.xid for k in report.kernel_logs for g in k.report.groups) == [48, 63]


def _refused(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    """The error document `doctor --json` gives for a refused input (exit 2, no traceback)."""
    code = main(["doctor", "--from", str(path), "--json"])
    captured = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in captured.err + captured.out
    error: dict[str, Any] = json.loads(captured.out or captured.err)
    assert error["schema"] == "gpuwarden.error/1"
    assert error["message"].startswith(str(path)) and error["hint"]
    return error


def test_a_gzip_bomb_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(captures_module, "MAX_GZIP_BYTES", 1 << 20)
    bomb = tmp_path / "nvidia-bug-report.log.gz"
    body = f"{SEPARATOR}\n\n{PROLOGUE}\n\n{SEPARATOR}\n\ndmesg:\n\n" + "A" * (8 << 20)
    bomb.write_bytes(gzip.compress(body.encode(), compresslevel=9))
    assert bomb.stat().st_size < 64 << 10
    assert _refused(capsys, bomb)["reference"] == "capture-too-large"


def test_a_bomb_of_zeros_is_refused_without_inflating_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bomb = tmp_path / "report.log.gz"
    bomb.write_bytes(gzip.compress(bytes(64 << 20), compresslevel=9))  # 64 MiB in ~64 KB
    said = _refused(capsys, bomb)
    assert (said["reference"], "binary file" in said["message"]) == ("capture-not-recognised", True)


def test_a_truncated_gz_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fixtures: Path
) -> None:
    packed = gzip.compress(_assembled(fixtures, DBE_DMESG).encode())
    cut = tmp_path / "nvidia-bug-report.log.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    assert _refused(capsys, cut)["reference"] == "capture-gzip-truncated"


# ---- dates --------------------------------------------------------------------------------------


def test_report_dates() -> None:
    def iso(line: str) -> str | None:
        when = report_time(line)
        return None if when is None else datetime.fromtimestamp(when, UTC).isoformat()

    assert iso("Date: Thu Oct 27 08:50:11 PM -03 2022") == "2022-10-27T23:50:11+00:00"
    assert iso("Date: Tue Oct 27 14:31:54 EDT 2009") == "2009-10-27T14:31:54+00:00"  # as UTC
    assert iso("Date: Fri Sep 10 04:31:01 UTC 2010") == "2010-09-10T04:31:01+00:00"
    assert iso("Date: mar 13 set 2011, 23.11.55, CEST") is None
    assert iso("Date: Thu Feb 31 10:00:00 UTC 2022") is None


# ---- fuzz ---------------------------------------------------------------------------------------


def _seed_texts() -> list[str]:
    return [p.read_text() for p in sorted(PUBLIC.glob("*.log"))]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_cut_and_spliced_reports_never_give_a_traceback(
    fixtures: Path, data: st.DataObject
) -> None:
    seeds = [*_seed_texts(), _assembled(fixtures, DBE_DMESG)]
    text = data.draw(st.sampled_from(seeds))
    other = data.draw(st.sampled_from(seeds))
    at = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, len(other)))
    junk = data.draw(st.text(max_size=30) | st.sampled_from([SEPARATOR, "\n*** ls: ", "dmesg:"]))
    text = text[:at] + junk + other[cut : cut + data.draw(st.integers(0, 20_000))]
    assert_judged_or_refused(text, "nvidia-bug-report.log")


def test_a_gz_of_garbage_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    junk = tmp_path / "nvidia-bug-report.log.gz"
    junk.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 4)
    assert _refused(capsys, junk)["reference"] == "capture-gzip-corrupt"


def test_a_truncated_gz_in_a_folder_is_listed_as_skipped(tmp_path: Path, fixtures: Path) -> None:
    packed = gzip.compress(_assembled(fixtures, DBE_DMESG).encode())
    (tmp_path / "kern.log.2.gz").write_bytes(packed[: len(packed) // 2])
    (tmp_path / "dmesg.txt").write_bytes(DBE_DMESG.read_bytes())
    report = diagnose_captures([str(tmp_path)], DoctorOptions())
    assert [(Path(s.path).name, "end marker" in s.reason) for s in report.skipped] == [
        ("kern.log.2.gz", True)
    ]
    assert sorted(g.xid for k in report.kernel_logs for g in k.report.groups) == [48, 63]
