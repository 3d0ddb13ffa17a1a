"""The pure analysis on small hand-built ``FleetData``: the rules' edges, one at a time."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.fleet.analyze import analyze
from gpuwarden.fleet.incidents import max_in_window
from gpuwarden.fleet.model import (
    BucketUsage,
    Collection,
    Event,
    FleetData,
    GpuId,
    Holder,
    SeriesKey,
    StateSpan,
    Window,
)
from gpuwarden.fleet.pricing import PriceBook, catalog, flat
from gpuwarden.fleet.stragglers import Comparison, Member, judge, robust_z
from gpuwarden.fleet.thresholds import DEFAULT_FLEET_THRESHOLDS as T
from gpuwarden.fleet.thresholds import FLEET_THRESHOLD_SOURCES, FleetThresholds
from gpuwarden.types.health import Severity

HOURS = 12
WINDOW = Window(0, HOURS * 3600, 3600)
H100 = "NVIDIA H100 80GB HBM3"
JOB = Holder("ml", "job")


def _collection(pods: bool = True) -> Collection:
    return Collection(
        server="http://prometheus:9090",
        lookback_s=150,
        scrape_interval_s=60.0,
        level_sources={"sm_active": 1, "gr_engine_active": 0, "gpu_util": 0},
        mig=False,
        pod_labels="namespace/pod" if pods else None,
        gpuwarden_exporter=True,
        queries=0,
        retries=0,
        server_s=0.0,
        total_s=0.0,
        answer_bytes=0,
    )


def _data(
    levels: dict[str, list[float]],
    *,
    pod: Holder = JOB,
    temps: dict[str, list[float]] | None = None,
    powers: dict[str, list[float]] | None = None,
    events: tuple[Event, ...] = (),
    states: tuple[StateSpan, ...] = (),
    pods: bool = True,
    model: str | None = H100,
) -> FleetData:
    """GPUs (by name) with a mean level per hour, all held by ``pod`` for the whole window."""
    usage = {
        SeriesKey(uuid, pod): {
            b: BucketUsage(60.0, 60.0 if level < 5 else 0.0, level)
            for b, level in enumerate(per_hour)
        }
        for uuid, per_hour in levels.items()
    }

    def per_bucket(values: dict[str, list[float]] | None) -> dict[str, dict[int, float]]:
        return {u: dict(enumerate(v)) for u, v in (values or {}).items()}

    return FleetData(
        window=WINDOW,
        idle_below_percent=5.0,
        gpus={u: GpuId(u, "node-1", str(i), model) for i, u in enumerate(levels)},
        usage=usage,
        temperature_celsius=per_bucket(temps),
        power_watts=per_bucket(powers),
        events=events,
        states=states,
        retired_pages_dbe={},
        collection=_collection(pods),
    )


def _codes(data: FleetData, prices: PriceBook | None = None) -> list[tuple[str, str | None]]:
    report = analyze(data, prices or flat(2.0))
    return [
        (f.finding.code, f.finding.device.uuid if f.finding.device else f.pod)
        for f in report.findings
        if f.finding.severity is not Severity.INFO
    ]


def _pod(n: int, level: float = 80.0) -> dict[str, list[float]]:
    return {f"GPU-{i}": [level + (i % 2)] * HOURS for i in range(n)}


def test_a_straggler_needs_a_baseline_and_persistence() -> None:
    levels = _pod(4)
    levels["GPU-2"] = [80.0] * 4 + [50.0] * 8  # in line 4 h, then 37 % below for 8 h
    assert _codes(_data(levels)) == [("straggler", "GPU-2")]


def test_a_gpu_off_from_the_start_is_heterogeneous_not_a_straggler() -> None:
    levels = _pod(4)
    levels["GPU-0"] = [40.0] * HOURS
    report = analyze(_data(levels), flat(2.0))
    assert [f.finding.code for f in report.findings] == []
    assert any("heterogeneous" in note and "GPU-0" in note for note in report.notes)


def test_a_transient_slowdown_is_not_flagged() -> None:
    levels = _pod(4)
    levels["GPU-1"] = [80.0] * 4 + [50.0] * 2 + [80.0] * 6  # two hours
    assert _codes(_data(levels)) == []
    levels["GPU-1"] = [80.0] * 4 + [50.0] * 3 + [80.0] * 5  # three hours, then back: < 3 of 4
    assert _codes(_data(levels)) == []


def test_small_or_idle_pods_are_not_judged() -> None:
    two = {"GPU-0": [80.0] * HOURS, "GPU-1": [80.0] * 4 + [40.0] * 8}
    assert _codes(_data(two)) == []  # two GPUs: either could be the odd one
    idle = _pod(4, level=2.0)
    idle["GPU-3"] = [2.0] * 4 + [8.0] * 8  # below the busy line: no job to compare
    assert ("straggler", "GPU-3") not in _codes(_data(idle))


def test_robust_z() -> None:
    assert robust_z(10, 10, 0) == 0
    assert robust_z(11, 10, 0) == float("inf")
    assert robust_z(5, 10, 2) == pytest.approx(0.6745 * -5 / 2)
    c = Comparison(0, 50, 80, -0.375, -10)
    assert c.off(T)
    off = [Comparison(i, 50, 80, -0.375, -10) for i in range(4)]
    verdict = judge(off, Member("GPU-0", None), T)
    assert verdict is not None and verdict.kind == "heterogeneous"


def test_thermal_outlier_at_matched_power_only() -> None:
    levels = _pod(5)
    temps = {u: [60.0 + (i % 2)] * HOURS for i, u in enumerate(levels)}
    powers = {u: [500.0] * HOURS for u in levels}
    temps["GPU-4"] = [72.0] * HOURS
    assert _codes(_data(levels, temps=temps, powers=powers)) == [("thermal-outlier", "GPU-4")]
    powers["GPU-4"] = [620.0] * HOURS  # draws 24 % more: hot for a reason, no matched peers
    assert _codes(_data(levels, temps=temps, powers=powers)) == []
    temps["GPU-4"] = [69.0] * HOURS  # 8-9 °C above the median: below the line
    powers["GPU-4"] = [500.0] * HOURS
    assert _codes(_data(levels, temps=temps, powers=powers)) == []


def test_thermal_needs_peers_of_the_same_model() -> None:
    levels = {"GPU-0": [80.0] * HOURS, "GPU-1": [80.0] * HOURS}
    temps = {"GPU-0": [60.0] * HOURS, "GPU-1": [90.0] * HOURS}
    powers = {u: [500.0] * HOURS for u in levels}
    assert _codes(_data(levels, temps=temps, powers=powers)) == []  # two GPUs are no peer group


def test_fatal_xid_five_times_in_24h_is_an_rma_candidate() -> None:
    hours = (1, 3, 5, 7, 9)
    events = tuple(Event("GPU-0", "xid:gpuwarden_xid_total", h * 3600, 1.0, 79) for h in hours)
    codes = _codes(_data(_pod(1), events=events))
    assert ("gpu-lost", "GPU-0") in codes and ("rma-candidate", "GPU-0") in codes
    four = events[:4]
    assert ("rma-candidate", "GPU-0") not in _codes(_data(_pod(1), events=four))
    warnings = tuple(Event("GPU-0", "xid:gpuwarden_xid_total", h * 3600, 1.0, 13) for h in hours)
    codes = _codes(_data(_pod(1), events=warnings))
    assert codes == [("xid", "GPU-0")]  # an application Xid: not an RMA criterion


def test_the_most_exact_xid_source_wins() -> None:
    events = (
        Event("GPU-0", "xid:DCGM_FI_DEV_XID_ERRORS", 3600, 1.0, 48),
        Event("GPU-0", "xid:gpuwarden_xid_total", 3600, 2.0, 48),
    )
    report = analyze(_data(_pod(1), events=events), flat(2.0))
    [incident] = report.incidents
    assert (incident.source, incident.count) == ("xid:gpuwarden_xid_total", 2.0)


def test_one_dbe_burst_is_not_recurring() -> None:
    burst = tuple(Event("GPU-0", "ecc-dbe:volatile", 3600 + 60 * i, 1.0) for i in range(3))
    codes = _codes(_data(_pod(1), events=burst))
    assert codes == [("ecc-uncorrectable", "GPU-0")]
    again = (*burst, Event("GPU-0", "ecc-dbe:volatile", 6 * 3600, 1.0))
    assert ("rma-candidate", "GPU-0") in _codes(_data(_pod(1), events=again))


def test_exporter_findings_pass_through_once() -> None:
    sram = StateSpan(
        "GPU-0", "gpuwarden-finding", ((600, 3000),), False, "sram-threshold-exceeded", "critical"
    )
    info = StateSpan("GPU-0", "gpuwarden-finding", ((600, 3000),), False, "persistence-off", "info")
    codes = _codes(_data(_pod(1), states=(sram, info)))
    assert sorted(codes) == [("rma-candidate", "GPU-0"), ("sram-threshold-exceeded", "GPU-0")]


def test_low_utilization_pods_ranked_by_idle_dollars() -> None:
    small = _data({"GPU-0": [2.0] * HOURS}, pod=Holder("a", "small"))
    big = _data({"GPU-1": [2.0] * HOURS, "GPU-2": [3.0] * HOURS}, pod=Holder("b", "big"))
    mixed = _data({"GPU-3": [2.0] * HOURS, "GPU-4": [98.0] * HOURS}, pod=Holder("c", "mixed"))
    merged = replace(
        small,
        usage={**small.usage, **big.usage, **mixed.usage},
        gpus={**small.gpus, **big.gpus, **mixed.gpus},
    )
    report = analyze(merged, flat(2.0))
    low = [(f.pod, f.idle_dollars) for f in report.findings if f.finding.code == "low-utilization"]
    # the mixed pod idles one GPU too, but its mean (50 %) is not low
    assert low == [("big", pytest.approx(48.0)), ("small", pytest.approx(24.0))]
    busy = _data({"GPU-0": [60.0] * HOURS})
    assert _codes(busy) == []


def test_unpriced_models_are_not_free() -> None:
    report = analyze(_data(_pod(2), model="Some Future GPU"), catalog())
    assert report.totals.gpu_dollars is None
    assert report.totals.unpriced_gpu_hours == pytest.approx(2 * HOURS)


def test_without_pod_labels_unallocated_is_unknown() -> None:
    report = analyze(_data(_pod(2, level=0.0), pod=Holder(), pods=False), flat(2.0))
    assert report.totals.idle_gpu_hours == pytest.approx(2 * HOURS)
    assert report.totals.unallocated_gpu_hours is None
    assert report.totals.unallocated_dollars is None
    assert any("no pod labels" in note for note in report.notes)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.floats(0, 10)), max_size=30),
    st.integers(1, 10**5),
)
def test_max_in_window_is_the_brute_force_s(events: list[tuple[int, float]], window: int) -> None:
    events.sort()
    times, amounts = [t for t, _ in events], [a for _, a in events]
    brute = max(
        (sum(a for t, a in events if start <= t < start + window) for start in times), default=0.0
    )
    assert max_in_window(times, amounts, window) == pytest.approx(brute)


def test_every_output_renders_without_pod_labels_or_findings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpuwarden.report.fleet import fleet_document, print_fleet_report, render_fleet_html

    report = analyze(_data(_pod(2, level=0.0), pod=Holder(), pods=False), catalog())
    document = fleet_document(report)
    assert document["unallocated_gpu_hours"] is None
    assert document["by_namespace"][0]["namespace"] is None
    assert document["timeline"][0]["unallocated_gpu_hours"] is None
    print_fleet_report(report)
    out = capsys.readouterr().out
    assert "pods unknown" in out and "no findings" in out
    html = render_fleet_html(report)
    assert 'id="plot-timeline"' in html and "No findings" in html


def test_every_fleet_threshold_names_where_it_comes_from() -> None:
    """FLEET_THRESHOLD_SOURCES is the table of the knobs' sources: one per field, none stale."""
    names = [f.name for f in fields(FleetThresholds)]
    assert sorted(FLEET_THRESHOLD_SOURCES) == sorted(names)
    assert all(len(FLEET_THRESHOLD_SOURCES[name]) > 20 for name in names)
