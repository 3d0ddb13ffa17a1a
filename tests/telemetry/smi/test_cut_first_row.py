"""A default screen whose excerpt ends inside a GPU's first row (the lead's convention of
2026-11-28, h299): the GPU whose index starts a first row of the screen's GPU table is listed. Its
name is read only when whole (followed by the persistence cell's On/Off, or by "|"), its bus id
only when whole, every other value only from whole cells; a row cut right after its index (the
index itself may be cut) lists nothing. A line that only looks like such a row -- quoted in prose
below the screen, a process row, a MIG device row, a process row of a paste without borders --
is never a GPU.

Sets 17, 18, 26 and 27 hold the real excerpts (smi_heldout17's nvidia-forums-339096 cut after GPU
3's bus id, 18's cnblogs-asandstar inside GPU 6's name, 26's soperator-430 inside GPU 1's name,
27's gpu-passthrough-4 after GPU 0's persistence cell); the screens here are cut from their lines.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.telemetry.smi import read_smi_output, table
from gpuwarden.telemetry.smi.cells import SmiOutputError
from gpuwarden.types.telemetry import DeviceSample
from tests.telemetry.smi.heldout import DATA_ROOT

_A100_MIG = (
    DATA_ROOT
    / "smi_heldout17"
    / "table__nvidia-forums-339096__4x-a100-80gb-mig-enabled-cut-in-gpu3-row__535.129.03"
    ".partial.txt"
)
_RTX_4090_COLLAPSED = (
    DATA_ROOT
    / "smi_heldout18"
    / "table__cnblogs-asandstar-19391726__8x-rtx-4090-gpu3-fan-err-cut-in-gpu6-name__550.144.03"
    ".partial.txt"
)
_H100_POD = (
    DATA_ROOT
    / "smi_heldout26"
    / "table__soperator-430__h100-80gb-hbm3-kubectl-exec-spaces-collapsed-cut-in-gpu1__550.54.15"
    ".partial.txt"
)
_RTX_2080_GUEST = (
    DATA_ROOT
    / "smi_heldout27"
    / "table__gpu-passthrough-4__rtx-208x-kvm-guest-cut-in-gpu0-first-row__435.21.partial.txt"
)
# whole screens: A100 in MIG mode with its MIG devices block, 8 B200 with vLLM's process rows
_A100_MIG_BLOCK = (
    DATA_ROOT / "smi_heldout10" / "table__openshift-dra-readme__a100-80gb-pcie-mig__570.148.08.txt"
)
_B200_PROCESSES = (
    DATA_ROOT
    / "smi_heldout12"
    / "table__nemo-agent-dynamo-readme__8x-b200-vllm-memory-cut__580.65.06.txt"
)
_SCREENS = [
    _A100_MIG,
    _RTX_4090_COLLAPSED,
    _H100_POD,
    _RTX_2080_GUEST,
    _A100_MIG_BLOCK,
    _B200_PROCESSES,
]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


# set 17's screen down to the rule closing GPU 0, and GPU 1's whole first row from the same screen
_HEAD = "\n".join(_lines(_A100_MIG)[:12]) + "\n"
_ROW = _lines(_A100_MIG)[12]
assert _HEAD.rstrip().endswith("-+") and _ROW.startswith("|   1  NVIDIA A100-SXM4-80GB")


def _gpus(text: str) -> list[DeviceSample]:
    (reading,) = read_smi_output(text, 0.0)
    return list(reading.samples)


def _readings(gpu: DeviceSample) -> list[Any]:
    """Every reading the second and third rows (and the ECC cell) would have given."""
    return [
        gpu.fan_speed_percent,
        gpu.temperature_gpu_celsius,
        gpu.pstate,
        gpu.power_draw_watts,
        gpu.power_limit_watts,
        gpu.memory_used_bytes,
        gpu.info.memory_total_bytes,
        gpu.gpu_utilization_percent,
        gpu.ecc_errors_uncorrected_volatile,
        gpu.ecc_mode_enabled,
        gpu.mig_mode,
    ]


def _upto(text: str) -> int:
    """Where GPU 1's first row is cut: just after ``text`` in it."""
    return _ROW.index(text) + len(text)


_NAME = "NVIDIA A100-SXM4-80GB"
_BUS = "00000000:0B:00.0"


