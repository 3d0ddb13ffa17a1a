"""Real captures → DeviceSamples for the store tests and benchmarks/telemetry_store.py.

A deliberately small reader of `nvidia-smi --query-gpu` CSV (the product parser is
gpuwarden.telemetry.smi; this one only has to be right for the fixtures it reads):
``[N/A]``-like cells become None, MiB become bytes, us counters become ns. Sources:
../shared/fixtures/nvidia-smi/SOURCES.md (utkuozdemir/nvidia_gpu_exporter captures) and
../shared/fixtures/topo/SOURCES.md (gpud nvlink-status).
"""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from pathlib import Path

from gpuwarden.types.telemetry import (
    DeviceEvent,
    DeviceInfo,
    DeviceSample,
    MigDeviceSample,
    NvLinkSample,
    ProcessSample,
    Snapshot,
)

MIB = 1 << 20
H100_LOAD = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load"
H100_IDLE = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.idle"
H100_MIG_LOAD = "nvidia-smi/linux-x86_64__nvidia-h100-mig__590.48.01.load"
RTX4080_LOAD = "nvidia-smi/linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.load"
A100_NVLINK = "topo/gpud__a100-sxm4-80gb-x8__nvlink-status.txt"

_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
    "sync_boost",
)


def _cell(row: dict[str, str], key: str) -> str | None:
    value = row.get(key)
    if value is None or value == "" or value.startswith("[") or value == "N/A":
        return None
    return value


def _num(row: dict[str, str], key: str) -> float | None:
    value = _cell(row, key)
    return None if value is None else float(value.split()[0])


def _int(row: dict[str, str], key: str, scale: int = 1) -> int | None:
    value = _num(row, key)
    return None if value is None else int(value) * scale


def _flag(row: dict[str, str], key: str) -> bool | None:
    value = _cell(row, key)
    if value is None:
        return None
    return value in ("Enabled", "Yes", "Active")


def query_gpu_rows(path: Path, delimiter: str = ",") -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle, skipinitialspace=True, delimiter=delimiter))


def info_from_row(row: dict[str, str]) -> DeviceInfo:
    return DeviceInfo(
        index=int(row["index"]),
        uuid=row["uuid"],
        name=row["name"],
        pci_bus_id=_cell(row, "pci.bus_id"),
        serial=_cell(row, "serial"),
        vbios_version=_cell(row, "vbios_version"),
        driver_version=_cell(row, "driver_version"),
        memory_total_bytes=_int(row, "memory.total [MiB]", MIB),
    )


def sample_from_row(
    row: dict[str, str], timestamp_s: float, info: DeviceInfo | None = None
) -> DeviceSample:
    """One DeviceSample with every field the query-gpu CSV carries for it."""
    sw_thermal = _int(row, "clocks_event_reasons_counters.sw_thermal_slowdown [us]", 1000)
    hw_thermal = _int(row, "clocks_event_reasons_counters.hw_thermal_slowdown [us]", 1000)
    reason_cells = [_cell(row, f"clocks_event_reasons.{r}") for r in _REASONS]
    reasons = (
        None
        if all(c is None for c in reason_cells)
        else tuple(r for r, c in zip(_REASONS, reason_cells, strict=True) if c == "Active")
    )
    return DeviceSample(
        info=info or info_from_row(row),
        timestamp_s=timestamp_s,
        memory_used_bytes=_int(row, "memory.used [MiB]", MIB),
        memory_free_bytes=_int(row, "memory.free [MiB]", MIB),
        memory_reserved_bytes=_int(row, "memory.reserved [MiB]", MIB),
        gpu_utilization_percent=_num(row, "utilization.gpu [%]"),
        memory_utilization_percent=_num(row, "utilization.memory [%]"),
        encoder_utilization_percent=_num(row, "utilization.encoder [%]"),
        decoder_utilization_percent=_num(row, "utilization.decoder [%]"),
        temperature_gpu_celsius=_num(row, "temperature.gpu"),
        temperature_memory_celsius=_num(row, "temperature.memory"),
        power_draw_watts=_num(row, "power.draw [W]"),
        power_limit_watts=_num(row, "power.limit [W]"),
        power_enforced_limit_watts=_num(row, "enforced.power.limit [W]"),
        clock_sm_mhz=_num(row, "clocks.current.sm [MHz]"),
        clock_memory_mhz=_num(row, "clocks.current.memory [MHz]"),
        clock_graphics_mhz=_num(row, "clocks.current.graphics [MHz]"),
        clock_video_mhz=_num(row, "clocks.current.video [MHz]"),
        clock_sm_max_mhz=_num(row, "clocks.max.sm [MHz]"),
        clock_memory_max_mhz=_num(row, "clocks.max.memory [MHz]"),
        pstate=_cell(row, "pstate"),
        fan_speed_percent=_num(row, "fan.speed [%]"),
        clock_event_reasons=reasons,
        power_violation_ns_total=_int(row, "clocks_event_reasons_counters.sw_power_cap [us]", 1000),
        thermal_violation_ns_total=(
            None if sw_thermal is None or hw_thermal is None else sw_thermal + hw_thermal
        ),
        ecc_mode_enabled=_flag(row, "ecc.mode.current"),
        ecc_errors_corrected_volatile=_int(row, "ecc.errors.corrected.volatile.total"),
        ecc_errors_uncorrected_volatile=_int(row, "ecc.errors.uncorrected.volatile.total"),
        ecc_errors_corrected_aggregate=_int(row, "ecc.errors.corrected.aggregate.total"),
        ecc_errors_uncorrected_aggregate=_int(row, "ecc.errors.uncorrected.aggregate.total"),
        retired_pages_single_bit=_int(row, "retired_pages.single_bit_ecc.count"),
        retired_pages_double_bit=_int(row, "retired_pages.double_bit.count"),
        retired_pages_pending=_flag(row, "retired_pages.pending"),
        remapped_rows_correctable=_int(row, "remapped_rows.correctable"),
        remapped_rows_uncorrectable=_int(row, "remapped_rows.uncorrectable"),
        remapped_rows_pending=_flag(row, "remapped_rows.pending"),
        remapped_rows_failure=_flag(row, "remapped_rows.failure"),
        pcie_link_gen_current=_int(row, "pcie.link.gen.gpucurrent"),
        pcie_link_gen_max=_int(row, "pcie.link.gen.max"),
        pcie_link_width_current=_int(row, "pcie.link.width.current"),
        pcie_link_width_max=_int(row, "pcie.link.width.max"),
        persistence_mode=_flag(row, "persistence_mode"),
        compute_mode=_cell(row, "compute_mode"),
        mig_mode=_flag(row, "mig.mode.current"),
        mig_mode_pending=_flag(row, "mig.mode.pending"),
    )


