"""Review r27b of h284's -q rule (the end of a GPU's report above the first "GPU <bus id>" line
is read as one more GPU): texts that put a GPU's rows above that line without being the end of
another GPU's report must not add a GPU.

The reports are the real H100 `-q` of /work/shared/fixtures/nvidia-smi (R590, one GPU: "Attached
GPUs : 1"), cut and pasted as posters paste them: twice, the first copy starting inside its one
GPU's report (below its "GPU <bus id>" line), with CRLF line ends, or followed by that GPU's line
again. Each read 2 GPUs after h284 (an invented GPU 0 with no name); one GPU before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.telemetry.smi import parse_smi_output, q_text
from gpuwarden.telemetry.smi.q_text import parse_q_text
from tests.telemetry.smi.heldout import assert_reads_or_refused_clearly

H100_Q = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
H100_BUS_ID = "00000000:00:09.0"


def _report(fixtures: Path) -> str:
    return (fixtures / H100_Q).read_text()


def _from_row(report: str, row: str) -> str:
    """The report from its first line that starts with ``row`` (an excerpt starting there)."""
    lines = report.splitlines(keepends=True)
    (at,) = [i for i, line in enumerate(lines) if line.rstrip() == row][:1]
    return "".join(lines[at:])


def _gpus(text: str) -> list[tuple[int, str, str | None]]:
    (reading,) = parse_smi_output(text, "q.txt", 0.0)
    return [(d.info.index, d.info.name, d.info.pci_bus_id) for d in reading.samples]


_ONE_H100 = [(0, "NVIDIA H100 80GB HBM3", H100_BUS_ID)]


@pytest.mark.parametrize("first_copy_from", ["    FB Memory Usage", "    Clocks", "    PCI"])
@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_a_report_pasted_twice_the_first_copy_cut_at_its_top_is_one_gpu(
    fixtures: Path, first_copy_from: str, line_end: str
) -> None:
    """The second copy prints the report's own rows (banner, Timestamp, "Attached GPUs : 1")
    between the first copy's rows and its GPU line: those rows are another output's, not the
    end of a GPU's report that runs into the next one's."""
    report = _report(fixtures)
    text = (_from_row(report, first_copy_from) + "\n" + report).replace("\n", line_end)
    assert _gpus(text) == _ONE_H100 == _gpus(report)


def test_the_end_of_a_gpu_s_report_then_the_same_gpu_s_line_is_one_gpu(fixtures: Path) -> None:
    """The rows above print the bus id of the GPU line below (in their PCI section): that GPU,
    printed twice (two runs), not one more."""
    report = _report(fixtures)
    gpu_report = _from_row(report, f"GPU {H100_BUS_ID}")
    assert _gpus(_from_row(report, "    PCI") + "\n" + gpu_report) == _ONE_H100


def test_the_end_of_another_gpu_s_report_still_reads_as_a_gpu(fixtures: Path) -> None:
    """The nearest look-alike of the two above, which h284 reads and must go on reading: the end
    of a GPU's report (its PCI section printing another bus id) running into the next GPU's."""
    report = _report(fixtures)
    other = _from_row(report, "    PCI").replace(H100_BUS_ID, "00000000:00:08.0")
    assert _gpus(other + "\n" + _from_row(report, f"GPU {H100_BUS_ID}")) == [
        (0, "", "00000000:00:08.0"),
        (1, "NVIDIA H100 80GB HBM3", H100_BUS_ID),
    ]


def test_doctor_counts_one_gpu_in_a_report_pasted_twice(fixtures: Path, tmp_path: Path) -> None:
    report = _report(fixtures)
    path = tmp_path / "pasted-twice.txt"
    path.write_text(_from_row(report, "    FB Memory Usage") + "\n" + report)
    judged = diagnose_captures([str(path)], DoctorOptions())
    assert [(d.info.index, d.info.pci_bus_id) for d in judged.samples] == [(0, H100_BUS_ID)]


_ROW = st.sampled_from(
    [
        "    Clock Policy",
        "    Max Clocks",
        "    PCI",
        "        Bus Id                      : 00000000:01:00.0",
        "        Graphics                    : 1911 MHz",
        "Attached GPUs                       : 1",
        "Timestamp                           : Fri Jun 28 21:44:44 2019",
        "==============NVSMI LOG==============",
        "",
    ]
)
_GPU_LINE = "GPU 00000000:01:00.0\n    Product Name                    : Tesla T4\n"


_COMMAND = st.sampled_from(
    ["", "$ nvidia-smi -q\n", "$ nvidia-smi -q -i 1\n", "$ nvidia-smi -q -i 0,1\n"]
)


@settings(max_examples=80, deadline=None)
@given(command=_COMMAND, rows=st.lists(_ROW, max_size=24))
def test_any_rows_and_report_rows_above_a_gpu_line_read_or_are_refused_clearly(
    command: str, rows: list[str]
) -> None:
    """Never a crash (under any command line); the GPU of the line itself is always the last GPU
    read, and a command selecting one GPU reads one."""
    names: list[list[str]] = []
    assert_reads_or_refused_clearly(
        lambda text: names.extend(
            [d.info.name for d in r.samples] for r in parse_smi_output(text, "q.txt", 0.0)
        ),
        command + "\n".join(rows) + "\n" + _GPU_LINE,
        0,
        "",
    )
    most = 1 if "-i 1" in command else 2
    assert all(read[-1] == "Tesla T4" and len(read) <= most for read in names)


def _header_matches(text: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many rows the -q reader asks whether they are a "GPU <bus id>" line, reading ``text``."""
    asked = 0
    pattern = q_text._GPU_HEADER

    class Counting:
        def match(self, key: str) -> object:
            nonlocal asked
            asked += 1
            return pattern.match(key)

    with monkeypatch.context() as patched:
        patched.setattr(q_text, "_GPU_HEADER", Counting())
        parse_q_text(text, "q.txt", 0.0)
    return asked


