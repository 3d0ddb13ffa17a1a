"""`nvidia-smi --query-compute-apps=... -i ID --format=csv`: the processes of the GPUs -i selects
(h215).

nvidia-smi's -i restricts a query to the GPUs it names ("Display data for a single specified GPU
or Unit", its man page), --query-compute-apps too: the rows are those GPUs' processes, and print
no GPU index (none of its fields is one). What the selection tells is read as on the
--query-gpu path (selection.py): one GPU selected, or every GPU selected listed, names each
GPU's index (or UUID / bus id); a GPU beyond the ones selected, or named otherwise than the one
GPU the command names, is refused; what stays unknown is said, not invented (a GPU without
processes prints no row, so the GPUs listed may be fewer than the ones selected).

Measured before: under `-i 1`, `-i 3`, `-i 0,1`, `-i 2,3` the processes were GPU 0's, said
nothing; rows of another GPU than the one selected, or of two GPUs under `-i 1`, were read as
GPUs 0 (and 1). The rows are real ones of /work/shared/fixtures' H100 and RTX 4080 SUPER
process lists (their columns picked, as a command asking for fewer prints them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import Snapshot
from tests.conftest import FIXTURES

_FIXTURES = FIXTURES / "nvidia-smi"
_H100 = _FIXTURES / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.query-compute-apps.csv"
_RTX_4080 = (
    _FIXTURES / "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.load.query-compute-apps.csv"
)
_H100_PIDS = [11327, 11328, 11345]
_RTX_4080_PIDS = [2165, 5022, 5021]
_H100_BUS_ID = "00000000:00:09.0"
_RTX_4080_BUS_ID = "00000000:01:00.0"


def _columns(path: Path, names: list[str]) -> tuple[str, list[str]]:
    """The header and rows of a real process list, with only the columns ``names``."""
    header, *rows = path.read_text().splitlines()
    columns = header.split(", ")
    at = [next(i for i, c in enumerate(columns) if c.split(" [")[0] == n) for n in names]
    return ", ".join(columns[i] for i in at), [
        ", ".join(row.split(", ")[i] for i in at) for row in rows if row.strip()
    ]


def _paste(names: list[str], selection: str, *paths: Path) -> str:
    fields = ",".join(names)
    header, rows = _columns(paths[0], names)
    for path in paths[1:]:
        rows += _columns(path, names)[1]
    command = f"$ nvidia-smi --query-compute-apps={fields} --format=csv {selection}"
    return "\n".join([command, header, *rows]) + "\n"


def _read(text: str) -> Snapshot:
    (reading,) = parse_smi_output(text, "apps.csv", 0.0)
    return reading


def _gpus(reading: Snapshot) -> list[tuple[int, list[int]]]:
    return [(d.info.index, [p.pid for p in d.processes or ()]) for d in reading.samples]


def _notes(reading: Snapshot) -> list[str]:
    return [e.message for e in reading.events]


_NO_GPU_COLUMN = ["pid", "process_name", "used_gpu_memory"]
_UUID_COLUMN = ["gpu_uuid", "pid", "process_name", "used_gpu_memory"]
_BUS_ID_COLUMN = ["gpu_bus_id", "pid", "process_name", "used_gpu_memory"]


@pytest.mark.parametrize(("selection", "index"), [("-i 1", 1), ("--id=3", 3), ("-i7", 7)])
def test_rows_without_a_gpu_column_are_the_processes_of_the_one_gpu_selected(
    selection: str, index: int
) -> None:
    """Failed before: GPU 0."""
    reading = _read(_paste(_NO_GPU_COLUMN, selection, _H100))
    assert _gpus(reading) == [(index, _H100_PIDS)]
    assert _notes(reading) == []


def test_a_uuid_column_under_one_index_is_that_gpu() -> None:
    """Failed before: GPU 0."""
    reading = _read(_paste(_UUID_COLUMN, "-i 3", _H100))
    assert _gpus(reading) == [(3, _H100_PIDS)]


def test_two_gpus_listed_under_two_indices_are_those_gpus_in_order() -> None:
    """Failed before: GPUs 0 and 1."""
    reading = _read(_paste(_BUS_ID_COLUMN, "-i 2,5", _H100, _RTX_4080))
    assert _gpus(reading) == [(2, _H100_PIDS), (5, _RTX_4080_PIDS)]
    assert [d.info.pci_bus_id for d in reading.samples] == [_H100_BUS_ID, _RTX_4080_BUS_ID]


def test_rows_without_a_gpu_column_under_several_gpus_say_which_is_not_known() -> None:
    """Failed before: GPU 0's processes, said nothing."""
    reading = _read(_paste(_NO_GPU_COLUMN, "-i 0,1", _H100))
    (note,) = _notes(reading)
    assert note.startswith("which of the GPUs selected (-i 0,1) each process runs on")


def test_fewer_gpus_listed_than_selected_say_their_index_is_not_known() -> None:
    """A selected GPU without processes prints no row: the one listed may be either."""
    reading = _read(_paste(_UUID_COLUMN, "-i 2,3", _H100))
    assert [pids for _, pids in _gpus(reading)] == [_H100_PIDS]
    (note,) = _notes(reading)
    assert "-i 2,3" in note and "lists the processes of 1 GPU(s)" in note


def test_a_second_gpu_under_one_selected_is_refused() -> None:
    """Failed before: read as GPUs 0 and 1."""
    with pytest.raises(CorruptInputError) as refused:
        _read(_paste(_BUS_ID_COLUMN, "-i 1", _H100, _RTX_4080))
    assert "apps.csv" in str(refused.value) and "(-i 1)" in refused.value.message


@pytest.mark.parametrize(
    ("names", "selection"),
    [
        (_BUS_ID_COLUMN, "-i 0000:3b:00.0"),
        (_UUID_COLUMN, "-i GPU-11111111-2222-3333-4444-555555555555"),
    ],
)
def test_processes_of_another_gpu_than_the_one_named_are_refused(
    names: list[str], selection: str
) -> None:
    """Failed before: read as GPU 0's."""
    with pytest.raises(CorruptInputError) as refused:
        _read(_paste(names, selection, _H100))
    assert f"under a command that selects {selection}" in refused.value.message


def test_one_bus_id_selected_names_the_gpu_of_rows_without_one() -> None:
    """Failed before: no bus id. Spelled as nvidia-smi prints it (8-digit domain); its index
    said unknown."""
    reading = _read(_paste(_NO_GPU_COLUMN, "-i 0000:00:09.0", _H100))
    assert [d.info.pci_bus_id for d in reading.samples] == [_H100_BUS_ID]
    (note,) = _notes(reading)
    assert note.startswith("its index")


def test_without_i_the_reading_is_as_before() -> None:
    reading = _read(_paste(_BUS_ID_COLUMN, "", _H100, _RTX_4080))
    assert _gpus(reading) == [(0, _H100_PIDS), (1, _RTX_4080_PIDS)]
    assert _notes(reading) == []
