"""NvmlBackend under the failures real drivers produce, scripted in the fake NVML."""

from __future__ import annotations

import sys

import pynvml
import pytest

from gpuwarden.errors import EnvironmentProblemError, MissingExtraError
from gpuwarden.telemetry.nvml import NvmlBackend, open_nvml
from gpuwarden.types.telemetry import DeviceState, EventKind
from tests.fakes.fake_pynvml.captures import A100_MIG_XML, H100, P100_XML, RTX_4080


def test_fake_raises_the_real_pynvml_errors(fake_host):
    module = fake_host(H100).module
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        module.nvmlDeviceGetCount()  # before nvmlInit, as the real library
    module.nvmlInit()
    handle = module.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported) as info:
        module.nvmlDeviceGetFanSpeed(handle)
    assert (
        info.value.value == pynvml.NVML_ERROR_NOT_SUPPORTED and str(info.value) == "Not Supported"
    )
    memory = module.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    assert isinstance(memory, pynvml.c_nvmlMemory_v2_t)


@pytest.mark.parametrize(
    ("setup", "reference"),
    [
        ({"library_present": False}, "nvml-library-not-found"),
        ({"init_error": pynvml.NVML_ERROR_DRIVER_NOT_LOADED}, "nvml-driver-not-loaded"),
        ({"init_error": pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH}, "nvml-driver-mismatch"),
        ({"init_error": pynvml.NVML_ERROR_NO_PERMISSION}, "nvml-no-permission"),
    ],
)
def test_init_errors(fake_host, setup, reference):
    host = fake_host(H100, library_present=setup.get("library_present", True))
    host.module.fake_lib.init_error = setup.get("init_error", 0)
    with pytest.raises(EnvironmentProblemError) as info:
        open_nvml(host.module)
    assert info.value.reference == reference
    assert info.value.hint


def test_driver_reloaded_mid_run_is_backend_wide(fake_host):
    host = fake_host(H100)
    backend = NvmlBackend(host.module)
    backend.read()
    host.module.fake_lib.global_error = pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
    with pytest.raises(EnvironmentProblemError) as info:
        backend.read()
    assert info.value.reference == "nvml-driver-mismatch"


def test_missing_nvidia_ml_py_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(MissingExtraError) as info:
        open_nvml()
    assert info.value.extra == "nvml"


def test_gpu_lost_mid_run_others_keep_reporting(fake_host):
    host = fake_host(H100, RTX_4080)
    backend = NvmlBackend(host.module, clock=host.clock)
    assert [s.state for s in backend.read().samples] == [DeviceState.OK, DeviceState.OK]
    host.gpus[0].lost_after_calls = host.gpus[0].calls + 5  # falls off in the middle of a read
    second = backend.read()
    assert [s.state for s in second.samples] == [DeviceState.GPU_LOST, DeviceState.OK]
    assert [(e.kind, e.index) for e in second.events] == [(EventKind.GPU_LOST, 0)]
    assert second.samples[1].power_draw_watts == pytest.approx(84.24)
    third = backend.read()
    assert third.samples[0].state is DeviceState.GPU_LOST
    assert third.events == ()  # reported once


def test_gpu_lost_at_a_time(fake_host):
    host = fake_host(H100, P100_XML)
    host.gpus[1].lost_at_s = host.clock.now + 30
    backend = NvmlBackend(host.module, clock=host.clock)
    assert backend.read().samples[1].state is DeviceState.OK
    host.clock.advance(31)
    snap = backend.read()
    assert [s.state for s in snap.samples] == [DeviceState.OK, DeviceState.GPU_LOST]


def test_gpu_lost_before_open_keeps_the_handle_scan_going(fake_host):
    host = fake_host(H100, RTX_4080)
    host.gpus[0].lose()  # nvmlDeviceGetHandleByIndex itself fails with GpuIsLost
    backend = NvmlBackend(host.module)
    assert backend.devices()[1].name == "NVIDIA GeForce RTX 4080 SUPER"
    snap = backend.read()
    assert [s.state for s in snap.samples] == [DeviceState.GPU_LOST, DeviceState.OK]
    assert snap.events[0].kind is EventKind.GPU_LOST


def test_gpu_that_requires_a_reset_is_an_error_not_blank_readings(fake_host):
    """NVML_ERROR_RESET_REQUIRED answers every call of that GPU (nvidia-smi prints "[GPU requires
    reset]" for each value): the GPU's state says so, the other GPU keeps reporting."""
    host = fake_host(H100, RTX_4080)
    backend = NvmlBackend(host.module)
    assert [s.state for s in backend.read().samples] == [DeviceState.OK, DeviceState.OK]
    host.gpus[0].reset_required_after_calls = host.gpus[0].calls + 3  # in the middle of a read
    snap = backend.read()
    assert [s.state for s in snap.samples] == [DeviceState.ERROR, DeviceState.OK]
    assert "GPU requires reset" in (snap.samples[0].error or "")
    assert snap.samples[0].power_draw_watts is None and snap.samples[1].power_draw_watts
    again = backend.read()  # it stays so, and is not read again
    assert again.samples[0].state is DeviceState.ERROR


def test_gpu_that_requires_a_reset_before_open(fake_host):
    host = fake_host(H100, RTX_4080)
    host.gpus[0].reset_required_after_calls = 0
    backend = NvmlBackend(host.module)
    snap = backend.read()
    assert [s.state for s in snap.samples] == [DeviceState.ERROR, DeviceState.OK]
    assert "NVML_ERROR_RESET_REQUIRED" in (snap.samples[0].error or "")


