"""Held-out set 9: nvidia-smi output of the 2025-2026 drivers (R570-R580, CUDA 12.8-13.0) and
GPUs — DGX Spark GB10 with `Not Supported` / `[N/A]` memory, H200, B200, L40S, RTX 5090, a full
R575 `-q` with its new sections (Platform Info, C2C Mode, GPU Recovery Action, Clocks Event Reasons
Counters, Power Smoothing, Fabric), Fabric sections of GPUs in trouble, and pastes shaped by their
authors (heading rows elided or trimmed, cells re-spaced, `watch` inside ssh)
(tests/data/smi_heldout9/: SOURCES.md says where each one comes from, expected.json holds the
values read off each sample by hand). Every sample reads to the values printed in it, or is refused
clearly when it names no GPU reading, and `doctor` finds nothing above info on a healthy GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import DeviceSample
from tests.telemetry.smi.heldout import (
    load_set,
    sample_param,
    sample_text,
    samples_read_as,
    smi_set_checks,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout9")

# Samples a parser still cannot read, and why (see the report).
READ_XFAIL: dict[str, str] = {}
# Samples doctor cannot judge as an engineer does yet, and why.
DOCTOR_XFAIL: dict[str, str] = {}

# expected.json's per-GPU readings of the R575 -q sections, and where a DeviceSample holds each
HEALTH: dict[str, Callable[[DeviceSample], Any]] = {
    "recovery_action": lambda d: d.recovery_action,
    "clock_event_reasons": lambda d: (
        None if d.clock_event_reasons is None else list(d.clock_event_reasons)
    ),
    "pcie": lambda d: [
        d.pcie_link_gen_current,
        d.pcie_link_gen_max,
        d.pcie_link_width_current,
        d.pcie_link_width_max,
    ],
    "temp_slowdown_c": lambda d: d.temperature_slowdown_celsius,
}

SMI_SAMPLES = samples_read_as(SAMPLES, "smi")

(
    test_the_set_is_the_one_described,
    test_what_holds_no_reading_is_refused_clearly,
    test_doctor_finds_what_the_engineer_finds_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = smi_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL)


def _text(sample: dict[str, Any]) -> str:
    return sample_text(DATA, sample)


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES])
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    (snap,) = parse_smi_output(_text(sample), sample["file"], 0.0)
    assert [table_values(d) for d in snap.samples] == sample["gpus"]
    assert {d.info.driver_version for d in snap.samples} == {sample["driver"]}


@pytest.mark.parametrize(
    "sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES if "health" in s]
)
def test_reads_the_new_q_sections(sample: dict[str, Any]) -> None:
    (snap,) = parse_smi_output(_text(sample), sample["file"], 0.0)
    read = {key: [HEALTH[key](d) for d in snap.samples] for key in sample["health"]}
    assert read == sample["health"]


def test_the_set_holds_faults_and_healthy_captures() -> None:
    faults = [s for s in SAMPLES if s["fault"].startswith("fault")]
    assert faults and all(s["reads"] == "rejected" for s in faults)  # no GPU header to attach to
    assert all(s["doctor_codes"] == [] for s in SMI_SAMPLES)


@pytest.mark.parametrize("elision", ["...\n", "[...]\n", "| ... |\n"])
def test_the_rows_under_the_screens_first_border_are_gpu_rows(elision: str) -> None:
    # the heading rows elided by the author: the first border still closes the GPU table's heading
    heading = "| NVIDIA-SMI 580.95.05  Driver Version: 580.95.05  CUDA Version: 13.0 |\n" + elision
    table = (
        "|=====================+==================+================|\n"
        "|   0  NVIDIA B200   On  |   00000000:00:04.0 Off |    0 |\n"
        "+---------------------+------------------+----------------+\n"
    )
    (snap,) = parse_smi_output(heading + table, "elided.txt", 0.0)
    assert [d.info.name for d in snap.samples] == ["NVIDIA B200"]
