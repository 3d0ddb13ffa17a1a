"""DCGM field names (dcgm-exporter metric names) → DeviceSample fields, with unit conversions.

Units from telemetry.md §2.2 (dcgm-exporter etc/default-counters.csv help texts and DCGM
dcgm_fields.h @ 72fa3fea): clocks MHz, temperatures C, power W, energy mJ, FB in MiB, violation
times ns, utilisation %, DCGM_FI_PROF_* ratios 0..1 and PCIe/NVLink bytes/s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from gpuwarden.catalog import nvml_enums
from gpuwarden.catalog.nvml_enums import FABRIC_SUCCESS, recovery_action_name
from gpuwarden.telemetry.sensors import sensor_celsius
from gpuwarden.telemetry.validate import U32_MAX, U64_MAX
from gpuwarden.units import MIB

# DCGM blank sentinels (telemetry.md §2.5, dcgm_structs.h DCGM_INT32_BLANK/INT64_BLANK/FP64_BLANK
# and their +1..+3 NOT_FOUND/NOT_SUPPORTED/NOT_PERMISSIONED): older exporters published them.
_INT32_BLANK = 0x7FFFFFF0
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
_FP64_BLANK = 140737488355328.0


def is_blank(value: float) -> bool:
    if math.isnan(value):
        return True
    # Compared as floats: the scrape's text went through float(), which rounds INT64 values.
    return any(
        float(blank) <= value <= float(blank + 3)
        for blank in (_INT32_BLANK, _INT64_BLANK, _FP64_BLANK)
    )


def _same(value: float) -> float:
    return value  # inf/NaN stay as they are: telemetry.validate names them and drops them


def whole(value: float) -> int:
    """A count or code read as a float (every exposition value is one)."""
    if not math.isfinite(value):
        raise ValueError("is not a finite number")
    return round(value)


def _int(value: float) -> int:
    return whole(value)


def _mib(value: float) -> int:
    if math.isfinite(value) and not math.isfinite(value * MIB):  # 1e308 MiB
        raise ValueError("MiB is more bytes than a float holds")
    return whole(value * MIB)


def _millijoules(value: float) -> float:
    return value / 1000.0


def _flag(value: float) -> bool:
    if not math.isfinite(value):
        raise ValueError("is not a yes/no value")
    return value != 0


def _xid(value: float) -> int | None:
    code = whole(value)
    return None if code == 0 else code  # 0 = no Xid seen since the exporter started


def _pstate(value: float) -> str:
    return f"P{whole(value)}"  # telemetry.validate keeps P0..P15


def _recovery_action(value: float) -> str:
    code = whole(value)
    if not 0 <= code <= U32_MAX:
        raise ValueError("is not an NVML recovery action (an unsigned enum)")
    return recovery_action_name(code)  # the NVML enum (telemetry.md §2.3)


def clock_event_mask(value: float) -> int:
    """DCGM_FI_DEV_CLOCKS_EVENT_REASONS: NVML's unsigned 64-bit clock-event bitmask."""
    mask = whole(value)
    if not 0 <= mask <= U64_MAX:
        raise ValueError("is not a clock-event bitmask (an unsigned 64-bit value)")
    return mask


Convert = Callable[[float], object]

