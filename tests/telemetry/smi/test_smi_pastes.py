"""Real nvidia-smi fixtures changed the way outputs people paste or log differ from them: a shell
prompt above, a ^C below, no index column, no header row, the pre-R450 process table. Each
variant must read to the same values as the untouched fixture.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError, GpuwardenError
from gpuwarden.telemetry.smi import open_smi, parse_smi_output
from gpuwarden.telemetry.smi.dmon import DMON_INTERVAL_S, dmon_interval_s
from gpuwarden.telemetry.smi.paste import query_command, strip_terminal
from gpuwarden.types.telemetry import DeviceSample, Snapshot

SMI = "nvidia-smi"
H100 = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load"
H100_MIG = "linux-x86_64__nvidia-h100-mig__590.48.01.load"
RTX_NOUNITS = "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.load.query-gpu.csv"


def _text(fixtures: Path, name: str) -> str:
    return (fixtures / SMI / name).read_text()


def _samples(snapshots: list[Snapshot]) -> list[tuple[DeviceSample, ...]]:
    return [s.samples for s in snapshots]


def _csv_columns(text: str) -> tuple[list[str], list[list[str]]]:
    header, *rows = [line for line in text.splitlines() if line.strip()]
    return header.split(", "), [row.split(", ") for row in rows]


def _join(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(", ".join(cells) for cells in [header, *rows]) + "\n"


def _without(text: str, names: set[str]) -> str:
    header, rows = _csv_columns(text)
    keep = [i for i, h in enumerate(header) if h.split(" [")[0] not in names]
    return _join([header[i] for i in keep], [[row[i] for i in keep] for row in rows])


# --- -l logs without an index column ----------------------------------------------------------


def _loop(text: str, stamps: list[str]) -> str:
    """The fixture's single row repeated as a `-l` loop would print it, one timestamp each."""
    header, (row,) = _csv_columns(text)
    at = header.index("timestamp")
    return _join(header, [[*row[:at], stamp, *row[at + 1 :]] for stamp in stamps])


STAMPS = ["2026/07/14 08:12:53.500", "2026/07/14 08:12:54.501", "2026/07/14 08:12:55.502"]


def test_loop_without_any_identity_column_is_one_gpu_over_time(fixtures: Path) -> None:
    original = parse_smi_output(_text(fixtures, f"{H100}.query-gpu.csv"), "h100.csv", 0.0)
    (gpu,) = original[0].samples
    text = _without(_loop(_text(fixtures, f"{H100}.query-gpu.csv"), STAMPS), {"index", "uuid"})
    text = _without(text, {"pci.bus_id"})
    readings = parse_smi_output(text, "loop.csv", 0.0)
    assert len(readings) == 3
    assert [len(r.samples) for r in readings] == [1, 1, 1]
    assert [r.timestamp_s for r in readings] == pytest.approx(
        [gpu.timestamp_s, gpu.timestamp_s + 1.001, gpu.timestamp_s + 2.002]
    )
    for reading in readings:
        (sample,) = reading.samples
        assert sample.info.index == 0
        # every reading field is the fixture's; identity is what the file no longer names
        ours = dataclasses.replace(sample, info=gpu.info, timestamp_s=gpu.timestamp_s)
        assert ours == gpu


def test_loop_named_by_uuid_keeps_each_gpu(fixtures: Path) -> None:
    header, (row,) = _csv_columns(_text(fixtures, f"{H100}.query-gpu.csv"))
    at = header.index("uuid")
    other = [*row[:at], "GPU-11111111-2222-3333-4444-555555555555", *row[at + 1 :]]
    text = _without(_join(header, [row, other, row, other]), {"index"})
    first, second = parse_smi_output(text, "uuids.csv", 0.0)
    assert [s.info.index for s in first.samples] == [0, 1]
    assert [s.info.uuid for s in second.samples] == [row[at], other[at]]
    assert first.samples == second.samples


def test_snapshot_of_a_series_is_its_newest_reading(fixtures: Path, tmp_path: Path) -> None:
    text = _without(_loop(_text(fixtures, f"{H100}.query-gpu.csv"), STAMPS), {"index", "uuid"})
    path = tmp_path / "loop.csv"
    path.write_text(text)
    backend = open_smi(str(path))
    assert backend.latest() == backend.snapshots()[-1]
    assert backend.latest().timestamp_s > backend.snapshots()[0].timestamp_s


# --- header-less CSV: field list from the caller or from the pasted command --------------------


def _noheader(text: str) -> tuple[list[str], str]:
    header, rows = _csv_columns(text)
    return [h.split(" [")[0] for h in header], "\n".join(", ".join(r) for r in rows) + "\n"


