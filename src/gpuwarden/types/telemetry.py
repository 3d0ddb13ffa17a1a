"""One reading of one GPU, and of all of them at once.

Units are in field names. ``None`` means the device (or the backend that read it) does not report
the field; it is never a sentinel number. Counters (``*_total``, energy, violation times) are as
the device reports them, since driver load; the collector turns them into rates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum


class DeviceState(StrEnum):
    OK = "ok"
    GPU_LOST = "gpu-lost"  # NVML_ERROR_GPU_IS_LOST / Xid 79: fell off the bus
    ERROR = "error"  # the device answered with an unexpected error; see DeviceSample.error


class FabricHealthIssue(StrEnum):
    """A condition the NVLink fabric health reports as present (NVML nvmlGpuFabricInfo_v2/v3
    ``healthMask``, NVML_GPU_FABRIC_HEALTH_MASK_*; nvidia-smi -q "Fabric / Health"; R550+)."""

    DEGRADED_BANDWIDTH = "degraded-bandwidth"  # _DEGRADED_BW_TRUE; "Bandwidth : Degraded"
    ROUTE_RECOVERY = "route-recovery"  # _ROUTE_RECOVERY_TRUE: route recovery in progress
    ROUTE_UNHEALTHY = "route-unhealthy"  # _ROUTE_UNHEALTHY_TRUE
    ACCESS_TIMEOUT_RECOVERY = "access-timeout-recovery"  # _ACCESS_TIMEOUT_RECOVERY_TRUE
    # _INCORRECT_CONFIGURATION_* (a 4-bit code, 1 = none): which misconfiguration
    INCORRECT_SYSGUID = "incorrect-sysguid"
    INCORRECT_CHASSIS_SN = "incorrect-chassis-sn"
    NO_PARTITION = "no-partition"
    INSUFFICIENT_NVLINKS = "insufficient-nvlinks"
    INCOMPATIBLE_GPU_FW = "incompatible-gpu-fw"
    INVALID_LOCATION = "invalid-location"
    GPU_STATE_INVALID = "gpu-state-invalid"
    INCORRECT_CONFIGURATION = "incorrect-configuration"  # a code or text newer than this list


class EventKind(StrEnum):
    XID = "xid"
    GPU_LOST = "gpu-lost"
    ECC_UNCORRECTED = "ecc-uncorrected"
    ECC_CORRECTED = "ecc-corrected"
    CLOCK_EVENT = "clock-event"
    BACKEND_ERROR = "backend-error"


def real_uuid(uuid: str) -> str | None:
    """``uuid`` when it is a GPU's or MIG instance's UUID; None for a backend's placeholder:
    backends without UUIDs (dmon, a dcgm page without its label) key devices as "index:N" or
    "HOST/index:N", which a finding must not pass off as a UUID remediation could match, nor a
    fleet take for one GPU across nodes."""
    return uuid if uuid.startswith(("GPU-", "MIG-")) else None


_PLACEHOLDER_ON_HOST = re.compile(r"(?P<host>.+)/index:(?P<index>[0-9]+)")


def placeholder_uuid(index: int, host: str | None = None) -> str:
    """What names a GPU whose backend prints no UUID (dmon, a dcgm page without its label): its
    index, on its host where the reading names one ("index:0", "node-a/index:0")."""
    return f"{host}/index:{index}" if host else f"index:{index}"


def placeholder_place(uuid: str) -> tuple[str, str] | None:
    """(host, index) of a placeholder that names its host ("node-a/index:0"); None otherwise."""
    found = _PLACEHOLDER_ON_HOST.fullmatch(uuid)
    return None if found is None else (found["host"], found["index"])


def placeholder_names_host(uuid: str) -> bool:
    """Is ``uuid`` a placeholder that names its host ("node-a/index:0")?"""
    return placeholder_place(uuid) is not None


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """Identity of a device: what does not change while the driver stays loaded.

    nvidia-smi equivalents: index, uuid, name, pci.bus_id, serial, vbios_version,
    driver_version, memory.total.
    """

    index: int
    uuid: str
    name: str
    pci_bus_id: str | None = None
    serial: str | None = None
    vbios_version: str | None = None
    architecture: str | None = None  # "Hopper", "Ampere", ...
    driver_version: str | None = None  # "550.54.15"
    cuda_driver_version: str | None = None  # "12.4", what nvidia-smi prints as CUDA Version
    memory_total_bytes: int | None = None
    # MIG: a MIG device has its parent's UUID, its GI/CI ids and its profile ("1g.10gb").
    mig_parent_uuid: str | None = None
    mig_profile: str | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True, slots=True)
class MigDeviceSample:
    """One MIG device (GPU instance + compute instance) of a MIG-enabled GPU."""

    gpu_instance_id: int
    compute_instance_id: int | None
    profile: str | None  # "1g.10gb", "3g.40gb", ...
    uuid: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    sm_count: int | None = None
    # DCGM profiling pillars of this GPU instance, ratios 0..1 (NVML GPM per MIG instance,
    # nvmlGpmMigSampleGet, on Hopper+; dcgm-exporter's GPU_I_ID series). Appended last: the
    # store keeps MIG devices as positional arrays and reads older, shorter ones as None here.
    graphics_engine_active_ratio: float | None = None  # DCGM_FI_PROF_GR_ENGINE_ACTIVE
    sm_active_ratio: float | None = None  # DCGM_FI_PROF_SM_ACTIVE
    sm_occupancy_ratio: float | None = None  # DCGM_FI_PROF_SM_OCCUPANCY
    tensor_active_ratio: float | None = None  # DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
    dram_active_ratio: float | None = None  # DCGM_FI_PROF_DRAM_ACTIVE
    fp64_active_ratio: float | None = None  # DCGM_FI_PROF_PIPE_FP64_ACTIVE
    fp32_active_ratio: float | None = None  # DCGM_FI_PROF_PIPE_FP32_ACTIVE
    fp16_active_ratio: float | None = None  # DCGM_FI_PROF_PIPE_FP16_ACTIVE


# MigDeviceSample's profiling fields, named as on DeviceSample (one name per pillar everywhere)
MIG_PILLARS = (
    "graphics_engine_active_ratio",
    "sm_active_ratio",
    "sm_occupancy_ratio",
    "tensor_active_ratio",
    "dram_active_ratio",
    "fp64_active_ratio",
    "fp32_active_ratio",
    "fp16_active_ratio",
)


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One process holding a context on a device (host PID: containers see other PIDs)."""

    pid: int
    used_memory_bytes: int | None  # None where NVML/nvidia-smi cannot tell (WDDM, some MIG)
    name: str | None = None
    kind: str | None = None  # "C" compute, "G" graphics, "C+G"
    gpu_instance_id: int | None = None  # MIG only
    compute_instance_id: int | None = None
    sm_utilization_percent: float | None = None
    memory_utilization_percent: float | None = None


