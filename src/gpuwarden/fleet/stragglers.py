"""``straggler``: one GPU of a multi-GPU pod whose activity left its peers' and stayed away.

Bucket by bucket, the GPUs a pod held for most of the bucket are compared with the pod's median
(SM active where exported, else GR engine active, else utilisation): a GPU is off in a bucket
when it is both 10 % away from the median and a robust outlier (modified z-score |z| ≥ 3.5,
Iglewicz & Hoaglin; fleet.md §3.3). It is a straggler when it is

* persistent: off in three buckets in a row, and in three of four buckets from the onset on;
* a change, not a design: in line with its peers for at least two buckets before the onset.

A GPU off its peers from the first bucket to the last is heterogeneous but stable (pipeline
stages, a rank with extra work): the report notes it and flags nothing. Pure.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from gpuwarden.fleet.devices import device_ref, gpu_label
from gpuwarden.fleet.model import GRID_S, FleetData, FleetFinding, Holder
from gpuwarden.fleet.thresholds import FleetThresholds
from gpuwarden.types.health import Confidence, Evidence, Finding, Severity

_MAD_SCALE = 0.6745  # Iglewicz & Hoaglin: MAD of normal data ≈ 0.6745 σ
REMEDY = (
    "look at this GPU first: its clocks and throttle reasons (thermal, power), Xid and ECC "
    "events, its PCIe/NVLink links; a fail-slow GPU sets the pace of every synchronous step of "
    "the job (move the job off it, or drain the node for field diagnostics)"
)
_PILLAR_SOURCES = frozenset({"sm_active", "gr_engine_active"})


@dataclass(frozen=True, slots=True)
class Member:
    """One GPU (or MIG instance) of a pod."""

    uuid: str
    mig_instance: str | None


@dataclass(frozen=True, slots=True)
class Comparison:
    """A member in one bucket against its pod's median."""

    bucket: int
    value: float
    median: float
    gap: float  # (value − median) / median
    z: float

    def off(self, t: FleetThresholds) -> bool:
        return (
            abs(self.gap) >= t.straggler_min_gap_ratio and abs(self.z) >= t.straggler_robust_z_min
        )


def robust_z(value: float, median: float, mad: float) -> float:
    if mad > 0:
        return _MAD_SCALE * (value - median) / mad
    if value == median:
        return 0.0
    return float("inf") if value > median else float("-inf")


def _pods(data: FleetData) -> dict[Holder, dict[int, dict[Member, float]]]:
    """Pod → bucket → member → mean level, for members the pod held most of the bucket."""
    out: dict[Holder, dict[int, dict[Member, float]]] = defaultdict(lambda: defaultdict(dict))
    lengths = [(end - start) / GRID_S for start, end in data.window.buckets()]
    for key, buckets in data.usage.items():
        if not key.holder.held:
            continue
        member = Member(key.uuid, key.mig_instance)
        for index, usage in buckets.items():
            if usage.mean_level_percent is None or usage.gpu_minutes < 0.5 * lengths[index]:
                continue
            out[key.holder][index][member] = usage.mean_level_percent
    return out


def _compare(
    per_bucket: dict[int, dict[Member, float]], t: FleetThresholds
) -> dict[Member, list[Comparison]]:
    series: dict[Member, list[Comparison]] = defaultdict(list)
    for index in sorted(per_bucket):
        levels = per_bucket[index]
        if len(levels) < t.peers_min_gpus_count:
            continue
        median = statistics.median(levels.values())
        if median < t.busy_min_percent:
            continue  # an idle pod runs no job to compare
        mad = statistics.median(abs(v - median) for v in levels.values())
        for member, value in levels.items():
            gap = (value - median) / median
            series[member].append(
                Comparison(index, value, median, gap, robust_z(value, median, mad))
            )
    return series


def _onset(comparisons: list[Comparison], t: FleetThresholds) -> int | None:
    """Index (in ``comparisons``) of the first run of ``straggler_min_run_buckets_count`` off
    buckets in a row, or None."""
    run = 0
    for i, c in enumerate(comparisons):
        run = run + 1 if c.off(t) else 0
        if run >= t.straggler_min_run_buckets_count:
            return i - run + 1
    return None


