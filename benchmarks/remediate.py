"""`gpuwarden remediate`'s decision time for 1,000 nodes × findings (issue 15).

What a run spends before its first write, measured apart:

* read   — the findings document (`gpuwarden.fleet/1`, the shape report.fleet writes) → node
           findings (json.loads + remediate.findings);
* nodes  — 1,000 Node objects as the API returns them (labels and annotations of a GPU node,
           taints, conditions) → NodeState;
* plan   — remediate.plan.make_plan: matching, gates, per-node sequences, the limits;
* list   — the same 1,000 nodes listed from the stand-in API server (tests/fakes/kube_api.py on
           127.0.0.1) through the official `kubernetes` client, as `remediate` reads them
           (`--no-api` skips it).

Findings scale from 1 % of the nodes sick (8 findings: one GPU each) to every GPU of every node
with one finding (8,000) and eight (64,000). Two policies: one rule (cordon, taint, drain) and
eight rules matching different codes. The limits bind (max_unavailable 20 %, the breaker at
50 %/5 min), so the plan defers most sick nodes, as it would in a mass event.

No reference tool makes these decisions offline (NVSentinel and draino decide inside their
controllers, one event at a time), so the table reports our times alone. Run:
    python benchmarks/remediate.py [--nodes 1000] [--repeat 5] [--no-api]
It reports; it never asserts.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuwarden.remediate.changes import node_state
from gpuwarden.remediate.findings import document_findings
from gpuwarden.remediate.model import ClusterState, FindingsInput
from gpuwarden.remediate.plan import make_plan
from gpuwarden.remediate.policy import policy_from_text
from gpuwarden.units import iso_utc
from planner_accuracy import table

ROOT = Path(__file__).resolve().parent.parent
NOW = time.time()
GPUS = 8
CODES = (
    "ecc-uncorrectable",
    "xid",
    "gpu-lost",
    "row-remap-failure",
    "thermal-outlier",
    "nvlink-down",
    "straggler",
    "low-utilization",
)
ONE_RULE = """
rules:
  - match: {code: [ecc-uncorrectable, xid, gpu-lost], severity: critical}
    actions: [cordon, {taint: {key: nvidia.com/gpu-error, value: fatal, effect: NoSchedule}},
              drain]
