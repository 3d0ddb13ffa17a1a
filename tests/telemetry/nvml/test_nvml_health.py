"""The health readings through NVML (the real nvidia-ml-py over the fake library built from the
captures): the same values nvidia-smi printed for the same capture, old drivers without them,
and the transitions a failing GPU goes through."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pynvml
import pytest

from gpuwarden.telemetry.nvml import NvmlBackend
from gpuwarden.telemetry.smi import open_smi
from gpuwarden.types.telemetry import DeviceSample, DeviceState
from tests.fakes.fake_pynvml.captures import (
    A100_MIG_XML,
    H100,
    H100_MIG,
    P100_XML,
    RTX_2080,
    RTX_4080,
)

HEALTH = (
    "temperature_margin_celsius",
    "temperature_gpu_max_celsius",
    "temperature_memory_max_celsius",
    "temperature_slowdown_celsius",
    "temperature_shutdown_celsius",
    "sram_threshold_exceeded",
    "remapped_rows_banks_exhausted",
    "recovery_action",
    "fabric_state",
    "fabric_status",
)


def _health(sample: DeviceSample) -> dict[str, object]:
    return {name: getattr(sample, name) for name in HEALTH}


def _read(host: Any) -> DeviceSample:
    backend = NvmlBackend(host.module, clock=host.clock)
    sample = backend.read().samples[0]
    backend.close()
    return sample


def test_h100_load(fake_host: Any) -> None:
    s = _read(fake_host(H100))
    assert _health(s) == {
        "temperature_margin_celsius": 26,  # temperature.gpu.tlimit 26
        # limits as T.Limit margins (NVML_FI_DEV_TEMPERATURE_*_TLIMIT: -8, -2): 59 + 26 = 85
        "temperature_gpu_max_celsius": 85,
        "temperature_memory_max_celsius": None,  # only "Memory Max Operating T.Limit Temp"
        "temperature_slowdown_celsius": 87,
        "temperature_shutdown_celsius": 93,
        "sram_threshold_exceeded": False,
        "remapped_rows_banks_exhausted": 0,
        "recovery_action": "none",
        "fabric_state": "completed",
        "fabric_status": "success",
    }


@pytest.mark.parametrize(
    ("capture", "smi_file"),
    [
        (H100, f"{H100}.load.q.txt"),
        (RTX_4080, f"{RTX_4080}.load.q.txt"),
        (RTX_2080, f"{RTX_2080}.load.q.txt"),
        (A100_MIG_XML, A100_MIG_XML),
        (P100_XML, P100_XML),
    ],
)
def test_nvml_says_what_nvidia_smi_printed(
    fake_host: Any, fixtures: Path, capture: str, smi_file: str
) -> None:
    """The fake's device comes from the CSV and -q of a capture; nvidia-smi's -q (or -q -x) of
    the same capture, through the smi parser, gives every health reading alike, the ones it
    does not print included."""
    nvml = _health(_read(fake_host(capture)))
    smi = _health(open_smi(str(fixtures / "nvidia-smi" / smi_file)).read().samples[0])
    assert nvml == smi
    assert sum(v is not None for v in smi.values()) >= 2


def test_h100_mig_reads_the_board(fake_host: Any) -> None:
    s = _read(fake_host(H100_MIG))
    assert s.mig_mode is True and s.mig_devices
    assert (s.temperature_margin_celsius, s.temperature_gpu_max_celsius) == (24, 77)
    assert s.remapped_rows_banks_exhausted == 0  # the CSV's histogram (-q prints N/A in MIG)
    assert (s.fabric_state, s.recovery_action) == ("completed", "none")


def test_consumer_card_reports_degrees_not_margins(fake_host: Any) -> None:
    s = _read(fake_host(RTX_4080))
    # -q "GPU Max Operating Temp : 90 C", "GPU Slowdown Temp : 96 C", "Shutdown : 101 C"
    assert (
        s.temperature_gpu_max_celsius,
        s.temperature_slowdown_celsius,
        s.temperature_shutdown_celsius,
    ) == (90, 96, 101)
    assert s.temperature_margin_celsius is None  # "GPU T.Limit Temp : N/A": NotSupported
    assert (s.fabric_state, s.fabric_status, s.sram_threshold_exceeded) == (None, None, None)
    assert s.remapped_rows_banks_exhausted is None


def test_old_driver_lacks_the_calls(fake_host: Any) -> None:
    """R470: no margin, SRAM status or fabric call (FunctionNotFound), no recovery-action or
    T.Limit field (the entries answer NotSupported): None, and the rest reads as before."""
    s = _read(fake_host(H100, driver_version="470.82.01"))
    assert s.state is DeviceState.OK
    assert _health(s) == dict.fromkeys(HEALTH) | {"remapped_rows_banks_exhausted": 0}
    assert s.temperature_gpu_celsius == 59 and s.power_limit_watts == pytest.approx(700.0)


def test_v1_fabric_call_on_drivers_without_the_versioned_one(fake_host: Any) -> None:
    s = _read(fake_host(H100, driver_version="535.183.01"))
    assert (s.fabric_state, s.fabric_status) == ("completed", "success")
    assert s.temperature_margin_celsius == 26
    assert s.sram_threshold_exceeded is None  # nvmlDeviceGetSramEccErrorStatus came later


def test_sram_status_needs_root(fake_host: Any) -> None:
    host = fake_host(H100)
    host.gpus[0].fail["nvmlDeviceGetSramEccErrorStatus"] = pynvml.NVML_ERROR_NO_PERMISSION
    s = _read(host)
    assert s.sram_threshold_exceeded is None
    assert s.fabric_state == "completed"


def _change(host: Any, **values: Any) -> None:
    gpu = host.gpus[0]
    gpu.capture = dataclasses.replace(gpu.capture, **values)


def test_recovery_action_and_margin_every_reading(fake_host: Any) -> None:
    host = fake_host(H100)
    backend = NvmlBackend(host.module, clock=host.clock, settings_every_s=30.0)
    assert backend.read().samples[0].recovery_action == "none"
    # Xid 154 "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
    _change(host, recovery_action=1, temp_margin=-3)
    host.clock.advance(1)
    s = backend.read().samples[0]
    assert s.recovery_action == "reset"
    assert s.temperature_margin_celsius == -3  # over the max operating temperature
    assert s.temperature_slowdown_celsius == 59 - 3 + 2
    for code, name in ((4, "drain-and-reset"), (6, "bus-reset"), (42, "unknown-42")):
        _change(host, recovery_action=code)
        assert backend.read().samples[0].recovery_action == name
    backend.close()


def test_slow_health_state_is_reread_with_the_settings(fake_host: Any) -> None:
    host = fake_host(H100)
    backend = NvmlBackend(host.module, clock=host.clock, settings_every_s=30.0)
    backend.read()
    _change(
        host,
        sram_threshold_exceeded=True,
        remap_histogram=(2550, 4, 2, 1, 3),
        fabric=(2, 0),  # NVML_GPU_FABRIC_STATE_IN_PROGRESS
    )
    host.clock.advance(10)
    cached = backend.read().samples[0]
    assert (cached.sram_threshold_exceeded, cached.fabric_state) == (False, "completed")
    host.clock.advance(25)
    s = backend.read().samples[0]
    assert s.sram_threshold_exceeded is True
    assert s.remapped_rows_banks_exhausted == 3
    assert (s.fabric_state, s.fabric_status) == ("in-progress", None)  # status: once completed
    backend.close()


def test_fabric_registration_failed(fake_host: Any) -> None:
    host = fake_host(H100)
    _change(host, fabric=(3, pynvml.NVML_ERROR_UNKNOWN))
    s = _read(host)
    assert s.fabric_state == "completed"
    assert s.fabric_status not in (None, "success")


def test_gpu_lost_during_the_health_reads(fake_host: Any) -> None:
    host = fake_host(H100, RTX_4080)
    host.gpus[0].fail["nvmlDeviceGetRowRemapperHistogram"] = pynvml.NVML_ERROR_GPU_IS_LOST
    backend = NvmlBackend(host.module, clock=host.clock)
    lost, other = backend.read().samples
    backend.close()
    assert lost.state is DeviceState.GPU_LOST
    assert other.state is DeviceState.OK and other.temperature_gpu_max_celsius == 90
