"""The fleet report against a real Prometheus (and VictoriaMetrics) holding generated DCGM series.

Every number is checked against ``synth.oracle_usage`` (the documented grid semantics in plain
Python over the same samples) and against what the fleet plants by construction.
"""

from __future__ import annotations

import pytest

from gpuwarden.fleet.analyze import analyze
from gpuwarden.fleet.collect import collect
from gpuwarden.fleet.model import FleetData, FleetReport, Window
from gpuwarden.fleet.pricing import catalog, flat
from gpuwarden.fleet.prometheus import PrometheusClient
from gpuwarden.report.fleet import fleet_document
from gpuwarden.types.health import Severity
from tests.fleet import synth
from tests.fleet.conftest import FLAT_PRICE, REAL_HOSTS, collect_cluster


def _minutes(data: FleetData) -> dict[tuple[str, str | None, str | None], tuple[float, float]]:
    out: dict[tuple[str, str | None, str | None], tuple[float, float]] = {}
    for key, buckets in data.usage.items():
        ident = (key.uuid, key.holder.namespace, key.holder.pod)
        gpu, idle = out.get(ident, (0.0, 0.0))
        out[ident] = (
            gpu + sum(b.gpu_minutes for b in buckets.values()),
            idle + sum(b.idle_minutes for b in buckets.values()),
        )
    return out


def _close(
    a: dict[tuple[str, str | None, str | None], tuple[float, float]],
    b: dict[tuple[str, str | None, str | None], tuple[float, float]],
) -> list[str]:
    diffs = []
    for key in sorted(set(a) | set(b), key=str):
        x, y = a.get(key, (0.0, 0.0)), b.get(key, (0.0, 0.0))
        if abs(x[0] - y[0]) > 1e-6 or abs(x[1] - y[1]) > 1e-6:
            diffs.append(f"{key}: {x} vs oracle {y}")
    return diffs


def test_usage_per_gpu_and_pod_is_the_oracle_s(lab: synth.Fleet, lab_data: FleetData) -> None:
    oracle = synth.oracle_usage(lab.series, lab_data.collection.lookback_s, 5.0)
    assert _close(_minutes(lab_data), oracle) == []
    assert lab_data.collection.scrape_interval_s == pytest.approx(synth.STEP)


def test_totals_hold_the_planted_hours(lab: synth.Fleet, lab_report: FleetReport) -> None:
    t = lab_report.totals
    assert t.gpus == len(lab.gpus) == 28
    assert t.gpu_hours == pytest.approx(28 * 24)
    pods = {dict(r.labels)["pod"]: r.usage for r in lab_report.by_pod}
    notebook = pods["notebook-alice"]
    assert (notebook.gpu_hours, notebook.idle_gpu_hours) == (pytest.approx(96), pytest.approx(96))
    # the 90-minute stall of the 8-GPU training pod is idle; its busy minutes never are
    assert pods["train-llm"].idle_gpu_hours == pytest.approx(lab.planted.stall_idle_gpu_hours)
    nodes = {dict(r.labels)["Hostname"]: r.usage for r in lab_report.by_node}
    # node-d GPU 3: 6 h at exactly 5 % (not below the line), then 18 h below it; GPU 2 below
    # all day; the newer "hostname" label names the node
    assert nodes["node-d"].idle_gpu_hours == pytest.approx(18 + 24)
    assert nodes["node-d"].unallocated_gpu_hours == pytest.approx(18 + 24)  # no pods there
    assert t.gpu_dollars == pytest.approx(t.gpu_hours * FLAT_PRICE)
    assert t.idle_dollars == pytest.approx(t.idle_gpu_hours * FLAT_PRICE)
    share_idle = t.idle_gpu_hours / t.gpu_hours
    assert 0.3 < share_idle < 0.5  # calibrated: a large share of GPU time at exactly 0 %


def test_unallocated_is_idle_and_held_by_no_pod(lab: synth.Fleet, lab_report: FleetReport) -> None:
    namespaces = {dict(r.labels)["namespace"]: r.usage for r in lab_report.by_namespace}
    nobody = namespaces[None]
    assert nobody.held_gpu_hours == 0
    assert lab_report.totals.unallocated_gpu_hours == pytest.approx(nobody.idle_gpu_hours)
    # node-c GPUs 4-7 all day, GPUs 0-3 after the pod ended at 12:00, node-d's idle GPUs; the
    # minute both the pod's and the free series report is shared between them
    assert nobody.unallocated_gpu_hours == pytest.approx(96 + 48 + 42, abs=4 * 0.5 / 60 + 1e-9)


def test_energy_is_power_on_the_grid(lab: synth.Fleet, lab_report: FleetReport) -> None:
    # every GPU reports power once a minute at +7 s: the grid minute m reads the sample of m − 53 s
    expected_wh = 0.0
    for s in lab.series:
        if s.name == "DCGM_FI_DEV_POWER_USAGE":
            expected_wh += (
                sum(v for t, v in s.samples if synth.WINDOW[0] - 53 <= t < synth.WINDOW[1] - 53)
                / 60
            )
    assert lab_report.totals.energy_kwh == pytest.approx(expected_wh / 1000, rel=2e-3)


