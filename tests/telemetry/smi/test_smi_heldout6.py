"""Held-out set 6: nvidia-smi output of newer drivers (R570-R580) and GPU kinds the earlier sets
lack (B200, GH200 and H20 in MIG mode, L20, GB10, RTX 50xx), pasted on WSL2, Windows and FreeBSD
or quoted/indented in Markdown (tests/data/smi_heldout6/: SOURCES.md says where each one comes
from, expected.json holds the values read off each sample by hand). Every sample reads without a
traceback to the values printed in it, and `doctor` gives exactly the findings above info the
sample shows: none for a healthy GPU.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.smi.paste import strip_terminal
from tests.telemetry.smi.heldout import (
    assert_reads_table_values,
    load_set,
    sample_ids,
    sample_param,
    sample_text,
    samples_read_as,
    smi_set_checks,
)

DATA, SAMPLES = load_set("smi_heldout6")

# Samples a parser still cannot read, and why (see the report).
READ_XFAIL: dict[str, str] = {}
# Samples doctor cannot take yet, and why (a change outside telemetry/smi; see the report).
DOCTOR_XFAIL: dict[str, str] = {}


def _text(sample: dict[str, Any]) -> str:
    return sample_text(DATA, sample)


SMI_SAMPLES = samples_read_as(SAMPLES, "smi")
REJECTED = samples_read_as(SAMPLES, "rejected")

(
    test_the_set_is_the_one_described,
    test_what_holds_no_gpu_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = smi_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL)


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES])
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    assert_reads_table_values(sample, _text(sample))


Q_EXTRAS = [s for s in SMI_SAMPLES if "power_limit_w" in s]


@pytest.mark.parametrize("sample", Q_EXTRAS, ids=sample_ids(Q_EXTRAS))
def test_reads_the_r580_q_extras(sample: dict[str, Any]) -> None:
    (snap,) = parse_smi_output(_text(sample), sample["file"], 0.0)
    (device,) = snap.samples
    assert device.power_limit_watts == sample["power_limit_w"]
    assert device.recovery_action == sample["recovery_action"]
    assert not snap.events  # a whole -q report: nothing reported as cut


def test_markdown_around_a_paste_is_taken_off_and_lines_keep_their_numbers() -> None:
    # a quoted reply, an indented code block, hard line breaks: the output itself is left
    quoted = strip_terminal("> GPU 00000000:01:00.0\n>\n>     Product Name : X\n")
    assert quoted.text.splitlines() == ["GPU 00000000:01:00.0", "", "    Product Name : X"]
    indented = strip_terminal("    +---+\n    | a |\n\n    +---+\n")
    assert indented.text.splitlines() == ["+---+", "| a |", "", "+---+"]
    broken = strip_terminal("| a | \\\n \\\n| b |\n")
    assert broken.text.splitlines() == ["| a |", "", "| b |"]


def test_a_command_run_by_its_path_and_the_posters_labels_are_read_and_dropped() -> None:
    paste = strip_terminal(
        "command:\nC:\\NVSMI\\nvidia-smi.exe --query-gpu=gpu_name --format=csv,noheader\n"
        "output:\nTesla T4\n"
    )
    assert paste.text.splitlines() == ["", "", "", "Tesla T4"]
    query = paste.query()
    assert query is not None and query.fields == ("gpu_name",)


def test_a_q_key_with_an_empty_value_is_not_a_label() -> None:
    text = "Chassis Serial Number                          : \nGPU 00000000:01:00.0\n"
    assert strip_terminal(text).text == text