@dataclass(frozen=True, slots=True)
class Verdict:
    member: Member
    kind: str  # "straggler", "heterogeneous"
    comparisons: tuple[Comparison, ...]
    onset: int  # index into comparisons


def judge(comparisons: list[Comparison], member: Member, t: FleetThresholds) -> Verdict | None:
    onset = _onset(comparisons, t)
    if onset is None:
        return None
    after = comparisons[onset:]
    if sum(c.off(t) for c in after) < t.straggler_min_share_after_onset * len(after):
        return None  # came and went: transient
    baseline = [c for c in comparisons[:onset] if not c.off(t)]
    kind = (
        "straggler" if len(baseline) >= t.straggler_baseline_min_buckets_count else "heterogeneous"
    )
    return Verdict(member, kind, tuple(comparisons), onset)


def _finding(data: FleetData, holder: Holder, verdict: Verdict, source: str) -> FleetFinding:
    member, t0 = verdict.member, verdict.onset
    after, before = verdict.comparisons[t0:], verdict.comparisons[:t0]
    gpu = data.gpus.get(member.uuid)
    buckets = data.window.buckets()
    value = statistics.mean(c.value for c in after)
    median = statistics.mean(c.median for c in after)
    gap = statistics.mean(c.gap for c in after)
    base_gap = statistics.mean(c.gap for c in before)
    z = statistics.median(c.z for c in after)
    way = "below" if gap < 0 else "above"
    pod = str(holder)
    detail = (
        f"{value:.0f} % vs the pod's median {median:.0f} % ({gap:+.0%}; robust z {z:+.1f}) in "
        f"{len(after)} buckets from the onset on, after {len(before)} buckets at {base_gap:+.0%}"
    )
    finding = Finding(
        code="straggler",
        severity=Severity.WARNING,
        title=(
            f"{gpu_label(gpu, member.uuid)} in pod {pod}: {abs(gap):.0%} {way} its peers' activity "
            f"since {_hhmm(buckets[after[0].bucket][0])}"
        ),
        cause=(
            "this GPU's activity left its peers' in the same pod and stayed away: in a synchronous "
            "job one slow (or idle-waiting) GPU sets the pace; it was in line before, so it is a "
            "change, not the job's design"
        ),
        remedy=REMEDY,
        device=device_ref(gpu, member.uuid),
        evidence=(Evidence("activity_percent", round(value, 2), f"prometheus:{source}", detail),),
        confidence=Confidence.MEDIUM if source in _PILLAR_SOURCES else Confidence.LOW,
        method=source,
        first_seen_s=buckets[after[0].bucket][0],
        last_seen_s=buckets[after[-1].bucket][1],
        count=len(after),
    )
    return FleetFinding(finding, holder.namespace, holder.pod)


def _hhmm(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def stragglers(
    data: FleetData, source: str, t: FleetThresholds
) -> tuple[tuple[FleetFinding, ...], tuple[str, ...]]:
    """Straggler findings, and notes on pods whose GPUs differ steadily (not flagged)."""
    findings, notes = [], []
    for holder, per_bucket in sorted(
        _pods(data).items(), key=lambda item: (item[0].namespace or "", item[0].pod or "")
    ):
        for member, comparisons in sorted(
            _compare(per_bucket, t).items(),
            key=lambda item: (item[0].uuid, item[0].mig_instance or ""),
        ):
            verdict = judge(comparisons, member, t)
            if verdict is None:
                continue
            if verdict.kind == "straggler":
                findings.append(_finding(data, holder, verdict, source))
            else:
                gpu = data.gpus.get(member.uuid)
                pod = str(holder)
                gap = statistics.mean(c.gap for c in comparisons)
                notes.append(
                    f"pod {pod}: {gpu_label(gpu, member.uuid)} runs {gap:+.0%} off its peers in "
                    "every bucket compared: heterogeneous but stable (by design?), not flagged "
                    "as a straggler"
                )
    return tuple(findings), tuple(notes)