def _flagged(report: FleetReport, *codes: str) -> set[tuple[str, str | None]]:
    return {
        (f.finding.code, f.finding.device.uuid if f.finding.device else None)
        for f in report.findings
        if f.finding.code in codes
    }


def test_planted_findings_exactly(lab: synth.Fleet, lab_report: FleetReport) -> None:
    p = lab.planted
    assert _flagged(lab_report, "straggler") == {("straggler", p.straggler)}
    assert _flagged(lab_report, "thermal-outlier") == {("thermal-outlier", p.thermal)}
    assert {u for _, u in _flagged(lab_report, "rma-candidate")} == p.rma
    assert _flagged(lab_report, "row-remap-failure") == {("row-remap-failure", p.row_remap_failure)}
    assert _flagged(lab_report, "ecc-uncorrectable") == {("ecc-uncorrectable", p.ecc_uncorrectable)}
    assert _flagged(lab_report, "ecc-correctable-storm") == {("ecc-correctable-storm", p.sbe_storm)}
    assert _flagged(lab_report, "retired-pages-limit") == {
        ("retired-pages-limit", p.retired_pages_limit)
    }
    low = [f for f in lab_report.findings if f.finding.code == "low-utilization"]
    assert [(f.namespace, f.pod) for f in low] == [p.low_utilization_pod]
    assert low[0].idle_dollars == pytest.approx(96 * FLAT_PRICE)
    xids = {
        (f.finding.device.uuid, int(f.finding.evidence[0].value)): f.finding.count
        for f in lab_report.findings
        if f.finding.code == "xid" and f.finding.device is not None
    }
    assert xids == p.xid
    codes = {f.finding.code for f in lab_report.findings if f.finding.severity is not Severity.INFO}
    assert codes == {
        "straggler",
        "thermal-outlier",
        "rma-candidate",
        "row-remap-failure",
        "ecc-uncorrectable",
        "ecc-correctable-storm",
        "low-utilization",
        "xid",
        "retired-pages-limit",
    }


def test_the_heterogeneous_pod_is_noted_not_flagged(
    lab: synth.Fleet, lab_report: FleetReport
) -> None:
    flagged = {f.finding.device.uuid for f in lab_report.findings if f.finding.device}
    assert lab.planted.heterogeneous not in flagged
    assert any(lab.planted.heterogeneous in n and "heterogeneous" in n for n in lab_report.notes)


def test_straggler_onset_and_evidence(lab: synth.Fleet, lab_report: FleetReport) -> None:
    [straggler] = [f for f in lab_report.findings if f.finding.code == "straggler"]
    assert (straggler.namespace, straggler.pod) == ("ml-train", "train-llm")
    assert straggler.finding.first_seen_s == synth.BASE + 14 * 3600  # planted at 14:00
    assert straggler.finding.count == 10  # 14:00-24:00, hour buckets
    assert straggler.finding.evidence[0].value == pytest.approx(45, abs=1.5)


def test_incident_timelines(lab: synth.Fleet, lab_report: FleetReport) -> None:
    [dbe] = [i for i in lab_report.incidents if i.kind == "ecc-uncorrectable"]
    assert dbe.gpu.uuid == lab.planted.ecc_uncorrectable
    assert (dbe.count, dbe.episodes) == (3, 2)
    assert dbe.timeline == ((synth.BASE + 3 * 3600, 1.0), (synth.BASE + 15 * 3600, 2.0))
    [xid119] = [i for i in lab_report.incidents if i.xid == 119]
    assert xid119.source == "xid:gpuwarden_xid_total"  # the counter, not the last-Xid gauge
    assert xid119.count == 6 and len(xid119.timeline) == 6
    gauge = [i for i in lab_report.incidents if i.source == "xid:DCGM_FI_DEV_XID_ERRORS"]
    assert sorted(i.xid or 0 for i in gauge) == [13, 31]
    [windowed] = [i for i in lab_report.incidents if i.source == "xid:DCGM_EXP_XID_ERRORS_COUNT"]
    assert (windowed.xid, windowed.count, windowed.episodes) == (94, 3, 2)
    assert [t for t, _ in windowed.timeline] == [synth.BASE + 6 * 3600, synth.BASE + 18 * 3600]


def test_catalog_prices_by_model(lab_data: FleetData) -> None:
    report = analyze(lab_data, catalog())
    prices = {p.model: p for p in report.costs.prices}
    assert prices[synth.H100].usd_per_gpu_hour is not None
    models = {dict(r.labels)["modelName"]: r.usage for r in report.by_model}
    h100 = models[synth.H100]
    assert h100.gpu_dollars == pytest.approx(h100.gpu_hours * prices[synth.H100].usd_per_gpu_hour)
    total = sum(u.gpu_dollars or 0 for u in models.values())
    assert report.totals.gpu_dollars == pytest.approx(total)


