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
    sample_gpus,
    sample_param,
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
    gpus = sample_gpus(DATA, sample)
    assert [table_values(d) for d in gpus] == sample["gpus"]
    assert {d.info.driver_version for d in gpus} == {sample["driver"]}
    assert [_extra(d, e) for d, e in zip(gpus, sample["extra"], strict=True)] == sample["extra"]


@pytest.mark.parametrize(
    "sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES if "processes" in s]
)
def test_reads_the_process_rows(sample: dict[str, Any]) -> None:
    rows = [
        [d.info.index, p.pid, mib(p.used_memory_bytes)]
        for d in sample_gpus(DATA, sample)
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


_XML = (
    '<?xml version="1.0" ?>\n<nvidia_smi_log>\n<driver_version>580.65.06</driver_version>\n'
    '<gpu id="00000000:01:00.0">\n<product_name>NVIDIA H100 80GB HBM3</product_name>\n'
    "<performance_state>{cell}</performance_state>\n"
    "<temperature><gpu_temp>{cell}</gpu_temp></temperature>\n</gpu>\n</nvidia_smi_log>\n"
)
_Q = (
    "==============NVSMI LOG==============\n\n"
    "Driver Version                            : 580.65.06\n"
    "\nAttached GPUs                             : 1\nGPU 00000000:01:00.0\n"
    "    Product Name                          : NVIDIA H100 80GB HBM3\n"
    "    Performance State                     : {cell}\n"
    "    Temperature\n        GPU Current Temp                  : {cell}\n"
    "    Processes                             : None\n"
)


@pytest.mark.parametrize("template", [_XML, _Q], ids=["xml", "q-text"])
@pytest.mark.parametrize(
    ("cell", "state"),
    [
        ("GPU requires reset", DeviceState.ERROR),  # -q and -q -x print nvidia-smi's text bare
        ("GPU is lost", DeviceState.GPU_LOST),
        ("N/A", DeviceState.OK),
        ("Unknown Error", DeviceState.OK),
    ],
)
def test_the_xml_and_q_text_readers_take_the_gpus_state_from_such_a_value(
    template: str, cell: str, state: DeviceState
) -> None:
    (snap,) = parse_smi_output(template.format(cell=cell), "faulty.txt", 0.0)
    (gpu,) = snap.samples
    assert (gpu.state, gpu.temperature_gpu_celsius, gpu.pstate) == (state, None, None)


def _full_q(uuid: str, stamp: str, celsius: int, double_bit: int) -> str:
    return (
        "==============NVSMI LOG==============\n\n"
        f"Timestamp                                 : {stamp}\n"
        "Driver Version                            : 580.105.08\n\n"
        "Attached GPUs                             : 1\nGPU 00000000:41:00.0\n"
        "    Product Name                          : Tesla V100-SXM2-32GB\n"
        f"    GPU UUID                              : {uuid}\n"
        "    ECC Errors\n        Volatile\n            Double Bit\n"
        f"                Total                     : {double_bit}\n"
        f"    Temperature\n        GPU Current Temp                  : {celsius} C\n"
        "    Processes                             : None\n\n"
    )


_UUID_A = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
_UUID_B = "GPU-bbbbbbbb-1111-2222-3333-444444444444"


def test_reports_of_two_hosts_with_one_bus_id_are_two_gpus() -> None:
    """Two nodes' `nvidia-smi -q` pasted together: the same slot, different GPUs (their UUIDs
    say so); the faulty one is not folded into the healthy one."""
    text = _full_q(_UUID_A, "Wed May 13 10:44:25 2026", 40, 0)
    text += _full_q(_UUID_B, "Wed May 13 10:44:27 2026", 90, 7)
    (snap,) = parse_smi_output(text, "two-hosts.txt", 0.0)
    read = [
        (d.info.uuid, d.temperature_gpu_celsius, d.ecc_errors_uncorrected_volatile)
        for d in snap.samples
    ]
    assert read == [(_UUID_A, 40.0, 0), (_UUID_B, 90.0, 7)]


def test_one_gpu_reported_twice_reads_as_its_later_report() -> None:
    """`nvidia-smi -q` run twice on one node (the counts grew in between): one GPU, the newer
    reading."""
    text = _full_q(_UUID_A, "Wed May 13 10:44:25 2026", 40, 0)
    text += _full_q(_UUID_A, "Wed May 13 10:50:25 2026", 41, 3)
    (snap,) = parse_smi_output(text, "twice.txt", 0.0)
    read = [
        (d.info.uuid, d.temperature_gpu_celsius, d.ecc_errors_uncorrected_volatile)
        for d in snap.samples
    ]
    assert read == [(_UUID_A, 41.0, 3)]


@pytest.mark.parametrize(
    ("said", "state"),
    [
        ("GPU is lost.  Reboot the system to recover this GPU", DeviceState.GPU_LOST),
        ("GPU requires reset", DeviceState.ERROR),
        ("Unknown Error", DeviceState.OK),  # it could not reach the GPU, and does not say why
    ],
)
def test_a_q_report_with_an_error_in_place_of_a_gpus_report_reads_its_state(
    said: str, state: DeviceState
) -> None:
    """`nvidia-smi -q` prints "Unable to determine the device handle ...: <NVML error>" under
    the header of a GPU it cannot read (test_smi_bounds): the error names the GPU's state."""
    text = _full_q(_UUID_A, "Wed May 13 10:44:25 2026", 40, 0) + (
        f"GPU 00000000:5E:00.0\n    Unable to determine the device handle for GPU "
        f"00000000:5E:00.0: {said}\n"
    )
    (snap,) = parse_smi_output(text, "lost.txt", 0.0)
    assert [d.state for d in snap.samples] == [DeviceState.OK, state]