@pytest.mark.parametrize(
    ("cut", "name", "bus_id", "persistence"),
    [
        pytest.param(_upto("A100-SXM4-8"), None, None, None, id="inside-the-name"),
        # nothing after the name says it is whole: "...-80GB" may go on
        pytest.param(_upto("80GB"), None, None, None, id="after-the-name"),
        pytest.param(_upto("80GB          O"), None, None, None, id="inside-the-mode"),
        pytest.param(_upto("80GB          On"), _NAME, None, True, id="after-the-mode"),
        pytest.param(_upto("On  |"), _NAME, None, True, id="after-the-persistence-cell"),
        pytest.param(_upto("0B:00."), _NAME, None, True, id="inside-the-bus-id"),
        pytest.param(_upto(_BUS), _NAME, _BUS, True, id="after-the-bus-id"),
        pytest.param(_upto(_BUS + " Of"), _NAME, _BUS, True, id="inside-disp-a"),
        # the cells before the ECC count whole: read as before h299, the count not
        pytest.param(_upto(_BUS + " Off |"), _NAME, _BUS, True, id="after-the-bus-cell"),
        pytest.param(_upto(_BUS + " Off |    "), _NAME, _BUS, True, id="inside-the-ecc-cell"),
    ],
)
def test_a_gpu_whose_first_row_the_excerpt_ends_inside_is_listed(
    cut: int, name: str | None, bus_id: str | None, persistence: bool | None
) -> None:
    gpu0, gpu1 = _gpus(_HEAD + _ROW[:cut])
    assert (gpu0.info.index, gpu0.info.name, gpu0.temperature_gpu_celsius) == (0, _NAME, 31.0)
    assert (gpu1.info.index, gpu1.info.name or None, gpu1.info.pci_bus_id) == (1, name, bus_id)
    assert gpu1.persistence_mode is persistence
    assert gpu1.info.driver_version == "535.129.03"  # the screen's, as every GPU of it
    assert _readings(gpu1) == [None] * len(_readings(gpu1))


@pytest.mark.parametrize("cut", ["|   1", "|   1 ", "|   1\n", "|   "])
def test_a_first_row_cut_right_after_its_index_lists_nothing(cut: str) -> None:
    """ "|   1" may be the start of "|  12 ...": trailing blanks are not kept, so a row that holds
    only its index (no name character after it) may hold only part of it."""
    assert [gpu.info.index for gpu in _gpus(_HEAD + cut)] == [0]


def test_a_screen_whose_only_gpu_row_is_cut_right_after_its_index_is_refused() -> None:
    head = "\n".join(_lines(_RTX_2080_GUEST)[:-1]) + "\n"  # set 27's screen above GPU 0's row
    with pytest.raises(SmiOutputError, match="without any GPU row"):
        read_smi_output(head + "|   0  ", 0.0)
    ((gpu,),) = (r.samples for r in read_smi_output(head + "|   0  G", 0.0))
    assert (gpu.info.index, gpu.info.name) == (0, "")


def test_a_collapsed_screen_s_cut_row_reads_its_whole_name() -> None:
    """cnblogs-asandstar's screen, its blanks collapsed: "| 6 NVIDIA GeForce RTX 4" lists GPU 6
    without a name (set 18); cut after the mode printed after the name, the name is whole."""
    lines = _lines(_RTX_4090_COLLAPSED)
    assert lines[-1] == "| 6 NVIDIA GeForce RTX 4"
    assert [(g.info.index, g.info.name) for g in _gpus("\n".join(lines))][-1] == (6, "")
    whole_name = "\n".join([*lines[:-1], "| 6 NVIDIA GeForce RTX 4090 Off"])
    sixth = _gpus(whole_name)[-1]
    assert (sixth.info.index, sixth.info.name, sixth.persistence_mode) == (
        6,
        "NVIDIA GeForce RTX 4090",
        False,
    )


def test_a_windows_driver_model_ends_a_whole_name_and_is_no_persistence_mode() -> None:
    row = _ROW.replace("          On  |", "         WDDM |")
    gpu1 = _gpus(_HEAD + row[: row.index("WDDM") + 4])[1]
    assert (gpu1.info.name, gpu1.persistence_mode) == (_NAME, None)


# --- look-alikes: lines shaped like a cut first row outside the GPU table ----------------------

_CUT_ROW_3 = _lines(_A100_MIG)[
    -1
]  # "|   3  NVIDIA A100-SXM4-80GB          On  | 00000000:4C:00.0 Off"
_CLOSED = _HEAD + _ROW + "\n" + "\n".join(_lines(_A100_MIG)[13:15]) + "\n" + _lines(_A100_MIG)[11]


def test_the_screen_closed_reads_gpus_0_and_1() -> None:
    """The look-alikes below add to this screen: it reads its two GPUs, whole."""
    assert [(g.info.index, g.temperature_gpu_celsius) for g in _gpus(_CLOSED)] == [
        (0, 31.0),
        (1, 30.0),
    ]


