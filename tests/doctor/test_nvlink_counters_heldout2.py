"""Held-out `nvidia-smi nvlink -s` / `nvlink -e` outputs, set 2 (tests/data/nvlink_counters_public2:
real outputs sampled as the searches gave them, their links read by hand into expected.json
before gpuwarden ran on them): the link states read as written, and doctor's findings on each
alone — none above info on a healthy output. What the code cannot take yet is a strict xfail
with the reason (SOURCES.md measures it)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.telemetry.smi import parse_nvlink_status
from tests.telemetry.smi.heldout import (
    assert_doctor_finds,
    assert_set_is_described,
    load_set,
    nvlink_states,
    sample_param,
)

DATA, SAMPLES = load_set("nvlink_counters_public2")

_NO_GPU_LINE = (
    "two link lines with no GPU line above them: NvLinkStatus holds links per GPU, so a paste "
    "that names no GPU is not recognised (its inactive link 1 goes unseen)"
)
_S_THEN_E = (
    "one pasted block of `nvlink -s` then `nvlink -e`: taken for `nvlink -e` (its classifier "
    "is asked first) and refused at the first link state; each reader reads one command"
)
_PROMPT_AFTER_COMMAND = (
    "a prompt `(baobab)-[root@gpu048 ~]$ ` below a bare command line is taken for output and "
    "refused (the nvlink -s reader's prompt handling)"
)
_UNBRIDGED_CARD = (
    "GPU 2 is an RTX A6000 with no NVLink bridge (a 2-way bridge joins the other two): "
    "health/topology.py reports 'every link inactive' as nvlink-down, critical, as it must on "
    "an SXM board, where every NVLink is wired"
)
# what the code cannot read yet, and why
READ_XFAIL = {
    "03__wsl-2080ti-postmortem__link-1-inactive-two-lines-no-gpu-line.txt": _NO_GPU_LINE,
    "06__iplane-0007-live-gpu-validation__2x-rtx-a6000-elided-s-then-e.txt": (
        "the `### nvidia-smi nvlink -s` label line above the output is refused as not NVLink "
        "status, and the `nvlink -e` part below it is not a state"
    ),
    "07__unige-hpc-community__8x-rtx-a6000-bridged-pairs-prompt.txt": _PROMPT_AFTER_COMMAND,
}
# what doctor does not find as an engineer would yet, and why
DOCTOR_XFAIL = {
    "03__wsl-2080ti-postmortem__link-1-inactive-two-lines-no-gpu-line.txt": _NO_GPU_LINE,
    "04__nvlink-notes-readme__3x-rtx-a6000-gpu2-unbridged-all-inactive.txt": _UNBRIDGED_CARD,
    "06__iplane-0007-live-gpu-validation__2x-rtx-a6000-elided-s-then-e.txt": _S_THEN_E,
    "07__unige-hpc-community__8x-rtx-a6000-bridged-pairs-prompt.txt": _PROMPT_AFTER_COMMAND,
}


def test_the_set_is_the_one_described() -> None:
    assert_set_is_described(DATA, SAMPLES)
    assert 3 <= len(SAMPLES) <= 8


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SAMPLES])
def test_reads_the_links_as_written(sample: dict[str, Any]) -> None:
    status = parse_nvlink_status((DATA / sample["file"]).read_text(), sample["file"])
    assert nvlink_states(status) == sample["nvlink"]


@pytest.mark.parametrize("sample", [sample_param(s, DOCTOR_XFAIL) for s in SAMPLES])
def test_doctor_finds_what_the_output_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    assert_doctor_finds(DATA / sample["file"], sample["doctor_codes"])
