"""`gpuwarden doctor --from` on `nvidia-smi nvlink -e` outputs: recognised as NVLink error
counters (a file, or the `nvlink --errorcounters` part of an nvidia-bug-report), judged without
crying wolf. One reading holds counts since the driver loaded: a failed link recovery is a
warning, other errors are said (info) with what would decide (a second reading); two readings of
the node, in order, are judged on the counters' growth with the live rule's thresholds (DCGM:
any replay/recovery, CRC at 100/s)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.doctor.captures import CaptureKind, read_capture
from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import InputError
from gpuwarden.types.health import Confidence, Severity

DATA = Path(__file__).resolve().parents[1] / "data"
A100 = (
    DATA
    / "nvlink_counters_public"
    / "nvlink-e__brev-node-report__8x-a100-sxm4-535-loop-per-gpu.txt"
)
GB300 = DATA / "topo_public2" / "nvlink-e__srt-slurm-307__gb300-error-counters.txt"
H100 = DATA / "topo_public4" / "nvlink-e__ml-engineering__h100-error-counters-elided.txt"
SEPARATOR = "_" * 44


def _doctor_json(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", *[a for p in paths for a in ("--from", str(p))], "--json"])
    return code, json.loads(capsys.readouterr().out)


def _with(text: str, gpu: int, link: int, counter: str, count: int) -> str:
    """The real A100 output with one count changed, the way nvidia-smi prints it."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"GPU {gpu}:"))
    old = f"\t Link {link}: {counter}: 0"
    row = lines.index(old, at)
    lines[row] = f"\t Link {link}: {counter}: {count}"
    return "\n".join(lines) + "\n"


def _written(path: Path, text: str, mtime: float) -> Path:
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return path


