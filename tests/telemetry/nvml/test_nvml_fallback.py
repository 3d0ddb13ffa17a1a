"""Without nvmlDeviceGetFieldValues (old drivers: FunctionNotFound) or with an entry NotSupported,
NVLink and ECC (and the other batched counters) come from the classic calls, with the same
values. The fake devices are the real captures; the old driver is the fake's driver version."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuwarden.telemetry.nvml import NvmlBackend
from gpuwarden.types.telemetry import DeviceSample
from tests.fakes.fake_pynvml.captures import H100, P100_XML, RTX_4080

OLD_DRIVER = "384.81"  # R384 (CUDA 9.0): before nvmlDeviceGetFieldValues (R387)
# DeviceSample fields the batch call serves (telemetry/nvml/fields.py DEVICE_FIELDS)
BATCHED = (
    "ecc_errors_corrected_volatile",
    "ecc_errors_uncorrected_volatile",
    "ecc_errors_corrected_aggregate",
    "ecc_errors_uncorrected_aggregate",
    "retired_pages_single_bit",
    "retired_pages_double_bit",
    "retired_pages_pending",
    "power_violation_ns_total",
    "thermal_violation_ns_total",
    "energy_consumed_joules",
    "pcie_replay_total",
)
ECC_FIELDS = (3, 4, 5, 6)  # NVML_FI_DEV_ECC_{SBE,DBE}_{VOL,AGG}_TOTAL
NVLINK_FIELDS = (91, 138, 139, 161, 162, 163, 164, 165)  # link count, data, errors, speed, state


def _batched(sample: DeviceSample) -> dict[str, Any]:
    return {name: getattr(sample, name) for name in BATCHED}


def _busy(host: Any) -> None:
    """Traffic, errors and throttling the capture cannot show, the same on every host."""
    gpu = host.gpus[0]
    gpu.nvlink_kib_per_s = (4096.0, 2048.0)
    gpu.nvlink_errors.update({(0, 0): 2, (3, 2): 7, (17, 1): 1})  # replay, CRC flit, recovery
    gpu.replay_per_s = 0.5
    gpu.set_clock_event_reasons(0x4 | 0x40)


def _read_twice(host: Any) -> DeviceSample:
    backend = NvmlBackend(host.module, clock=host.clock)
    backend.read()
    host.clock.advance(8.0)
    sample = backend.read().samples[0]
    backend.close()
    return sample


def test_old_driver_has_no_field_values(fake_host: Any) -> None:
    module = fake_host(P100_XML, driver_version=OLD_DRIVER).module
    module.nvmlInit()
    handle = module.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(module.NVMLError_FunctionNotFound):
        module.nvmlDeviceGetFieldValues(handle, [3])
    module.nvmlShutdown()


def test_p100_on_an_old_driver_reads_the_same_ecc_and_counters(fake_host: Any) -> None:
    new = _read_twice(fake_host(P100_XML))
    old = _read_twice(fake_host(P100_XML, driver_version=OLD_DRIVER))
    assert _batched(old) == _batched(new)
    # the capture's own numbers: XML aggregate single-bit total 3, no retired pages
    assert old.ecc_errors_corrected_aggregate == 3
    assert (old.retired_pages_single_bit, old.retired_pages_double_bit) == (0, 0)
    assert old.retired_pages_pending is False
    assert old.energy_consumed_joules is not None and old.energy_consumed_joules > 0
    assert old.nvlinks is None  # P100 PCIe: no NVLink either way


def test_h100_on_an_old_driver_reads_the_same_nvlinks(fake_host: Any) -> None:
    hosts = fake_host(H100), fake_host(H100, driver_version=OLD_DRIVER)
    for host in hosts:
        _busy(host)
    new, old = (_read_twice(host) for host in hosts)
    assert _batched(old) == _batched(new)
    assert new.nvlinks is not None and old.nvlinks is not None
    assert len(old.nvlinks) == len(new.nvlinks) == 18  # nvidia-smi nvlink -s: links 0-17
    # no classic call reports a link's speed; everything else is the same
    assert [dataclasses.replace(link, bandwidth_bytes_per_second=None) for link in new.nvlinks] == (
        list(old.nvlinks)
    )
    assert all(link.bandwidth_bytes_per_second is None for link in old.nvlinks)
    assert old.nvlinks[3].crc_errors_total == 7 and old.nvlinks[0].replay_errors_total == 2
    assert old.nvlinks[17].recovery_errors_total == 1
    # 8 s of 4096 KiB/s over 18 links, whole KiB per link
    assert old.nvlinks[0].tx_bytes_total == int(4096 * 8 / 18) * 1024
    assert old.nvlinks[0].rx_bytes_total == int(2048 * 8 / 18) * 1024
    assert old.remapped_rows_correctable is None  # nvmlDeviceGetRemappedRows came with R450
    assert new.remapped_rows_correctable == 0


def test_entries_not_supported_fall_back_per_entry(fake_host: Any) -> None:
    normal, degraded = fake_host(H100), fake_host(H100)
    degraded.gpus[0].field_fail.update(dict.fromkeys(ECC_FIELDS + NVLINK_FIELDS, 3))
    for host in (normal, degraded):
        _busy(host)
    want, got = _read_twice(normal), _read_twice(degraded)
    assert _batched(got) == _batched(want)
    assert got.ecc_mode_enabled is True and got.ecc_errors_corrected_volatile is not None
    assert got.nvlinks == tuple(
        dataclasses.replace(link, bandwidth_bytes_per_second=None) for link in want.nvlinks or ()
    )
    assert got.temperature_memory_celsius == want.temperature_memory_celsius  # still batched


def test_unsupported_classic_calls_are_not_asked_every_read(fake_host: Any) -> None:
    # RTX 4080: ECC NotSupported in the batch and in nvmlDeviceGetTotalEccErrors alike
    host = fake_host(RTX_4080, driver_version=OLD_DRIVER)
    calls: list[tuple[Any, ...]] = []
    real = host.module.nvmlDeviceGetTotalEccErrors

    def counted(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    host.module.nvmlDeviceGetTotalEccErrors = counted
    backend = NvmlBackend(host.module, clock=host.clock)
    samples = [backend.read().samples[0] for _ in range(3)]
    backend.close()
    assert all(s.ecc_errors_corrected_volatile is None for s in samples)
    assert all(s.nvlinks is None for s in samples)
    assert len(calls) <= 4  # at most once per counter, on the first reading