FIELDS: dict[str, tuple[str, Convert]] = {
    "DCGM_FI_DEV_SM_CLOCK": ("clock_sm_mhz", _same),
    "DCGM_FI_DEV_MEM_CLOCK": ("clock_memory_mhz", _same),
    "DCGM_FI_DEV_VIDEO_CLOCK": ("clock_video_mhz", _same),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("clock_sm_max_mhz", _same),
    "DCGM_FI_DEV_MAX_MEM_CLOCK": ("clock_memory_max_mhz", _same),
    "DCGM_FI_DEV_MEMORY_TEMP": ("temperature_memory_celsius", sensor_celsius),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_gpu_celsius", sensor_celsius),
    "DCGM_FI_DEV_SLOWDOWN_TEMP": ("temperature_slowdown_celsius", _same),
    "DCGM_FI_DEV_SHUTDOWN_TEMP": ("temperature_shutdown_celsius", _same),
    # Field 153 "gpu_temp_tlimit": nvmlDeviceGetMarginTemperature, °C below the max operating
    # temperature (negative = over it), not a temperature.
    "DCGM_FI_DEV_GPU_TEMP_LIMIT": ("temperature_margin_celsius", _same),
    "DCGM_FI_DEV_GPU_MAX_OP_TEMP": ("temperature_gpu_max_celsius", _same),  # field 152
    "DCGM_FI_DEV_MEM_MAX_OP_TEMP": ("temperature_memory_max_celsius", _same),  # field 151
    "DCGM_FI_DEV_POWER_USAGE": ("power_draw_watts", _same),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_watts", _same),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_enforced_limit_watts", _same),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_consumed_joules", _millijoules),
    "DCGM_FI_DEV_PSTATE": ("pstate", _pstate),
    "DCGM_FI_DEV_FAN_SPEED": ("fan_speed_percent", _same),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_utilization_percent", _same),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("memory_utilization_percent", _same),
    "DCGM_FI_DEV_ENC_UTIL": ("encoder_utilization_percent", _same),
    "DCGM_FI_DEV_DEC_UTIL": ("decoder_utilization_percent", _same),
    "DCGM_FI_DEV_XID_ERRORS": ("xid_last", _xid),
    # Violation times are nanoseconds, as NVML returns them (nvmlDeviceGetViolationStatus:
    # nvmlViolationTime_t.violationTime "in Nanoseconds"): newer dcgm_fields.h corrects its
    # older "Power Violation time in usec" to "in ns", as go-dcgm's field constants have it;
    # dcgm-exporter's help text "(in us)" copies the older comment (it scales no value).
    "DCGM_FI_DEV_POWER_VIOLATION": ("power_violation_ns_total", _int),
    "DCGM_FI_DEV_THERMAL_VIOLATION": ("thermal_violation_ns_total", _int),
    "DCGM_FI_DEV_FB_TOTAL": ("memory_total_bytes", _mib),
    "DCGM_FI_DEV_FB_FREE": ("memory_free_bytes", _mib),
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", _mib),
    "DCGM_FI_DEV_FB_RESERVED": ("memory_reserved_bytes", _mib),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_errors_corrected_volatile", _int),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_errors_uncorrected_volatile", _int),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": ("ecc_errors_corrected_aggregate", _int),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("ecc_errors_uncorrected_aggregate", _int),
    "DCGM_FI_DEV_RETIRED_SBE": ("retired_pages_single_bit", _int),
    "DCGM_FI_DEV_RETIRED_DBE": ("retired_pages_double_bit", _int),
    "DCGM_FI_DEV_RETIRED_PENDING": ("retired_pages_pending", _flag),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("remapped_rows_correctable", _int),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("remapped_rows_uncorrectable", _int),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ("remapped_rows_pending", _flag),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("remapped_rows_failure", _flag),
    # field 389: banks with no spare row left (nvmlDeviceGetRowRemapperHistogram "none")
    "DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_NONE": ("remapped_rows_banks_exhausted", _int),
    # field 346: nvmlEccSramErrorStatus_v1_t.bThresholdExceeded
    "DCGM_FI_DEV_THRESHOLD_SRM": ("sram_threshold_exceeded", _flag),
    "DCGM_FI_DEV_GPU_RECOVERY_ACTION": ("recovery_action", _recovery_action),  # field 1523
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("pcie_replay_total", _int),
    "DCGM_FI_DEV_PCIE_LINK_GEN": ("pcie_link_gen_current", _int),
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": ("pcie_link_gen_max", _int),
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": ("pcie_link_width_current", _int),
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": ("pcie_link_width_max", _int),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_bytes_per_second", _same),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_bytes_per_second", _same),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("nvlink_tx_bytes_per_second", _same),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("nvlink_rx_bytes_per_second", _same),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("graphics_engine_active_ratio", _same),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_ratio", _same),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy_ratio", _same),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active_ratio", _same),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active_ratio", _same),
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": ("fp64_active_ratio", _same),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": ("fp32_active_ratio", _same),
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": ("fp16_active_ratio", _same),
}
# dcgm-exporter 1.x (gpu-monitoring-tools exporters/prometheus-dcgm/dcgm-exporter/dcgm-exporter, a
# `dcgmi dmon` + awk script) named each series "dcgm_<short name>" after the DCGM field it read
# (field ids in the script's comments); pages with these names are still pasted (dcgm-exporter
# issue 188). Short name → the DCGM field name of the same field, read as that field.
LEGACY_NAMES: dict[str, str] = {
    "dcgm_sm_clock": "DCGM_FI_DEV_SM_CLOCK",  # 100
    "dcgm_memory_clock": "DCGM_FI_DEV_MEM_CLOCK",  # 101
    "dcgm_memory_temp": "DCGM_FI_DEV_MEMORY_TEMP",  # 140
    "dcgm_gpu_temp": "DCGM_FI_DEV_GPU_TEMP",  # 150
    "dcgm_power_usage": "DCGM_FI_DEV_POWER_USAGE",  # 155
    "dcgm_total_energy_consumption": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",  # 156
    "dcgm_pcie_tx_throughput": "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",  # 200
    "dcgm_pcie_rx_throughput": "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",  # 201
    "dcgm_pcie_replay_counter": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",  # 202
    "dcgm_gpu_utilization": "DCGM_FI_DEV_GPU_UTIL",  # 203
    "dcgm_mem_copy_utilization": "DCGM_FI_DEV_MEM_COPY_UTIL",  # 204
    "dcgm_enc_utilization": "DCGM_FI_DEV_ENC_UTIL",  # 206
    "dcgm_dec_utilization": "DCGM_FI_DEV_DEC_UTIL",  # 207
    "dcgm_xid_errors": "DCGM_FI_DEV_XID_ERRORS",  # 230
    "dcgm_power_violation": "DCGM_FI_DEV_POWER_VIOLATION",  # 240
    "dcgm_thermal_violation": "DCGM_FI_DEV_THERMAL_VIOLATION",  # 241
    "dcgm_sync_boost_violation": "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",  # 242
    "dcgm_board_limit_violation": "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",  # 243
    "dcgm_low_util_violation": "DCGM_FI_DEV_LOW_UTIL_VIOLATION",  # 244
    "dcgm_reliability_violation": "DCGM_FI_DEV_RELIABILITY_VIOLATION",  # 245
    "dcgm_fb_total": "DCGM_FI_DEV_FB_TOTAL",  # 250
    "dcgm_fb_free": "DCGM_FI_DEV_FB_FREE",  # 251
    "dcgm_fb_used": "DCGM_FI_DEV_FB_USED",  # 252
    "dcgm_ecc_sbe_volatile_total": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",  # 310
    "dcgm_ecc_dbe_volatile_total": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",  # 311
    "dcgm_ecc_sbe_aggregate_total": "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",  # 312
    "dcgm_ecc_dbe_aggregate_total": "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",  # 313
    "dcgm_retired_pages_sbe": "DCGM_FI_DEV_RETIRED_SBE",  # 390
    "dcgm_retired_pages_dbe": "DCGM_FI_DEV_RETIRED_DBE",  # 391
    "dcgm_retired_pages_pending": "DCGM_FI_DEV_RETIRED_PENDING",  # 392
    "dcgm_nvlink_flit_crc_error_count_total": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_data_crc_error_count_total": "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_replay_error_count_total": "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_recovery_error_count_total": "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    "dcgm_nvlink_bandwidth_total": "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",  # 449
}
# The 1.x script's per-GPU info series: its gpu_type label is the GPU's name (field 50).
LEGACY_INFO = "dcgm_gpu_info"