def test_healthy_fleet_has_no_finding_above_info(prometheus_url: str) -> None:
    report = analyze(collect_cluster(prometheus_url, "healthy"), flat(FLAT_PRICE))
    assert report.totals.gpus == 12
    assert [
        f.finding.title for f in report.findings if f.finding.severity is not Severity.INFO
    ] == []
    assert report.totals.idle_gpu_hours == 0


def test_mig_gpu_counts_once_split_between_its_instances_by_slices(prometheus_url: str) -> None:
    data = collect_cluster(prometheus_url, "mig")
    report = analyze(data, flat(FLAT_PRICE))
    assert data.collection.mig
    assert report.totals.gpus == 1
    assert report.totals.gpu_hours == pytest.approx(24)
    pods = {dict(r.labels)["pod"]: r.usage for r in report.by_pod}
    # a 4g instance holds 4 of the 7 slices in use, the 3g one 3
    assert pods["svc-a"].gpu_hours == pytest.approx(24 * 4 / 7)
    assert pods["svc-a"].idle_gpu_hours == 0
    assert pods["svc-b"].idle_gpu_hours == pytest.approx(24 * 3 / 7)
    assert report.totals.unallocated_gpu_hours == 0


def test_renamed_pod_labels_are_read_from_exported(prometheus_url: str) -> None:
    data = collect_cluster(prometheus_url, "renamed")
    report = analyze(data, flat(FLAT_PRICE))
    assert data.collection.pod_labels == "exported_namespace/exported_pod"
    assert [dict(r.labels) for r in report.by_pod] == [{"namespace": "team-z", "pod": "trainer-0"}]
    assert report.totals.unallocated_gpu_hours == pytest.approx(
        24
    )  # the exporter's pod holds nothing


def test_real_scrapes_replayed(prometheus_url: str) -> None:
    """The label shapes of three real dcgm-exporter scrapes, each served unchanged for 2 h."""
    window = Window(synth.BASE, synth.BASE + 2 * 3600, 3600)
    data = collect(PrometheusClient(prometheus_url), window, selector=REAL_HOSTS)
    report = analyze(data, flat(FLAT_PRICE))
    assert data.collection.level_sources == {"sm_active": 0, "gr_engine_active": 2, "gpu_util": 1}
    assert data.collection.mig and data.collection.pod_labels == "namespace/pod"
    models = {dict(r.labels)["modelName"]: r.usage for r in report.by_model}
    assert set(models) == {
        "NVIDIA H100 80GB HBM3",
        "Tesla T4",
        None,
    }  # the A100 scrape is old: no modelName
    assert report.totals.gpus == 3 and report.totals.gpu_hours == pytest.approx(6)
    # H100 in MIG: its three 1g.10gb instances share its hours, two of them held by pods; idle
    # (GR engine 0); the A100's instance at 99.6 %; the T4 at 0 % utilization
    pods = {dict(r.labels)["pod"][:14]: r.usage.gpu_hours for r in report.by_pod}
    assert pods == {"text-embedding": pytest.approx(2 / 3), "tts-predictor-": pytest.approx(2 / 3)}
    assert report.totals.idle_gpu_hours == pytest.approx(4)
    assert report.totals.unallocated_gpu_hours == pytest.approx(2 / 3 + 2)
    assert [f.finding.title for f in report.findings] == []


def test_idle_line_is_a_parameter(lab: synth.Fleet, prometheus_url: str) -> None:
    data = collect_cluster(prometheus_url, "lab", idle_below=50)
    oracle = synth.oracle_usage(lab.series, data.collection.lookback_s, 50)
    assert _close(_minutes(data), oracle) == []


def test_victoria_metrics_gives_the_same_report(prometheus_url: str, victoria_url: str) -> None:
    for cluster in ("lab", "mig", "renamed"):
        documents = []
        for url in (prometheus_url, victoria_url):
            document = fleet_document(analyze(collect_cluster(url, cluster), flat(FLAT_PRICE)))
            document.pop("source")
            documents.append(document)
        assert documents[0] == documents[1], cluster


def test_a_prometheus_that_scrapes_gpuwarden_s_exporter(prometheus_url: str) -> None:
    """gpuwarden's exporter serves collections_total and collection_errors_total with one label
    set: the probe for its series counted every gpuwarden_* family over the window, a range
    function drops the names, and Prometheus refused the query (HTTP 422), so `fleet report`
    exited 4 on every Prometheus scraping the exporter (and `deploy remediate`'s job with it)."""
    window = Window(synth.BASE, synth.BASE + 2 * 3600, 3600)
    data = collect(PrometheusClient(prometheus_url), window, selector='cluster="exporter"')
    assert data.collection.gpuwarden_exporter
    report = analyze(data, flat(FLAT_PRICE))
    assert report.totals.gpus == 1 and report.totals.gpu_hours == pytest.approx(2)