@pytest.mark.parametrize(
    "code",
    [pynvml.NVML_ERROR_NO_PERMISSION, pynvml.NVML_ERROR_UNKNOWN, pynvml.NVML_ERROR_NOT_SUPPORTED],
)
def test_one_field_error_is_none(fake_host, code):
    host = fake_host(H100)
    host.gpus[0].fail["nvmlDeviceGetPowerUsage"] = code
    sample = NvmlBackend(host.module).read().samples[0]
    assert sample.state is DeviceState.OK
    assert sample.power_draw_watts is None
    assert sample.power_limit_watts == pytest.approx(700.0)


def test_old_driver_falls_back_and_remembers_missing_functions(fake_host):
    host = fake_host(H100, driver_version="450.80.02")  # before memory v2, process v3, GPM
    backend = NvmlBackend(host.module, clock=host.clock)
    sample = backend.read().samples[0]
    assert sample.memory_reserved_bytes is None  # v1 struct has no reserved
    mem_v1_used = (81559 - 61263) * (1 << 20)  # v1 used = total - free (reserved counted)
    assert sample.memory_used_bytes == mem_v1_used
    assert sample.processes is not None and len(sample.processes) == 3  # via _v2
    assert sample.clock_event_reasons == ()  # via the pre-535 ThrottleReasons name
    lib = host.module.fake_lib
    host.clock.advance(1)
    before = lib.calls
    backend.read()
    per_read = lib.calls - before
    host.clock.advance(1)
    before = lib.calls
    backend.read()
    assert lib.calls - before == per_read  # FunctionNotFound is not retried read after read


def test_xid_events(fake_host):
    host = fake_host(H100, A100_MIG_XML)
    backend = NvmlBackend(host.module, clock=host.clock)
    assert backend.read().events == ()  # NVML_ERROR_TIMEOUT: none waiting
    host.gpus[1].add_xid(48)
    host.gpus[1].add_xid(63)
    snap = backend.read()
    assert [(e.kind, e.index, e.code) for e in snap.events] == [
        (EventKind.XID, 1, 48),
        (EventKind.XID, 1, 63),
    ]
    assert snap.events[0].uuid == "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a"
    later = backend.read()
    assert later.events == ()
    assert [s.xid_last for s in later.samples] == [None, 63]  # sticky, like DCGM's gauge


def test_scheduled_xid_waits_for_its_time(fake_host):
    host = fake_host(H100)
    host.gpus[0].add_xid(79, at_s=host.clock.now + 10)
    backend = NvmlBackend(host.module, clock=host.clock)
    assert backend.read().events == ()
    host.clock.advance(10)
    assert [e.code for e in backend.read().events] == [79]
    backend.close()


def test_real_nvidia_ml_py_without_a_driver():
    """This machine has nvidia-ml-py and no NVIDIA driver: the real library's LibraryNotFound."""
    with pytest.raises(EnvironmentProblemError) as info:
        open_nvml()
    assert info.value.reference == "nvml-library-not-found"
    assert "--backend" in (info.value.hint or "")


def test_nvlink_counters_per_link(fake_host):
    host = fake_host(H100)
    gpu = host.gpus[0]
    backend = NvmlBackend(host.module, clock=host.clock)
    first = backend.read().samples[0].nvlinks
    gpu.nvlink_errors[(3, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT)] = 7
    gpu.nvlink_errors[(3, pynvml.NVML_NVLINK_ERROR_DL_REPLAY)] = 2
    gpu.nvlink_kib_per_s = (18 * 1000.0, 18 * 500.0)  # spread over the 18 links
    host.clock.advance(4.0)
    second = backend.read().samples[0].nvlinks
    assert first is not None and second is not None
    assert (second[3].crc_errors_total, second[3].replay_errors_total) == (7, 2)
    assert second[3].recovery_errors_total == 0 and second[4].crc_errors_total == 0
    assert second[0].tx_bytes_total - first[0].tx_bytes_total == 4 * 1000 * 1024  # KiB -> B
    assert second[0].rx_bytes_total - first[0].rx_bytes_total == 4 * 500 * 1024


def test_settings_are_reread_after_their_interval(fake_host):
    host = fake_host(H100)
    backend = NvmlBackend(host.module, clock=host.clock, settings_every_s=30.0)
    backend.read()
    host.gpus[0].fail["nvmlDeviceGetPowerManagementLimit"] = pynvml.NVML_ERROR_NO_PERMISSION
    host.clock.advance(10)
    assert backend.read().samples[0].power_limit_watts == pytest.approx(700.0)  # cached
    host.clock.advance(25)
    assert backend.read().samples[0].power_limit_watts is None  # re-read after 30 s


def test_an_event_wait_that_says_a_gpu_is_lost_is_no_crash(fake_host, monkeypatch):
    """nvmlEventSetWait returns NVML_ERROR_GPU_IS_LOST "if a GPU has fallen off the bus" (NVML
    API reference, Event Handling Methods), naming no GPU: the read goes on, and the lost GPU is
    found by its own calls."""
    host = fake_host(H100, RTX_4080)
    backend = NvmlBackend(host.module, clock=host.clock)
    backend.read()

    def lost(*_args: object) -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    monkeypatch.setattr(host.module, "nvmlEventSetWait_v2", lost)
    host.gpus[0].lost_after_calls = host.gpus[0].calls
    snap = backend.read()
    assert [s.state for s in snap.samples] == [DeviceState.GPU_LOST, DeviceState.OK]