# DCGM 4.6 renamed its fields by the DCGM Field Naming Standard and kept the old names as
# deprecated aliases of the same field ids (dcgm_fields.h "#if DCGM_DEPRECATED"; the Python
# bindings' _DEPRECATED_ALIASES list each old name → new name with its id; go-dcgm resolves both).
# dcgm-exporter names a series, and a label-type field's label, as its counters file does, so a
# counters file written with the new names serves them. New name → the name this package reads
# the field under (FIELDS, the string fields, the device labels, the extras), for the fields it
# knows; same id, so same unit and meaning.
DCGM4_RENAMED: dict[str, str] = {
    "DCGM_FI_SYSTEM_DRIVER_VERSION": "DCGM_FI_DRIVER_VERSION",  # 1
    "DCGM_FI_SYSTEM_NVML_VERSION": "DCGM_FI_NVML_VERSION",  # 2
    "DCGM_FI_SYSTEM_PROCESS_NAME": "DCGM_FI_PROCESS_NAME",  # 3
    "DCGM_FI_DEV_GPU_NAME": "DCGM_FI_DEV_NAME",  # 50
    "DCGM_FI_DEV_GPU_BRAND": "DCGM_FI_DEV_BRAND",  # 51
    "DCGM_FI_DEV_BOARD_SERIAL": "DCGM_FI_DEV_SERIAL",  # 53
    "DCGM_FI_DEV_GPU_UUID": "DCGM_FI_DEV_UUID",  # 54
    "DCGM_FI_DEV_INFOROM_OEM_VERSION": "DCGM_FI_DEV_OEM_INFOROM_VER",  # 56
    "DCGM_FI_DEV_PCI_BUS_ID": "DCGM_FI_DEV_PCI_BUSID",  # 57
    "DCGM_FI_DEV_INFOROM_ECC_VERSION": "DCGM_FI_DEV_ECC_INFOROM_VER",  # 80
    "DCGM_FI_DEV_INFOROM_POWER_VERSION": "DCGM_FI_DEV_POWER_INFOROM_VER",  # 81
    "DCGM_FI_DEV_INFOROM_IMAGE_VERSION": "DCGM_FI_DEV_INFOROM_IMAGE_VER",  # 82
    "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS": "DCGM_FI_DEV_MEMORY_TEMP",  # 140
    "DCGM_FI_DEV_GPU_TEMP_CELSIUS": "DCGM_FI_DEV_GPU_TEMP",  # 150
    "DCGM_FI_DEV_MEMORY_MAX_OP_TEMP_CELSIUS": "DCGM_FI_DEV_MEM_MAX_OP_TEMP",  # 151
    "DCGM_FI_DEV_GPU_MAX_OP_TEMP_CELSIUS": "DCGM_FI_DEV_GPU_MAX_OP_TEMP",  # 152
    "DCGM_FI_DEV_GPU_TEMP_MARGIN_CELSIUS": "DCGM_FI_DEV_GPU_TEMP_LIMIT",  # 153
    "DCGM_FI_DEV_BOARD_POWER_WATTS": "DCGM_FI_DEV_POWER_USAGE",  # 155
    "DCGM_FI_DEV_BOARD_POWER_RAW_WATTS": "DCGM_FI_DEV_POWER_USAGE_INSTANT",  # 157
    "DCGM_FI_DEV_GPU_TEMP_SLOWDOWN_CELSIUS": "DCGM_FI_DEV_SLOWDOWN_TEMP",  # 158
    "DCGM_FI_DEV_GPU_TEMP_SHUTDOWN_CELSIUS": "DCGM_FI_DEV_SHUTDOWN_TEMP",  # 159
    "DCGM_FI_DEV_BOARD_POWER_LIMIT_REQUESTED_WATTS": "DCGM_FI_DEV_POWER_MGMT_LIMIT",  # 160
    "DCGM_FI_DEV_BOARD_POWER_LIMIT_MIN_WATTS": "DCGM_FI_DEV_POWER_MGMT_LIMIT_MIN",  # 161
    "DCGM_FI_DEV_BOARD_POWER_LIMIT_MAX_WATTS": "DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX",  # 162
    "DCGM_FI_DEV_BOARD_POWER_LIMIT_DEFAULT_WATTS": "DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF",  # 163
    "DCGM_FI_DEV_BOARD_POWER_LIMIT_ENFORCED_WATTS": "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",  # 164
    "DCGM_FI_DEV_FABRIC_MANAGER_ERROR": "DCGM_FI_DEV_FABRIC_MANAGER_ERROR_CODE",  # 171
    "DCGM_FI_DEV_GPU_PSTATE": "DCGM_FI_DEV_PSTATE",  # 190
    "DCGM_FI_DEV_PCIE_REPLAY_TOTAL": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",  # 202
    "DCGM_FI_DEV_GPU_UTIL_RATIO": "DCGM_FI_DEV_GPU_UTIL",  # 203: still an INT64 percent
    "DCGM_FI_DEV_XID_ERROR": "DCGM_FI_DEV_XID_ERRORS",  # 230
    "DCGM_FI_DEV_FB_USED_RATIO": "DCGM_FI_DEV_FB_USED_PERCENT",  # 254
    "DCGM_FI_DEV_ECC_MODE": "DCGM_FI_DEV_ECC_CURRENT",  # 300
    "DCGM_FI_DEV_SRAM_EXCEEDED": "DCGM_FI_DEV_THRESHOLD_SRM",  # 346
    "DCGM_FI_DEV_BANK_REMAP_AVAIL_MAX": "DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_MAX",  # 385
    "DCGM_FI_DEV_BANK_REMAP_AVAIL_HIGH": "DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_HIGH",  # 386
    "DCGM_FI_DEV_BANK_REMAP_AVAIL_PARTIAL": "DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_PARTIAL",  # 387
    "DCGM_FI_DEV_BANK_REMAP_AVAIL_LOW": "DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_LOW",  # 388
    "DCGM_FI_DEV_BANK_REMAP_AVAIL_NONE": "DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_NONE",  # 389
    "DCGM_FI_DEV_PAGE_RETIRED_SBE_TOTAL": "DCGM_FI_DEV_RETIRED_SBE",  # 390
    "DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL": "DCGM_FI_DEV_RETIRED_DBE",  # 391
    "DCGM_FI_DEV_PAGE_RETIRED_PENDING": "DCGM_FI_DEV_RETIRED_PENDING",  # 392
    "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL": "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",  # 393
    "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL": "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",  # 394
    "DCGM_FI_DEV_ROW_REMAP_FAILED": "DCGM_FI_DEV_ROW_REMAP_FAILURE",  # 395
    # 409
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    # 419
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL": "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    # 429
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL": "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    # 439
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL": "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL": "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",  # 449
    "DCGM_FI_DEV_GPU_VIRTUAL_MODE": "DCGM_FI_DEV_VIRTUAL_MODE",  # 500
    "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",  # 1001
    "DCGM_FI_PROF_SM_UTIL_RATIO": "DCGM_FI_PROF_SM_ACTIVE",  # 1002
    "DCGM_FI_PROF_SM_OCCUPANCY_RATIO": "DCGM_FI_PROF_SM_OCCUPANCY",  # 1003
    "DCGM_FI_PROF_TENSOR_UTIL_RATIO": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",  # 1004
    "DCGM_FI_PROF_DRAM_UTIL_RATIO": "DCGM_FI_PROF_DRAM_ACTIVE",  # 1005
    "DCGM_FI_PROF_FP64_UTIL_RATIO": "DCGM_FI_PROF_PIPE_FP64_ACTIVE",  # 1006
    "DCGM_FI_PROF_FP32_UTIL_RATIO": "DCGM_FI_PROF_PIPE_FP32_ACTIVE",  # 1007
    "DCGM_FI_PROF_FP16_UTIL_RATIO": "DCGM_FI_PROF_PIPE_FP16_ACTIVE",  # 1008
    "DCGM_FI_PROF_IMMA_UTIL_RATIO": "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE",  # 1013
    "DCGM_FI_PROF_HMMA_UTIL_RATIO": "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE",  # 1014
    "DCGM_FI_PROF_DFMA_UTIL_RATIO": "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE",  # 1015
    "DCGM_FI_PROF_INT_UTIL_RATIO": "DCGM_FI_PROF_PIPE_INT_ACTIVE",  # 1016
}


