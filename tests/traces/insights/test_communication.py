"""Communication per collective, overlap with compute, exposed share: against the raw events."""

from __future__ import annotations

import pytest

from gpuwarden.traces.insights import rank_insights
from gpuwarden.types.trace_insights import KernelKind
from tests.traces.insights import raw
from tests.traces.insights.cache import rank_of

DTYPE = {"Float": 4, "Long": 8, "BFloat16": 2, "Half": 2}


def _split(rel: str) -> tuple[list[dict], list[tuple[float, float]]]:  # type: ignore[type-arg]
    kernels = [e for e in raw.complete(rel) if e["cat"] == "kernel"]
    comm = [e for e in kernels if "nccl" in e["name"] or "all_reduce" in e["name"]]
    comm_ids = {id(e) for e in comm}
    compute = [(e["ts"], e["ts"] + e["dur"]) for e in kernels if id(e) not in comm_ids]
    return comm, compute


@pytest.mark.parametrize("rel", [raw.megatron(0), raw.megatron(3), raw.NCCL, raw.CONTROL, raw.B200])
def test_comm_time_and_overlap(rel: str) -> None:
    comm, compute = _split(rel)
    report = rank_insights(rank_of(rel)).communication
    assert report is not None
    assert sum(c.count for c in report.collectives) == len(comm)
    assert sum(c.time_us for c in report.collectives) == pytest.approx(sum(e["dur"] for e in comm))
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in comm]
    busy = sum(e - s for s, e in raw.union(spans))
    over = raw.overlap(spans, compute)
    assert report.comm_busy_us == pytest.approx(busy, abs=1.0)
    assert report.overlapped_us == pytest.approx(over, abs=1.0)
    assert report.exposed_us == pytest.approx(busy - over, abs=1.0)


def test_megatron_tp_allreduce_is_fully_exposed() -> None:
    """Megatron TP=8: all 84 all-reduces per rank, none overlapped: 40 % of the step."""
    rel = raw.megatron(0)
    comm, _ = _split(rel)
    report = rank_insights(rank_of(rel)).communication
    assert report is not None
    (coll,) = report.collectives
    assert coll.kind is KernelKind.COMM_ALLREDUCE and coll.count == len(comm) == 84
    (step,) = raw.steps(rel)
    exposed = report.exposed_us
    assert report.exposed_ratio_of_steps == pytest.approx(exposed / step["dur"], rel=1e-6)
    assert report.fix is not None


def test_message_bytes_from_collective_args() -> None:
    rel = raw.NCCL
    expected: dict[str, int] = {}
    for e in raw.complete(rel):
        a = e.get("args") or {}
        if e["cat"] == "kernel" and "In msg nelems" in a:
            name = a["Collective name"]
            expected[name] = expected.get(name, 0) + a["In msg nelems"] * DTYPE[a["dtype"]]
    report = rank_insights(rank_of(rel)).communication
    assert report is not None
    got = {c.kind: c.bytes_total for c in report.collectives}
    assert got[KernelKind.COMM_ALLREDUCE] == expected["allreduce"]
    assert got[KernelKind.COMM_BROADCAST] == expected["broadcast"]


def test_no_bytes_when_not_recorded() -> None:
    report = rank_insights(rank_of(raw.megatron(0))).communication
    assert report is not None and report.collectives[0].bytes_total is None
