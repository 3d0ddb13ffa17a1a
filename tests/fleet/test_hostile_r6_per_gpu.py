"""Issue 13, round 6: `fleet report` by_node rows' per-GPU list (fleet.usage.by_node) on hostile
fleets — a node of thousands of GPUs (time stays linear), GPUs whose series carry a UUID but no
``gpu`` label or a label that is no number, and a UUID whose series name two nodes (it is one
GPU: its row is under the node it was first seen on, and the node rows still add up)."""

from __future__ import annotations

import time

import pytest

from gpuwarden.fleet.model import (
    BucketUsage,
    Collection,
    FleetData,
    GpuId,
    Holder,
    SeriesKey,
    Window,
)
from gpuwarden.fleet.usage import by_node

H100 = "NVIDIA H100 80GB HBM3"
PRICES = {H100: 2.0}
HOURS = 24


def _fleet(gpus: list[GpuId], extra_keys: tuple[SeriesKey, ...] = ()) -> FleetData:
    busy = {b: BucketUsage(60.0, 15.0, 40.0) for b in range(HOURS)}
    keys = [SeriesKey(g.uuid, Holder()) for g in gpus] + list(extra_keys)
    collection = Collection("http://prometheus", 300, 60.0, {}, False, None, False, 1, 0, 0, 0, 0)
    return FleetData(
        Window(0, HOURS * 3600, 3600),
        5.0,
        {g.uuid: g for g in gpus},
        dict.fromkeys(keys, busy),
        {},
        {},
        (),
        (),
        {},
        collection,
    )


def _node_of(count: int) -> list[GpuId]:
    return [GpuId(f"GPU-{i:08d}", "node-a", str(i), H100) for i in range(count)]


def _seconds(count: int) -> float:
    data = _fleet(_node_of(count))
    # the process's own CPU time: the other test worker's load does not count (wall time did)
    start = time.process_time()
    (row,) = by_node(data, PRICES, None)
    elapsed = time.process_time() - start
    assert [g.gpu.index for g in row.gpus] == [str(i) for i in range(count)]
    assert sum(g.usage.gpu_hours for g in row.gpus) == pytest.approx(row.usage.gpu_hours)
    return elapsed


def test_a_node_of_thousands_of_gpus_is_listed_in_linear_time() -> None:
    # the fastest of three (a collection or another worker's burst only ever adds time)
    small, large = (min(_seconds(count) for _ in range(3)) for count in (1_000, 4_000))
    assert large < 10 * small + 0.05  # four times the GPUs: ~5× the time, not sixteen times


def test_gpus_without_a_number_come_after_the_numbered_ones() -> None:
    gpus = [
        GpuId("GPU-c", "node-a", None, H100),
        GpuId("GPU-b", "node-a", "10", H100),
        GpuId("GPU-a", "node-a", "gpu-x", H100),
        GpuId("GPU-d", "node-a", "9", H100),
    ]
    (row,) = by_node(_fleet(gpus), PRICES, None)
    assert [g.gpu.uuid for g in row.gpus] == ["GPU-d", "GPU-b", "GPU-c", "GPU-a"]
    assert all(g.usage.gpus == 1 for g in row.gpus)


def test_a_uuid_seen_on_two_nodes_is_one_gpu_and_the_rows_add_up() -> None:
    gpus = [GpuId("GPU-shared", "node-a", "0", H100), GpuId("GPU-b0", "node-b", "0", H100)]
    # a second series of the shared UUID (another pod) — collect keeps one GpuId per UUID
    other = SeriesKey("GPU-shared", Holder("ml", "job-2"))
    rows = {dict(r.labels)["Hostname"]: r for r in by_node(_fleet(gpus, (other,)), PRICES, None)}
    assert [g.gpu.uuid for g in rows["node-a"].gpus] == ["GPU-shared"]
    for row in rows.values():
        assert sum(g.usage.gpu_hours for g in row.gpus) == pytest.approx(row.usage.gpu_hours)