def pre_dcgm46_name(name: str) -> str:
    """The name this package reads a field under: a DCGM 4.6 field name's older alias."""
    return DCGM4_RENAMED.get(name, name)


# The clock-event bitmask, under its old and new DCGM names (telemetry.md §2.3, field id 112).
CLOCK_EVENT_FIELDS = frozenset(
    {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}
)


# DCGM 4's per-reason clock-event times (dcgm_fields.h fields 1420-1424, ns, counters since the
# driver loaded): SW_POWER_CAP_NS is what field 240 counts; the SW and HW thermal slowdown times
# together are the thermal time nvidia-smi's readers keep (its clocks_event_reasons_counters).
# Fields 240/241 are read first where a page has both.
POWER_CAP_TIME_FIELD = "DCGM_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP_NS"
THERMAL_TIME_FIELDS = (
    "DCGM_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN_NS",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN_NS",
)


def clock_event_times(power_cap: float | None, thermal: Sequence[float | None]) -> dict[str, int]:
    """power_violation_ns_total / thermal_violation_ns_total from the DCGM 4 per-reason times
    (the thermal one the sum of those present); a blank or non-finite value gives none."""
    times: dict[str, int] = {}
    if power_cap is not None and math.isfinite(power_cap):
        times["power_violation_ns_total"] = whole(power_cap)
    present = [whole(v) for v in thermal if v is not None and math.isfinite(v)]
    if present:
        times["thermal_violation_ns_total"] = sum(present)
    return times


