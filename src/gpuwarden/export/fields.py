"""DeviceSample fields → dcgm-exporter metrics: name, DCGM field id, Prometheus type, help, unit.

The other direction of ``telemetry.dcgm.fields.FIELDS`` (DCGM metric → DeviceSample attribute
and the conversion from DCGM's unit), and one mapping with it: a row here takes its attribute from
FIELDS and adds what publishing needs (field id, type, help, the conversion to DCGM's unit);
``tests/export/test_fields.py`` checks that every row reads back through FIELDS to the value it
started from.

Names are the ones dcgm-exporter publishes (the DCGM field's pre-4.x macro name, which its
counter CSVs still use; telemetry.md §2.1). Types and help texts of the rows in dcgm-exporter's
``etc/default-counters.csv`` / ``dcp-metrics-included.csv`` are verbatim from the CSV
(telemetry.md §2.2); the others use DCGM's own description (``dcgmlib/dcgm_fields.h``). Units are
DCGM's: MiB, W, mJ, MHz, °C, %, ns, ratios 0..1 for the profiling pillars, bytes/s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from gpuwarden.catalog.nvml_enums import (
    FABRIC_SUCCESS,
    RECOVERY_ACTIONS,
    VGPU_LICENSED,
    VGPU_UNLICENSED,
    fabric_health_mask,
    fabric_health_summary_code,
)
from gpuwarden.telemetry.clock_events import CLOCK_EVENT_BITS
from gpuwarden.telemetry.dcgm.fields import (
    FABRIC_MANAGER_STATES,
    FABRIC_STATUS_FIELD,
    FIELDS,
    VGPU_LICENSE_FIELD,
)
from gpuwarden.types.telemetry import MigDeviceSample, NvLinkSample
from gpuwarden.units import MIB


class Kind(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"
    UNTYPED = "untyped"  # a field passed through from a scrape whose type this table does not know


ToDcgm = Callable[[Any], float | None]


def _number(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _mib(value: Any) -> float | None:
    # DCGM's FB fields are whole MiB: the NVML byte count divided by 2**20, truncated.
    return float(int(value) // MIB) if value >= 0 else None


def _millijoules(value: Any) -> float | None:
    return float(round(value * 1000)) if math.isfinite(value) and value >= 0 else None


def _flag(value: Any) -> float:
    return 1.0 if value else 0.0


_PSTATE = re.compile(r"^P(\d{1,2})$")


def _pstate(value: Any) -> float | None:
    match = _PSTATE.match(str(value))
    return float(match.group(1)) if match else None


_RECOVERY_CODES = {name: code for code, name in RECOVERY_ACTIONS.items()}


def _recovery_action(value: Any) -> float | None:
    """DeviceSample's spelling → the NVML enum DCGM exports (``unknown-<n>`` keeps its n)."""
    text = str(value)
    if text in _RECOVERY_CODES:
        return float(_RECOVERY_CODES[text])
    unknown = text.removeprefix("unknown-")
    return float(unknown) if unknown != text and unknown.isdecimal() else None


_CLOCK_EVENT_MASK = {name: bit for bit, name in CLOCK_EVENT_BITS}


def clock_event_mask(reasons: Iterable[str]) -> int:
    """The NVML/DCGM bitmask of clock-event reason names (unknown names have no bit)."""
    return sum(_CLOCK_EVENT_MASK.get(name, 0) for name in set(reasons))


def _clock_events(value: Any) -> float:
    return float(clock_event_mask(value))


def _link_total(counter: str) -> ToDcgm:
    """The sum of one NVLink counter over the links that report it (DCGM's ``_TOTAL`` fields)."""

    def total(links: tuple[NvLinkSample, ...]) -> float | None:
        values = [getattr(link, counter) for link in links]
        known = [v for v in values if v is not None]
        return float(sum(known)) if known else None

    return total


