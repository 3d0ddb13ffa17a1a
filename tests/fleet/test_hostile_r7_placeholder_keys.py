"""Issue 13, round 7: fleet's placeholder GPUs (collect.gpu_key, this stop: "index:0" keyed with
its node) under the labels a hostile fleet serves.

Measured before the fix: a placeholder that names its node already ("HOST/index:0", the dcgm
reader's spelling, which gpuwarden's exporter serves) was keyed again with the series' node label
when that differed (an exporter relaying another node's page under its own Hostname): one GPU
had two keys, "relay/node-a/index:0" and "node-a/index:0". And a node label holding a "/" let two
GPUs share a key: GPU 0 of node "rack/1" and the placeholder "1/index:0" a node "rack" served
were both "rack/1/index:0". 10,000 nodes' "index:0" stayed 10,000 GPUs in linear time."""

from __future__ import annotations

import time

import pytest

from gpuwarden.fleet.collect import gpu_key, series_key
from gpuwarden.fleet.model import GpuId
from gpuwarden.fleet.usage import by_node
from tests.fleet.test_hostile_r6_per_gpu import H100, PRICES, _fleet


def _key(**labels: str) -> str:
    key = series_key(labels, None)
    assert key is not None
    return key.uuid


def test_a_placeholder_that_names_its_node_is_one_gpu_under_any_node_label() -> None:
    """Failed before: "relay/node-a/index:0" beside "node-a/index:0"."""
    served = [
        _key(UUID="node-a/index:0", Hostname="node-a", gpu="0"),
        _key(UUID="node-a/index:0", Hostname="relay", gpu="0"),
        _key(UUID="node-a/index:0", instance="10.0.0.9:9400", gpu="0"),
        _key(UUID="node-a/index:0", gpu="0"),
        _key(UUID="index:0", Hostname="node-a", gpu="0"),
    ]
    assert set(served) == {"node-a/index:0"}


def test_a_node_label_with_a_slash_does_not_merge_two_gpus() -> None:
    """Failed before: both were "rack/1/index:0"."""
    on_rack_1 = _key(UUID="index:0", Hostname="rack/1", gpu="0")
    named_1 = _key(UUID="1/index:0", Hostname="rack", gpu="0")
    assert on_rack_1 == "rack/1/index:0"
    assert named_1 == "1/index:0"
    # the dcgm reader's spelling of rack/1's GPU 0 is that GPU
    assert _key(UUID="rack/1/index:0", Hostname="relay", gpu="0") == on_rack_1


@pytest.mark.parametrize(
    ("uuid", "host", "key"),
    [
        (
            "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e",
            "node-b",
            "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e",
        ),
        ("index:0", None, "index:0"),  # no node to tell it by
        ("N/A", "node-a", "node-a/N/A"),  # not a node-qualified placeholder: keyed with its node
        ("node-a/index:x", "node-b", "node-b/node-a/index:x"),
        ("/index:0", "node-b", "node-b//index:0"),  # no node before the "/"
    ],
)
def test_other_uuid_labels_keep_their_keys(uuid: str, host: str | None, key: str) -> None:
    assert gpu_key(GpuId(uuid, host, "0", None)) == key


def _seconds(nodes: int) -> float:
    start = time.process_time()
    keys = {_key(UUID="index:0", Hostname=f"node-{n}", gpu="0") for n in range(nodes)}
    gpus = [GpuId(key, key.split("/", 1)[0], "0", H100) for key in keys]
    rows = by_node(_fleet(gpus), PRICES, None)
    elapsed = time.process_time() - start
    assert len(keys) == len(rows) == nodes  # every node's GPU 0 is its own GPU, on its own row
    return elapsed


def test_ten_thousand_nodes_gpu_0_are_ten_thousand_gpus_in_linear_time() -> None:
    # the fastest of three at each size (another worker's burst only ever adds time); four times
    # the nodes: ~4× the time when linear, 16× when quadratic
    small = min(_seconds(2_500) for _ in range(3))
    large = min(_seconds(10_000) for _ in range(3))
    assert large < 10 * small + 0.2
