"""PyTorch's NCCL watchdog timeouts: which collective timed out, and what that says.

ProcessGroupNCCL prints ``WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1,
Timeout(ms)=1800000) ran for 1800328 milliseconds before timing out`` (PyTorch 1.13+; older
releases print no element counts, the oldest no SeqNum: the reading then stays split; 2.3+
also print "[PG 0 Rank 3] Timeout at NCCL work: 2070, last enqueued NCCL work: 2082", the SeqNum
alone). A barrier is a one-element all-reduce: a timeout there, early in the job, means the
others waited for a rank that was busy elsewhere; so does an early control message (the object
sizes and pickled bytes of broadcast_object_list / all_gather_object, a flag); a real tensor
late in training means the collective itself hung.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuwarden.health.explain.sizes import whole_number
from gpuwarden.health.explain.votes import Vote

# Thresholds of the reading (diagnosis.md §1, nccl-timeout-rank-busy / -hang).
EARLY_SEQ_NUM = 10  # the first collectives: setup barriers and the first broadcasts
BARRIER_NUMEL = 1  # torch.distributed.barrier() all-reduces one element
# torch.distributed's object collectives send a tensor of sizes, then the pickled bytes: a few
# KiB at most for the flags, configs and metrics programs exchange; parameters, gradients and
# activations are far larger
CONTROL_NUMEL = 4096

_WORK = re.compile(
    r"WorkNCCL\((?P<body>[^()]*(?:\([^()]*\)[^()]*)*)\)(?:\s*ran for (?P<ran>\d+) milliseconds)?",
    re.IGNORECASE,
)
_FIELD = re.compile(
    r"(?P<key>SeqNum|OpType|NumelIn|NumelOut|Timeout\(ms\))\s*=\s*(?P<value>[^,\s)]+)",
    re.IGNORECASE,
)
_TIMEOUT = re.compile(r"collective operation timeout|Timeout at NCCL work", re.IGNORECASE)
# ProcessGroupNCCL 2.3+: the timed-out work's sequence number, printed without the WorkNCCL
_TIMEOUT_AT_WORK = re.compile(r"Timeout at NCCL work:\s*(?P<seq>\d+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Collective:
    """The collective a watchdog timeout names."""

    seq_num: int | None
    op_type: str | None
    numel_in: int | None
    numel_out: int | None
    timeout_ms: int | None
    ran_ms: int | None

    @property
    def is_barrier(self) -> bool | None:
        if self.op_type is not None and self.op_type.upper() == "BARRIER":
            return True
        if self.numel_in is None:
            return None
        return self.numel_in <= BARRIER_NUMEL

    @property
    def is_control_message(self) -> bool | None:
        """Whether the tensor is as small as an object collective's sizes or pickled bytes."""
        return None if self.numel_in is None else self.numel_in <= CONTROL_NUMEL

    @property
    def is_early(self) -> bool | None:
        return None if self.seq_num is None else self.seq_num <= EARLY_SEQ_NUM


def _collective(match: re.Match[str]) -> Collective:
    fields = {m["key"].lower(): m["value"] for m in _FIELD.finditer(match["body"])}
    return Collective(
        seq_num=whole_number(fields.get("seqnum")),
        op_type=fields.get("optype"),
        numel_in=whole_number(fields.get("numelin")),
        numel_out=whole_number(fields.get("numelout")),
        timeout_ms=whole_number(fields.get("timeout(ms)")),
        ran_ms=whole_number(match["ran"]),
    )


def watchdog_timeout(flat: str) -> tuple[bool, Collective | None]:
    """Whether the text holds a watchdog timeout, and the collective it names (the earliest
    SeqNum when several ranks printed theirs: the first one that stopped the job)."""
    if _TIMEOUT.search(flat) is None:
        return False, None
    found = [_collective(m) for m in _WORK.finditer(flat)] or [
        Collective(whole_number(m["seq"]), None, None, None, None, None)
        for m in _TIMEOUT_AT_WORK.finditer(flat)
    ]
    if not found:
        return True, None
    return True, min(found, key=lambda c: (c.seq_num is None, c.seq_num or 0))


_DECIDES = (
    "every rank's log at the time of the timeout (what the rank that did not arrive was doing); "
    "TORCH_NCCL_DUMP_ON_TIMEOUT=1 records which rank never entered the collective"
)


def describe(c: Collective) -> str:
    parts = [
        f"SeqNum={c.seq_num}" if c.seq_num is not None else "",
        f"OpType={c.op_type}" if c.op_type else "",
        f"NumelIn={c.numel_in}" if c.numel_in is not None else "",
        f"Timeout={c.timeout_ms / 1000:g} s" if c.timeout_ms is not None else "",
    ]
    return ", ".join(p for p in parts if p)


def _weights(c: Collective) -> tuple[float, float, str]:
    """(rank-busy, hang, the reading in words)."""
    barrier, early = c.is_barrier, c.is_early
    if barrier and early:
        return 0.85, 0.15, "an early one-element collective is a barrier: a rank was elsewhere"
    if barrier:
        return (
            0.6,
            0.35,
            "a one-element collective (a barrier) mid-run: one rank was saving, "
            "evaluating or loading while the others waited",
        )
    if barrier is None:
        if early:
            return 0.5, 0.4, "an early collective of unknown size"
        return 0.45, 0.45, "a collective of unknown size"
    if early and c.is_control_message:
        return (
            0.6,
            0.35,
            "an early collective of a few elements (an object's size or pickled bytes, a flag): "
            "a rank was elsewhere",
        )
    if early:
        return 0.4, 0.5, "an early collective of a real tensor (the first broadcast or all-reduce)"
    return 0.25, 0.75, "a late collective of a real tensor: the collective itself hung"


def nccl_votes(flat: str) -> tuple[list[Vote], dict[str, str]]:
    timed_out, c = watchdog_timeout(flat)
    if not timed_out:
        return [], {}
    if c is None:
        what = "an NCCL watchdog timeout without the collective's details"
        return [
            Vote("nccl-timeout-rank-busy", 0.45, what, decides=_DECIDES),
            Vote("nccl-timeout-hang", 0.45, what, decides=_DECIDES),
        ], {}
    busy, hang, reading = _weights(c)
    evidence = f"watchdog timeout: {describe(c)} — {reading}"
    facts = {
        key: str(value)
        for key, value in (
            ("nccl_seq_num", c.seq_num),
            ("nccl_op_type", c.op_type),
            ("nccl_numel_in", c.numel_in),
            ("nccl_timeout_ms", c.timeout_ms),
            ("nccl_ran_ms", c.ran_ms),
        )
        if value is not None
    }
    return [
        Vote("nccl-timeout-rank-busy", busy, evidence, decides=_DECIDES),
        Vote("nccl-timeout-hang", hang, evidence, decides=_DECIDES),
    ], facts
