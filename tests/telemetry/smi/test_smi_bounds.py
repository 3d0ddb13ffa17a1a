"""nvidia-smi input at its edges: a `-q` report cut short says so, impossible values are left out
and said, a GPU index that is no index and an endless stream are refused, a long series keeps
its newest readings."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from gpuwarden.errors import CorruptInputError, InputError
from gpuwarden.report.snapshot_document import snapshot_document
from gpuwarden.telemetry.smi import open_smi, parse_smi_output
from gpuwarden.telemetry.smi.q_text import parse_tree
from gpuwarden.types.telemetry import EventKind, Snapshot

SMI = "nvidia-smi"
H100_Q = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
H100_DMON = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.dmon.txt"
H100_CSV = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.query-gpu.csv"
P100_XML = "netdata__tesla-p100.xml"
MIB = 1 << 20


def _text(fixtures: Path, name: str) -> str:
    return (fixtures / SMI / name).read_text()


def _cut_notes(snapshot: Snapshot) -> list[str]:
    return [e.message for e in snapshot.events if "cut short" in e.message]


def _q_reports(fixtures: Path) -> list[Path]:
    files = sorted((fixtures / SMI).glob("*.q.txt"))
    assert len(files) == 14
    return files


# --- a -q report cut short ----------------------------------------------------------------------


def test_whole_reports_are_not_called_cut(fixtures: Path) -> None:
    for path in [*_q_reports(fixtures), *sorted((fixtures / SMI / "captures").glob("*.txt"))]:
        for snapshot in parse_smi_output(path.read_text(), path.name, 0.0):
            assert _cut_notes(snapshot) == [], path.name


def test_every_cut_before_the_processes_is_said(fixtures: Path) -> None:
    """The report of issue 13 kept 28 of 46 fields and looked complete: cut a real report at
    every line of its GPU section before "Processes", each time the reading says so."""
    for path in _q_reports(fixtures)[:4]:
        lines = path.read_text().splitlines()
        gpu_at = next(i for i, line in enumerate(lines) if line.startswith("GPU "))
        processes_at = next(i for i, line in enumerate(lines) if line.startswith("    Processes"))
        for end in range(gpu_at + 1, processes_at + 1):
            snapshot = parse_smi_output("\n".join(lines[:end]) + "\n", path.name, 0.0)[0]
            (note,) = _cut_notes(snapshot)
            assert note.endswith("what came after is not reported"), (path.name, end)
            (event,) = snapshot.events
            assert event.kind is EventKind.BACKEND_ERROR and event.index == 0


def test_a_cut_inside_the_processes_is_said(fixtures: Path) -> None:
    lines = _text(fixtures, H100_Q).splitlines()
    last_pid = max(i for i, line in enumerate(lines) if "Process ID" in line)
    for end in (last_pid - 1, last_pid + 1, last_pid + 2):  # its GI line, the pid, its type
        snapshot = parse_smi_output("\n".join(lines[:end]) + "\n", H100_Q, 0.0)[0]
        (note,) = _cut_notes(snapshot)
        assert "without the end of its last process" in note


def test_the_second_gpu_must_end_as_the_first(fixtures: Path) -> None:
    """Two GPUs (the capture's section twice, at another bus id): a cut in the second one is
    said even where the section has no process list, as in a `-q -d` selection."""
    text = _text(fixtures, H100_Q)
    head, gpu = text.split("GPU 00000000:00:09.0\n", 1)
    second = gpu.replace("00000000:00:09.0", "00000000:0A:00.0")
    whole = f"{head}GPU 00000000:00:09.0\n{gpu}GPU 00000000:0A:00.0\n{second}"
    assert _cut_notes(parse_smi_output(whole, "two", 0.0)[0]) == []
    cut = whole[: whole.rindex("    Capabilities")]
    snapshot = parse_smi_output(cut, "two", 0.0)[0]
    (note,) = _cut_notes(snapshot)
    assert "GPU 00000000:0A:00.0's report ends after 'Processes'" in note
    assert "'Capabilities'" in note and snapshot.events[0].index == 1


def test_a_gpu_nvidia_smi_cannot_read_is_not_a_cut(fixtures: Path) -> None:
    """A GPU that fell off the bus gets an error line instead of its report."""
    text = _text(fixtures, H100_Q)
    lost = (
        "GPU 00000000:0A:00.0\n"
        "    Unable to determine the device handle for gpu 0000:0A:00.0: Unknown Error\n"
    )
    snapshot = parse_smi_output(text + lost, "lost", 0.0)[0]
    assert _cut_notes(snapshot) == [] and len(snapshot.samples) == 2


def test_a_display_selection_is_not_a_cut(fixtures: Path) -> None:
    """`nvidia-smi -q -d MEMORY` prints a few sections of every GPU and no process list."""
    text = _text(fixtures, H100_Q)
    root = parse_tree(text)
    gpu = root.children[-1]
    lines = text.splitlines()
    memory = gpu.child("FB Memory Usage")
    assert memory is not None
    body = lines[memory.line - 1 : memory.children[-1].line]
    selection = "\n".join([*lines[: gpu.line], *body]) + "\n"
    snapshot = parse_smi_output(selection, "memory", 0.0)[0]
    assert _cut_notes(snapshot) == [] and snapshot.samples[0].memory_used_bytes == 19818 * MIB


def test_a_cut_report_is_said_once_by_the_backend(fixtures: Path, tmp_path: Path) -> None:
    path = tmp_path / "cut.txt"
    path.write_text(_text(fixtures, H100_Q)[:6000])
    backend = open_smi(str(path))
    assert len(_cut_notes(backend.read())) == 1
    assert backend.read().events == ()  # the same reading, repeated: said once


# --- impossible values in each format -----------------------------------------------------------


def test_impossible_values_in_xml_csv_and_dmon(fixtures: Path) -> None:
    xml = _text(fixtures, P100_XML).replace(
        "<total>16384 MiB</total>", "<total>-8192 MiB</total>", 1
    )
    csv = _text(fixtures, H100_CSV)
    header, row, *rest = csv.splitlines()
    at = [c.strip() for c in header.split(",")].index("utilization.gpu [%]")
    cells = row.split(",")
    cells[at] = " 1000 %"
    dmon = _text(fixtures, H100_DMON).replace("    0    631     63 ", "    0    631   -300 ", 1)
    cases = [
        (xml, P100_XML, "memory_total_bytes = -8589934592 is outside"),
        ("\n".join([header, ",".join(cells), *rest]), H100_CSV, "gpu_utilization_percent = 1000"),
        (dmon, H100_DMON, "temperature_gpu_celsius = -300 is outside -40..200 °C"),
    ]
    for text, name, said in cases:
        snapshot = parse_smi_output(text, name, 0.0)[0]
        json.dumps(snapshot_document(snapshot), allow_nan=False)
        messages = [e.message for e in snapshot.events]
        assert len(messages) == 1 and messages[0].startswith(said), (name, messages)


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        (H100_DMON, "\n    0    631", "\n   -1    631"),
        (H100_CSV, "\n2026/07/14", "\n2026/07/14"),  # the index cell is set below
    ],
)
def test_a_gpu_index_that_is_no_index_is_refused(
    fixtures: Path, name: str, old: str, new: str
) -> None:
    text = _text(fixtures, name).replace(old, new, 1)
    if name == H100_CSV:
        header, row, *rest = text.splitlines()
        cells = row.split(",")
        cells[[c.strip() for c in header.split(",")].index("index")] = " -1"
        text = "\n".join([header, ",".join(cells), *rest])
    with pytest.raises(CorruptInputError, match=r", line [23]: .*GPU index -1 is not a device"):
        parse_smi_output(text, name, 0.0)


# --- inputs without end, empty inputs, long series ----------------------------------------------


def test_a_file_past_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(/dev/zero itself is read in a child with a memory limit: tests/cli/test_fuzz_verbs.py)"""
    from gpuwarden import files as capped

    monkeypatch.setattr(capped, "MAX_CAPTURE_BYTES", 1 << 20)
    path = tmp_path / "big.txt"
    path.write_bytes(b"\0" * (2 << 20))
    with pytest.raises(InputError) as info:
        open_smi(str(path))
    assert info.value.reference == "smi-output-too-large" and info.value.exit_code == 2
    assert f"{path}: larger than 1 MiB" in info.value.message and info.value.hint


def test_stdin_is_cut_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwarden import files as capped

    monkeypatch.setattr(capped, "MAX_CAPTURE_BYTES", 1000)
    monkeypatch.setattr(sys, "stdin", io.StringIO("x" * 5000))
    with pytest.raises(InputError, match="-: larger than 0 MiB"):
        open_smi("-")


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("\n \n")
    with pytest.raises(CorruptInputError, match="the input is empty") as info:
        open_smi(str(path))
    assert info.value.reference == "smi-output-unreadable"


def test_a_long_series_keeps_its_newest_readings(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuwarden.telemetry.smi import builder

    text = _text(fixtures, H100_DMON)
    every = parse_smi_output(text, H100_DMON, 0.0)
    assert len(every) == 5 and every[-1].events == ()
    monkeypatch.setattr(builder, "MAX_SERIES_READINGS", 3)
    kept = parse_smi_output(text, H100_DMON, 0.0)
    assert [s.timestamp_s for s in kept] == [s.timestamp_s for s in every[-3:]]
    assert kept[-1].samples == every[-1].samples
    (note,) = kept[-1].events
    assert (
        note.message == "the series holds 5 readings; the newest 3 are kept, the oldest 2 left out"
    )


def test_more_gpus_than_a_node_has_is_refused(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuwarden.telemetry.smi import builder

    monkeypatch.setattr(builder, "MAX_DEVICES", 0)
    with pytest.raises(CorruptInputError, match="more than 0 GPUs in one reading"):
        parse_smi_output(_text(fixtures, P100_XML), P100_XML, 0.0)
