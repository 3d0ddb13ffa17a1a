"""The R575+ repair readings through NVML (the real nvidia-ml-py over the fake library built from
the captures): nvmlDeviceGetUnrepairableMemoryFlag_v1 and nvmlDeviceGetRepairStatus give what
nvidia-smi printed for the same capture ("Unrepairable Memory", "Channel / TPC Repair Pending"),
None where the GPU or the driver does not report them, and a new flag with the settings."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pynvml
import pytest

from gpuwarden.telemetry.nvml import NvmlBackend
from gpuwarden.telemetry.smi import open_smi
from gpuwarden.types.telemetry import DeviceSample, DeviceState
from tests.fakes.fake_pynvml.captures import A100_MIG_XML, H100, P100_XML, RTX_2080, RTX_4080

FIELDS = ("memory_unrepairable", "channel_repair_pending", "tpc_repair_pending")
_UNREPAIRABLE = "nvmlDeviceGetUnrepairableMemoryFlag_v1"
_REPAIR_STATUS = "nvmlDeviceGetRepairStatus"


def _flags(sample: DeviceSample) -> tuple[bool | None, ...]:
    return tuple(getattr(sample, name) for name in FIELDS)


def _read(host: Any) -> DeviceSample:
    backend = NvmlBackend(host.module, clock=host.clock)
    sample = backend.read().samples[0]
    backend.close()
    return sample


@pytest.mark.parametrize(
    ("capture", "smi_file", "printed"),
    [
        (H100, f"{H100}.load.q.txt", (False, False, False)),
        (RTX_4080, f"{RTX_4080}.load.q.txt", (None, False, False)),  # Unrepairable: N/A
        (RTX_2080, f"{RTX_2080}.load.q.txt", (None, None, None)),  # Turing: no rows
        (A100_MIG_XML, A100_MIG_XML, (None, None, None)),  # R5xx XML before the rows
        (P100_XML, P100_XML, (None, None, None)),
    ],
)
def test_nvml_says_what_nvidia_smi_printed(
    fake_host: Any, fixtures: Path, capture: str, smi_file: str, printed: tuple[bool | None, ...]
) -> None:
    nvml = _flags(_read(fake_host(capture)))
    smi = _flags(open_smi(str(fixtures / "nvidia-smi" / smi_file)).read().samples[0])
    assert nvml == smi == printed


def test_a_driver_before_r575_lacks_both_calls(fake_host: Any) -> None:
    s = _read(fake_host(H100, driver_version="570.133.20"))
    assert s.state is DeviceState.OK
    assert _flags(s) == (None, None, None)
    assert s.sram_threshold_exceeded is False  # the other health reads go on


@pytest.mark.parametrize("function", [_UNREPAIRABLE, _REPAIR_STATUS])
def test_not_supported_is_none_for_that_call_only(fake_host: Any, function: str) -> None:
    host = fake_host(H100)
    host.gpus[0].fail[function] = pynvml.NVML_ERROR_NOT_SUPPORTED
    s = _read(host)
    if function == _UNREPAIRABLE:
        assert _flags(s) == (None, False, False)
    else:
        assert _flags(s) == (False, None, None)


def test_a_flag_set_later_is_read_with_the_settings(fake_host: Any) -> None:
    host = fake_host(H100)
    backend = NvmlBackend(host.module, clock=host.clock, settings_every_s=30.0)
    assert _flags(backend.read().samples[0]) == (False, False, False)
    gpu = host.gpus[0]
    gpu.capture = dataclasses.replace(
        gpu.capture, unrepairable_memory=True, repair_pending=(False, True)
    )
    host.clock.advance(10)
    assert _flags(backend.read().samples[0]) == (False, False, False)  # cached until then
    host.clock.advance(25)
    assert _flags(backend.read().samples[0]) == (True, False, True)
    backend.close()


def test_gpu_lost_during_the_repair_read(fake_host: Any) -> None:
    host = fake_host(H100, RTX_4080)
    host.gpus[0].fail[_REPAIR_STATUS] = pynvml.NVML_ERROR_GPU_IS_LOST
    backend = NvmlBackend(host.module, clock=host.clock)
    lost, other = backend.read().samples
    backend.close()
    assert lost.state is DeviceState.GPU_LOST
    assert other.state is DeviceState.OK and _flags(other) == (None, False, False)