@pytest.mark.parametrize("sample", [A100, GB300, H100], ids=lambda p: p.name)
def test_a_healthy_capture_reads_and_gives_no_alarm(
    sample: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert read_capture(str(sample)).kind is CaptureKind.NVLINK_COUNTERS  # type: ignore[union-attr]
    code, doc = _doctor_json(capsys, sample)
    assert code == 0
    assert [i["kind"] for i in doc["inputs"]] == ["nvlink-counters"]
    assert doc["findings"] == []
    check = next(c for c in doc["checks"] if c["name"] == "nvlink-counters")
    assert check["status"] == "pass" and "no NVLink error counted" in check["detail"]


def test_the_a100_node_reads_8_gpus_of_12_links(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc = _doctor_json(capsys, A100)
    assert doc["inputs"][0]["detail"] == "8 GPU(s), 96 link(s), 3 counter(s)"


def test_lifetime_replays_in_one_reading_are_said_not_alarmed(tmp_path: Path) -> None:
    text = _with(A100.read_text(), 3, 7, "Replay Errors", 12)
    report = diagnose_captures([str(_written(tmp_path / "e.txt", text, 1e9))], DoctorOptions())
    (finding,) = report.findings
    assert (finding.code, finding.severity, finding.confidence) == (
        "nvlink-errors",
        Severity.INFO,
        Confidence.LOW,
    )
    assert finding.device is not None and finding.device.index == 3
    assert "link 7 replay 12" in finding.title
    assert "second reading in 10 minutes" in finding.evidence[0].detail


def test_a_failed_link_recovery_is_a_warning_on_one_reading(tmp_path: Path) -> None:
    text = (
        "GPU 2: NVIDIA GB200 (UUID: GPU-c0c859b5-876c-b6f1-c6d7-bde487c326a1)\n"
        "\t Link 14: Link recovery successful events: 505\n"
        "\t Link 14: Link recovery failed events: 1\n"
        "\t Link 14: FEC Errors - 0: 36140749276\n"
        "\t Link 14: Effective BER: 15e-255\n"
    )
    report = diagnose_captures([str(_written(tmp_path / "e.txt", text, 1e9))], DoctorOptions())
    (finding,) = report.findings
    assert (finding.severity, finding.confidence) == (Severity.WARNING, Confidence.MEDIUM)
    assert "link 14 link recovery failed events 1" in finding.title
    check = next(c for c in report.checks if c.name == "nvlink-counters")
    assert check.status.value == "warn" and check.codes == ("nvlink-errors",)


def test_fec_histogram_raw_and_ber_values_are_no_error(tmp_path: Path) -> None:
    text = (
        "GPU 0: NVIDIA B300 SXM6 AC (UUID: GPU-1)\n"
        "\t Link 0: Tx packets: 912345678\n\t Link 0: FEC Errors - 0: 36140749276\n"
        "\t Link 0: Raw Errors Lane 0: 82\n\t Link 0: Symbol BER: 15e-255\n"
        "\t Link 0: Link recovery failed events: 0\n"
    )
    report = diagnose_captures([str(_written(tmp_path / "e.txt", text, 1e9))], DoctorOptions())
    assert report.findings == ()


def test_two_readings_judge_the_growth(tmp_path: Path) -> None:
    before = _written(tmp_path / "before.txt", A100.read_text(), 1_000_000.0)
    grown = _with(A100.read_text(), 5, 2, "Replay Errors", 2)
    after = _written(tmp_path / "after.txt", grown, 1_000_600.0)
    report = diagnose_captures([str(before), str(after)], DoctorOptions())
    (finding,) = report.findings
    assert (finding.code, finding.severity) == ("nvlink-errors", Severity.WARNING)
    assert finding.device is not None and finding.device.index == 5
    assert "link 2 replay +2" in finding.title
    assert (finding.first_seen_s, finding.last_seen_s) == (1_000_000.0, 1_000_600.0)
    check = next(c for c in report.checks if c.name == "nvlink-counters")
    assert "8 read twice" in check.detail
    # the same files the other way round: a count that fell is a reset, nothing rose
    backwards = diagnose_captures([str(after), str(before)], DoctorOptions())
    assert backwards.findings == ()


@pytest.mark.parametrize(("crc", "rising"), [(30_000, False), (120_000, True)])
def test_crc_growth_is_judged_as_a_rate(tmp_path: Path, crc: int, rising: bool) -> None:
    """DCGM's bound: CRC errors matter at 100 per second or more (600 s apart here)."""
    before = _written(tmp_path / "before.txt", A100.read_text(), 1_000_000.0)
    grown = _with(A100.read_text(), 0, 11, "CRC Errors", crc)
    after = _written(tmp_path / "after.txt", grown, 1_000_600.0)
    report = diagnose_captures([str(before), str(after)], DoctorOptions())
    titles = [f.title for f in report.findings if f.severity is Severity.WARNING]
    assert titles == (["GPU 0: NVLink errors rising (link 11 CRC 200/s)"] if rising else [])


def test_an_nvlink_errorcounters_part_of_a_bug_report_is_read(tmp_path: Path) -> None:
    smi = "\n\n".join(
        [
            "/usr/bin/nvidia-smi nvlink --errorcounters",
            _with(A100.read_text(), 1, 4, "Recovery Errors", 3).rstrip(),
            "/usr/bin/nvidia-smi nvlink --status",
        ]
    )
    prologue = "Start of NVIDIA bug report log file.\n\nnvidia-bug-report.sh Version: 35171225"
    text = "".join(f"{SEPARATOR}\n\n{block}\n\n" for block in (prologue, smi))
    path = _written(tmp_path / "nvidia-bug-report.log", text, 1e9)
    report = diagnose_captures([str(path)], DoctorOptions())
    kinds = [(i.source.rsplit("#", 1)[-1], i.kind) for i in report.inputs]
    assert ("/usr/bin/nvidia-smi nvlink --errorcounters", "nvlink-counters") in kinds
    (finding,) = report.findings
    assert "link 4 recovery 3" in finding.title and finding.severity is Severity.INFO


def test_a_named_file_that_breaks_the_counters_is_refused_clearly(tmp_path: Path) -> None:
    text = A100.read_text().replace("\t Link 3: CRC Errors: 0", "\t Link 3: 25 GB/s", 1)
    path = _written(tmp_path / "broken.txt", text, 1e9)
    with pytest.raises(InputError) as caught:
        diagnose_captures([str(path)], DoctorOptions())
    assert caught.value.exit_code == 2 and str(path) in str(caught.value)
    assert "nvlink -s" in str(caught.value) and caught.value.hint