@dataclass(frozen=True, slots=True)
class DcgmField:
    """One dcgm-exporter metric and the DeviceSample field it is read from."""

    name: str  # the metric name dcgm-exporter publishes
    field_id: int  # DCGM field id (dcgm_fields.h)
    kind: Kind
    help: str
    attr: str  # DeviceSample attribute (dotted for an attribute of an attribute)
    to_dcgm: ToDcgm = _number
    # a DeviceSample.extra key read first when present (the NVML backend keeps Hopper's GPM
    # PCIe rates there, which is what DCGM reports on Hopper; PcieThroughput is a 20 ms sample)
    prefer_extra: str | None = None

    def value(self, source: object) -> float | None:
        """The value in DCGM's unit; None when the source does not report the field."""
        extra = getattr(source, "extra", None)
        if self.prefer_extra is not None and isinstance(extra, dict):
            preferred = extra.get(self.prefer_extra)
            if preferred is not None and math.isfinite(preferred):
                return float(preferred)
        raw: Any = source
        for part in self.attr.split("."):
            raw = getattr(raw, part, None)
            if raw is None:
                return None
        converted = self.to_dcgm(raw)
        return converted if converted is None or math.isfinite(converted) else None


def _field(
    name: str,
    field_id: int,
    kind: Kind,
    help_text: str,
    to_dcgm: ToDcgm = _number,
    *,
    attr: str | None = None,
    prefer_extra: str | None = None,
) -> DcgmField:
    """A row whose attribute is the one the dcgm backend reads the field into (``FIELDS``), so
    the two directions cannot name different attributes; ``attr`` only for the fields the
    backend reads elsewhere (the clock-event bitmask) or not at all (sums over NVLinks)."""
    attribute = attr if attr is not None else FIELDS[name][0]
    return DcgmField(name, field_id, kind, help_text, attribute, to_dcgm, prefer_extra)


G, C = Kind.GAUGE, Kind.COUNTER

