"""State of one fake GPU: the captured values, counters driven by a clock, scripted failures.

Counters integrate over the injectable clock so rates derived from two reads are consistent:
energy grows by power x dt, violation time by dt while the matching clock-event reason is active,
GPM activity integrals by percent x dt. Tests change state mid-run through the setters
(``set_clock_event_reasons``, ``set_power_w``, ``lose``, ``add_xid``...).
"""

from __future__ import annotations

import json
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .capture_model import CapturedGpu, CapturedMig, CapturedProcess

MIB = 1 << 20
SW_POWER_CAP = 0x4
THERMAL_REASONS = 0x20 | 0x40  # sw + hw thermal slowdown

# nvmlDeviceArchitecture_t values (pynvml NVML_DEVICE_ARCH_*), keyed by nvidia-smi's
# "Product Architecture" text.
ARCHITECTURES = {
    "Kepler": 2,
    "Maxwell": 3,
    "Pascal": 4,
    "Volta": 5,
    "Turing": 6,
    "Ampere": 7,
    "Ada Lovelace": 8,
    "Hopper": 9,
    "Blackwell": 10,
}
GPM_ARCHITECTURES = {"Hopper", "Blackwell"}  # nvml.h: GPM is Hopper and newer

# NVML_GPM_METRIC_* ids the fake fills from the capture when the test does not set them.
GPM_GRAPHICS_UTIL = 1
GPM_PCIE_TX_PER_SEC = 20
GPM_PCIE_RX_PER_SEC = 21


@dataclass(frozen=True)
class FakeGridFeature:
    """One nvmlGridLicensableFeature_v4_t a vGPU guest's driver fills (NVML API reference:
    featureState non-zero = currently licensed, featureEnabled non-zero = enabled)."""

    feature_code: int  # nvmlGridLicenseFeatureCode_t: 1 vGPU, 2 NVIDIA RTX, 4 compute
    product_name: str
    licensed: bool
    enabled: bool = True


@dataclass
class FakeMig:
    """One MIG device (GPU instance + compute instance) of a fake parent GPU."""

    parent: FakeGpu
    index: int
    captured: CapturedMig
    profile: str | None
    uuid: str


