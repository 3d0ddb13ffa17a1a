"""Held-out set 15: every nvidia-smi output (table, -q, topo -m, a noheader CSV query) that
2021-2024 issue threads of vLLM, PyTorch, Transformers, Ollama, llama.cpp, Ray, Lightning,
TensorFlow, the k8s device plugin and the GPU operator paste, in the order the issues corpus gave
them, as its stored excerpts hold them (tests/data/smi_heldout15/: SOURCES.md says where each comes
from and what was skipped, expected.json holds the values read off each by hand). A GPU row cut
inside its second line keeps its whole cells; Markdown bold around a value is not the value's;
healthy GPUs get nothing above info.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from tests.telemetry.smi.heldout import (
    load_set,
    matrix_check,
    mixed_set_checks,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout15")

# Samples a parser still cannot read or doctor cannot judge as an engineer does, and why: none.
READ_XFAIL: dict[str, str] = {}
DOCTOR_XFAIL: dict[str, str] = {}


(
    test_the_set_is_the_one_described,
    test_reads_the_printed_values,
    test_what_holds_no_gpu_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = mixed_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=20)


test_reads_the_matrix = matrix_check(DATA, SAMPLES)


_SCREEN = (
    "+-----------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |\n"
    "|-------------------------------+----------------------+----------------------+\n"
    "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
    "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
    "|                               |                      |               MIG M. |\n"
    "|===============================+======================+======================|\n"
    "|   0  NVIDIA A10          On   | 00000000:17:00.0 Off |                    0 |\n"
    "| 31%   45C    P12   52W / 150W |   4321MiB / 22731MiB |     87%      Default |\n"
)


def _gpu0(text: str) -> dict[str, Any]:
    (snap,) = parse_smi_output(text, "screen.txt", 0.0)
    d = snap.samples[0]
    values = table_values(d)
    values["fan"] = d.fan_speed_percent
    values["pstate"] = d.pstate
    values["cap"] = d.power_limit_watts
    return values


@pytest.mark.parametrize(
    ("cut_after", "fan", "temp", "pstate", "used", "util"),
    [
        # a cut P-state may be the start of a longer one ("P1" of "P12"): it is not read
        ("| 31%   45C    P1", 31.0, 45.0, None, None, None),
        # a number followed by its unit is whole: it is read, the cells after it are not
        ("| 31%   45C", 31.0, 45.0, None, None, None),
        # a cut power draw: the cells after it are not read
        ("| 31%   45C    P12   5", 31.0, 45.0, "P12", None, None),
        # a cut inside a later cell is the whole-cell rule's (test_smi_heldout10): a memory cell
        # cut in its total is not read
        ("| 31%   45C    P12   52W / 150W |   4321MiB / 227", 31.0, 45.0, "P12", None, None),
        (
            "| 31%   45C    P12   52W / 150W |   4321MiB / 22731MiB |     87",
            31.0,
            45.0,
            "P12",
            4321.0,
            None,
        ),
    ],
)
def test_a_gpu_row_cut_inside_its_second_line_keeps_its_whole_cells(
    cut_after: str,
    fan: float,
    temp: float,
    pstate: str | None,
    used: float | None,
    util: float | None,
) -> None:
    text = _SCREEN[: _SCREEN.index(cut_after) + len(cut_after)]
    values = _gpu0(text)
    assert (values["fan"], values["temp_c"], values["pstate"]) == (fan, temp, pstate)
    assert (values["mem_used_mib"], values["util_pct"]) == (used, util)
    assert values["name"] == "NVIDIA A10"


def test_a_whole_screen_reads_the_same_as_before() -> None:
    values = _gpu0(_SCREEN)
    assert (values["fan"], values["temp_c"], values["pstate"], values["power_w"]) == (
        31.0,
        45.0,
        "P12",
        52.0,
    )
    assert (values["mem_used_mib"], values["mem_total_mib"], values["util_pct"]) == (
        4321.0,
        22731.0,
        87.0,
    )


def test_markdown_bold_around_a_value_is_not_the_values() -> None:
    bold = _SCREEN.replace("|     87%      Default |", "|     **87%**      Default |")
    bold = bold.replace("45C", "**45C**")
    assert _gpu0("**nvidia-smi:**\n" + bold) == _gpu0(_SCREEN)


def test_a_heading_without_gpu_rows_is_refused_as_such() -> None:
    heading = _SCREEN[: _SCREEN.index("| Fan") + len("| Fan  Temp")]
    for text in (heading, "```" + heading):
        with pytest.raises(CorruptInputError, match="without any GPU row"):
            parse_smi_output(text, "heading.txt", 0.0)
