"""The numbers the alert rules compare with that the health rules do not already own, and where
each default comes from. The rules read the rest from ``health.thresholds`` (the same TOML file
overrides both), so a threshold means the same in ``doctor``, ``watch`` and Prometheus.

Windows are Prometheus durations. Alerting windows are longer than the health rules' (which judge
a 1 Hz window of a minute): a page should follow a state, not one evaluation pass or checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AlertKnobs:
    # --- events
    xid_recent_window: str = "1h"
    gpu_missing_lookback: str = "1h"
    # --- counters turned into rates
    counter_rate_window: str = "5m"
    # --- utilization and the DCGM pillars
    process_memory_min_mib: float = 256.0
    low_utilization_window: str = "30m"
    idle_utilization_max_percent: float = 5.0
    idle_window: str = "1h"
    fake_load_window: str = "5m"
    pillar_window: str = "10m"
    # --- peers on one node
    peer_window: str = "10m"
    thermal_peer_window: str = "15m"
    # --- telemetry
    exporter_job_regex: str = ".*(dcgm|gpuwarden).*"
    reading_max_age_s: float = 120.0
    frozen_counter_window: str = "10m"
    frozen_counter_min_samples_count: int = 5


DEFAULT_KNOBS = AlertKnobs()

KNOB_SOURCES: Mapping[str, str] = {
    "xid_recent_window": (
        "gpuwarden: an Xid stays firing for an hour after its last occurrence — long enough for "
        "the on-call to see it, short enough that a GPU that was reset and stays quiet clears"
    ),
    "gpu_missing_lookback": (
        "gpuwarden: a GPU that reported within the hour and is gone while its node still "
        "reports has fallen off (dcgm-exporter drops a lost GPU's series rather than zeroing them)"
    ),
    "counter_rate_window": (
        "DCGM's health watches judge error rates per minute; 5 minutes covers at least 5 "
        "scrapes at dcgm-exporter's default 30 s collection interval... and its 15-60 s scrapes"
    ),
    "process_memory_min_mib": (
        "diagnosis.md §1 oom-other-process: a CUDA context costs ~0.3-1 GiB, so 256 MiB used "
        "means a process holds the GPU; an idle GPU without a process reads 0-10 MiB"
    ),
    "low_utilization_window": (
        "gpuwarden: half an hour outlasts an evaluation pass, a checkpoint save or a restart"
    ),
    "idle_utilization_max_percent": (
        "fleet.md §3.2: 5 % is the common idle cut (AcmeTrace shows the mass at exactly 0)"
    ),
    "idle_window": "gpuwarden: a GPU held for an hour without a kernel is waste worth a ticket",
    "fake_load_window": (
        "gpuwarden: 5 minutes of SM activity averaged: a spin-wait is steady, real work is not"
    ),
    "pillar_window": (
        "gpuwarden: the profiling pillars averaged over 10 minutes (several training steps and "
        "10+ scrapes) before a bottleneck is named"
    ),
    "peer_window": "gpuwarden: 10 minutes of SM activity per GPU before peers are compared",
    "thermal_peer_window": (
        "gpuwarden: temperatures settle within minutes of a load change; 15 minutes compares "
        "settled boards"
    ),
    "exporter_job_regex": (
        "the job names of dcgm-exporter's Helm chart (nvidia-dcgm-exporter), the GPU Operator "
        "(nvidia-dcgm-exporter) and gpuwarden's manifests (gpuwarden-exporter)"
    ),
    "reading_max_age_s": (
        "gpuwarden: two minutes without a new reading is longer than the slowest backend read "
        "(nvidia-smi -q on 8 GPUs takes seconds) with retries"
    ),
    "frozen_counter_window": (
        "dcgm-exporter serves stale values after nv-hostengine restarts (gpu-monitoring-tools "
        "#188): a GPU draws power whenever it is on, so an energy counter that does not move "
        "for 10 minutes is frozen telemetry"
    ),
    "frozen_counter_min_samples_count": (
        "gpuwarden: 5 scrapes at least, so a single slow scrape is not 'frozen'"
    ),
}
