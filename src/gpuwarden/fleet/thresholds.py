"""Every number the fleet analysis compares with, its default, and where the default comes from.

Units in the names, as in ``health.thresholds`` (whose peer knobs these mirror: the fleet layer
may not import health, and a GPU judged by ``watch`` and by ``fleet`` should meet the same lines).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FleetThresholds:
    idle_below_percent: float = 5.0
    busy_min_percent: float = 10.0
    low_utilization_max_percent: float = 50.0
    low_utilization_min_gpu_hours: float = 1.0
    peers_min_gpus_count: int = 3
    thermal_outlier_min_celsius: float = 10.0
    thermal_load_match_ratio: float = 0.15
    thermal_outlier_min_share: float = 0.5
    thermal_outlier_min_buckets_count: int = 2
    straggler_min_gpus_count: int = 3
    straggler_robust_z_min: float = 3.5
    straggler_min_gap_ratio: float = 0.10
    straggler_min_run_buckets_count: int = 3
    straggler_min_share_after_onset: float = 0.75
    straggler_baseline_min_buckets_count: int = 2
    ecc_correctable_storm_per_minute: float = 10.0
    incident_episode_gap_s: float = 3600.0
    rma_fatal_xid_count: int = 5
    rma_fatal_xid_window_s: float = 24 * 3600.0
    rma_retired_pages_dbe_count: int = 60


DEFAULT_FLEET_THRESHOLDS = FleetThresholds()

_DIAG = "shared/reference/diagnosis.md §2"
FLEET_THRESHOLD_SOURCES: Mapping[str, str] = {
    "idle_below_percent": (
        "fleet.md §3.2: 5 % is the common idle cut in the public cluster traces (Philly, "
        "AcmeTrace), whose mass sits at exactly 0 %"
    ),
    "busy_min_percent": (
        "health.thresholds busy_utilization_min_percent: below 10 % a GPU runs no job worth "
        "comparing with its peers"
    ),
    "low_utilization_max_percent": f"{_DIAG} low-utilization: held, utilisation < 50 % sustained",
    "low_utilization_min_gpu_hours": (
        "gpuwarden: a pod that held GPUs for less than a GPU-hour in the window is a start or an "
        "end, not a sustained waste"
    ),
    "peers_min_gpus_count": (
        "health.thresholds peers_min_gpus_count: a median names an outlier among three or more"
    ),
    "thermal_outlier_min_celsius": f"{_DIAG} thermal-outlier: ≥ 10 °C above the peer median",
    "thermal_load_match_ratio": (
        "health.thresholds thermal_outlier_load_match_ratio: matched load = power within ±15 % "
        "(utilisation bands alone miss a GPU drawing more for the same work)"
    ),
    "thermal_outlier_min_share": (
        "gpuwarden: 'over a window' (diagnosis.md) = hot in at least half the hours it had peers"
    ),
    "thermal_outlier_min_buckets_count": "gpuwarden: never on one hour alone",
    "straggler_min_gpus_count": (
        "a median and a MAD need three GPUs: with two, either one is the odd one out"
    ),
    "straggler_robust_z_min": (
        "Iglewicz & Hoaglin's modified z-score |0.6745 (x − median) / MAD| > 3.5 (fleet.md §3.3)"
    ),
    "straggler_min_gap_ratio": (
        "health.thresholds straggler_min_gap_ratio: identical GPUs of one job read within a few %; "
        "10 % off the pod's median matters"
    ),
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
    "ecc_correctable_storm_per_minute": (
        "health.thresholds ecc_corrected_max_per_minute: correctable errors rising fast"
    ),
    "incident_episode_gap_s": (
        "gpuwarden: events more than an hour apart are separate episodes (a burst is one); "
        "uncorrectable ECC in two episodes is 'recurring'"
    ),
    "rma_fatal_xid_count": f"{_DIAG} rma-candidate: a fatal Xid ≥ 5 times in 24 h (NVSentinel)",
    "rma_fatal_xid_window_s": f"{_DIAG} rma-candidate: ... in 24 h",
    "rma_retired_pages_dbe_count": (
        f"{_DIAG} rma-candidate: retired pages ≥ 60 from DBE (pre-Ampere RMA criterion)"
    ),
}
