"""Review r26a of smi held-out set 26 (table.py reads a "MIG devices" block pasted alone), as a
hostile user: a MIG row's GPU index is now a GPU of the reading, so an index NVML could not print
must be refused as bad input, naming its line. Before: the GPU was made after the rows were
read, and the index check's ValueError ended doctor as an internal error ("this is a bug in
gpuwarden")."""

from __future__ import annotations

import re

import pytest

from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.smi.cells import SmiOutputError
from tests.telemetry.smi.heldout import load_set

DATA, _ = load_set("smi_heldout26")
MIG_ONLY = "table-mig__nvitop-8__a100-gpu1-gpu2-mig-devices-table-cut-in-gpu2.partial.txt"
FIRST_MIG_ROW = re.compile(r"^\|  1(?=    3   0   0  \|)", re.MULTILINE)


def _first_row_under(index: int) -> str:
    """The nvitop#8 paste (GPUs 1 and 2's MIG devices) with its first MIG row's GPU index
    replaced."""
    text = (DATA / MIG_ONLY).read_text()
    edited, count = FIRST_MIG_ROW.subn(f"|  {index}", text, count=1)
    assert count == 1
    return edited


def _line_of_first_row(text: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if line.startswith("|  1"))


def test_the_paste_as_recorded_reads_gpus_1_and_2() -> None:
    (reading,) = parse_smi_output((DATA / MIG_ONLY).read_text(), MIG_ONLY, 0.0)
    assert [s.info.index for s in reading.samples] == [1, 2]


@pytest.mark.parametrize("index", [2**32, 2**70])
def test_a_mig_row_index_nvml_cannot_print_is_refused_at_its_line(index: int) -> None:
    line = _line_of_first_row((DATA / MIG_ONLY).read_text())
    with pytest.raises(SmiOutputError, match=rf"line {line}: GPU index {index} is not a device"):
        parse_smi_output(_first_row_under(index), MIG_ONLY, 0.0)


def test_the_largest_index_nvml_prints_is_read() -> None:
    (reading,) = parse_smi_output(_first_row_under(2**32 - 1), MIG_ONLY, 0.0)
    assert [s.info.index for s in reading.samples] == [1, 2, 2**32 - 1]
