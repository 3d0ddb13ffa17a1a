"""doctor --from says when each capture's readings were taken and how that is known: as the
output states it, or the file's modification time where it states none (a copy or an edit
moves it, so it is said as a guess, never as a fact)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.report.doctor_document import doctor_document
from tests.cli.test_main import run_cli
from tests.doctor.test_nvlink_paste_parts import COUNTERS_LOOP

SMI = "nvidia-smi"
IDLE = "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle"
WRITTEN_S = 1.7e9  # 2023-11-14 22:13:20 UTC


def _copy(source: Path, tmp_path: Path) -> Path:
    path = tmp_path / source.name
    path.write_bytes(source.read_bytes())
    os.utime(path, (WRITTEN_S, WRITTEN_S))
    return path


def _inputs(path: Path) -> list[tuple[str, float | None, str | None]]:
    document = doctor_document(diagnose_captures([str(path)], DoctorOptions()))
    return [(i["kind"], i["time_s"], i["time_source"]) for i in document["inputs"]]


def test_a_q_report_is_of_the_time_it_states(fixtures: Path, tmp_path: Path) -> None:
    """ "Timestamp : Wed Jun 24 10:26:34 2026": stated, whatever the file's time."""
    path = _copy(fixtures / SMI / f"{IDLE}.q.txt", tmp_path)
    assert _inputs(path) == [("nvidia-smi", 1782296794.0, "stated")]


def test_dmon_and_nvlink_e_are_of_the_files_modification_time(
    fixtures: Path, tmp_path: Path
) -> None:
    """dmon without -o T: five blocks a second apart from the file's time; `nvlink -e`: none."""
    dmon = _copy(fixtures / SMI / f"{IDLE}.dmon.txt", tmp_path)
    assert _inputs(dmon) == [("nvidia-smi", WRITTEN_S + 4, "file-mtime")]
    counters = _copy(COUNTERS_LOOP, tmp_path)
    assert _inputs(counters) == [("nvlink-counters", WRITTEN_S, "file-mtime")]


def test_the_table_says_a_guessed_time_as_one(fixtures: Path, tmp_path: Path) -> None:
    dmon = _copy(fixtures / SMI / f"{IDLE}.dmon.txt", tmp_path)
    report = _copy(fixtures / SMI / f"{IDLE}.q.txt", tmp_path)
    done = run_cli("doctor", "--from", str(dmon), "--from", str(report))
    lines = [line for line in done.stdout.splitlines() if line.startswith("read ")]
    assert lines[0].endswith(
        "; at 2023-11-14 22:13:24 UTC (the file's modification time: the output states none))"
    )
    assert lines[1].endswith("; at 2026-06-24 10:26:34 UTC (as it states))")
    document = json.loads(run_cli("doctor", "--from", str(dmon), "--json").stdout)
    assert document["inputs"][0]["time_source"] == "file-mtime"
