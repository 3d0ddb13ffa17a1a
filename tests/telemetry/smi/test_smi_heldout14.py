"""Held-out set 14: the default table with the line nvidia-smi prints above it for a GPU it cannot
open ("Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error"), a real
paste (tests/data/smi_heldout14/SOURCES.md). That GPU is read as a device of its own: its bus id,
its index (printed by R6xx, else the one the table skips), no reading, and the state its NVML
error says (lost, requires reset, else an error).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import InputError
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import DeviceSample, DeviceState, Snapshot
from tests.telemetry.smi.heldout import (
    CUT,
    NOISE,
    assert_doctor_finds,
    assert_reads_or_refused_clearly,
    assert_set_is_described,
    doctor_codes_above_info,
    load_set,
    sample_param,
    sample_text,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout14")
(REAL,) = SAMPLES

DOCTOR_XFAIL: dict[str, str] = {}

# The lines real threads show nvidia-smi printing for such a GPU (SOURCES.md names them).
GPU_IS_LOST = (  # marian-nmt/marian#251, R4xx: the bus id alone, two blanks after "lost."
    "Unable to determine the device handle for GPU 0000:03:00.0: GPU is lost.  Reboot the "
    "system to recover this GPU"
)
NO_BLANK = "Unable to determine the device handle for GPU0000:07:00.0: Unknown Error"  # syno#22


def _read(text: str, name: str = "paste.txt") -> Snapshot:
    (snap,) = parse_smi_output(text, name, 0.0)
    return snap


def _table_under(line: str) -> str:
    """The set's real table with ``line`` in place of the line nvidia-smi printed above it."""
    _, table = sample_text(DATA, REAL).split("\n", 1)
    return f"{line}\n{table}"


def _unopened(snap: Snapshot) -> list[list[Any]]:
    def error(device: DeviceSample) -> str:
        return (
            (device.error or "")
            .split("(")[0]
            .removeprefix("Unable to determine the device handle: ")
            .strip()
        )

    return [
        [d.info.index, d.info.pci_bus_id, d.state.value, error(d)]
        for d in snap.samples
        if d.state is not DeviceState.OK
    ]


def test_the_set_is_the_one_described() -> None:
    assert_set_is_described(DATA, SAMPLES)


def test_reads_the_table_and_the_gpu_it_could_not_open() -> None:
    snap = _read(sample_text(DATA, REAL), REAL["file"])
    assert [table_values(d) for d in snap.samples] == REAL["gpus"]
    assert [d.power_limit_watts for d in snap.samples] == REAL["power_limit_w"]
    assert {d.info.driver_version for d in snap.samples} == {REAL["driver"]}
    assert _unopened(snap) == REAL["unopened"]
    lost = snap.samples[1]
    assert (lost.memory_used_bytes, lost.processes) == (None, None)  # none of it is known
    assert len({d.info.uuid for d in snap.samples}) == 4


@pytest.mark.parametrize("sample", [sample_param(s, DOCTOR_XFAIL) for s in SAMPLES])
def test_doctor_finds_what_the_sample_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    assert_doctor_finds(DATA / sample["file"], sample["doctor_codes"])


def test_a_gpu_that_is_lost_reads_lost_and_doctor_says_so(tmp_path: Path) -> None:
    text = _table_under(GPU_IS_LOST)
    # R4xx-R5xx print no index: GPU 0000:03:00.0 (NVML spells it 00000000:03:00.0) is the one
    # the table skips (0, 2, 3 listed)
    assert _unopened(_read(text)) == [[1, "00000000:03:00.0", "gpu-lost", "GPU is lost"]]
    paste = tmp_path / "lost.txt"
    paste.write_text(text)
    assert "gpu-lost" in doctor_codes_above_info(paste)


def test_the_index_is_the_one_the_table_skips_or_else_the_next_one() -> None:
    assert _unopened(_read(_table_under(NO_BLANK)))[0][:3] == [1, "00000000:07:00.0", "error"]
    # two unopened of five GPUs: the table (0, 2, 3) skips 1 and 4, in the order printed
    two = _table_under(f"{NO_BLANK}\n{GPU_IS_LOST}")
    assert [row[:3] for row in _unopened(_read(two))] == [
        [1, "00000000:07:00.0", "error"],
        [4, "00000000:03:00.0", "gpu-lost"],
    ]
    # a paste that lost GPU 0's rows (2 and 3 listed): 0 or 1 cannot be told, the next is taken
    rows = _table_under(NO_BLANK).splitlines(keepends=True)
    first = next(n for n, line in enumerate(rows) if line.startswith("|   0 "))
    cut = "".join(rows[:first] + rows[first + 4 :])
    assert [d.info.index for d in _read(cut).samples] == [2, 3, 4]


