"""Every number the fleet analysis compares with, its default, and where the default comes from.

Units in the names, as in ``health.thresholds``. The lines a GPU meets in ``health`` too (busy,
low utilization, peers, thermal outliers, stragglers, ECC, retired pages) come from
``catalog.health_lines``: a GPU judged by ``watch`` and by ``fleet`` meets the same line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuwarden.catalog import health_lines as lines


@dataclass(frozen=True, slots=True)
class FleetThresholds:
    idle_below_percent: float = 5.0
    busy_min_percent: float = lines.BUSY_UTILIZATION_MIN_PERCENT.value
    low_utilization_max_percent: float = lines.LOW_UTILIZATION_MAX_PERCENT.value
    low_utilization_min_gpu_hours: float = 1.0
    peers_min_gpus_count: int = lines.PEERS_MIN_GPUS_COUNT.value
    thermal_outlier_min_celsius: float = lines.THERMAL_OUTLIER_MIN_CELSIUS.value
    thermal_load_match_ratio: float = lines.THERMAL_OUTLIER_LOAD_MATCH_RATIO.value
    thermal_outlier_min_share: float = 0.5
    thermal_outlier_min_buckets_count: int = 2
    straggler_robust_z_min: float = lines.STRAGGLER_ROBUST_Z_MIN.value
    straggler_min_gap_ratio: float = lines.STRAGGLER_MIN_GAP_RATIO.value
    straggler_min_run_buckets_count: int = 3
    straggler_min_share_after_onset: float = 0.75
    straggler_baseline_min_buckets_count: int = 2
    ecc_correctable_storm_per_minute: float = lines.ECC_CORRECTED_MAX_PER_MINUTE.value
    incident_episode_gap_s: float = 3600.0
    rma_fatal_xid_count: int = 5
    rma_fatal_xid_window_s: float = 24 * 3600.0
    rma_retired_pages_dbe_count: int = lines.RETIRED_PAGES_DBE_LIMIT_COUNT.value


DEFAULT_FLEET_THRESHOLDS = FleetThresholds()

_DIAG = "shared/reference/diagnosis.md §2"
FLEET_THRESHOLD_SOURCES: Mapping[str, str] = {
    "idle_below_percent": (
        "fleet.md §3.2: 5 % is the common idle cut in the public cluster traces (Philly, "
        "AcmeTrace), whose mass sits at exactly 0 %"
    ),
    "busy_min_percent": lines.BUSY_UTILIZATION_MIN_PERCENT.source,
    "low_utilization_max_percent": lines.LOW_UTILIZATION_MAX_PERCENT.source,
    "low_utilization_min_gpu_hours": (
        "gpuwarden: a pod that held GPUs for less than a GPU-hour in the window is a start or an "
        "end, not a sustained waste"
    ),
    "peers_min_gpus_count": (
        f"{lines.PEERS_MIN_GPUS_COUNT.source} (thermal bands and a pod's GPUs alike: with two, "
        "either one is the odd one out)"
    ),
    "thermal_outlier_min_celsius": lines.THERMAL_OUTLIER_MIN_CELSIUS.source,
    "thermal_load_match_ratio": (
        f"{lines.THERMAL_OUTLIER_LOAD_MATCH_RATIO.source} (utilisation bands alone miss a GPU "
        "drawing more for the same work)"
    ),
    "thermal_outlier_min_share": (
        "gpuwarden: 'over a window' (diagnosis.md) = hot in at least half the hours it had peers"
    ),
    "thermal_outlier_min_buckets_count": "gpuwarden: never on one hour alone",
    "straggler_robust_z_min": f"{lines.STRAGGLER_ROBUST_Z_MIN.source} (fleet.md §3.3)",
    "straggler_min_gap_ratio": lines.STRAGGLER_MIN_GAP_RATIO.source,
    "straggler_min_run_buckets_count": (
        "fleet.md §3.3: persistent, not transient (fail-slows last tens of seconds to ~10 h, "
        "Falcon): three hours in a row"
    ),
    "straggler_min_share_after_onset": (
        "fleet.md §3.3 'k of n windows': off its peers in 3 of 4 hours from the onset on"
    ),
    "straggler_baseline_min_buckets_count": (
        "fleet.md §3.3: a GPU that was always off its peers is heterogeneous by design (pipeline "
        "stages, a parameter server), not a straggler: two hours in line with them first"
    ),
    "ecc_correctable_storm_per_minute": lines.ECC_CORRECTED_MAX_PER_MINUTE.source,
    "incident_episode_gap_s": (
        "gpuwarden: events more than an hour apart are separate episodes (a burst is one); "
        "uncorrectable ECC in two episodes is 'recurring'"
    ),
    "rma_fatal_xid_count": f"{_DIAG} rma-candidate: a fatal Xid ≥ 5 times in 24 h (NVSentinel)",
    "rma_fatal_xid_window_s": f"{_DIAG} rma-candidate: ... in 24 h",
    "rma_retired_pages_dbe_count": lines.RETIRED_PAGES_DBE_LIMIT_COUNT.source,
}
