"""fleet's GPU keys in PromQL (queries.gpu_keyed, this stop) against label values a hostile fleet
serves (issue 13, round 8), on the real Prometheus and VictoriaMetrics: the key the servers
compute must be collect.gpu_key's, label set by label set, or the overlap join pairs series of
two GPUs (or splits one GPU's).

Measured before the fix: a label value holding a newline (the text format escapes it as \\n; a
relabelling can put one there) was read by collect.gpu_of as any other, but the servers'
regexes ("(.+)", "(?:GPU-|MIG-).*") do not match across a newline: a Hostname "rack\\n7" was no
node in PromQL ("index:1" against "rack\\n7/index:1"), and a UUID "GPU-…\\n" was keyed with its
node ("n-1/GPU-…" against "GPU-…")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwarden.fleet import queries as q
from gpuwarden.fleet.analyze import analyze
from gpuwarden.fleet.collect import LevelGroup, collect, gpu_key, gpu_of, level_groups
from gpuwarden.fleet.model import Window
from gpuwarden.fleet.pricing import flat
from gpuwarden.fleet.prometheus import PrometheusClient
from tests.fleet import synth
from tests.fleet.conftest import FLAT_PRICE
from tests.fleet.test_placeholder_families import TWO_HOURS, _server

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"

METRIC = "DCGM_FI_DEV_SM_CLOCK"
# label sets as the text format spells them (escapes kept: \\n a newline, \\" a quote, \\\\ a
# backslash), each with the key collect.gpu_key gives the values the servers answer with
SERVED: tuple[tuple[dict[str, str], str], ...] = (
    ({"UUID": "index:1", "Hostname": "rack\\n7"}, "rack\n7/index:1"),
    ({"UUID": "index:1", "Hostname": "\\n"}, "\n/index:1"),
    ({"UUID": "index:1", "node": "n\\n1", "Hostname": "pod"}, "n\n1/index:1"),
    ({"UUID": "index:1", "instance": "a\\nb:9400"}, "a\nb/index:1"),
    ({"UUID": "index:1", "instance": "x\\ny"}, "x\ny/index:1"),
    ({"UUID": "GPU-0000\\n", "Hostname": "n-1"}, "GPU-0000\n"),
    ({"UUID": "MIG-\\nx", "Hostname": "n-1"}, "MIG-\nx"),
    ({"UUID": "a\\nb/index:2", "Hostname": "n-1"}, "n-1/a\nb/index:2"),
    ({"UUID": "index:1", "Hostname": 'q\\"uote\\\\d'}, 'q"uote\\d/index:1'),
    ({"UUID": "index:1", "Hostname": "rack/7/index:3"}, "rack/7/index:3/index:1"),
    ({"UUID": "x/index:4", "Hostname": "(.*)|[a-z]+$"}, "x/index:4"),
    ({"UUID": "index:1", "Hostname": "(.*)|[a-z]+$"}, "(.*)|[a-z]+$/index:1"),
    ({"UUID": "index:1", "instance": "[::1]:9400"}, "[::1]/index:1"),  # its port cut
    ({"UUID": "index:1", "instance": ":9400"}, "index:1"),
    ({"UUID": "índex:1", "Hostname": "nœud"}, "nœud/índex:1"),
)


@contextlib.contextmanager
def _serving(kind: str, workdir: Path) -> Iterator[str]:
    times = synth.sample_times(TWO_HOURS.end_s - 600, TWO_HOURS.end_s)
    series = [
        synth.Series(METRIC, {**labels, "cluster": "hostile-keys"}, [(t, 1.0) for t in times])
        for labels, _ in SERVED
    ]
    with _server(kind, series, workdir) as url:
        yield url


@pytest.fixture(scope="module", params=["prometheus", "victoria-metrics"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with _serving(request.param, tmp_path_factory.mktemp("hostile-keys")) as url:
        yield url


def test_the_servers_key_every_hostile_label_set_as_the_collector_does(served: str) -> None:
    query = q.gpu_keyed(f'{METRIC}{{cluster="hostile-keys"}}')
    samples = PrometheusClient(served).instant("keys", query, TWO_HOURS.end_s)
    assert len(samples) == len(SERVED)
    pairs = {}
    for sample in samples:
        gpu = gpu_of(sample.labels)
        assert gpu is not None
        pairs[gpu_key(gpu)] = sample.labels.get(q.GPU_KEY)
    assert pairs == {key: key for _, key in SERVED}


# --- many GPUs: the UUID lists that narrow a query, and the batches of the overlap join

# VictoriaMetrics' default -search.maxQueryLen
MAX_QUERY_BYTES = 16384
HOUR = Window(synth.BASE, synth.BASE + synth.HOUR, synth.HOUR)
H100 = "NVIDIA H100 80GB HBM3"


def _longest_query(groups: list[LevelGroup]) -> int:
    lookback = "300s"
    queries = [
        q.present_minutes(q.level(g.metric, g.factor, g.where, lookback), "1h") for g in groups
    ]
    queries += [
        q.overlaps(q.level(g.metric, g.factor, where, lookback))
        for g in groups
        for where in (batch.where for batch in g.overlaps)
    ]
    return max(len(query.encode()) for query in queries)


def test_ten_thousand_placeholder_gpus_of_two_families_fit_a_query() -> None:
    """10,000 nodes' "node-N/index:0" (the dcgm reader's spelling), half of them with SM
    activity, a quarter scraped twice. Failed before: the GPU_UTIL group's UUID list was 110 KB
    (VictoriaMetrics: HTTP 422)."""
    nodes = [f"node-{i}/index:0" for i in range(10_000)]
    rows = {
        "sm_active": {(key, None): 1.0 for key in nodes[::2]},
        "gpu_util": {(key, None): 2.0 if i % 4 == 1 else 1.0 for i, key in enumerate(nodes)},
    }
    groups = level_groups(rows, 'cluster="scale"')
    assert sum(g.gpus for g in groups) == 10_000
    assert _longest_query(groups) < MAX_QUERY_BYTES
    for group in groups:
        batches = [batch.keys for batch in group.overlaps]
        # every GPU with several series is in one batch, and folded for that batch alone
        assert sum(len(keys) for keys in batches) == len({k for keys in batches for k in keys})


def test_a_batch_of_long_placeholder_uuids_fits_a_query() -> None:
    """Nodes named with 253 characters (RFC 1035's longest name): 200 such UUIDs are 50 KB."""
    nodes = [f"{'n' * 240}-{i:06d}.example/index:0" for i in range(1000)]
    rows = {"gpu_util": {(key, None): 2.0 if i < 300 else 1.0 for i, key in enumerate(nodes)}}
    groups = level_groups(rows, "")
    assert _longest_query(groups) < MAX_QUERY_BYTES
    [group] = groups
    assert sorted(k for batch in group.overlaps for k in batch.keys) == sorted(nodes[:300])


def _placeholder_fleet(nodes: int, twice: int) -> list[synth.Series]:
    """``nodes`` nodes' GPU 0, a placeholder "index:0" (no UUID served), the first ``twice``
    scraped by two jobs, busy at 50 % every 5 minutes over the hour."""
    times = synth.sample_times(HOUR.start_s - 300, HOUR.end_s + 300, 300)
    served = []
    for i in range(nodes):
        labels = {"UUID": "index:0", "Hostname": f"node-{i}", "gpu": "0", "modelName": H100}
        for job in range(2 if i < twice else 1):
            labels = {**labels, "instance": f"10.1.{i // 250}.{i % 250}:{9400 + job}"}
            served.append(
                synth.Series(GPU_UTIL, {**labels, "cluster": "twice"}, [(t, 50.0) for t in times])
            )
    return served


@pytest.mark.parametrize("kind", ["prometheus", "victoria-metrics"])
def test_placeholder_gpus_scraped_twice_in_two_batches_are_each_counted_once(
    kind: str, tmp_path: Path
) -> None:
    """201 nodes' "index:0" scraped by two jobs, of 260: two overlap batches, each selecting
    every node's "index:0". Failed before: each batch's answer took back every such GPU's
    surplus, twice in all: those GPUs had no minute left (59 GPUs, 59 GPU-hours of 260)."""
    with _server(kind, _placeholder_fleet(260, 201), tmp_path) as url:
        data = collect(PrometheusClient(url), HOUR, selector='cluster="twice"')
    report = analyze(data, flat(FLAT_PRICE))
    assert report.totals.gpus == 260
    assert report.totals.gpu_hours == pytest.approx(260)
    assert report.totals.mean_utilization_percent == pytest.approx(50)


def _real_uuid_fleet(gpus: int, twice: int) -> list[synth.Series]:
    times = synth.sample_times(HOUR.start_s - 300, HOUR.end_s + 300, 300)
    served = []
    for i in range(gpus):
        labels = {"UUID": f"GPU-{i:08x}-1111-2222-3333-444455556666", "Hostname": f"node-{i // 8}"}
        labels.update(gpu=str(i % 8), modelName=H100, cluster="uuids")
        for job in range(2 if i < twice else 1):
            instance = f"10.2.0.{i // 8}:{9400 + job}"
            served.append(
                synth.Series(GPU_UTIL, {**labels, "instance": instance}, [(t, 50.0) for t in times])
            )
    return served


def test_two_hundred_real_uuids_of_gpus_scraped_twice_fit_victoria_metrics(tmp_path: Path) -> None:
    """250 of 1,000 GPUs scraped twice: a batch of 200 UUIDs, twice in the overlap query.
    Failed before: 21.5 KB, refused by VictoriaMetrics (HTTP 422), the whole report lost."""
    with _server("victoria-metrics", _real_uuid_fleet(1000, 250), tmp_path) as url:
        data = collect(PrometheusClient(url), HOUR, selector='cluster="uuids"')
    report = analyze(data, flat(FLAT_PRICE))
    assert report.totals.gpus == 1000
    assert report.totals.gpu_hours == pytest.approx(1000)