@pytest.mark.parametrize(
    "unit",
    [
        # sections and report rows in turn, above GPU lines: each report row a new start
        "    Max Clocks\n        Graphics : 1911 MHz\nAttached GPUs : 1\n",
        # the end of a report naming a bus id, above many GPU lines
        "    PCI\n        Bus Id : 00000000:01:00.0\n    Max Clocks\n        Graphics : 1 MHz\n",
    ],
)
def test_rows_above_gpu_lines_are_looked_at_a_bounded_number_of_times(
    unit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 KB and 1 MB of rows above (and among) GPU lines: the rows asked about grow with the
    text (a few times per top-level row), not with rows times GPU lines."""
    counts = []
    for size in (100_000, 1_000_000):
        block = unit * (size // (2 * len(unit)))
        text = block + _GPU_LINE * (size // (2 * len(_GPU_LINE)))
        top_level = sum(1 for line in text.splitlines() if not line.startswith(" "))
        asked = _header_matches(text, monkeypatch)
        assert asked <= 3 * top_level
        counts.append(asked)
    assert counts[1] <= 11 * counts[0]


_ABOVE = "    Max Clocks\n        Graphics : 1911 MHz\n    Clock Policy\n        Auto Boost : N/A\n"


def _read(text: str) -> list[tuple[int, str]]:
    (reading,) = parse_smi_output(text, "q.txt", 0.0)
    return [(d.info.index, d.info.name) for d in reading.samples]


@pytest.mark.parametrize("selection", ["-i 1", "-i 00000000:01:00.0", "--id=1"])
def test_rows_above_the_one_gpu_a_command_selects_are_no_gpu(selection: str) -> None:
    """One GPU selected, its one GPU line printed: the rows above are no GPU of the output, read
    as the report without them (h284 refused the paste: "2 GPU(s) ... the command selects 1")."""
    command = f"$ nvidia-smi -q {selection}\n"
    assert _read(command + _ABOVE + _GPU_LINE) == _read(command + _GPU_LINE)


@pytest.mark.parametrize(
    ("command", "gpus"),
    [
        ("nvidia-smi -q -i 2,3", [(2, ""), (3, "Tesla T4")]),
        ("nvidia-smi -q", [(0, ""), (1, "Tesla T4")]),
    ],
)
def test_rows_above_are_a_gpu_where_the_command_selects_one_more(
    command: str, gpus: list[tuple[int, str]]
) -> None:
    """The nearest look-alike: two selected (or all), one line printed, the other's end above."""
    assert _read(f"$ {command}\n{_ABOVE}{_GPU_LINE}") == gpus