def processes(path: Path) -> tuple[ProcessSample, ...]:
    """`--query-compute-apps` rows as ProcessSamples (kind C: compute apps)."""
    return tuple(
        ProcessSample(
            pid=int(row["pid"]),
            used_memory_bytes=_int(row, "used_gpu_memory [MiB]", MIB),
            name=row["process_name"],
            kind="C",
        )
        for row in query_gpu_rows(path)
    )


_MIG_ROW = re.compile(
    r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s+(\d+)MiB\s+/\s+(\d+)MiB\s+\|\s+(\d+)\s"
)


def mig_devices(table_path: Path) -> tuple[MigDeviceSample, ...]:
    """The "MIG devices" block of the default nvidia-smi table."""
    out = []
    for line in table_path.read_text().splitlines():
        match = _MIG_ROW.match(line)
        if match:
            _, gi, ci, _, used, total, sms = (int(g) for g in match.groups())
            out.append(
                MigDeviceSample(
                    gpu_instance_id=gi,
                    compute_instance_id=ci,
                    profile=None,
                    memory_total_bytes=total * MIB,
                    memory_used_bytes=used * MIB,
                    sm_count=sms,
                )
            )
    return tuple(out)


def nvlinks(path: Path, gpu: int = 0) -> tuple[NvLinkSample, ...]:
    """`nvidia-smi nvlink --status` links of one GPU (GB/s → bytes/s, decimal as printed)."""
    links: list[NvLinkSample] = []
    current = -1
    for line in path.read_text().splitlines():
        if line.startswith("GPU "):
            current = int(line.split()[1].rstrip(":"))
            continue
        match = re.match(r"\s+Link (\d+): ([\d.]+) GB/s", line)
        if match and current == gpu:
            links.append(NvLinkSample(int(match[1]), True, float(match[2]) * 1e9))
    return tuple(links)


def capture_timestamp(row: dict[str, str]) -> float:
    """The capture's own timestamp (``2026/07/14 08:12:53.353``, host local time taken as UTC),
    at the store's 1 ms resolution."""
    from datetime import UTC, datetime

    moment = datetime.strptime(row["timestamp"], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000) / 1000


def h100_samples(fixtures: Path, gpus: int, timestamp_s: float) -> tuple[DeviceSample, ...]:
    """The H100 load capture as ``gpus`` devices of one node (index and UUID per device; the
    capture's UUID is masked to zeros, so the device number goes into its last digits)."""
    row = query_gpu_rows(fixtures / f"{H100_LOAD}.query-gpu.csv")[0]
    procs = processes(fixtures / f"{H100_LOAD}.query-compute-apps.csv")
    base = info_from_row(row)
    out = []
    for i in range(gpus):
        info = DeviceInfo(
            index=i,
            uuid=f"{base.uuid[:-4]}{i:04d}",
            name=base.name,
            pci_bus_id=base.pci_bus_id,
            serial=base.serial,
            vbios_version=base.vbios_version,
            driver_version=base.driver_version,
            memory_total_bytes=base.memory_total_bytes,
        )
        sample = sample_from_row(row, timestamp_s, info)
        out.append(_with_processes(sample, procs))
    return tuple(out)


def _with_processes(sample: DeviceSample, procs: tuple[ProcessSample, ...]) -> DeviceSample:
    return replace(sample, processes=procs)


def snapshot(
    samples: tuple[DeviceSample, ...],
    timestamp_s: float,
    *,
    simulated: bool = False,
    events: tuple[DeviceEvent, ...] = (),
) -> Snapshot:
    """The samples re-timed to ``timestamp_s`` (each keeps its offset from the first)."""
    base = samples[0].timestamp_s if samples else timestamp_s
    moved = tuple(
        replace(s, timestamp_s=round((timestamp_s + s.timestamp_s - base) * 1000) / 1000)
        for s in samples
    )
    return Snapshot(
        timestamp_s=timestamp_s,
        host="gpu-node-1",
        backend="sim" if simulated else "smi",
        simulated=simulated,
        samples=moved,
        events=events,
    )