@pytest.mark.parametrize("name", [f"{H100}.query-gpu.csv", RTX_NOUNITS])
def test_noheader_csv_with_its_command_line_above(fixtures: Path, name: str) -> None:
    text = _text(fixtures, name)
    fields, rows = _noheader(text)
    expected = _samples(parse_smi_output(text, "x.csv", 0.0))
    fmt = "csv,noheader,nounits" if "[" in text.splitlines()[0] else "csv,noheader"
    command = f"user@node:~$ nvidia-smi --query-gpu={','.join(fields)} --format={fmt}\n"
    assert _samples(parse_smi_output(command + rows, "x.csv", 0.0)) == expected
    assert _samples(parse_smi_output(rows, "x.csv", 0.0, query_fields=fields)) == expected


def test_noheader_compute_apps(fixtures: Path) -> None:
    text = _text(fixtures, f"{H100}.query-compute-apps.csv")
    fields, rows = _noheader(text)
    expected = _samples(parse_smi_output(text, "apps.csv", 0.0))
    command = f"# nvidia-smi --query-compute-apps={','.join(fields)} --format=csv,noheader\n"
    assert _samples(parse_smi_output(command + rows, "apps.csv", 0.0)) == expected
    by_name = parse_smi_output(rows, "apps.csv", 0.0, query_fields=fields)
    assert _samples(by_name) == expected
    (sample,) = by_name[0].samples
    assert sample.processes is not None and [p.pid for p in sample.processes] == [
        11327,
        11328,
        11345,
    ]


def test_noheader_without_fields_names_the_option(fixtures: Path) -> None:
    _, rows = _noheader(_text(fixtures, f"{H100}.query-gpu.csv"))
    with pytest.raises(CorruptInputError, match="without a header row") as err:
        parse_smi_output(rows, "rows.csv", 0.0)
    assert err.value.hint is not None and "--query-fields" in err.value.hint


def test_query_command_forms() -> None:
    assert query_command("nvidia-smi --query-gpu=index,name --format=csv") is not None
    spaced = query_command("sudo nvidia-smi --query-compute-apps pid,used_memory --format=csv")
    assert spaced is not None and spaced.kind == "compute-apps"
    assert spaced.fields == ("pid", "used_memory")
    assert query_command("nvidia-smi dmon -s pucm") is None


# --- terminal pastes: prompt line, ^C ---------------------------------------------------------

PROMPTS = [
    "root@ubuntu:~# nvidia-smi {cmd}",
    "user@gpu-node-3:~/work$ nvidia-smi {cmd}",
    "[me@login01 ~]$ nvidia-smi {cmd}",
    "(venv) $ sudo nvidia-smi {cmd}",
    # a Kali-style theme: the venv and the brackets joined by a dash (a real paste, nvlink set 2)
    "(baobab)-[root@gpu048 ~]$ nvidia-smi {cmd}",
    "# nvidia-smi {cmd}",
    "PS C:\\Users\\me> nvidia-smi.exe {cmd}",
]


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize(
    ("name", "cmd"),
    [
        (f"{H100}.dmon.txt", "dmon"),
        (f"{H100}.q.txt", "-q"),
        (f"{H100_MIG}.table.txt", ""),
        (f"{H100}.query-gpu.csv", "--query-gpu=... --format=csv"),
        ("netdata__tesla-p100.xml", "-q -x"),
    ],
)
def test_prompt_line_above_the_output(fixtures: Path, prompt: str, name: str, cmd: str) -> None:
    text = _text(fixtures, name).rstrip("\n") + "\n"
    pasted = prompt.format(cmd=cmd).rstrip() + "\n" + text + "me@box:~$ \n"
    assert _samples(parse_smi_output(pasted, name, 0.0)) == _samples(
        parse_smi_output(text, name, 0.0)
    )


