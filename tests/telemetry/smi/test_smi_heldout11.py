"""Held-out set 11: `nvidia-smi -q` of GPUs in trouble and the same fields healthy on a GPU that
holds a job (tests/data/smi_heldout11/: SOURCES.md says where each one comes from, expected.json
holds the values read off each sample by hand). A row remap waiting for a reset is read — the
author's arrow after the value included — and doctor says so; the key lines an author kept
without their GPU line are refused clearly; a healthy GPU gets nothing above info.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import DeviceSample
from tests.telemetry.smi.heldout import (
    load_set,
    mib,
    sample_gpus,
    sample_param,
    samples_read_as,
    smi_set_checks,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout11")

# Samples a parser still cannot read, and why (see the report).
READ_XFAIL: dict[str, str] = {}
# Samples doctor cannot judge as an engineer does yet, and why.
DOCTOR_XFAIL: dict[str, str] = {}

SMI_SAMPLES = samples_read_as(SAMPLES, "smi")

(
    test_the_set_is_the_one_described,
    test_what_holds_no_reading_is_refused_clearly,
    test_doctor_finds_what_the_engineer_finds_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = smi_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL)


def _health(device: DeviceSample) -> dict[str, Any]:
    return {
        "remap_pending": device.remapped_rows_pending,
        "remap_uncorrectable": device.remapped_rows_uncorrectable,
        "pcie_gen": device.pcie_link_gen_current,
        "pcie_width": device.pcie_link_width_current,
        "margin_c": device.temperature_margin_celsius,
    }


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES])
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    gpus = sample_gpus(DATA, sample)
    assert [table_values(d) for d in gpus] == sample["gpus"]
    assert {d.info.driver_version for d in gpus} == {sample["driver"]}
    assert [_health(d) for d in gpus] == sample["health"]


@pytest.mark.parametrize(
    "sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES if "processes" in s]
)
def test_reads_the_process_rows(sample: dict[str, Any]) -> None:
    (gpu,) = sample_gpus(DATA, sample)
    assert [[p.pid, mib(p.used_memory_bytes)] for p in gpu.processes or ()] == sample["processes"]


def test_the_set_holds_faults_and_a_healthy_gpu_holding_a_job() -> None:
    assert any(s["doctor_codes"] for s in SAMPLES)
    assert any(s["doctor_codes"] == [] and s.get("processes") for s in SAMPLES)


_REMAPPED_ROWS = (
    "==============NVSMI LOG==============\n"
    "Driver Version                            : 550.90.07\n"
    "Attached GPUs                             : 1\n"
    "GPU 00000000:52:00.0\n"
    "    Product Name                          : NVIDIA H100 80GB HBM3\n"
    "    Remapped Rows\n"
    "        Correctable Error                 : 0\n"
    "        Uncorrectable Error               : 1\n"
    "        Pending                           : {pending}\n"
    "    Clocks\n"
    "        SM                                : {sm}\n"
)


@pytest.mark.parametrize(
    ("pending", "sm", "read"),
    [
        ("Yes                      <===", "1980 MHz", (True, 1980.0)),
        ("Yes  <-- reset needed", "382 MHz   \u2190 should be ~1530 MHz", (True, 382.0)),
        ("No   <\u2500\u2500 fine", "1980 MHz \u21d0 boost", (False, 1980.0)),
    ],
)
def test_an_authors_arrow_after_a_value_is_not_part_of_it(
    pending: str, sm: str, read: tuple[bool, float | None]
) -> None:
    text = _REMAPPED_ROWS.format(pending=pending, sm=sm)
    (snap,) = parse_smi_output(text, "annotated.txt", 0.0)
    (gpu,) = snap.samples
    assert (gpu.remapped_rows_pending, gpu.clock_sm_mhz) == read


def test_an_arrow_glued_to_a_value_is_no_note_and_the_value_is_refused() -> None:
    # no blank before it: the arrow belongs to the value, which then is no clock reading
    text = _REMAPPED_ROWS.format(pending="No", sm="1980 MHz<==")
    with pytest.raises(CorruptInputError, match=r"line 11: Clocks / SM"):
        parse_smi_output(text, "glued.txt", 0.0)
