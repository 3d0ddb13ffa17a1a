"""Where a capture's time comes from: stated by the output, or guessed from the file.

`doctor --from` dates a reading whose output states no time (dmon without -o T, `nvlink -e`,
a scrape) by the file's modification time, which a copy or an edit moves; one that states its
time (-q's "Timestamp", the default table's date line) by that. Each capture says which
(``Capture.time_source``; ``reading_time_source`` for the readings taken from it), so that the
report can say a guessed time as one.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from gpuwarden.doctor.captures import (
    Capture,
    CaptureKind,
    TimeSource,
    collect_captures,
    read_capture,
    reading_time_source,
)
from gpuwarden.telemetry.smi import parse_smi_output
from tests.doctor.test_nvlink_paste_parts import COUNTERS_LOOP, STATES, gpu0_counters

SMI = "nvidia-smi"
IDLE = "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle"
WRITTEN_S = 1.7e9  # a modification time no output of these states


def _copied(fixtures: Path, name: str, tmp_path: Path) -> Capture:
    """The fixture copied with a modification time of its own, read as a capture."""
    path = tmp_path / name
    path.write_bytes((fixtures / SMI / name).read_bytes())
    os.utime(path, (WRITTEN_S, WRITTEN_S))
    capture = read_capture(str(path))
    assert isinstance(capture, Capture)
    return capture


def _stamps(capture: Capture) -> list[float]:
    return [s.timestamp_s for s in parse_smi_output(capture.text, capture.path, capture.written_s)]


def test_a_file_is_of_its_modification_time_until_its_output_says_otherwise(
    fixtures: Path, tmp_path: Path
) -> None:
    capture = _copied(fixtures, f"{IDLE}.dmon.txt", tmp_path)
    assert (capture.written_s, capture.time_source) == (WRITTEN_S, TimeSource.FILE_MTIME)


@pytest.mark.parametrize(
    ("suffix", "source", "first_s"),
    [
        # "Timestamp : Wed Jun 24 10:26:34 2026", read as UTC
        ("q.txt", TimeSource.STATED, 1782296794.0),
        # the default table's date line, the same moment
        ("table.txt", TimeSource.STATED, 1782296794.0),
        # dmon without -o T prints no time: its first block is of the file's
        ("dmon.txt", TimeSource.FILE_MTIME, WRITTEN_S),
    ],
)
def test_readings_say_whether_their_time_was_stated(
    fixtures: Path, tmp_path: Path, suffix: str, source: TimeSource, first_s: float
) -> None:
    capture = _copied(fixtures, f"{IDLE}.{suffix}", tmp_path)
    stamps = _stamps(capture)
    assert stamps[0] == first_s
    assert reading_time_source(capture, stamps) is source


def test_nvlink_e_prints_no_time(tmp_path: Path) -> None:
    """`nvlink -e` states none: two readings' rise is over their files' times, guessed."""
    path = tmp_path / COUNTERS_LOOP.name
    path.write_bytes(COUNTERS_LOOP.read_bytes())
    os.utime(path, (WRITTEN_S, WRITTEN_S))
    (capture,), _ = collect_captures([str(path)])
    assert capture.kind is CaptureKind.NVLINK_COUNTERS
    assert (capture.written_s, capture.time_source) == (WRITTEN_S, TimeSource.FILE_MTIME)


def test_a_part_of_a_paste_keeps_the_pastes_time(tmp_path: Path) -> None:
    """The `nvlink -s` part of a paste of both listings is of the paste's time, known alike."""
    path = tmp_path / "both.txt"
    path.write_text(STATES.read_text() + gpu0_counters())
    os.utime(path, (WRITTEN_S, WRITTEN_S))
    captures, _ = collect_captures([str(path)])
    assert [(c.kind, c.written_s, c.time_source) for c in captures] == [
        (CaptureKind.NVLINK_COUNTERS, WRITTEN_S, TimeSource.FILE_MTIME),
        (CaptureKind.NVLINK, WRITTEN_S, TimeSource.FILE_MTIME),
    ]


def test_a_pipe_is_of_the_time_it_was_read(fixtures: Path) -> None:
    """`--from <(nvidia-smi dmon ...)`: no file, no modification time; read now."""
    read_end, write_end = os.pipe()
    text = (fixtures / SMI / f"{IDLE}.dmon.txt").read_bytes()

    def write() -> None:
        with os.fdopen(write_end, "wb") as out:
            out.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        capture = read_capture(f"/proc/self/fd/{read_end}")
    finally:
        writer.join()
        os.close(read_end)
    assert isinstance(capture, Capture)
    assert capture.time_source is TimeSource.READ_TIME
    assert reading_time_source(capture, _stamps(capture)) is TimeSource.READ_TIME
