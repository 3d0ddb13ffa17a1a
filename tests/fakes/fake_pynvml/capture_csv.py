"""nvidia_gpu_exporter captures: query-gpu CSV + `-q` text + compute-apps CSV + table."""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from pathlib import Path

from .capture_model import (
    CapturedGpu,
    CapturedMig,
    CapturedProcess,
    _clean,
    _fabric,
    _flag,
    _int,
    _num,
    _recovery_action,
    repair_status,
)


def _csv_row(path: Path) -> dict[str, str]:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    rows = list(csv.reader(lines, skipinitialspace=True))
    header = [h.split(" [")[0].strip() for h in rows[0]]
    return dict(zip(header, (v.strip() for v in rows[1]), strict=True))


def _q_text(path: Path) -> dict[str, str]:
    """`key : value` lines of `nvidia-smi -q`; later duplicates keep the first (the GPU block)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if " : " not in line and not line.rstrip().endswith(":"):
            continue
        key, _, value = line.partition(":")
        out.setdefault(key.strip(), value.strip())
    return out


def _q_temperature(path: Path, label: str) -> int | None:
    for line in path.read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == label:
            return _int(value)
    return None


def _q_section_value(path: Path, section: str, key: str) -> int | None:
    """`key` inside the indented block headed `section` of `nvidia-smi -q`."""
    inside = False
    for line in path.read_text().splitlines():
        name, _, value = line.partition(":")
        if name.strip() == section and not value.strip():
            inside = True
        elif inside and name.strip() == key:
            return _int(value)
        elif inside and not value.strip():
            inside = False
    return None


def _processes_csv(path: Path, kind: str = "C") -> tuple[CapturedProcess, ...]:
    if not path.exists():
        return ()
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    rows = list(csv.reader(lines, skipinitialspace=True))
    if not rows:
        return ()
    header = [h.split(" [")[0].strip() for h in rows[0]]
    out = []
    for raw in rows[1:]:
        row = dict(zip(header, (v.strip() for v in raw), strict=True))
        out.append(
            CapturedProcess(
                pid=int(row["pid"]),
                name=_clean(row.get("process_name")),
                used_mib=_int(row.get("used_gpu_memory")),
                kind=kind,
            )
        )
    return tuple(out)


def _mig_table(path: Path) -> tuple[tuple[CapturedMig, ...], dict[int, tuple[int, int]]]:
    """MIG device rows and process GI/CI of the default `nvidia-smi` table (H100 MIG capture)."""
    migs: list[CapturedMig] = []
    procs: dict[int, tuple[int, int]] = {}
    row = re.compile(
        r"^\|\s+\d+\s+(\d+)\s+(\d+)\s+\d+\s+\|\s+(\d+)MiB\s*/\s*(\d+)MiB\s+\|\s+(\d+)\s+"
        r"\d+\s+\|\s+(\d+)\s"
    )
    proc = re.compile(r"^\|\s+\d+\s+(\d+)\s+(\d+)\s+(\d+)\s+[CG+]+\s")
    for line in path.read_text().splitlines():
        if m := row.match(line):
            gi, ci, used, total, sms, ces = (int(g) for g in m.groups())
            migs.append(CapturedMig(gi, ci, sms, total, used, ces))
        elif m := proc.match(line):
            gi, ci, pid = (int(g) for g in m.groups())
            procs[pid] = (gi, ci)
    return tuple(migs), procs


def _histogram(row: dict[str, str]) -> tuple[int, int, int, int, int] | None:
    """remapped_rows.histogram.{max,high,partial,low,none}: nvmlRowRemapperHistogramValues."""
    buckets = [_int(row.get(f"remapped_rows.histogram.{b}")) for b in _BUCKETS]
    known = [b for b in buckets if b is not None]
    if len(known) != len(_BUCKETS):
        return None
    maximum, high, partial, low, none = known
    return maximum, high, partial, low, none


_BUCKETS = ("max", "high", "partial", "low", "none")


def _mask(raw: str | None) -> int | None:
    text = _clean(raw)
    return None if text is None else int(text, 16)


def load_exporter_capture(smi_dir: Path, stem: str, state: str = "load") -> CapturedGpu:
    """One of the nvidia_gpu_exporter captures, e.g. stem
    ``linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01`` and state ``load`` or ``idle``."""
    base = smi_dir / f"{stem}.{state}"
    row = _csv_row(Path(f"{base}.query-gpu.csv"))
    qpath = Path(f"{base}.q.txt")
    q = _q_text(qpath)
    migs, proc_ids = _mig_table(Path(f"{base}.table.txt"))
    processes = tuple(
        replace(p, gpu_instance_id=proc_ids[p.pid][0], compute_instance_id=proc_ids[p.pid][1])
        if p.pid in proc_ids
        else p
        for p in _processes_csv(Path(f"{base}.query-compute-apps.csv"))
    )
    nvlink = smi_dir.parent / "topo" / f"{stem}.nvlink-s.txt"
    speeds = (
        tuple(float(m) for m in re.findall(r"Link \d+: ([0-9.]+) GB/s", nvlink.read_text()))
        if nvlink.exists()
        else ()
    )
    pstate = _clean(row.get("pstate"))

    def counter_us(name: str) -> int | None:
        return _int(row.get(f"clocks_event_reasons_counters.{name}"))

    remapped = None
    if _clean(row.get("remapped_rows.correctable")) is not None:
        remapped = (
            int(row["remapped_rows.correctable"]),
            int(row["remapped_rows.uncorrectable"]),
            bool(_flag(row["remapped_rows.pending"])),
            bool(_flag(row["remapped_rows.failure"])),
        )
    # Absolute thresholds only where -q prints them as such (newer drivers print T.Limit margins).
    slowdown = _q_temperature(qpath, "GPU Slowdown Temp")
    shutdown = _q_temperature(qpath, "GPU Shutdown Temp")
    # Ada+ print the thresholds as T.Limit margins instead: NVML's *_TLIMIT field values
    tlimit = {
        key: _q_temperature(qpath, f"{label} T.Limit Temp")
        for key, label in (
            ("shutdown", "GPU Shutdown"),
            ("slowdown", "GPU Slowdown"),
            ("memory_max", "Memory Max Operating"),
            ("gpu_max", "GPU Max Operating"),
        )
    }
    return CapturedGpu(
        source=f"{stem}.{state}",
        name=row["name"],
        uuid=row["uuid"],
        driver_version=row["driver_version"],
        cuda_version=_clean(q.get("CUDA Version")),
        serial=_clean(row.get("serial")),
        pci_bus_id=row["pci.bus_id"],
        pci_device_id=_mask(row.get("pci.device_id")),
        pci_subsystem_id=_mask(row.get("pci.sub_device_id")),
        vbios=_clean(row.get("vbios_version")),
        architecture=_clean(q.get("Product Architecture")),
        memory_total_mib=_int(row.get("memory.total")),
        memory_reserved_mib=_int(row.get("memory.reserved")),
        memory_used_mib=_int(row.get("memory.used")),
        memory_free_mib=_int(row.get("memory.free")),
        util_gpu=_int(row.get("utilization.gpu")),
        util_memory=_int(row.get("utilization.memory")),
        util_encoder=_int(row.get("utilization.encoder")),
        util_decoder=_int(row.get("utilization.decoder")),
        temp_gpu=_int(row.get("temperature.gpu")),
        temp_memory=_int(row.get("temperature.memory")),
        temp_slowdown=slowdown,
        temp_shutdown=shutdown,
        temp_gpu_max=_q_temperature(qpath, "GPU Max Operating Temp"),
        temp_memory_max=_q_temperature(qpath, "Memory Max Operating Temp"),
        temp_margin=_int(row.get("temperature.gpu.tlimit")),
        tlimit_shutdown=tlimit["shutdown"],
        tlimit_slowdown=tlimit["slowdown"],
        tlimit_memory_max=tlimit["memory_max"],
        tlimit_gpu_max=tlimit["gpu_max"],
        power_draw_w=_num(row.get("power.draw")),
        power_limit_w=_num(row.get("power.limit")),
        power_enforced_w=_num(row.get("enforced.power.limit")),
        clock_graphics=_int(row.get("clocks.current.graphics")),
        clock_sm=_int(row.get("clocks.current.sm")),
        clock_memory=_int(row.get("clocks.current.memory")),
        clock_video=_int(row.get("clocks.current.video")),
        max_graphics=_int(row.get("clocks.max.graphics")),
        max_sm=_int(row.get("clocks.max.sm")),
        max_memory=_int(row.get("clocks.max.memory")),
        max_video=_q_section_value(qpath, "Max Clocks", "Video"),
        pstate=None if pstate is None else int(pstate.lstrip("P")),
        fan_percent=_int(row.get("fan.speed")),
        clock_event_reasons=_mask(row.get("clocks_event_reasons.active")),
        sw_power_cap_us=counter_us("sw_power_cap"),
        sw_thermal_us=counter_us("sw_thermal_slowdown"),
        hw_thermal_us=counter_us("hw_thermal_slowdown"),
        ecc_current=_flag(row.get("ecc.mode.current")),
        ecc_pending=_flag(row.get("ecc.mode.pending")),
        ecc_corrected_volatile=_int(row.get("ecc.errors.corrected.volatile.total")),
        ecc_uncorrected_volatile=_int(row.get("ecc.errors.uncorrected.volatile.total")),
        ecc_corrected_aggregate=_int(row.get("ecc.errors.corrected.aggregate.total")),
        ecc_uncorrected_aggregate=_int(row.get("ecc.errors.uncorrected.aggregate.total")),
        retired_sbe=_int(row.get("retired_pages.single_bit_ecc.count")),
        retired_dbe=_int(row.get("retired_pages.double_bit.count")),
        retired_pending=_flag(row.get("retired_pages.pending")),
        remapped=remapped,
        remap_histogram=_histogram(row),
        # -q, not the CSV: the RTX 4080's CSV prints "No" where -q (and so NVML's SRAM status
        # call, which -q shows) says N/A on this card without ECC
        sram_threshold_exceeded=_flag(q.get("SRAM Threshold Exceeded")),
        unrepairable_memory=_flag(q.get("Unrepairable Memory")),
        repair_pending=repair_status(
            _flag(q.get("Channel Repair Pending")), _flag(q.get("TPC Repair Pending"))
        ),
        recovery_action=_recovery_action(row.get("gpu_recovery_action")),
        fabric=_fabric(row.get("fabric.state"), row.get("fabric.status")),
        pcie_gen=_int(row.get("pcie.link.gen.gpucurrent")),
        pcie_gen_max=_int(row.get("pcie.link.gen.max")),
        pcie_width=_int(row.get("pcie.link.width.current")),
        pcie_width_max=_int(row.get("pcie.link.width.max")),
        pcie_tx_kbs=_int(q.get("Tx Throughput")),
        pcie_rx_kbs=_int(q.get("Rx Throughput")),
        pcie_replay=_int(q.get("Replays Since Reset")),
        persistence=_flag(row.get("persistence_mode")),
        compute_mode=_clean(row.get("compute_mode")),
        mig_current=_flag(row.get("mig.mode.current")),
        mig_pending=_flag(row.get("mig.mode.pending")),
        mig_devices=migs,
        processes=processes,
        nvlink_speeds_gbs=speeds,
        wddm=_clean(row.get("driver_model.current")) == "WDDM",
    )