# fmt: off
DCGM_FIELDS: tuple[DcgmField, ...] = (
    # dcgm-exporter's default set (help texts verbatim from the CSV)
    _field("DCGM_FI_DEV_SM_CLOCK", 100, G, "SM clock frequency (in MHz)."),
    _field("DCGM_FI_DEV_MEM_CLOCK", 101, G, "Memory clock frequency (in MHz)."),
    _field("DCGM_FI_DEV_MEMORY_TEMP", 140, G, "Memory temperature (in C)."),
    _field("DCGM_FI_DEV_GPU_TEMP", 150, G, "GPU temperature (in C)."),
    _field("DCGM_FI_DEV_POWER_USAGE", 155, G, "Power draw (in W)."),
    _field("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 156, C,
           "Total energy consumption since boot (in mJ).", _millijoules),
    _field("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 202, C, "Total number of PCIe retries."),
    _field("DCGM_FI_DEV_GPU_UTIL", 203, G, "GPU utilization (in %)."),
    _field("DCGM_FI_DEV_MEM_COPY_UTIL", 204, G, "Memory utilization (in %)."),
    _field("DCGM_FI_DEV_ENC_UTIL", 206, G, "Encoder utilization (in %)."),
    _field("DCGM_FI_DEV_DEC_UTIL", 207, G, "Decoder utilization (in %)."),
    _field("DCGM_FI_DEV_FB_FREE", 251, G, "Framebuffer memory free (in MiB).", _mib),
    _field("DCGM_FI_DEV_FB_USED", 252, G, "Framebuffer memory used (in MiB).", _mib),
    _field("DCGM_FI_DEV_FB_RESERVED", 253, G, "Framebuffer memory reserved (in MiB).", _mib),
    _field("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 393, C,
           "Number of remapped rows for uncorrectable errors"),
    _field("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 394, C,
           "Number of remapped rows for correctable errors"),
    _field("DCGM_FI_DEV_ROW_REMAP_FAILURE", 395, G, "Whether remapping of rows has failed", _flag),
    _field("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1001, G,
           "Ratio of time the graphics engine is active."),
    _field("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1004, G,
           "Ratio of cycles the tensor (HMMA) pipe is active."),
    _field("DCGM_FI_PROF_DRAM_ACTIVE", 1005, G,
           "Ratio of cycles the device memory interface is active sending or receiving data."),
    _field("DCGM_FI_PROF_PCIE_TX_BYTES", 1009, G,
           "The rate of data transmitted over the PCIe bus - including both protocol headers "
           "and data payloads - in bytes per second.",
           prefer_extra="gpm_pcie_tx_bytes_per_second"),
    _field("DCGM_FI_PROF_PCIE_RX_BYTES", 1010, G,
           "The rate of data received over the PCIe bus - including both protocol headers "
           "and data payloads - in bytes per second.",
           prefer_extra="gpm_pcie_rx_bytes_per_second"),
    # in the CSVs but commented out: gpuwarden exports them by default (telemetry.md §1 gap 5)
    _field("DCGM_FI_DEV_POWER_VIOLATION", 240, C,
           "Throttling duration due to power constraints (in ns)."),
    _field("DCGM_FI_DEV_THERMAL_VIOLATION", 241, C,
           "Throttling duration due to thermal constraints (in ns)."),
    _field("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 310, C,
           "Total number of single-bit volatile ECC errors."),
    _field("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 311, C,
           "Total number of double-bit volatile ECC errors."),
    _field("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", 312, C,
           "Total number of single-bit persistent ECC errors."),
    _field("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", 313, C,
           "Total number of double-bit persistent ECC errors."),
    _field("DCGM_FI_DEV_RETIRED_SBE", 390, C,
           "Total number of retired pages due to single-bit errors."),
    _field("DCGM_FI_DEV_RETIRED_DBE", 391, C,
           "Total number of retired pages due to double-bit errors."),
    _field("DCGM_FI_DEV_RETIRED_PENDING", 392, C, "Total number of pages pending retirement.",
           _flag),
    _field("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 429, C,
           "Total number of NVLink retries.", _link_total("replay_errors_total"), attr="nvlinks"),
    _field("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 439, C,
           "Total number of NVLink recovery errors.", _link_total("recovery_errors_total"),
           attr="nvlinks"),
    _field("DCGM_FI_PROF_SM_ACTIVE", 1002, G,
           "The ratio of cycles an SM has at least 1 warp assigned."),
    _field("DCGM_FI_PROF_SM_OCCUPANCY", 1003, G,
           "The ratio of number of warps resident on an SM."),
    _field("DCGM_FI_PROF_PIPE_FP64_ACTIVE", 1006, G, "Ratio of cycles the fp64 pipes are active."),
    _field("DCGM_FI_PROF_PIPE_FP32_ACTIVE", 1007, G, "Ratio of cycles the fp32 pipes are active."),
    _field("DCGM_FI_PROF_PIPE_FP16_ACTIVE", 1008, G, "Ratio of cycles the fp16 pipes are active."),
    # DCGM fields outside the CSVs that the health verdicts read (telemetry.md §2.3); help texts
    # from dcgm_fields.h
    _field("DCGM_FI_PROF_NVLINK_TX_BYTES", 1011, G,
           "The rate of data transmitted over NVLink, in bytes per second."),
    _field("DCGM_FI_PROF_NVLINK_RX_BYTES", 1012, G,
           "The rate of data received over NVLink, in bytes per second."),
    _field("DCGM_FI_DEV_VIDEO_CLOCK", 102, G,
           "Video encoder/decoder clock for the device (in MHz)."),
    _field("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 112, G,
           "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)", _clock_events,
           attr="clock_event_reasons"),
    _field("DCGM_FI_DEV_MAX_SM_CLOCK", 113, G,
           "Maximum supported SM clock for the device (in MHz)."),
    _field("DCGM_FI_DEV_MAX_MEM_CLOCK", 114, G,
           "Maximum supported Memory clock for the device (in MHz)."),
    _field("DCGM_FI_DEV_MEM_MAX_OP_TEMP", 151, G,
           "Maximum operating temperature for the memory of this GPU (in C)."),
    _field("DCGM_FI_DEV_GPU_MAX_OP_TEMP", 152, G,
           "Maximum operating temperature for this GPU (in C)."),
    _field("DCGM_FI_DEV_GPU_TEMP_LIMIT", 153, G,
           "Thermal margin temperature (distance to nearest slowdown threshold) for this GPU "
           "(in C)."),
    _field("DCGM_FI_DEV_SLOWDOWN_TEMP", 158, G, "Slowdown temperature for the device (in C)."),
    _field("DCGM_FI_DEV_SHUTDOWN_TEMP", 159, G, "Shutdown temperature for the device (in C)."),
    _field("DCGM_FI_DEV_POWER_MGMT_LIMIT", 160, G, "Current Power limit for the device (in W)."),
    _field("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 164, G,
           "Effective power limit that the driver enforces after taking into account all "
           "limiters (in W)."),
    _field("DCGM_FI_DEV_PSTATE", 190, G, "Performance state (P-State) 0-15. 0=highest", _pstate),
    _field("DCGM_FI_DEV_FAN_SPEED", 191, G, "Fan speed for the device in percent 0-100"),
    _field("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", 235, G, "PCIe Max Link Generation"),
    _field("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", 236, G, "PCIe Max Link Width"),
    _field("DCGM_FI_DEV_PCIE_LINK_GEN", 237, G, "PCIe Current Link Generation"),
    _field("DCGM_FI_DEV_PCIE_LINK_WIDTH", 238, G, "PCIe Current Link Width"),
    _field("DCGM_FI_DEV_THRESHOLD_SRM", 346, G, "SRAM Threshold Exceeded boolean (1=true)", _flag),
    _field("DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_NONE", 389, G,
           "Historical marker of memory banks with no available spare memory rows"),
    _field("DCGM_FI_DEV_ROW_REMAP_PENDING", 396, G, "Whether remapping of rows is pending", _flag),
    _field("DCGM_FI_DEV_GPU_RECOVERY_ACTION", 1523, G,
           "Recovery action the driver asks for (nvmlDeviceGpuRecoveryAction_t: 0 none, "
           "1 reset, 2 reboot, 3 drain P2P, 4 drain and reset)", _recovery_action),
)
# fmt: on

# DCGM_FI_DEV_XID_ERRORS (field 230, gauge): the last Xid, 0 = none since the exporter started.
XID_LAST = _field("DCGM_FI_DEV_XID_ERRORS", 230, G, "Value of the last XID error encountered.")
# Backends that watch Xids, so that "no Xid seen" is a reading (0) and not an unknown: NVML
# drains its XidCriticalError event set on every read, the simulator knows its faults.
# nvidia-smi output and replays cannot tell; nor can the dcgm backend, which reads a scrape's
# DCGM_FI_DEV_XID_ERRORS 0 as None and so cannot tell it from a scrape without the field.
XID_WATCHING_BACKENDS = frozenset({"nvml", "sim"})

# DCGM_FI_DEV_FB_TOTAL (field 250) from DeviceInfo.memory_total_bytes. The dcgm backend fills that
# with used + free (+ reserved) where a scrape has no FB_TOTAL (telemetry.dcgm.scrape), which can
# be a MiB short of what DCGM reports: from a dcgm reading that has used and free, the total may be
# that sum, so it is not published as DCGM's (``fb_total_is_read``).
FB_TOTAL = DcgmField(
    "DCGM_FI_DEV_FB_TOTAL",
    250,
    G,
    "Total Frame Buffer of the GPU in MB",
    "info.memory_total_bytes",
    _mib,
)


def fb_total_is_read(backend: str, used: int | None, free: int | None) -> bool:
    """Whether DeviceInfo.memory_total_bytes is a reading, not the dcgm backend's sum."""
    return backend != "dcgm" or used is None or free is None


# DCGM_FI_DEV_FABRIC_MANAGER_STATUS (field 170): dcgmFabricManagerStatus_t from DeviceSample's
# fabric_state / fabric_status (the inverse of telemetry.dcgm.fields.fabric_fields).
FABRIC_MANAGER_STATUS = DcgmField(
    FABRIC_STATUS_FIELD,
    170,
    G,
    "The status of the fabric manager - a value from dcgmFabricManagerStatus_t.",
    "fabric_state",
)
_FABRIC_CODES = {pair: code for code, pair in FABRIC_MANAGER_STATES.items()}
_FABRIC_FAILED = "error"  # FABRIC_MANAGER_STATES' status of a registration that failed


def fabric_manager_status(state: str | None, status: str | None) -> float | None:
    """0 not supported, 1 not started, 2 in progress, 3 success, 4 failure; None if unknown."""
    if state is None or (state == "completed" and status is None):
        return None
    if state != "completed":
        outcome = None  # a registration not completed has no status in DCGM's enum
    else:
        outcome = FABRIC_SUCCESS if status == FABRIC_SUCCESS else _FABRIC_FAILED
    code = _FABRIC_CODES.get((state, outcome))
    return None if code is None else float(code)


# DCGM_FI_DEV_FABRIC_HEALTH_MASK / _SUMMARY (fields 174/175): NVML's healthMask and healthSummary
# from DeviceSample's fabric_health_issues / fabric_health_summary (the inverse of
# telemetry.dcgm.fields.fabric_health_fields).
FABRIC_HEALTH_MASK = DcgmField(
    "DCGM_FI_DEV_FABRIC_HEALTH_MASK",
    174,
    G,
    "GPU Fabric health Status Mask",
    "fabric_health_issues",
    lambda issues: _float_or_none(fabric_health_mask(issues)),
)
FABRIC_HEALTH_SUMMARY = DcgmField(
    "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY",
    175,
    G,
    "GPU Fabric Health Summary",
    "fabric_health_summary",
    lambda name: _float_or_none(fabric_health_summary_code(name)),
)


def _float_or_none(code: int | None) -> float | None:
    return None if code is None else float(code)


def _licensed(state: Any) -> float | None:
    """1 licensed, 0 any unlicensed state (nvidia-smi's restricted / unrestricted detail is no
    part of DCGM's yes/no)."""
    text = str(state)
    if text == VGPU_LICENSED:
        return 1.0
    return 0.0 if text.startswith(VGPU_UNLICENSED) else None


# DCGM_FI_DEV_VGPU_LICENSE_STATUS (field 526, on in the default CSV): a vGPU guest's licence as
# DCGM publishes it, nvmlGridLicensableFeature_t.featureState's yes/no, from DeviceSample's
# vgpu_license_status (the inverse of telemetry.dcgm.fields.vgpu_license_status). A dcgm scrape's
# raw 526 also passes through (``PASSTHROUGH_FIELDS``): the 0 of a bare-metal GPU has no state.
VGPU_LICENSE_STATUS = DcgmField(
    VGPU_LICENSE_FIELD, 526, G, "vGPU License status", "vgpu_license_status", _licensed
)


# A MIG GPU instance (MigDeviceSample, the NVML backend's GPM per instance): the pillars under the
# same names as the GPU's, and its framebuffer. Rows of DCGM_FIELDS whose attribute it has.
MIG_FIELDS: tuple[DcgmField, ...] = tuple(
    f for f in DCGM_FIELDS if f.attr in MigDeviceSample.__dataclass_fields__
)
MIG_FB_FREE = next(f for f in DCGM_FIELDS if f.name == "DCGM_FI_DEV_FB_FREE")


# dcgm-exporter's default ``--devices f`` watches a GPU that has GPU instances only through them
# (DCGM entity group GPU_I; devicemonitoring.monitorAllGPUInstances): every field of such a GPU is
# a series per instance (GPU_I_ID, GPU_I_PROFILE), none of the GPU's own. DCGM answers the
# framebuffer and the profiling fields from the instance itself; every other field on an instance's
# series is the GPU's reading, repeated on each instance (real scrapes: the A800 of
# tests/data/dcgm_public2/08, SM_CLOCK and MEMORY_TEMP alike on GPU_I_ID 3, 5 and 6).
_INSTANCE_SCOPED_PREFIXES = ("DCGM_FI_DEV_FB_", "DCGM_FI_PROF_")


def instance_scoped(name: str) -> bool:
    """Whether DCGM reads this family of a GPU instance from the instance (its memory, its
    profiling), not from its GPU: a GPU's value of it is never an instance's."""
    return name.startswith(_INSTANCE_SCOPED_PREFIXES)


MIG_FB_TOTAL = replace(FB_TOTAL, attr="memory_total_bytes")  # the instance's own (MigDeviceSample)


def mig_free_mib(mig: MigDeviceSample) -> float | None:
    """An instance's free framebuffer: its memory less what is used (no reserved split)."""
    if mig.memory_total_bytes is None or mig.memory_used_bytes is None:
        return None
    return _mib(max(0, mig.memory_total_bytes - mig.memory_used_bytes))


# Fields a dcgm-exporter scrape carried that no DeviceSample attribute holds: the dcgm backend
# keeps them in ``extra`` as ``telemetry.dcgm.fields.extra_name(metric)`` ("dcgm_dev_..."), and
# they go back out under their own name, with the type and help text of dcgm-exporter's counter
# CSVs where those list the field (etc/default-counters.csv and dcp-metrics-included.csv of 4.x,
# verbatim; telemetry.md §2.2); others are published untyped, saying where they came from.
_PASSTHROUGH_PREFIXES = {"dcgm_dev_": "DCGM_FI_DEV_", "dcgm_prof_": "DCGM_FI_PROF_"}


@dataclass(frozen=True, slots=True)
class PassedThrough:
    """The type and help text a passed-through field is published with."""

    kind: Kind
    help: str


# DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL stays a counter: dcgm-exporter 3.x declares it so, as does
# every real scrape we hold, and the dcgm backend does not keep a scrape's TYPE line; its latest
# CSV declares it a gauge (DCGM publishes a rate; dcgm-exporter issue 417).
PASSTHROUGH_FIELDS: dict[str, PassedThrough] = {
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": PassedThrough(
        C, "Total number of NVLink bandwidth counters for all lanes."
    ),
    VGPU_LICENSE_STATUS.name: PassedThrough(VGPU_LICENSE_STATUS.kind, VGPU_LICENSE_STATUS.help),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": PassedThrough(
        C, "Total number of NVLink flow-control CRC errors."
    ),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": PassedThrough(
        C, "Total number of NVLink data CRC errors."
    ),
    "DCGM_FI_DEV_SYNC_BOOST_VIOLATION": PassedThrough(
        C, "Throttling duration due to sync-boost constraints (in ns)."
    ),
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION": PassedThrough(
        C, "Throttling duration due to board limit constraints (in ns)."
    ),
    "DCGM_FI_DEV_LOW_UTIL_VIOLATION": PassedThrough(
        C, "Throttling duration due to low utilization (in ns)."
    ),
    "DCGM_FI_DEV_RELIABILITY_VIOLATION": PassedThrough(
        C, "Throttling duration due to reliability constraints (in ns)."
    ),
}
PASSTHROUGH_KINDS = {name: row.kind for name, row in PASSTHROUGH_FIELDS.items()}


def passed_through(name: str) -> PassedThrough:
    """How a passed-through field is published: its CSV row, else untyped."""
    known = PASSTHROUGH_FIELDS.get(name)
    if known is not None:
        return known
    return PassedThrough(Kind.UNTYPED, f"{name} (passed through from the dcgm-exporter scrape)")


_EXPORTED = frozenset(f.name for f in DCGM_FIELDS) | {
    XID_LAST.name,
    FABRIC_MANAGER_STATUS.name,
    FB_TOTAL.name,
}


def passthrough_name(extra_key: str) -> str | None:
    """``dcgm_dev_nvlink_bandwidth_total`` → ``DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL``; None for
    keys that are not a passed-through DCGM field, or one this table already publishes."""
    for prefix, dcgm in _PASSTHROUGH_PREFIXES.items():
        if extra_key.startswith(prefix):
            name = dcgm + extra_key.removeprefix(prefix).upper()
            return None if name in _EXPORTED else name
    return None
