"""Review r27b of h284's tab rule (a paste whose every line starts with a tab, Markdown's indented
code block, is read without the tab): every format nvidia-smi prints reads the same behind one
tab as without it, tabs that belong to the output (`topo -m`'s header row, a cell's) stay, and
the work stays linear in the text (counted, not timed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuwarden.telemetry.smi import parse_smi_output, parse_topology, paste
from gpuwarden.telemetry.smi.paste import strip_terminal

H100 = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load"
# `nvidia-smi topo -m` as it prints its matrix: a tab before the header row, not before the rows
TOPO = (
    "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNV12\t0-23\t0\n"
    "GPU1\tNV12\t X \t0-23\t0\n"
    "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
)


def _tab_led(text: str) -> str:
    return "".join("\t" + line for line in text.splitlines(keepends=True))


@pytest.mark.parametrize("output", ["q.txt", "table.txt", "dmon.txt", "query-gpu.csv"])
def test_each_output_behind_a_tab_reads_as_itself(fixtures: Path, output: str) -> None:
    text = (fixtures / f"{H100}.{output}").read_text()
    assert parse_smi_output(_tab_led(text), "f", 0.0) == parse_smi_output(text, "f", 0.0)


def test_topo_m_behind_a_tab_keeps_its_header_row_s_own_tab() -> None:
    """The header row's tab is the matrix's first (empty) cell: one tab goes, that one stays."""
    assert parse_topology(_tab_led(TOPO), "t") == parse_topology(TOPO, "t")


def test_a_table_with_tabs_in_its_cells_behind_a_tab_reads_as_itself(fixtures: Path) -> None:
    text = (fixtures / f"{H100}.table.txt").read_text().replace("|  ", "|\t")
    assert parse_smi_output(_tab_led(text), "f", 0.0) == parse_smi_output(text, "f", 0.0)


def test_lines_behind_a_tab_and_lines_behind_spaces_are_not_unindented(fixtures: Path) -> None:
    """The nearest look-alike: no blank every line starts with, so none is taken off (a tab is not
    taken for four spaces), and the paste reads as it did before h284: not at all."""
    lines = (fixtures / f"{H100}.table.txt").read_text().splitlines()
    mixed = "\n".join(("\t" if i % 2 else "    ") + line for i, line in enumerate(lines))
    assert strip_terminal.__wrapped__(mixed).text.splitlines()[1:] == mixed.splitlines()[1:]


def _compared(text: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many characters of indentation the tab rule compares, reading ``text``."""
    compared = 0
    common_prefix = os.path.commonprefix

    def counting(blanks: list[str]) -> str:
        nonlocal compared
        compared += sum(map(len, blanks))
        return common_prefix(blanks)

    with monkeypatch.context() as patched:
        patched.setattr(paste.os.path, "commonprefix", counting)
        strip_terminal.__wrapped__(text)
    return compared


@pytest.mark.parametrize(
    "text",
    [
        "\t" * 100_000 + "x\n\ty\n",  # one long indentation, then a short one
        "\t \t  \t\t  \tx\n" * 10_000,  # 10^4 lines behind 10 blanks of a mix
        ("\t" * 1_000 + "x\n") * 1_000,  # 1 MB: 10^3 lines each behind 10^3 tabs
        ("\t" * 1_000 + "x\n" + " \t" * 500 + "y\n") * 500,  # 1 MB, two indentations in turn
    ],
)
def test_indentations_are_compared_once_each(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to 1 MB of blanks: each line's indentation is compared with the common one once, so
    the characters compared are at most twice the text's."""
    assert _compared(text, monkeypatch) <= 2 * len(text)
