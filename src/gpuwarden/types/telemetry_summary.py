"""What a recording says about each GPU: the summary `gpuwarden record` prints when the job ends."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwarden.types.telemetry import DeviceEvent


@dataclass(frozen=True, slots=True)
class RecordSummary:
    """One GPU over a recording. ``None`` = the backend never reported what it is made from."""

    index: int | None
    uuid: str
    name: str
    samples: int
    first_timestamp_s: float
    last_timestamp_s: float
    memory_total_bytes: int | None
    peak_memory_used_bytes: int | None
    gpu_utilization_mean_percent: float | None
    gpu_utilization_p95_percent: float | None
    sm_active_mean_ratio: float | None
    sm_active_p95_ratio: float | None
    power_mean_watts: float | None
    power_peak_watts: float | None
    temperature_peak_celsius: float | None
    # seconds between readings during which each clock-event reason was active (reading at the
    # start of the interval); "gpu_idle" and clock settings are not throttling and are left out
    throttled_seconds_by_reason: dict[str, float] = field(default_factory=dict)
    # the same from the driver's violation counters, where the backend reports them
    power_violation_seconds: float | None = None
    thermal_violation_seconds: float | None = None
    energy_wh: float | None = None
    energy_basis: str | None = None  # "energy-counter" or "power-integral"
    price_per_kwh: float | None = None
    energy_cost: float | None = None  # energy_wh / 1000 x price_per_kwh
    xid_events: tuple[DeviceEvent, ...] = ()
    ecc_events: tuple[DeviceEvent, ...] = ()
    ecc_uncorrected_increase: int | None = None  # volatile counter, last - first reading
    ecc_corrected_increase: int | None = None
    lost: bool = False
    lost_at_s: float | None = None
    # a MIG instance the backend reports on its own (dcgm-exporter's per-instance series)
    mig_parent_uuid: str | None = None
    mig_profile: str | None = None

    @property
    def duration_s(self) -> float:
        return self.last_timestamp_s - self.first_timestamp_s
