"""Held-out set 12: nvidia-smi outputs of R570-R580 (CUDA 12.8-13.0), Blackwell B200 nodes, and
GPUs NVML answers "GPU requires reset" for (tests/data/smi_heldout12/: SOURCES.md says where each
one comes from, expected.json holds the values read off each sample by hand). Two `-q -d` runs
of one node pasted together are one reading of its GPUs; a bracketed NVML error about the whole
GPU is its state, not a refused number, and doctor asks for the reset; healthy GPUs get nothing
above info.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import DeviceSample, DeviceState
from tests.telemetry.smi.heldout import (
    load_set,
    mib,
    sample_param,
    sample_text,
    samples_read_as,
    smi_set_checks,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout12")

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


def _gpus(sample: dict[str, Any]) -> list[DeviceSample]:
    (snap,) = parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)
    return list(snap.samples)


def _extra(device: DeviceSample, expected: dict[str, Any]) -> dict[str, Any]:
    read = {
        "power_limit_w": device.power_limit_watts,
        "ecc_volatile": device.ecc_errors_uncorrected_volatile,
        "state": device.state.value,
    }
    if "sm_clock_mhz" in expected:
        read["sm_clock_mhz"] = device.clock_sm_mhz
    return read


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES])
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    gpus = _gpus(sample)
    assert [table_values(d) for d in gpus] == sample["gpus"]
    assert {d.info.driver_version for d in gpus} == {sample["driver"]}
    assert [_extra(d, e) for d, e in zip(gpus, sample["extra"], strict=True)] == sample["extra"]


@pytest.mark.parametrize(
    "sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES if "processes" in s]
)
def test_reads_the_process_rows(sample: dict[str, Any]) -> None:
    rows = [
        [d.info.index, p.pid, mib(p.used_memory_bytes)]
        for d in _gpus(sample)
        for p in d.processes or ()
    ]
    assert rows == sample["processes"]


def test_the_set_holds_blackwell_r570_plus_faults_and_healthy_gpus() -> None:
    drivers = {s["driver"].split(".")[0] for s in SAMPLES if s["driver"]}
    assert {"570", "575", "580"} <= drivers
    assert any(g["name"] == "NVIDIA B200" for s in SAMPLES for g in s["gpus"])
    assert any(s["doctor_codes"] for s in SAMPLES)
    assert any(s["doctor_codes"] == [] and s.get("processes") for s in SAMPLES)


_TWO_RUNS = (
    "$ nvidia-smi -q -d POWER\n\n==============NVSMI LOG==============\n\n"
    "Driver Version                            : 580.65.06\n\n"
    "Attached GPUs                             : 1\n"
    "GPU 00000000:01:00.0\n"
    "    GPU Power Readings\n"
    "        Average Power Draw                : 13.44 W\n"
    "        Current Power Limit               : 480.00 W\n\n"
    "$ nvidia-smi -q -d {second}\n\n==============NVSMI LOG==============\n\n"
    "Driver Version                            : 580.65.06\n\n"
    "Attached GPUs                             : 1\n"
    "GPU {bus}\n"
    "    Clocks\n"
    "        SM                                : 210 MHz\n"
)


@pytest.mark.parametrize(
    ("second", "bus", "read"),
    [
        # the same GPU in a second run: one GPU, its power and its clock
        ("CLOCK", "00000000:01:00.0", [("00000000:01:00.0", 13.44, 210.0)]),
        # another GPU in the second run (`-i 1`): two GPUs
        (
            "CLOCK -i 1",
            "00000000:21:00.0",
            [("00000000:01:00.0", 13.44, None), ("00000000:21:00.0", None, 210.0)],
        ),
    ],
)
def test_runs_of_one_node_pasted_together_read_each_gpu_once(
    second: str, bus: str, read: list[tuple[str, float | None, float | None]]
) -> None:
    (snap,) = parse_smi_output(_TWO_RUNS.format(second=second, bus=bus), "two-runs.txt", 0.0)
    assert [(d.info.pci_bus_id, d.power_draw_watts, d.clock_sm_mhz) for d in snap.samples] == read


@pytest.mark.parametrize(
    ("cell", "state"),
    [
        ("[GPU requires reset]", DeviceState.ERROR),
        ("[GPU is lost]", DeviceState.GPU_LOST),
        ("[N/A]", DeviceState.OK),  # a field not reported says nothing of the GPU
        ("[Unknown Error]", DeviceState.OK),  # one query failed: not the GPU's state
    ],
)
def test_an_nvml_error_about_the_whole_gpu_is_its_state(cell: str, state: DeviceState) -> None:
    text = f"index, temperature.gpu, pstate\n0, {cell}, P0\n1, 41, P0\n"
    (snap,) = parse_smi_output(text, "faulty.csv", 0.0)
    assert [d.state for d in snap.samples] == [state, DeviceState.OK]
    assert snap.samples[0].temperature_gpu_celsius is None