@pytest.mark.parametrize(
    "below",
    [
        # a paragraph of prose under the screen, the row quoted on a line of its own
        "\n\nThe forum's copy stops inside GPU 3's row:\n" + _CUT_ROW_3,
        # prose right under the screen's closing rule, no blank line between
        "\nThe forum's copy stops inside GPU 3's row:\n" + _CUT_ROW_3,
        "\nand then:\n|   3  NVIDIA A100",
    ],
    ids=["after-a-blank-line", "right-under-the-screen", "cut-in-the-name"],
)
def test_a_first_row_quoted_in_prose_below_the_screen_is_no_gpu(below: str) -> None:
    assert [gpu.info.index for gpu in _gpus(_CLOSED + below)] == [0, 1]


def _processes_block(path: Path) -> list[str]:
    lines = _lines(path)
    start = next(n for n, line in enumerate(lines) if "Processes:" in line) - 1
    return lines[start:]


# set 12's process rows of GPUs 1 and 3 (R470+ rows: GI and CI "N/A", a letter after the index)
_PROCESS_ROW_1 = _processes_block(_B200_PROCESSES)[6]
_PROCESS_ROW_3 = _processes_block(_B200_PROCESSES)[8]
assert _PROCESS_ROW_1.startswith("|    1   N/A  N/A")
assert _PROCESS_ROW_3.startswith("|    3   N/A  N/A")


@pytest.mark.parametrize("cut", range(7, len(_PROCESS_ROW_3)))
def test_a_process_row_under_the_processes_border_is_no_gpu(cut: int) -> None:
    """A process row of a GPU the table does not list, cut anywhere after its index, under the
    "|===" border of the processes block: it is a process row, never a GPU."""
    block = _processes_block(_B200_PROCESSES)[:5]  # down to the processes block's border
    assert block[-1].startswith("|===")
    text = _CLOSED + "\n\n" + "\n".join(block) + "\n" + _PROCESS_ROW_3[:cut]
    assert [gpu.info.index for gpu in _gpus(text)] == [0, 1]


def test_a_process_row_of_a_paste_without_borders_is_no_gpu() -> None:
    """GPU rows pasted without the header (no "|===" border anywhere: rows told apart by their
    shape), a process row of GPU 1 after the rule closing GPU 0, cut in its name."""
    gpu0 = _lines(_A100_MIG)[8:12]
    text = "\n".join([*gpu0, _PROCESS_ROW_1[:60]])
    assert "|=" not in text
    assert [gpu.info.index for gpu in _gpus(text)] == [0]


_MIG_BLOCK = _lines(_A100_MIG_BLOCK)
# set 10's third MIG device row, under the rule closing the second ("+---")
_AT = next(n for n, line in enumerate(_MIG_BLOCK) if line.startswith("|  0   13   0   2  |"))
assert _MIG_BLOCK[_AT - 1].startswith("+---")


@pytest.mark.parametrize("cut", range(4, len(_MIG_BLOCK[_AT])))
def test_a_mig_device_row_cut_anywhere_is_no_gpu_of_its_own(cut: int) -> None:
    """Read, or refused (a MIG row cut right after a "|" is refused as unreadable, as before
    h299); never a GPU of its own. (A GPU the MIG rows name and the table does not list is
    listed by its rows: the rule of h263, tested in set 26; this row names GPU 0.)"""
    text = "\n".join([*_MIG_BLOCK[:_AT], _MIG_BLOCK[_AT][:cut]])
    with contextlib.suppress(SmiOutputError):
        assert [gpu.info.index for gpu in _gpus(text)] == [0]


# --- every cut of a real screen -----------------------------------------------------------------


@functools.cache
def _whole_readings(path: Path) -> dict[int, DeviceSample]:
    return {gpu.info.index: gpu for gpu in _gpus(path.read_text())}


def _values(gpu: DeviceSample) -> list[Any]:
    return [gpu.info.name or None, gpu.info.pci_bus_id, gpu.persistence_mode, *_readings(gpu)]


def _assert_a_cut_reads_only_what_it_prints(path: Path, cut: str) -> None:
    """The prefix ``cut`` of ``path``'s screen reads, or is refused with SmiOutputError; every
    GPU it lists has its index printed at the start of a row of the cut text, and every value it
    reads is the whole screen's (a name or number cut short is no value, never part of one)."""
    try:
        readings = read_smi_output(cut, 0.0)
    except SmiOutputError:
        return
    whole = _whole_readings(path)
    for gpu in (gpu for reading in readings for gpu in reading.samples):
        index = gpu.info.index
        assert re.search(rf"^\|\s*{index}\s+\S", cut, re.MULTILINE), index
        read = _values(gpu)
        assert read == [
            None if mine is None else theirs
            for mine, theirs in zip(read, _values(whole[index]), strict=True)
        ]