@dataclass
class FakeGpu:
    capture: CapturedGpu
    clock: Callable[[], float]
    minor: int = 0
    # scripted failures
    lost_after_calls: int | None = None  # GpuIsLost from the (N+1)-th call on this device on
    lost_at_s: float | None = None  # GpuIsLost once clock() >= this
    # NVML_ERROR_RESET_REQUIRED for every call on this device from the (N+1)-th call on
    reset_required_after_calls: int | None = None
    fail: dict[str, int] = field(default_factory=dict)  # C function name -> nvmlReturn_t
    # per-entry status in nvmlDeviceGetFieldValues: field id -> nvmlReturn_t (the call succeeds)
    field_fail: dict[int, int] = field(default_factory=dict)
    # scripted activity the capture does not show
    gpm_activity: dict[int, float] = field(default_factory=dict)  # GPM metric id -> value
    # per MIG GPU instance (GI id -> metric id -> value): nvmlGpmMigSampleGet's activity
    mig_gpm_activity: dict[int, dict[int, float]] = field(default_factory=dict)
    process_utilization: dict[int, tuple[int, int]] = field(default_factory=dict)  # pid->sm,mem
    nvlink_errors: dict[tuple[int, int], int] = field(default_factory=dict)  # (link, ctr)->n
    nvlink_kib_per_s: tuple[float, float] = (0.0, 0.0)  # tx, rx over all links
    replay_per_s: float = 0.0
    xids: list[tuple[float, int]] = field(default_factory=list)  # (at clock s, xid) pending
    # vGPU: nvmlGpuVirtualizationMode_t (0 bare metal, 2 a vGPU guest) and the guest's
    # licensable features; None = nvmlDeviceGetGridLicensableFeatures answers NOT_SUPPORTED
    virtualization_mode: int = 0
    grid_features: tuple[FakeGridFeature, ...] | None = None
    calls: int = 0
    lost: bool = False
    migs: list[FakeMig] = field(default_factory=list)

    def __post_init__(self) -> None:
        c = self.capture
        self.power_w = c.power_draw_w
        self.reasons = c.clock_event_reasons
        self._t0 = self._last = self.clock()
        self.energy_mj = 0.0  # "since the driver was loaded" = since the fake started
        self.power_violation_ns = float((c.sw_power_cap_us or 0) * 1000)
        self.thermal_violation_ns = float(((c.sw_thermal_us or 0) + (c.hw_thermal_us or 0)) * 1000)
        self.replay = float(c.pcie_replay or 0)
        self.nvlink_kib = [0.0, 0.0]
        self.gpm_integrals: dict[int, float] = {}
        self.mig_gpm_integrals: dict[int, dict[int, float]] = {}

    # ---- time ------------------------------------------------------------------------------
    def activity(self) -> dict[int, float]:
        """GPM metric values now: the test's, else those the capture implies."""
        out: dict[int, float] = {}
        if self.capture.util_gpu is not None:
            out[GPM_GRAPHICS_UTIL] = float(self.capture.util_gpu)
        if self.capture.pcie_tx_kbs is not None:
            out[GPM_PCIE_TX_PER_SEC] = self.capture.pcie_tx_kbs * 1000 / MIB
        if self.capture.pcie_rx_kbs is not None:
            out[GPM_PCIE_RX_PER_SEC] = self.capture.pcie_rx_kbs * 1000 / MIB
        out.update(self.gpm_activity)
        return out

    def advance(self) -> float:
        """Integrate every counter up to clock(); returns now."""
        now = self.clock()
        dt = max(0.0, now - self._last)
        if dt:
            if self.power_w is not None:
                self.energy_mj += self.power_w * dt * 1000.0
            if self.reasons and self.reasons & SW_POWER_CAP:
                self.power_violation_ns += dt * 1e9
            if self.reasons and self.reasons & THERMAL_REASONS:
                self.thermal_violation_ns += dt * 1e9
            self.replay += self.replay_per_s * dt
            self.nvlink_kib[0] += self.nvlink_kib_per_s[0] * dt
            self.nvlink_kib[1] += self.nvlink_kib_per_s[1] * dt
            for metric, value in self.activity().items():
                self.gpm_integrals[metric] = self.gpm_integrals.get(metric, 0.0) + value * dt
            for gi, activity in self.mig_gpm_activity.items():
                integrals = self.mig_gpm_integrals.setdefault(gi, {})
                for metric, value in activity.items():
                    integrals[metric] = integrals.get(metric, 0.0) + value * dt
        self._last = now
        return now

    # ---- scripted transitions ----------------------------------------------------------------
    def set_clock_event_reasons(self, mask: int) -> None:
        self.advance()
        self.reasons = mask

    def set_power_w(self, watts: float) -> None:
        self.advance()
        self.power_w = watts

    def set_gpm(self, metric: int, value: float) -> None:
        self.advance()
        self.gpm_activity[metric] = value

    def set_mig_gpm(self, gpu_instance_id: int, metric: int, value: float) -> None:
        """What one MIG GPU instance's GPM counters show from now on (the capture cannot say:
        nvidia-smi prints N/A utilisation under MIG)."""
        if not any(m.captured.gpu_instance_id == gpu_instance_id for m in self.migs):
            raise ValueError(f"no MIG GPU instance {gpu_instance_id} on this fake GPU")
        self.advance()
        self.mig_gpm_activity.setdefault(gpu_instance_id, {})[metric] = value

    def add_xid(self, xid: int, at_s: float | None = None) -> None:
        self.xids.append((self.clock() if at_s is None else at_s, xid))

    def lose(self) -> None:
        self.lost = True

    def check(self, function: str) -> int:
        """nvmlReturn_t for a call on this device before it does any work (0 = go on)."""
        self.calls += 1
        if not self.lost:
            after_n = self.lost_after_calls is not None and self.calls > self.lost_after_calls
            at_time = self.lost_at_s is not None and self.clock() >= self.lost_at_s
            self.lost = after_n or at_time
        if self.lost:
            return 15  # NVML_ERROR_GPU_IS_LOST
        after = self.reset_required_after_calls
        if after is not None and self.calls > after:
            return 16  # NVML_ERROR_RESET_REQUIRED
        return self.fail.get(function, 0)

    # ---- derived facts -------------------------------------------------------------------------
    @property
    def gpm_supported(self) -> bool:
        return self.capture.architecture in GPM_ARCHITECTURES

    def processes(self, kind: str, mig: FakeMig | None) -> list[CapturedProcess]:
        """Processes whose type includes ``kind`` ("C"/"G"); MIG handles see their own only."""
        out = [p for p in self.capture.processes if kind in p.kind]
        if mig is not None:
            gi, ci = mig.captured.gpu_instance_id, mig.captured.compute_instance_id
            out = [p for p in out if (p.gpu_instance_id, p.compute_instance_id) == (gi, ci)]
        return out


def _go_nvml_profiles(facts_path: Path, capture: CapturedGpu) -> list[dict[str, object]]:
    """go-nvml's GPU-instance profiles of the GPU config with the capture's PCI device id."""
    facts = json.loads(facts_path.read_text())
    for config in facts["gpus"].values():
        dev_id = int(str(config["config"]["PciDeviceId"]), 16)
        if dev_id == capture.pci_device_id and "gpu_instance_profiles" in config:
            return list(config["gpu_instance_profiles"])
    return []


def mig_profile_name(profiles: list[dict[str, object]], mig: CapturedMig) -> str | None:
    """Profile with the same copy-engine count (= slices; go-nvml's SM counts for H100 differ
    from real drivers' 60/132), closest in memory (mock sizes differ too, nvml/SOURCES.md); the
    media-extension (+me) variants lose ties."""
    same_sm = [p for p in profiles if p["CopyEngineCount"] == mig.copy_engines]
    if not same_sm:
        return None
    best = min(
        same_sm,
        key=lambda p: (
            abs(int(str(p["MemorySizeMB"])) - mig.memory_total_mib),
            "+me" in str(p["derived_profile_name"]),
        ),
    )
    return str(best["derived_profile_name"])


def attach_migs(gpu: FakeGpu, facts_path: Path) -> None:
    profiles = _go_nvml_profiles(facts_path, gpu.capture)
    for i, captured in enumerate(gpu.capture.mig_devices):
        mig_uuid = uuidlib.uuid5(
            uuidlib.NAMESPACE_URL,
            f"{gpu.capture.uuid}/{captured.gpu_instance_id}/{captured.compute_instance_id}",
        )
        gpu.migs.append(
            FakeMig(gpu, i, captured, mig_profile_name(profiles, captured), f"MIG-{mig_uuid}")
        )
