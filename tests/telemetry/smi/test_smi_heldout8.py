"""Held-out set 8: nvidia-smi output of GPUs in trouble, or that look like it and are not —
a laptop throttled by a 57 °C max operating temperature, memory held full by idle processes,
PCIe links below their max at idle (x8/x4 of x16, Gen1 of Gen4), SW Power Cap active at P8,
a lifetime corrected ECC error, MIG mode pending, remap-pending and throttle fragments that name
no GPU (tests/data/smi_heldout8/: SOURCES.md says where each one comes from, expected.json holds
the values and the engineer's verdict read off each sample by hand). Every sample reads without
a traceback to the values printed in it, or is refused clearly when it names no GPU reading, and
`doctor` gives exactly the findings above info an engineer gives: none for a healthy GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.smi.paste import strip_terminal
from gpuwarden.types.telemetry import DeviceSample
from tests.telemetry.smi.heldout import (
    load_set,
    sample_param,
    sample_text,
    samples_read_as,
    smi_set_checks,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout8")

# Samples a parser still cannot read, and why (see the report).
READ_XFAIL: dict[str, str] = {}
# Samples doctor cannot judge as an engineer does yet, and why.
DOCTOR_XFAIL: dict[str, str] = {}

# expected.json's per-GPU fault readings, and where a DeviceSample holds each
HEALTH: dict[str, Callable[[DeviceSample], Any]] = {
    "pcie": lambda d: [
        d.pcie_link_gen_current,
        d.pcie_link_gen_max,
        d.pcie_link_width_current,
        d.pcie_link_width_max,
    ],
    "clock_event_reasons": lambda d: (
        None if d.clock_event_reasons is None else list(d.clock_event_reasons)
    ),
    "ecc_corrected_aggregate": lambda d: d.ecc_errors_corrected_aggregate,
    "ecc_corrected_volatile": lambda d: d.ecc_errors_corrected_volatile,
    "temp_slowdown_c": lambda d: d.temperature_slowdown_celsius,
    "temp_gpu_max_c": lambda d: d.temperature_gpu_max_celsius,
    "mig_mode": lambda d: d.mig_mode,
    "mig_mode_pending": lambda d: d.mig_mode_pending,
    "fans_pct": lambda d: d.fan_speed_percent,
}


def _text(sample: dict[str, Any]) -> str:
    return sample_text(DATA, sample)


SMI_SAMPLES = samples_read_as(SAMPLES, "smi")
REJECTED = samples_read_as(SAMPLES, "rejected")

(
    test_the_set_is_the_one_described,
    test_what_holds_no_reading_is_refused_clearly,
    test_doctor_finds_what_the_engineer_finds_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = smi_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL)


def test_the_set_holds_faults_and_healthy_look_alikes() -> None:
    verdicts = {s["worst_severity"] for s in SAMPLES}
    assert {"warning", "info", None} <= verdicts
    assert all((s["doctor_codes"] == []) == (s["worst_severity"] == "info") for s in SMI_SAMPLES)


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES])
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    (snap,) = parse_smi_output(_text(sample), sample["file"], 0.0)
    assert [table_values(d) for d in snap.samples] == sample["gpus"]
    assert {d.info.driver_version for d in snap.samples} == {sample["driver"]}


@pytest.mark.parametrize(
    "sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES if "health" in s]
)
def test_reads_the_fault_readings(sample: dict[str, Any]) -> None:
    (snap,) = parse_smi_output(_text(sample), sample["file"], 0.0)
    read = {key: [HEALTH[key](d) for d in snap.samples] for key in sample["health"]}
    assert read == sample["health"]


def test_a_board_throttled_at_its_max_operating_temperature_is_flagged_below_slowdown() -> None:
    # 56 °C is 41 °C under the HW slowdown threshold (97 °C) but 1 °C under the 57 °C max
    # operating temperature where the driver's SW thermal slowdown caps the clocks
    sample = next(s for s in SMI_SAMPLES if "max-operating" in s["file"])
    (snap,) = parse_smi_output(_text(sample), sample["file"], 0.0)
    (device,) = snap.samples
    assert (device.temperature_gpu_celsius, device.temperature_gpu_max_celsius) == (56, 57)
    assert device.temperature_slowdown_celsius == 97


@pytest.mark.parametrize(
    ("preamble", "stripped"),
    [
        # a cluster shell's own lines, then the CSV
        ("maybe refresh.. nodesnames\nnodes cache fresh\n-- compute01\n", 3),
        # an ssh banner line
        ("Warning: Permanently added 'gpu-7' (ED25519) to the list of known hosts.\n", 1),
        ("", 0),
    ],
)
def test_lines_a_wrapper_printed_above_a_csv_header_are_dropped(
    preamble: str, stripped: int
) -> None:
    csv = "index, name, temperature.gpu\n0, NVIDIA A100-SXM4-80GB, 31\n"
    paste = strip_terminal(preamble + csv)
    assert paste.text.splitlines()[stripped:] == csv.splitlines()
    assert not any(line.strip() for line in paste.text.splitlines()[:stripped])


def test_a_headerless_csv_keeps_its_first_rows() -> None:
    # rows of the CSV itself above a header-like row: nothing is a preamble
    text = "0, NVIDIA A10, 33\nab_c, de_f, gh_i\n1, NVIDIA A10, 35\n"
    assert strip_terminal(text).text == text


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.text(alphabet=st.characters(exclude_characters="\r\n")), max_size=8))
def test_any_preamble_leaves_a_csv_readable(lines: list[str]) -> None:
    csv = "index, name, temperature.gpu\n0, NVIDIA A100-SXM4-80GB, 31\n"
    paste = strip_terminal("\n".join([*lines, ""]) + csv)
    assert paste.text.splitlines()[-2:] == csv.splitlines()