@pytest.mark.parametrize("path", _SCREENS, ids=lambda p: p.parent.name)
def test_every_cut_of_a_real_screen_reads_only_what_it_prints(path: Path) -> None:
    text = path.read_text()
    for at in range(len(text) + 1):
        _assert_a_cut_reads_only_what_it_prints(path, text[:at])


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(), path=st.sampled_from(_SCREENS), end=st.sampled_from(["", "\n", "  ", "\r\n"])
)
def test_a_cut_screen_reads_or_is_refused_as_the_parser_s_own_error(
    data: st.DataObject, path: Path, end: str
) -> None:
    """Cut anywhere, then ended as a copy may end it (a line break, blanks, CRLF)."""
    text = path.read_text()
    at = data.draw(st.integers(0, len(text)))
    _assert_a_cut_reads_only_what_it_prints(path, text[:at] + end)


# --- the work on a 100 KB first row -------------------------------------------------------------

_LONG = 100_000


def _adversarial_rows(size: int) -> list[str]:
    """First rows the text ends inside, ``size`` characters long: a name that never ends, blanks
    inside the name's cell, a bus cell that never ends, blanks before the index, blanks after
    it, the mode over and over."""
    return [
        "|   1  " + "A" * size,
        "|   1  A" + " " * size + "On",
        "|   1  NVIDIA A100 On |" + " 0000:" * (size // 6),
        "|" + " " * size + "1  NVIDIA",
        "|   1" + " " * size + "|",
        "|   1  NVIDIA" + " On" * (size // 3),
    ]


@pytest.mark.parametrize("row", range(len(_adversarial_rows(0))))
def test_a_100_kb_cut_first_row_reads_or_is_refused_as_the_parser_s_own_error(row: int) -> None:
    cut = _adversarial_rows(_LONG)[row]
    try:
        gpus = _gpus(_HEAD + cut)
    except SmiOutputError:
        return
    assert [gpu.info.index for gpu in gpus] in ([0], [0, 1])
    name = gpus[-1].info.name if len(gpus) == 2 else ""
    # a name read is what the row prints before a whole mode word
    assert not name or re.match(rf"\|\s*1\s+{re.escape(name)}\s+(?:On|Off)(?:\s|\||$)", cut)


def _steps_reading(text: str) -> int:
    """The lines of Python the table reader runs on ``text`` (each run of a loop's body counts)
    and the calls it makes: its work, the same on a loaded runner as on an idle one."""
    steps = 0

    def count(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal steps
        steps += 1
        return count

    previous = sys.gettrace()
    sys.settrace(count)
    try:
        with contextlib.suppress(SmiOutputError):
            table.read_table(text, 0.0)
    finally:
        sys.settrace(previous)
    return steps


@pytest.mark.parametrize("row", range(len(_adversarial_rows(0))))
def test_the_work_on_a_cut_first_row_does_not_grow_with_its_length(row: int) -> None:
    """Checked without a clock: the table reader takes as many steps on the row at 50 KB as at
    100 KB (the row is matched once, by a pattern whose runs each end at a character of another
    class; its long runs are timed package-wide by test_hostile_r9_regex_probe). A Python loop
    over the row's characters or words would take twice the steps."""
    half, whole = (
        _steps_reading(_HEAD + _adversarial_rows(size)[row]) for size in (_LONG // 2, _LONG)
    )
    assert whole == half


def test_the_cut_row_is_matched_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    pattern = table._CUT_FIRST_ROW

    class Counting:
        def match(self, line: str) -> re.Match[str] | None:
            seen.append(len(line))
            return pattern.match(line)

    monkeypatch.setattr(table, "_CUT_FIRST_ROW", Counting())
    long_row = _adversarial_rows(_LONG)[0]
    assert [gpu.info.index for gpu in _gpus(_HEAD + long_row)] == [0, 1]
    assert seen == [len(long_row)]


def test_doctor_describes_a_screen_with_an_unnamed_gpu_by_the_names_it_has() -> None:
    """Set 18's GPU 6, cut inside its name, is listed unnamed: doctor's input line named it as
    an empty name ("7 GPU(s) (, NVIDIA GeForce RTX 4090)") before."""
    from gpuwarden.doctor.node import DoctorOptions, diagnose_captures

    sample = next((DATA_ROOT / "smi_heldout18").glob("table__cnblogs-asandstar-*"))
    report = diagnose_captures([str(sample)], DoctorOptions())
    assert [record.detail for record in report.inputs] == [
        "7 GPU(s) (NVIDIA GeForce RTX 4090), driver 550.144.03"
    ]
