"""NvmlBackend against fake NVML devices built from real captures: values and units."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpuwarden.telemetry.backend import Backend
from gpuwarden.telemetry.nvml import NvmlBackend, open_nvml
from gpuwarden.types.telemetry import DeviceState
from tests.fakes.fake_pynvml.captures import (
    A100_MIG_XML,
    H100,
    H100_MIG,
    P100_XML,
    RTX_2080_WIN_XML,
    RTX_4080,
)

MIB = 1 << 20


def _csv(fixtures: Path, stem: str) -> dict[str, str]:
    """The raw query-gpu row, read here without the fake's loader (an independent check)."""
    path = fixtures / "nvidia-smi" / f"{stem}.load.query-gpu.csv"
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    header, row = csv.reader(lines, skipinitialspace=True)
    return dict(zip(header, row, strict=True))


def test_h100_load_matches_the_capture(fake_host, fixtures):
    host = fake_host(H100)
    backend = open_nvml(host.module)
    assert isinstance(backend, Backend)
    sample = backend.read().samples[0]
    raw = _csv(fixtures, H100)
    assert sample.state is DeviceState.OK
    assert sample.info.name == raw["name"] == "NVIDIA H100 80GB HBM3"
    assert sample.info.pci_bus_id == raw["pci.bus_id"]
    assert sample.info.vbios_version == raw["vbios_version"]
    assert sample.info.driver_version == raw["driver_version"]
    assert sample.info.architecture == "Hopper"
    assert sample.info.cuda_driver_version == "13.1"  # -q header "CUDA Version : 13.1"
    assert sample.power_draw_watts == pytest.approx(float(raw["power.draw [W]"].split()[0]))
    assert sample.power_limit_watts == pytest.approx(700.0)
    assert sample.memory_used_bytes == int(raw["memory.used [MiB]"].split()[0]) * MIB
    assert sample.memory_reserved_bytes == int(raw["memory.reserved [MiB]"].split()[0]) * MIB
    assert sample.memory_free_bytes == int(raw["memory.free [MiB]"].split()[0]) * MIB
    assert sample.info.memory_total_bytes == int(raw["memory.total [MiB]"].split()[0]) * MIB
    assert sample.clock_sm_mhz == float(raw["clocks.current.sm [MHz]"].split()[0]) == 1980
    assert sample.clock_memory_mhz == float(raw["clocks.current.memory [MHz]"].split()[0])
    assert sample.clock_video_mhz == float(raw["clocks.current.video [MHz]"].split()[0])
    assert sample.clock_sm_max_mhz == float(raw["clocks.max.sm [MHz]"].split()[0])
    assert sample.pstate == raw["pstate"] == "P0"
    assert sample.gpu_utilization_percent == 100.0
    assert sample.temperature_gpu_celsius == float(raw["temperature.gpu"])
    assert sample.temperature_memory_celsius == float(raw["temperature.memory"])
    assert sample.fan_speed_percent is None  # "[N/A]": passively cooled
    assert sample.clock_event_reasons == ()  # active mask 0x0
    assert sample.ecc_mode_enabled is True
    assert sample.ecc_errors_uncorrected_aggregate == 0
    assert sample.retired_pages_single_bit is None  # "[N/A]" on Hopper (row remapping instead)
    assert (sample.remapped_rows_correctable, sample.remapped_rows_pending) == (0, False)
    assert (sample.pcie_link_gen_current, sample.pcie_link_width_max) == (5, 16)
    # -q: "Tx Throughput : 3092 KB/s", "Replays Since Reset : 9"
    assert sample.pcie_tx_bytes_per_second == 3092 * 1000
    assert sample.pcie_replay_total == 9
    assert sample.persistence_mode is True and sample.compute_mode == "Default"
    assert sample.mig_mode is False and sample.mig_devices is None
    # topo nvlink -s: 18 links at 26.562 GB/s
    assert sample.nvlinks is not None and len(sample.nvlinks) == 18
    assert sample.nvlinks[0].active and sample.nvlinks[0].bandwidth_bytes_per_second == 26.562e9
    # query-compute-apps: three compute processes, MiB -> bytes, not MIG
    assert sample.processes is not None
    assert {p.pid: p.used_memory_bytes for p in sample.processes} == {
        11327: 2566 * MIB,
        11328: 1542 * MIB,
        11345: 15690 * MIB,
    }
    assert all(p.kind == "C" and p.gpu_instance_id is None for p in sample.processes)
    assert {p.pid: p.name for p in sample.processes}[11345] == "./gpu_burn"
    backend.close()