# Fabric Manager registration (fields 170/171): DCGM's dcgmFabricManagerStatus_t, and the DCGM
# return code of a registration that completed with an error (DCGM 4.6 names it ..._ERROR).
FABRIC_STATUS_FIELD = "DCGM_FI_DEV_FABRIC_MANAGER_STATUS"
FABRIC_ERROR_FIELD = "DCGM_FI_DEV_FABRIC_MANAGER_ERROR_CODE"
# dcgmFabricManagerStatus_t → (fabric_state, fabric_status); DCGM derives it from NVML's fabric
# state (CacheManager: COMPLETED + NVML_SUCCESS → Success, COMPLETED + an error → Failure).
# Unrecognized (5) and NvmlTooOld (6) say the versions do not match, not what the state is.
# export.fields publishes the same table the other way.
FABRIC_MANAGER_STATES: dict[int, tuple[str, str | None]] = {
    0: ("not-supported", None),
    1: ("not-started", None),
    2: ("in-progress", None),
    3: ("completed", FABRIC_SUCCESS),
    4: ("completed", "error"),
}


# NVLink fabric health (DCGM 4.x fields 174/175, NVML's healthMask and healthSummary: the same
# codes, catalog.nvml_enums decodes both), keyed as _Device.fabric keeps them
FABRIC_HEALTH_FIELDS = {
    "DCGM_FI_DEV_FABRIC_HEALTH_MASK": "health_mask",
    "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY": "health_summary",
}
_MASK_BITS = 32  # nvmlGpuFabricInfo_v2_t.healthMask is an unsigned int