@dataclass(frozen=True, slots=True)
class PodSample:
    """A Kubernetes pod the device (or MIG instance) is allocated to: dcgm-exporter's kubelet
    pod-resources mapping, its ``pod``/``namespace``/``container`` labels."""

    pod: str
    namespace: str | None = None
    container: str | None = None


@dataclass(frozen=True, slots=True)
class NvLinkSample:
    """One NVLink of a device."""

    link: int
    active: bool | None
    bandwidth_bytes_per_second: float | None = None  # nominal link speed
    tx_bytes_total: int | None = None
    rx_bytes_total: int | None = None
    crc_errors_total: int | None = None
    replay_errors_total: int | None = None
    recovery_errors_total: int | None = None


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One reading of one device. The comment after a field is its nvidia-smi query name."""

    info: DeviceInfo
    timestamp_s: float  # Unix seconds when this device was read
    state: DeviceState = DeviceState.OK
    error: str | None = None  # what went wrong when state is not OK
    # memory
    memory_used_bytes: int | None = None  # memory.used
    memory_free_bytes: int | None = None  # memory.free
    memory_reserved_bytes: int | None = None  # memory.reserved (NVML memory_v2)
    # utilization (NVML sample period, percent 0-100)
    gpu_utilization_percent: float | None = None  # utilization.gpu
    memory_utilization_percent: float | None = None  # utilization.memory
    encoder_utilization_percent: float | None = None  # utilization.encoder
    decoder_utilization_percent: float | None = None  # utilization.decoder
    # temperatures and thresholds
    temperature_gpu_celsius: float | None = None  # temperature.gpu
    temperature_memory_celsius: float | None = None  # temperature.memory
    temperature_slowdown_celsius: float | None = None  # (XML: gpu_temp_slow_threshold)
    temperature_shutdown_celsius: float | None = None  # (XML: gpu_temp_max_threshold)
    # power and energy
    power_draw_watts: float | None = None  # power.draw
    power_limit_watts: float | None = None  # power.limit
    power_enforced_limit_watts: float | None = None  # enforced.power.limit
    energy_consumed_joules: float | None = None  # total_energy_consumption (counter since load)
    # clocks
    clock_sm_mhz: float | None = None  # clocks.sm
    clock_memory_mhz: float | None = None  # clocks.mem
    clock_graphics_mhz: float | None = None  # clocks.gr
    clock_video_mhz: float | None = None  # clocks.video
    clock_sm_max_mhz: float | None = None  # clocks.max.sm
    clock_memory_max_mhz: float | None = None  # clocks.max.mem
    pstate: str | None = None  # pstate, "P0".."P15"
    fan_speed_percent: float | None = None  # fan.speed
    # clock events (throttle reasons) as names: "sw_power_cap", "hw_slowdown",
    # "sw_thermal_slowdown",
    # "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost", "applications_clocks_setting",
    # "gpu_idle", "display_clock_setting"; () = none active
    clock_event_reasons: tuple[str, ...] | None = None  # clocks_event_reasons.active (decoded)
    power_violation_ns_total: int | None = None  # clocks_event_reasons_counters.sw_power_cap
    thermal_violation_ns_total: int | None = None  # ...sw_thermal_slowdown + hw_thermal
    # ECC and memory health
    ecc_mode_enabled: bool | None = None  # ecc.mode.current
    ecc_errors_corrected_volatile: int | None = None  # ecc.errors.corrected.volatile.total
    ecc_errors_uncorrected_volatile: int | None = None  # ecc.errors.uncorrected.volatile.total
    ecc_errors_corrected_aggregate: int | None = None  # ecc.errors.corrected.aggregate.total
    ecc_errors_uncorrected_aggregate: int | None = None  # ecc.errors.uncorrected.aggregate.total
    retired_pages_single_bit: int | None = None  # retired_pages.sbe
    retired_pages_double_bit: int | None = None  # retired_pages.dbe
    retired_pages_pending: bool | None = None  # retired_pages.pending
    remapped_rows_correctable: int | None = None  # remapped_rows.correctable
    remapped_rows_uncorrectable: int | None = None  # remapped_rows.uncorrectable
    remapped_rows_pending: bool | None = None  # remapped_rows.pending
    remapped_rows_failure: bool | None = None  # remapped_rows.failure
    # PCIe
    pcie_link_gen_current: int | None = None  # pcie.link.gen.gpucurrent
    pcie_link_gen_max: int | None = None  # pcie.link.gen.max
    pcie_link_width_current: int | None = None  # pcie.link.width.current
    pcie_link_width_max: int | None = None  # pcie.link.width.max
    pcie_tx_bytes_per_second: float | None = None  # (XML: pci/tx_util, KB/s → B/s)
    pcie_rx_bytes_per_second: float | None = None  # (XML: pci/rx_util)
    pcie_replay_total: int | None = None  # (XML: pci/replay_counter)
    # NVLink
    nvlinks: tuple[NvLinkSample, ...] | None = None
    nvlink_tx_bytes_per_second: float | None = None  # all links (GPM or counter rate)
    nvlink_rx_bytes_per_second: float | None = None
    # modes
    persistence_mode: bool | None = None  # persistence_mode
    compute_mode: str | None = None  # compute_mode: "Default", "Exclusive_Process", "Prohibited"
    mig_mode: bool | None = None  # mig.mode.current
    mig_mode_pending: bool | None = None  # mig.mode.pending
    mig_devices: tuple[MigDeviceSample, ...] | None = None
    processes: tuple[ProcessSample, ...] | None = None
    # DCGM profiling pillars (DCGM_FI_PROF_*; NVML GPM on Hopper+), ratios 0..1
    graphics_engine_active_ratio: float | None = None  # DCGM_FI_PROF_GR_ENGINE_ACTIVE
    sm_active_ratio: float | None = None  # DCGM_FI_PROF_SM_ACTIVE
    sm_occupancy_ratio: float | None = None  # DCGM_FI_PROF_SM_OCCUPANCY
    tensor_active_ratio: float | None = None  # DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
    dram_active_ratio: float | None = None  # DCGM_FI_PROF_DRAM_ACTIVE
    fp64_active_ratio: float | None = None  # DCGM_FI_PROF_PIPE_FP64_ACTIVE
    fp32_active_ratio: float | None = None  # DCGM_FI_PROF_PIPE_FP32_ACTIVE
    fp16_active_ratio: float | None = None  # DCGM_FI_PROF_PIPE_FP16_ACTIVE
    # rates the collector derives from two readings of a counter (None on the first reading)
    power_average_watts: float | None = None  # from energy_consumed_joules
    power_throttled_ratio: float | None = None  # from power_violation_ns_total
    thermal_throttled_ratio: float | None = None  # from thermal_violation_ns_total
    # last Xid the backend saw on this device (DCGM_FI_DEV_XID_ERRORS semantics), None = none seen
    xid_last: int | None = None
    extra: dict[str, float] = field(default_factory=dict, compare=False)  # backend-specific fields
    pods: tuple[PodSample, ...] | None = None  # Kubernetes pods using it (dcgm-exporter labels)
    # Health readings the verdicts need (appended last: the store keeps samples positionally).
    # Degrees below the GPU's max operating temperature ("GPU T.Limit Temp"; NVML
    # nvmlDeviceGetMarginTemperature): positive = headroom, negative = over the limit.
    temperature_margin_celsius: float | None = None  # temperature.gpu.tlimit
    temperature_gpu_max_celsius: float | None = None  # (XML: gpu_temp_max_gpu_threshold)
    temperature_memory_max_celsius: float | None = None  # (XML: gpu_temp_max_mem_threshold)
    sram_threshold_exceeded: bool | None = None  # (q: "SRAM Threshold Exceeded", Hopper+)
    # banks of the row-remapper histogram with no spare rows left ("None" bucket, Ampere+)
    remapped_rows_banks_exhausted: int | None = None
    # the driver's requested recovery: "none", "reset", "reboot", "drain-p2p", "drain-and-reset",
    # and from NVML 615 "recover-imex-domain", "bus-reset", "system-reboot"; an unknown code is
    # "unknown-<n>" (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; nvidia-smi "GPU Recovery Action";
    # mirrors Xid 154; names in catalog/nvml_enums.py)
    recovery_action: str | None = None
    # NVSwitch fabric registration (nvmlDeviceGetGpuFabricInfo; nvidia-smi "Fabric"):
    # state "not-supported", "not-started", "in-progress", "completed"; status "success" or
    # the NVML error text. None where the backend does not report it.
    fabric_state: str | None = None
    fabric_status: str | None = None
    # NVLink fabric health (R550+ nvmlDeviceGetGpuFabricInfoV healthSummary / healthMask;
    # nvidia-smi "Fabric / Health"): summary "healthy", "unhealthy", "limited-capacity"; issues
    # = the FabricHealthIssue values reported present, () when every condition answered "no".
    # None where the driver reports no health (N/A, summary NOT_SUPPORTED, older drivers).
    fabric_health_summary: str | None = None
    fabric_health_issues: tuple[str, ...] | None = None
    # vGPU guest licensing (nvidia-smi -q "vGPU Software Licensed Product / License Status";
    # XML <vgpu_software_licensed_product><license_status>; NVML's licensable feature state and
    # DCGM field 526 give only licensed / unlicensed), in NVML's nvmlGridLicenseState_t
    # words: "licensed", "unlicensed", "unlicensed-restricted" (the guest is capped now),
    # "unlicensed-unrestricted" (the grace period runs); an expiry date is dropped. None where
    # not reported (N/A: bare metal, pass-through without vGPU software, the hypervisor host).
    vgpu_license_status: str | None = None
    # R575+ repair readings (nvidia-smi -q "ECC Errors" / XML <ecc_errors>: "Unrepairable
    # Memory" <unrepairable_memory>, "Channel Repair Pending" <channel_repair_pending>, "TPC
    # Repair Pending" <tpc_repair_pending>; NVML nvmlDeviceGetUnrepairableMemoryFlag_v1 and
    # nvmlDeviceGetRepairStatus). True = the driver says so; None = N/A or not supported.
    memory_unrepairable: bool | None = None  # memory the GPU can no longer repair in the field
    channel_repair_pending: bool | None = None  # a memory-channel repair waits for a reset
    tpc_repair_pending: bool | None = None  # a TPC (compute cluster) repair waits for a reset


@dataclass(frozen=True, slots=True)
class DeviceEvent:
    """Something that happened on a device between two readings."""

    kind: EventKind
    timestamp_s: float
    uuid: str | None
    index: int | None
    code: int | None = None  # Xid number for XID
    message: str = ""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One reading of every device of one host, from one backend."""

    timestamp_s: float
    host: str
    backend: str  # "nvml", "smi", "dcgm", "replay", "sim"
    simulated: bool
    samples: tuple[DeviceSample, ...]
    events: tuple[DeviceEvent, ...] = ()
    source: str | None = None  # file or URL the reading came from, for replays of captures
