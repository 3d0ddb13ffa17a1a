"""A paste of several nvidia-smi commands (a user's terminal: `$ nvidia-smi -q -i 0`, its report,
`$ nvidia-smi -q -i 2`, its report): each report is read under the command line above it (h215).

nvidia-smi prints no index in a -q report; a command's `-i` list tells the index of each GPU it
prints, in its own enumeration order (selection.py). Measured before: the V100 paste of held-out
set 12 (`nvidia-smi -i 0 -q -d ECC`, then `nvidia-smi -i 2 -q -d ECC` under a zsh theme's
"user@host:~ ➜ $" prompt) read as GPUs 0 and 1; with the second prompt a plain "$ " the same;
a second report under `-i 1,2` printing one GPU was read without a word.
"""

from __future__ import annotations

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.smi.paste import pasted_commands
from gpuwarden.types.telemetry import Snapshot
from tests.telemetry.smi.heldout import DATA_ROOT

_V100_ECC = (
    DATA_ROOT
    / "smi_heldout12"
    / "q-d-ecc-x2__sxm2-board-nvlink-notes__v100-sxm2-prompt-between__580.105.08.txt"
)
_FIRST_COMMAND = "nvidia-smi -i 0 -q -d ECC"
_SECOND_PROMPT = "adsk1@ZimaOS-AI:~ ➜ $ "
_SECOND_COMMAND = "nvidia-smi -i 2 -q -d ECC"
# four RTX 3090 Ti, `-q -d POWER` then `-q -d CLOCK`, no -i: one reading of four GPUs
_MINERVA = (
    DATA_ROOT
    / "smi_heldout12"
    / "q-d-power-clock__minerva-default-clocks-notes__4x-rtx-3090-ti__580.65.06.txt"
)


def _read(text: str) -> Snapshot:
    (reading,) = parse_smi_output(text, "paste.txt", 0.0)
    return reading


def _gpus(text: str) -> list[tuple[int | None, str | None]]:
    return [(d.info.index, d.info.pci_bus_id) for d in _read(text).samples]


def _v100(first: str = _FIRST_COMMAND, second: str = _SECOND_COMMAND) -> str:
    text = _V100_ECC.read_text()
    assert text.count(_FIRST_COMMAND) == 1 and text.count(_SECOND_COMMAND) == 1
    return text.replace(_FIRST_COMMAND, first).replace(_SECOND_COMMAND, second)


def test_both_command_lines_of_the_v100_paste_are_found() -> None:
    """Failed before: the zsh theme's prompt hid the second."""
    assert pasted_commands(_V100_ECC.read_text()) == [_FIRST_COMMAND, _SECOND_COMMAND]


def test_the_v100_paste_reads_its_second_report_as_gpu_2() -> None:
    """Failed before: GPUs 0 and 1."""
    assert _gpus(_V100_ECC.read_text()) == [(0, "00000000:41:00.0"), (2, "00000000:61:00.0")]


@pytest.mark.parametrize(
    ("first", "second", "indices"),
    [
        ("nvidia-smi -q -d ECC -i 3", "nvidia-smi -q -d ECC -i 1", [3, 1]),
        ("nvidia-smi --id=5 -q -d ECC", "nvidia-smi -i7 -q -d ECC", [5, 7]),
        ("nvidia-smi -q -d ECC", "nvidia-smi -i 2 -q -d ECC", [0, 2]),
        ("nvidia-smi -i 1 -q -d ECC", "nvidia-smi -i 0 -q -d ECC", [1, 0]),
    ],
)
def test_each_report_takes_the_indices_of_its_own_command(
    first: str, second: str, indices: list[int]
) -> None:
    """Failed before: GPUs 0 and 1 whatever the commands. A command without -i gives no index:
    its GPU keeps its place in the paste."""
    assert [i for i, _ in _gpus(_v100(first, second))] == indices


def test_a_plain_prompt_between_the_reports_reads_the_same() -> None:
    """Failed before: GPUs 0 and 1 (two commands: no selection was applied)."""
    text = _V100_ECC.read_text().replace(_SECOND_PROMPT, "$ ")
    assert [i for i, _ in _gpus(text)] == [0, 2]


def test_a_report_its_own_command_contradicts_is_refused() -> None:
    """Failed before: read as GPUs 0 and 1. `-i 1,2` prints two GPUs; one printed, not cut."""
    with pytest.raises(CorruptInputError) as refused:
        parse_smi_output(_v100(second="nvidia-smi -i 1,2 -q -d ECC"), "paste.txt", 0.0)
    assert "paste.txt" in str(refused.value)
    assert "where the command selects 2 (-i 1,2)" in refused.value.message


def test_two_gpus_one_index_by_their_commands_are_refused() -> None:
    """Failed before: read as GPUs 0 and 1. Two bus ids, both printed under `-i 5`: not one
    node's GPUs."""
    with pytest.raises(CorruptInputError) as refused:
        parse_smi_output(_v100("nvidia-smi -i 5 -q -d ECC", "nvidia-smi -i 5 -q"), "p.txt", 0.0)
    assert "two different GPUs printed as GPU 5" in refused.value.message


def test_two_sections_of_one_run_without_i_still_join() -> None:
    """`-q -d POWER` then `-q -d CLOCK` of four GPUs: one reading of four, in order (as before)."""
    reading = _read(_MINERVA.read_text())
    assert [d.info.index for d in reading.samples] == [0, 1, 2, 3]
    assert all(d.power_limit_watts is not None for d in reading.samples)
    assert all(d.clock_sm_mhz is not None for d in reading.samples)


def test_an_excerpt_without_its_gpu_line_under_one_index_is_that_gpu() -> None:
    """A -q excerpt that starts below its "GPU <bus id>" line (held-out set 25's
    nvidia-docker#1146 rows) under `-i 3` is GPU 3, as before h215's per-command reading."""
    excerpt = DATA_ROOT / "smi_heldout25"
    excerpt /= "q-fragment__nvidia-docker-1146__10de-1e04-identity-to-bridge-chip.fragment.txt"
    assert _gpus(f"$ nvidia-smi -q -i 3\n{excerpt.read_text()}") == [(3, "00000000:AF:00.0")]