def test_a100_mig_layout(fake_host):
    host = fake_host(A100_MIG_XML)
    sample = NvmlBackend(host.module).read().samples[0]
    assert sample.mig_mode is True and sample.mig_mode_pending is True
    assert sample.gpu_utilization_percent is None  # XML: gpu_util N/A under MIG
    assert sample.mig_devices is not None
    # XML: GI 1 and 2, CI 0, 42 SMs and 19968 MiB each = go-nvml's A100-40GB 3-slice profile
    assert [(m.gpu_instance_id, m.compute_instance_id) for m in sample.mig_devices] == [
        (1, 0),
        (2, 0),
    ]
    assert all(m.profile == "3g.20gb" for m in sample.mig_devices)
    assert all(m.memory_total_bytes == 19968 * MIB for m in sample.mig_devices)
    assert all(m.memory_used_bytes == 19 * MIB for m in sample.mig_devices)
    assert sample.temperature_slowdown_celsius == 89 and sample.temperature_shutdown_celsius == 92


def test_h100_mig_processes_carry_instance_ids(fake_host):
    sample = NvmlBackend(fake_host(H100_MIG).module).read().samples[0]
    assert sample.mig_devices is not None
    assert [m.gpu_instance_id for m in sample.mig_devices] == [2, 3, 9, 10]
    assert [m.profile for m in sample.mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert sample.processes is not None
    assert {(p.pid, p.gpu_instance_id, p.compute_instance_id) for p in sample.processes} == {
        (21180, 2, 0),
        (21181, 2, 0),
        (21198, 2, 0),
    }


def test_consumer_card_fields_not_supported(fake_host):
    sample = NvmlBackend(fake_host(RTX_4080).module).read().samples[0]
    assert sample.ecc_mode_enabled is None
    assert sample.ecc_errors_corrected_volatile is None
    assert sample.temperature_memory_celsius is None  # per-entry NotSupported in field values
    assert sample.encoder_utilization_percent == 72.0  # two ffmpeg encodes in the capture
    assert sample.fan_speed_percent == 0.0
    assert sample.nvlinks is None
    assert sample.mig_mode is None
    assert sample.power_draw_watts == pytest.approx(84.24)


def test_windows_wddm_processes_have_no_memory(fake_host):
    sample = NvmlBackend(fake_host(RTX_2080_WIN_XML).module).read().samples[0]
    assert sample.processes is not None and len(sample.processes) == 26
    assert all(p.used_memory_bytes is None and p.kind == "C+G" for p in sample.processes)
    assert sample.persistence_mode is None  # no persistence mode on Windows


def test_p100_retired_pages_and_ecc(fake_host):
    sample = NvmlBackend(fake_host(P100_XML).module).read().samples[0]
    assert sample.ecc_errors_corrected_aggregate == 3  # XML aggregate single_bit total
    assert (sample.retired_pages_single_bit, sample.retired_pages_double_bit) == (0, 0)
    assert sample.retired_pages_pending is False
    assert sample.remapped_rows_correctable is None  # <remapped_rows>N/A</remapped_rows>
    assert sample.clock_event_reasons == ("gpu_idle",)
    assert sample.info.architecture == "Pascal"


def test_counters_follow_the_clock(fake_host):
    host = fake_host(H100)
    backend = NvmlBackend(host.module, clock=host.clock)
    first = backend.read().samples[0]
    host.clock.advance(10.0)
    second = backend.read().samples[0]
    assert first.energy_consumed_joules is not None and second.energy_consumed_joules is not None
    # energy grows with power x dt: 631.95 W for 10 s (mJ counter, truncated)
    assert second.energy_consumed_joules - first.energy_consumed_joules == pytest.approx(
        6319.5, abs=0.002
    )
    host.gpus[0].set_clock_event_reasons(0x4 | 0x40)
    host.clock.advance(5.0)
    third = backend.read().samples[0]
    assert third.clock_event_reasons == ("sw_power_cap", "hw_thermal_slowdown")
    assert third.power_violation_ns_total == 5_000_000_000
    assert third.thermal_violation_ns_total == 5_000_000_000


def test_gpm_ratios_on_hopper_only(fake_host):
    host = fake_host(H100, P100_XML)
    backend = NvmlBackend(host.module, clock=host.clock)
    first = backend.read().samples
    assert first[0].sm_active_ratio is None  # one GPM sample is not a rate
    for metric, value in {2: 62.5, 3: 31.0, 5: 40.0, 10: 20.0, 11: 1.0, 12: 8.0, 13: 30.0}.items():
        host.gpus[0].set_gpm(metric, value)
    host.clock.advance(2.0)
    h100, p100 = backend.read().samples
    assert h100.graphics_engine_active_ratio == pytest.approx(1.0)  # utilization.gpu 100 %
    assert h100.sm_active_ratio == pytest.approx(0.625)
    assert h100.sm_occupancy_ratio == pytest.approx(0.31)
    assert h100.tensor_active_ratio == pytest.approx(0.40)
    assert h100.dram_active_ratio == pytest.approx(0.20)
    assert (h100.fp64_active_ratio, h100.fp32_active_ratio) == pytest.approx((0.01, 0.08))
    assert h100.fp16_active_ratio == pytest.approx(0.30)
    # GPM PCIe MiB/s back to bytes/s = the capture's 3092 KB/s
    assert h100.extra["gpm_pcie_tx_bytes_per_second"] == pytest.approx(3092 * 1000)
    assert p100.sm_active_ratio is None and p100.graphics_engine_active_ratio is None


def test_process_utilization(fake_host):
    host = fake_host(H100)
    backend = NvmlBackend(host.module)
    assert all(p.sm_utilization_percent is None for p in backend.read().samples[0].processes or ())
    host.gpus[0].process_utilization = {11345: (97, 41)}
    procs = {p.pid: p for p in backend.read().samples[0].processes or ()}
    assert procs[11345].sm_utilization_percent == 97.0
    assert procs[11345].memory_utilization_percent == 41.0
    assert procs[11327].sm_utilization_percent is None


def test_gpm_per_mig_instance_on_hopper(fake_host):
    # H100 capture in MIG mode (GI 2 = 3g.40gb runs gpu_burn + 2 memhogs; GI 3/9/10 idle)
    host = fake_host(H100_MIG)
    backend = NvmlBackend(host.module, clock=host.clock)
    first = backend.read().samples[0]
    assert first.mig_devices is not None
    assert all(m.sm_active_ratio is None for m in first.mig_devices)  # one sample: no rate
    gpu = host.gpus[0]
    for metric, value in {1: 97.0, 2: 88.0, 3: 45.0, 5: 61.0, 10: 33.0, 12: 12.0}.items():
        gpu.set_mig_gpm(2, metric, value)
    gpu.set_mig_gpm(9, 2, 5.0)  # a trickle on one 1g instance
    host.clock.advance(3.0)
    gpu.set_mig_gpm(9, 2, 15.0)  # changes mid-interval: the read is the interval's mean
    host.clock.advance(1.0)
    migs = {m.gpu_instance_id: m for m in backend.read().samples[0].mig_devices or ()}
    busy = migs[2]
    assert busy.profile == "3g.40gb"
    assert busy.graphics_engine_active_ratio == pytest.approx(0.97)
    assert busy.sm_active_ratio == pytest.approx(0.88)
    assert busy.sm_occupancy_ratio == pytest.approx(0.45)
    assert busy.tensor_active_ratio == pytest.approx(0.61)
    assert busy.dram_active_ratio == pytest.approx(0.33)
    assert busy.fp32_active_ratio == pytest.approx(0.12)
    assert busy.fp64_active_ratio is None  # the instance did not report it
    assert migs[9].sm_active_ratio == pytest.approx((5.0 * 3 + 15.0 * 1) / 4 / 100)
    assert migs[3].sm_active_ratio is None and migs[10].sm_active_ratio is None
    # memory still comes from the MIG handle, next to the pillars
    assert busy.memory_total_bytes == 40448 * MIB
    backend.close()
    assert host.module.fake_lib._samples == {}  # every GPM sample buffer freed


def test_gpm_per_mig_needs_hopper_and_a_new_driver(fake_host):
    # A100 (Ampere) in MIG mode: no GPM at all; H100 MIG on a driver before GPM (R520): none
    for name, kwargs in ((A100_MIG_XML, {}), (H100_MIG, {"driver_version": "515.65.01"})):
        host = fake_host(name, **kwargs)
        backend = NvmlBackend(host.module, clock=host.clock)
        backend.read()
        host.clock.advance(2.0)
        sample = backend.read().samples[0]
        assert sample.mig_devices
        assert all(m.sm_active_ratio is None for m in sample.mig_devices)
        backend.close()