def test_an_author_quoting_the_error_is_no_gpu() -> None:
    quoted = _table_under(f"nvidia-smi then says: {NO_BLANK}")
    assert [d.info.index for d in _read(quoted).samples] == [0, 2, 3]


def test_a_reset_required_reads_as_such() -> None:
    text = _table_under(NO_BLANK.replace("Unknown Error", "GPU requires reset"))
    ((_, _, state, error),) = _unopened(_read(text))
    assert (state, error.lower()) == ("error", "gpu requires reset")


@settings(max_examples=60, deadline=None)
@given(cut=CUT, noise=NOISE, line=st.sampled_from([GPU_IS_LOST, NO_BLANK]))
def test_a_cut_or_spliced_paste_reads_or_is_refused_clearly(
    cut: float, noise: str, line: str
) -> None:
    assert_reads_or_refused_clearly(
        lambda text: parse_smi_output(text, "cut.txt", 0.0), _table_under(line), cut, noise
    )


def test_a_gpu_named_by_two_runs_or_listed_by_one_is_one_gpu() -> None:
    """A paste of two runs (`watch nvidia-smi`, a command run twice): the line printed again is
    one GPU, and a GPU one run lists and another could not open is that GPU, not a fifth."""
    twice = _table_under(f"{NO_BLANK}\n{_table_under(NO_BLANK)}")
    assert [d.info.index for d in _read(twice).samples] == [0, 1, 2, 3]
    # GPU 0 (00000000:16:00.0 in the table) lost in the other run
    listed = _table_under(GPU_IS_LOST.replace("0000:03:00.0", "0000:16:00.0"))
    snap = _read(listed)
    assert [d.info.index for d in snap.samples] == [0, 2, 3]
    assert snap.samples[0].state is DeviceState.GPU_LOST


_REAL_TABLES = sorted(
    path
    for path in DATA.parent.glob("smi_heldout*/table__*.txt")
    if "Unable to determine" not in path.read_text(encoding="utf-8")
)


@settings(max_examples=80, deadline=None)
@given(
    table=st.sampled_from(_REAL_TABLES),
    unopened=st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(0, 9)),  # the index R6xx prints, else none
            st.sampled_from([0x01, 0x03, 0x07, 0x16, 0x34, 0x3B, 0x65, 0x81]),  # the bus
            st.sampled_from(["Unknown Error", "GPU is lost", "GPU requires reset"]),
            st.floats(0, 1),  # where in the paste the line goes
        ),
        max_size=4,
    ),
)
def test_real_tables_with_unopened_lines_spliced_in_keep_one_gpu_per_index_and_bus(
    table: Path, unopened: list[tuple[int | None, int, str, float]]
) -> None:
    lines = table.read_text(encoding="utf-8").splitlines()
    for index, bus, error, where in unopened:
        gpu = f"GPU{index}: " if index is not None else "GPU "
        line = f"Unable to determine the device handle for {gpu}0000:{bus:02X}:00.0: {error}"
        lines.insert(int(where * len(lines)), line)
    try:
        snaps = parse_smi_output("\n".join(lines) + "\n", "spliced.txt", 0.0)
    except InputError as error:  # refused clearly (a splice inside a row)
        snaps, refused = [], error
        assert "spliced.txt" in str(refused)
    for snap in snaps:
        indexes = [d.info.index for d in snap.samples]
        assert len(set(indexes)) == len(indexes)
        buses = [_bus(d) for d in snap.samples if d.info.pci_bus_id]
        # a spliced line is a GPU of its own only when no other GPU has its bus id
        assert len(set(buses)) == len(buses) or len(snaps) > 1


def _bus(device: DeviceSample) -> tuple[int, str]:
    domain, _, rest = (device.info.pci_bus_id or "").partition(":")
    return int(domain, 16), rest.upper()