def test_dmon_stopped_with_ctrl_c(fixtures: Path) -> None:
    # the rows only: the split capture file goes on with another section after a blank line
    lines = _text(fixtures, f"{H100}.dmon.txt").split("\n\n")[0].splitlines()
    assert len(lines) == 7
    expected = parse_smi_output("\n".join(lines), "dmon", 0.0)
    # the ^C echoed at the start of the line where the next row began
    echoed = [*lines[:-1], "^C" + lines[-1][2:]]
    assert _samples(parse_smi_output("\n".join(echoed), "dmon", 0.0)) == _samples(expected)
    # or in the middle of a row dmon never finished: that row is dropped
    cut = [*lines, lines[-1][: len(lines[-1]) // 2] + "^C"]
    assert _samples(parse_smi_output("\n".join(cut), "dmon", 0.0)) == _samples(expected)
    # without the ^C, a short last row is still an error
    with pytest.raises(CorruptInputError, match="cells, the dmon header has"):
        parse_smi_output("\n".join([*lines, lines[-1][: len(lines[-1]) // 2]]), "dmon", 0.0)


def test_csv_loop_stopped_with_ctrl_c(fixtures: Path) -> None:
    text = _loop(_text(fixtures, f"{H100}.query-gpu.csv"), STAMPS)
    expected = parse_smi_output(text, "loop.csv", 0.0)
    last = text.splitlines()[-1]
    cut = text + last[: len(last) // 3] + "^C\n"
    assert _samples(parse_smi_output(cut, "loop.csv", 0.0)) == _samples(expected)


def test_prompt_text_elsewhere_is_not_dropped() -> None:
    """Only a leading command line and trailing bare prompts are taken for terminal noise."""
    text = "# gpu pwr\n# Idx W\n 0 31\nuser@host:~$ nvidia-smi dmon\n 0 32\n"
    paste = strip_terminal(text)
    assert paste.text == text and paste.command is None and not paste.interrupted


# --- the default screen before R450 (no GI/CI process columns) ---------------------------------


def test_table_processes_without_mig_columns(fixtures: Path) -> None:
    text = _text(fixtures, f"{H100}.table.txt")
    old = re.sub(r"(?m)^(\|\s+\d+)\s+N/A\s+N/A(\s+\d+\s+C)", r"\1\2", text)
    old = old.replace("GPU   GI   CI              PID", "GPU                        PID")
    assert old != text and " N/A  N/A " not in old
    (new_snap,) = parse_smi_output(text, "new.txt", 0.0)
    (old_snap,) = parse_smi_output(old, "old.txt", 0.0)
    assert old_snap.samples == new_snap.samples
    processes = old_snap.samples[0].processes
    assert processes is not None and [p.pid for p in processes] == [11327, 11328, 11345]


# --- fuzz: whatever a terminal adds around a real output, a result or the smi error -----------

_SEEDS = (f"{H100}.dmon.txt", f"{H100}.query-gpu.csv", f"{H100_MIG}.table.txt", f"{H100}.q.txt")
_TERMINAL = st.sampled_from(
    ["^C", "$ ", "# ", "nvidia-smi ", "user@h:~$ ", "--query-gpu=", ",", "\n"]
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    which=st.integers(0, len(_SEEDS) - 1),
    before=st.lists(_TERMINAL | st.text(max_size=8), max_size=6).map("".join),
    after=st.lists(_TERMINAL | st.text(max_size=8), max_size=6).map("".join),
    cut=st.floats(0.5, 1),
)
def test_fuzz_terminal_additions(
    fixtures: Path, which: int, before: str, after: str, cut: float
) -> None:
    text = _text(fixtures, _SEEDS[which])
    pasted = before + "\n" + text[: int(len(text) * cut)] + after
    reference = None
    try:
        parse_smi_output(pasted, "fuzz", 0.0)
    except GpuwardenError as exc:
        reference = exc.reference
    assert reference in (None, "smi-output-unreadable")


_COMMAND_WORDS = st.sampled_from(
    ["nvidia-smi", "dmon", "-d", "--delay", "--delay=", "=", "-s", "pu", "'", '"', " ", "0", "nan"]
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(_COMMAND_WORDS | st.text(max_size=6) | st.floats().map(str), max_size=10).map(" ".join)
)
def test_fuzz_dmon_delay_of_any_command(command: str) -> None:
    """Whatever the pasted command line says, the delay is a usable spacing: positive and
    finite, dmon's default unless the command is dmon's."""
    interval_s = dmon_interval_s(command)
    assert 0 < interval_s < float("inf")
    assert "dmon" in command or interval_s == DMON_INTERVAL_S


@pytest.mark.parametrize("suffix", [".q.txt", ".table.txt"])
def test_a_zero_degree_reading_is_a_missing_sensor(fixtures: Path, suffix: str) -> None:
    """vGPU guests print `0 C` where the board gives them no sensor: it reads as not reported,
    like N/A, and nothing else changes but the limits derived from it (real H100 capture, its
    59 °C replaced; the capture prints its limits relative to T.Limit only)."""
    text = _text(fixtures, H100 + suffix)
    (before,) = _samples(parse_smi_output(text, "h100", 0.0))[-1:]
    assert before[0].temperature_gpu_celsius == 59
    edited = re.sub(r"\b59C\b|\b59 C\b", lambda m: m.group(0).replace("59", "0"), text, count=1)
    assert edited != text
    (after,) = _samples(parse_smi_output(edited, "h100", 0.0))[-1:]
    assert after[0].temperature_gpu_celsius is None
    derived = ("temperature_gpu_max_celsius", "temperature_slowdown_celsius")
    if suffix == ".q.txt":  # T.Limit 26 C: max operating 59 + 26, slowdown 2 °C above it
        assert (before[0].temperature_gpu_max_celsius, before[0].temperature_slowdown_celsius) == (
            85,
            87,
        )
        assert all(getattr(after[0], name) is None for name in derived)
    restored = {
        name: getattr(before[0], name) for name in (*derived, "temperature_shutdown_celsius")
    }
    assert dataclasses.replace(after[0], temperature_gpu_celsius=59, **restored) == before[0]