def fabric_health_fields(
    summary: float | None, mask: float | None
) -> dict[str, str | tuple[str, ...] | None]:
    """fabric_health_summary / _issues from the two fields; {} when neither holds a code."""
    code = _code(summary, 1 << 8)
    bits = _code(mask, 1 << _MASK_BITS)
    if code is None and bits is None:
        return {}
    return nvml_enums.fabric_health(code, bits)


def _code(value: float | None, limit: int) -> int | None:
    """A field's integer code; None when absent, not finite, negative or past ``limit`` (DCGM's
    blank values, a corrupted page)."""
    if value is None or not math.isfinite(value) or not 0 <= value < limit:
        return None
    return int(value)


def fabric_fields(status: float | None, error: float | None) -> dict[str, str | None]:
    """fabric_state / fabric_status from DCGM_FI_DEV_FABRIC_MANAGER_STATUS and _ERROR_CODE; {}
    when the status is absent or says nothing about the fabric."""
    if status is None or not math.isfinite(status) or round(status) not in FABRIC_MANAGER_STATES:
        return {}
    state, text = FABRIC_MANAGER_STATES[round(status)]
    if text == "error" and error is not None and math.isfinite(error):
        text = f"error (DCGM return code {round(error)})"
    return {"fabric_state": state, "fabric_status": text}


def extra_name(metric: str) -> str:
    """DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL → "dcgm_dev_nvlink_bandwidth_total"."""
    return "dcgm_" + metric.removeprefix("DCGM_FI_").removeprefix("DCGM_").lower()


def cuda_version(label: str | None) -> str | None:
    """DCGM_FI_CUDA_DRIVER_VERSION is CUDA's integer form: 12010 → "12.1" (cudaDriverGetVersion)."""
    if label is None or not label.isdecimal():
        return label or None
    number = int(label)
    return f"{number // 1000}.{(number % 1000) // 10}"


# vGPU guest licensing. Field 526 (dcgm_fields.h): "License status of the vGPU: 0 = vgpu is not
# licensed, 1 = vgpu is licensed" -- a yes/no, not NVML's nvmlGridLicenseState_t, so an unlicensed
# guest reads "unlicensed" (never the restricted / unrestricted detail). dcgm-exporter publishes
# 0 for bare-metal GPUs too (scrapes of T4, L4, L40S, RTX 4000 Ada hosts), so 0 says "unlicensed"
# only where field 500 says the GPU is a vGPU guest (DCGM_GPU_VIRTUALIZATION_MODE_VGPU, = NVML's
# value); without it a 0 decides nothing. 1 is a licensed guest wherever it is published.
VGPU_LICENSE_FIELD = "DCGM_FI_DEV_VGPU_LICENSE_STATUS"
VIRTUAL_MODE_FIELD = "DCGM_FI_DEV_VIRTUAL_MODE"
_LICENSED, _NOT_LICENSED = 1, 0  # field 526's yes/no


def vgpu_license_status(license_value: float | None, virtual_mode: float | None) -> str | None:
    """DeviceSample.vgpu_license_status from fields 526 and 500 of one GPU ("licensed",
    "unlicensed", or None: absent, blank, not a yes/no, or a 0 that may be bare metal)."""
    if license_value is None or is_blank(license_value):  # NaN too
        return None
    if license_value == _LICENSED:
        return nvml_enums.VGPU_LICENSED
    guest = virtual_mode == nvml_enums.VIRTUALIZATION_MODE_VGPU
    return nvml_enums.VGPU_UNLICENSED if license_value == _NOT_LICENSED and guest else None