limits: {max_unavailable: 20%, circuit_breaker: {percentage: 50, window: 5m}}
uncordon: true
"""
EIGHT_RULES = (
    "rules:\n"
    + "".join(
        f"  - match: {{code: {code}, for: 10m}}\n"
        f"    actions: [cordon, {{label: {{gpuwarden.io/fault: {code}}}}}, drain]\n"
        for code in CODES
    )
    + "limits: {max_unavailable: 20%, min_interval: 10m}\nuncordon: true\n"
)


def node_object(i: int, rng: random.Random) -> dict[str, Any]:
    """A GPU node as `kubectl get node -o json` shows one (the parts remediate reads, and the
    labels GPU feature discovery and the cloud put there)."""
    labels = {
        "kubernetes.io/hostname": f"gpu-{i:04d}",
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "topology.kubernetes.io/zone": f"us-east-1{'abc'[i % 3]}",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": str(GPUS),
        "nvidia.com/cuda.driver.major": "550",
        "pool": "training",
    }
    annotations = {"node.alpha.kubernetes.io/ttl": "0", "csi.volume.kubernetes.io/nodeid": "{}"}
    spec: dict[str, Any] = {
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    }
    state = rng.random()
    if state < 0.02:  # cordoned by a person
        spec["unschedulable"] = True
    elif state < 0.03:  # quarantined by gpuwarden 2 minutes ago
        spec["unschedulable"] = True
        labels["gpuwarden.io/cordoned-by"] = "gpuwarden"
        annotations["gpuwarden.io/quarantined-at"] = iso_utc(NOW - 120)
    ready = "False" if rng.random() < 0.01 else "True"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"gpu-{i:04d}",
            "labels": labels,
            "annotations": annotations,
            "resourceVersion": str(1000 + i),
        },
        "spec": spec,
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "DiskPressure", "status": "False"},
                {"type": "Ready", "status": ready},
            ],
            "capacity": {"nvidia.com/gpu": str(GPUS), "cpu": "192", "memory": "2097152Ki"},
        },
    }


def fleet_document(
    nodes: int, sick_share: float, per_gpu: int, rng: random.Random
) -> dict[str, Any]:
    findings = []
    for i in range(nodes):
        if rng.random() >= sick_share:
            continue
        gpus = range(GPUS) if sick_share >= 1 else (rng.randrange(GPUS),)
        for gpu in gpus:
            for k in range(per_gpu):
                findings.append(
                    {
                        "code": CODES[(i + gpu + k) % len(CODES)],
                        "severity": "critical" if k % 2 == 0 else "warning",
                        "Hostname": f"gpu-{i:04d}",
                        "gpu": str(gpu),
                        "UUID": f"GPU-{i:04d}-{gpu}",
                        "modelName": "NVIDIA H100 80GB HBM3",
                        "namespace": None,
                        "pod": None,
                        "title": "",
                        "evidence": [],
                        "first_seen": iso_utc(NOW - rng.randrange(60, 7200)),
                        "last_seen": iso_utc(NOW - 60),
                        "count": 1,
                    }
                )
    return {
        "schema": "gpuwarden.fleet/1",
        "window": {"end_s": NOW - 60},
        "by_node": [{"Hostname": f"gpu-{i:04d}"} for i in range(nodes)],
        "findings": findings,
    }


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(fastest, median) seconds of ``repeat`` calls, and the last result."""
    times = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def list_through_the_client(objects: list[dict[str, Any]], repeat: int) -> tuple[float, float]:
    sys.path.insert(0, str(ROOT))  # tests.fakes.kube_api: the stand-in API server
    from tests.fakes.kube_api import FakeKubeApi

    from gpuwarden.remediate.apply import connect
    from gpuwarden.remediate.changes import node_state as state

    with FakeKubeApi() as api:
        for obj in objects:
            api.put(obj)
        config = api.write_kubeconfig(Path(sys.argv[0]).parent / ".remediate-bench-kubeconfig")
        try:
            cluster = connect(str(config))

            def read() -> int:
                answer = cluster.list_nodes()
                return len([state(i) for i in answer.body["items"]])

            fastest, median, count = best(read, repeat)
        finally:
            config.unlink(missing_ok=True)
    assert count == len(objects)
    return fastest, median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-api", action="store_true")
    args = parser.parse_args()
    rng = random.Random(15)
    objects = [node_object(i, rng) for i in range(args.nodes)]
    nodes_s, nodes_med, states = best(lambda: tuple(node_state(o) for o in objects), args.repeat)
    cluster = ClusterState(states)
    rows = []
    for label, share, per_gpu in (
        ("1 % of nodes, 1 GPU each", 0.01, 1),
        ("10 % of nodes, 1 GPU each", 0.10, 1),
        ("every GPU, 1 finding", 1.0, 1),
        ("every GPU, 8 findings", 1.0, 8),
    ):
        text = json.dumps(fleet_document(args.nodes, share, per_gpu, rng))
        read_s, _, document = best(lambda t=text: document_findings(json.loads(t)), args.repeat)
        findings = FindingsInput(tuple(document.findings), dict(document.judged))
        count = len(findings.findings)
        for policy_name, policy_text in (("1 rule", ONE_RULE), ("8 rules", EIGHT_RULES)):
            policy = policy_from_text(policy_text)
            plan_s, _, plan = best(
                lambda p=policy, f=findings: make_plan(p, f, cluster, NOW), args.repeat
            )
            statuses: dict[str, int] = {}
            for action in plan.actions:
                statuses[action.status.value] = statuses.get(action.status.value, 0) + 1
            rows.append(
                [
                    label,
                    f"{count:,}",
                    f"{len(text) / 1e6:.1f}",
                    policy_name,
                    ms(read_s),
                    ms(plan_s),
                    ms(read_s + nodes_s + plan_s),
                    ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
                ]
            )
    print(
        f"remediate decision time, {args.nodes:,} nodes × {GPUS} GPUs, fastest of {args.repeat} "
        f"(ms; nodes → NodeState: {ms(nodes_s)} ms, median {ms(nodes_med)})"
    )
    print(
        table(
            ["findings", "count", "doc MB", "policy", "read ms", "plan ms", "total ms", "plan"],
            rows,
        )
    )
    if not args.no_api:
        fastest, median = list_through_the_client(objects, args.repeat)
        print(
            f"\nlist {args.nodes:,} nodes through the kubernetes client from the stand-in server "
            f"(127.0.0.1) + NodeState: fastest {ms(fastest)} ms, median {ms(median)} ms"
        )


if __name__ == "__main__":
    main()
