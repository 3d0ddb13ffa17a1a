"""netdata `nvidia-smi -q -x` XML captures."""

from __future__ import annotations

import xml.etree.ElementTree as ET
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


def _text(node: ET.Element | None, path: str) -> str | None:
    if node is None:
        return None
    found = node.find(path)
    return None if found is None or found.text is None else found.text


def _xml_ecc(gpu: ET.Element, scope: str, kind: str) -> int | None:
    """Total ECC count: `single_bit/total` (older XML) or the SRAM+DRAM sum (Ampere+ XML)."""
    old = _int(
        _text(gpu, f"ecc_errors/{scope}/{'single_bit' if kind == 'c' else 'double_bit'}/total")
    )
    if old is not None:
        return old
    word = "correctable" if kind == "c" else "uncorrectable"
    parts = [_int(_text(gpu, f"ecc_errors/{scope}/{mem}_{word}")) for mem in ("sram", "dram")]
    known = [p for p in parts if p is not None]
    return sum(known) if known else None


def load_xml_capture(path: Path) -> CapturedGpu:
    root = ET.parse(path).getroot()
    gpu = root.find("gpu")
    assert gpu is not None, f"{path}: no <gpu>"
    migs = tuple(
        CapturedMig(
            gpu_instance_id=int(_text(m, "gpu_instance_id") or 0),
            compute_instance_id=int(_text(m, "compute_instance_id") or 0),
            sm_count=_int(_text(m, "device_attributes/shared/multiprocessor_count")),
            memory_total_mib=_int(_text(m, "fb_memory_usage/total")) or 0,
            memory_used_mib=_int(_text(m, "fb_memory_usage/used")) or 0,
            copy_engines=_int(_text(m, "device_attributes/shared/copy_engine_count")),
        )
        for m in gpu.findall("mig_devices/mig_device")
    )
    processes = tuple(
        CapturedProcess(
            pid=int(_text(p, "pid") or 0),
            name=_clean(_text(p, "process_name")),
            used_mib=_int(_text(p, "used_memory")),
            kind=_clean(_text(p, "type")) or "C",
            gpu_instance_id=_int(_text(p, "gpu_instance_id")),
            compute_instance_id=_int(_text(p, "compute_instance_id")),
        )
        for p in gpu.findall("processes/process_info")
    )
    reasons = 0
    bits = {
        "gpu_idle": 0x1,
        "applications_clocks_setting": 0x2,
        "sw_power_cap": 0x4,
        "hw_slowdown": 0x8,
        "sync_boost": 0x10,
        "sw_thermal_slowdown": 0x20,
        "hw_thermal_slowdown": 0x40,
        "hw_power_brake_slowdown": 0x80,
        "display_clocks_setting": 0x100,
    }
    for name, bit in bits.items():
        if (
            _clean(_text(gpu, f"clocks_throttle_reasons/clocks_throttle_reason_{name}")) or ""
        ).lower() == "active":
            reasons |= bit
    pstate = _clean(_text(gpu, "performance_state"))
    histogram = [
        _int(_text(gpu, f"remapped_rows/row_remapper_histogram/row_remapper_histogram_{b}"))
        for b in ("max", "high", "partial", "low", "none")
    ]
    known = [b for b in histogram if b is not None]
    temp = "temperature/gpu_temp_"
    return CapturedGpu(
        source=path.name,
        name=_text(gpu, "product_name") or "",
        uuid=_text(gpu, "uuid") or "",
        driver_version=_text(root, "driver_version") or "",
        cuda_version=_clean(_text(root, "cuda_version")),
        serial=_clean(_text(gpu, "serial")),
        pci_bus_id=_text(gpu, "pci/pci_bus_id"),
        pci_device_id=int(_text(gpu, "pci/pci_device_id") or "0", 16),
        pci_subsystem_id=int(_text(gpu, "pci/pci_sub_system_id") or "0", 16),
        vbios=_clean(_text(gpu, "vbios_version")),
        architecture=_clean(_text(gpu, "product_architecture")),
        memory_total_mib=_int(_text(gpu, "fb_memory_usage/total")),
        memory_reserved_mib=_int(_text(gpu, "fb_memory_usage/reserved")),
        memory_used_mib=_int(_text(gpu, "fb_memory_usage/used")),
        memory_free_mib=_int(_text(gpu, "fb_memory_usage/free")),
        util_gpu=_int(_text(gpu, "utilization/gpu_util")),
        util_memory=_int(_text(gpu, "utilization/memory_util")),
        util_encoder=_int(_text(gpu, "utilization/encoder_util")),
        util_decoder=_int(_text(gpu, "utilization/decoder_util")),
        temp_gpu=_int(_text(gpu, "temperature/gpu_temp")),
        temp_memory=_int(_text(gpu, "temperature/memory_temp")),
        temp_slowdown=_int(_text(gpu, "temperature/gpu_temp_slow_threshold")),
        temp_shutdown=_int(_text(gpu, "temperature/gpu_temp_max_threshold")),
        temp_gpu_max=_int(_text(gpu, temp + "max_gpu_threshold")),
        temp_memory_max=_int(_text(gpu, temp + "max_mem_threshold")),
        temp_margin=_int(_text(gpu, temp + "tlimit")),  # nvsmi_device_v12+
        tlimit_shutdown=_int(_text(gpu, temp + "max_tlimit_threshold")),
        tlimit_slowdown=_int(_text(gpu, temp + "slow_tlimit_threshold")),
        tlimit_memory_max=_int(_text(gpu, temp + "max_mem_tlimit_threshold")),
        tlimit_gpu_max=_int(_text(gpu, temp + "max_gpu_tlimit_threshold")),
        power_draw_w=_num(_text(gpu, "power_readings/power_draw")),
        power_limit_w=_num(_text(gpu, "power_readings/power_limit")),
        power_enforced_w=_num(_text(gpu, "power_readings/enforced_power_limit")),
        clock_graphics=_int(_text(gpu, "clocks/graphics_clock")),
        clock_sm=_int(_text(gpu, "clocks/sm_clock")),
        clock_memory=_int(_text(gpu, "clocks/mem_clock")),
        clock_video=_int(_text(gpu, "clocks/video_clock")),
        max_graphics=_int(_text(gpu, "max_clocks/graphics_clock")),
        max_sm=_int(_text(gpu, "max_clocks/sm_clock")),
        max_memory=_int(_text(gpu, "max_clocks/mem_clock")),
        max_video=_int(_text(gpu, "max_clocks/video_clock")),
        pstate=None if pstate is None else int(pstate.lstrip("P")),
        fan_percent=_int(_text(gpu, "fan_speed")),
        clock_event_reasons=reasons,
        ecc_current=_flag(_text(gpu, "ecc_mode/current_ecc")),
        ecc_pending=_flag(_text(gpu, "ecc_mode/pending_ecc")),
        ecc_corrected_volatile=_xml_ecc(gpu, "volatile", "c"),
        ecc_uncorrected_volatile=_xml_ecc(gpu, "volatile", "u"),
        ecc_corrected_aggregate=_xml_ecc(gpu, "aggregate", "c"),
        ecc_uncorrected_aggregate=_xml_ecc(gpu, "aggregate", "u"),
        retired_sbe=_int(_text(gpu, "retired_pages/multiple_single_bit_retirement/retired_count")),
        retired_dbe=_int(_text(gpu, "retired_pages/double_bit_retirement/retired_count")),
        retired_pending=_flag(_text(gpu, "retired_pages/pending_retirement")),
        remapped=None,  # none of the XMLs report remapped rows (N/A)
        remap_histogram=(known[0], known[1], known[2], known[3], known[4])
        if len(known) == 5
        else None,
        sram_threshold_exceeded=_flag(_text(gpu, "ecc_errors/aggregate/sram_threshold_exceeded")),
        unrepairable_memory=_flag(_text(gpu, "ecc_errors/unrepairable_memory")),
        repair_pending=repair_status(
            _flag(_text(gpu, "ecc_errors/channel_repair_pending")),
            _flag(_text(gpu, "ecc_errors/tpc_repair_pending")),
        ),
        recovery_action=_recovery_action(_text(gpu, "gpu_recovery_action")),
        fabric=_fabric(_text(gpu, "fabric/state"), _text(gpu, "fabric/status")),
        pcie_gen=_int(_text(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
        pcie_gen_max=_int(_text(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
        pcie_width=_int(_text(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width")),
        pcie_width_max=_int(_text(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width")),
        pcie_tx_kbs=_int(_text(gpu, "pci/tx_util")),
        pcie_rx_kbs=_int(_text(gpu, "pci/rx_util")),
        pcie_replay=_int(_text(gpu, "pci/replay_counter")),
        persistence=_flag(_text(gpu, "persistence_mode")),
        compute_mode=_clean(_text(gpu, "compute_mode")),
        mig_current=_flag(_text(gpu, "mig_mode/current_mig")),
        mig_pending=_flag(_text(gpu, "mig_mode/pending_mig")),
        mig_devices=migs,
        processes=processes,
        wddm=_clean(_text(gpu, "driver_model/current_dm")) == "WDDM",
    )
