"""``thermal-outlier``: a GPU hotter than its peers of the same model at the same load, hour after
hour.

Peers, bucket by bucket: the GPUs of the same model whose mean power falls in the same ±15 % band
(``thermal_load_match_ratio``; bands on a logarithmic scale, so "same band" means within that
ratio of each other). A GPU is hot in a bucket when its mean temperature is ≥ 10 °C above its band's
median (with at least three GPUs in the band); it is an outlier when it is hot in at least half of
the buckets where it had peers, and in two or more. Pure.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from gpuwarden.fleet.devices import device_ref, gpu_label
from gpuwarden.fleet.model import FleetData, FleetFinding
from gpuwarden.fleet.thresholds import FleetThresholds
from gpuwarden.types.health import Confidence, Evidence, Finding, Severity

REMEDY = (
    "check the airflow at this GPU's slot (fans, blanking panels, a blocked inlet), compare its "
    "slot position with its cooler neighbours, then the fan and the thermal paste; a hot GPU "
    "throttles its clocks and slows every job it serves"
)
METHOD = "power-matched peers"


@dataclass(slots=True)
class _Record:
    compared: int = 0
    hot: list[tuple[int, float, float, float, float]] = field(default_factory=list)
    # (bucket, temperature, band median, power, band median power)


def _band(power_w: float, ratio: float) -> int:
    return math.floor(math.log(max(power_w, 1.0)) / math.log1p(ratio))


def _judge_bucket(
    members: list[tuple[str, float, float]],
    t: FleetThresholds,
    bucket: int,
    records: dict[str, _Record],
) -> None:
    """One model's GPUs in one bucket: (uuid, temperature, power)."""
    bands: dict[int, list[tuple[str, float, float]]] = defaultdict(list)
    for member in members:
        bands[_band(member[2], t.thermal_load_match_ratio)].append(member)
    for band in bands.values():
        if len(band) < t.peers_min_gpus_count:
            continue
        median_temp = statistics.median(m[1] for m in band)
        median_power = statistics.median(m[2] for m in band)
        for uuid, temp, power in band:
            record = records[uuid]
            record.compared += 1
            if temp - median_temp >= t.thermal_outlier_min_celsius:
                record.hot.append((bucket, temp, median_temp, power, median_power))


def _finding(data: FleetData, uuid: str, record: _Record, t: FleetThresholds) -> FleetFinding:
    gpu = data.gpus.get(uuid)
    buckets = data.window.buckets()
    excess = statistics.mean(temp - median for _, temp, median, _, _ in record.hot)
    temp = statistics.mean(h[1] for h in record.hot)
    peers = statistics.mean(h[2] for h in record.hot)
    power = statistics.mean(h[3] for h in record.hot)
    peer_power = statistics.mean(h[4] for h in record.hot)
    first, last = record.hot[0][0], record.hot[-1][0]
    detail = (
        f"mean {temp:.1f} °C vs its peers' median {peers:.1f} °C (+{excess:.1f} °C ≥ "
        f"{t.thermal_outlier_min_celsius:g}) at {power:.0f} W vs {peer_power:.0f} W, hot in "
        f"{len(record.hot)} of {record.compared} hours compared"
    )
    finding = Finding(
        code="thermal-outlier",
        severity=Severity.WARNING,
        title=(
            f"{gpu_label(gpu, uuid)}: {excess:.0f} °C hotter than its peers of the same model at "
            f"the same load, in {len(record.hot)} of {record.compared} buckets"
        ),
        cause=(
            "over the window this GPU ran hotter than GPUs of the same model drawing the same "
            "power: its cooling is worse (airflow, fan, paste, slot), not its work"
        ),
        remedy=REMEDY,
        device=device_ref(gpu, uuid),
        evidence=(
            Evidence("DCGM_FI_DEV_GPU_TEMP", round(temp, 1), "prometheus", detail),
            Evidence("DCGM_FI_DEV_POWER_USAGE", round(power, 1), "prometheus"),
        ),
        confidence=Confidence.MEDIUM,
        method=METHOD,
        first_seen_s=buckets[first][0],
        last_seen_s=buckets[last][1],
        count=len(record.hot),
    )
    return FleetFinding(finding)


def thermal_outliers(data: FleetData, t: FleetThresholds) -> tuple[FleetFinding, ...]:
    per_bucket: dict[tuple[str | None, int], list[tuple[str, float, float]]] = defaultdict(list)
    for uuid, temps in data.temperature_celsius.items():
        powers = data.power_watts.get(uuid, {})
        model = data.gpus[uuid].model if uuid in data.gpus else None
        for bucket, temp in temps.items():
            power = powers.get(bucket)
            if power is not None and power > 0 and temp > 0:
                per_bucket[(model, bucket)].append((uuid, temp, power))
    records: dict[str, _Record] = defaultdict(_Record)
    for (_, bucket), members in sorted(per_bucket.items(), key=lambda item: item[0][1]):
        _judge_bucket(members, t, bucket, records)
    found = [
        _finding(data, uuid, record, t)
        for uuid, record in sorted(records.items())
        if len(record.hot) >= t.thermal_outlier_min_buckets_count
        and len(record.hot) >= t.thermal_outlier_min_share * record.compared
    ]
    return tuple(found)
