"""Which out-of-memory cause the numbers support (diagnosis.md §1, the ``oom-*`` codes).

The arithmetic, for PyTorch's numbers (T total, R reserved, A allocated, F free, X tried):

* T − R − F is held outside PyTorch's allocator: this process's CUDA context (0.3–1 GiB),
  NCCL buffers, and every other process on the GPU. Far more than a context: another process
  (``oom-other-process``); PyTorch 2.1+ names those processes and their bytes.
* X − (F + (R − A)) is the shortfall: what the request lacks even if the allocator's cache were
  one free block. Positive: the job needs more than the GPU has (``oom-too-big``). Not
  positive, and the cache holds a material share of the GPU: the bytes are there but split
  (``oom-fragmentation``). Not positive but only by a sliver: the job is at the GPU's limit —
  the next allocation fails even after defragmenting (``oom-too-big``, fragmentation second).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwarden.health.explain.sizes import size
from gpuwarden.health.explain.votes import Vote
from gpuwarden.types.health import OomFacts
from gpuwarden.units import GIB

# A CUDA context with the framework's kernels loaded: a few hundred MiB with lazy loading,
# up to ~1 GiB (memory.md §2.10; diagnosis.md §1 "~0.3–1 GiB"), plus the cuBLAS/cuDNN handles'
# tens of MiB and the messages' rounding to 0.01 GiB: "≈ a context" up to 1.25 GiB.
CONTEXT_MAX_BYTES = GIB + GIB // 4
# "≫ a context": more than two contexts' worth is another process (or a second framework).
OUTSIDE_OTHER_MIN_BYTES = 2 * GIB
# What the allocator normally keeps split or rounded (512 B rounding, 2 MiB small-pool segments,
# 20 MiB blocks for 1–10 MiB requests; memory.md §2.10): fragmentation matters when compacting
# the cache would give back more than this share of the GPU.
FRAGMENTATION_MIN_SHARE = 0.05
# An "other process" large enough to matter on its own.
OTHER_PROCESS_MIN_BYTES = GIB
HIGH_VOTE = 0.85  # a vote this strong is the answer: the others become second readings
# Too big while another holder's bytes (beyond a context) would cover the shortfall: a reading,
# not the answer (the other-process vote beside it is medium too)
COVERED_TOO_BIG = 0.6
# Bytes outside the allocator that NVML cannot attribute (its per-process figure for this
# process is below PyTorch's own reservation): another process stays a medium reading at most.
UNATTRIBUTED_MAX = 0.6

DECIDES_OOM = (
    "the full OOM message (its numbers), `nvidia-smi --query-compute-apps=pid,used_memory "
    "--format=csv` while it runs, torch.cuda.memory_summary() at the failure"
)


@dataclass(frozen=True, slots=True)
class _Numbers:
    """A PyTorch OOM message with every number stated (bytes)."""

    tried: int
    total: int
    allocated: int
    reserved: int
    free: int

    @classmethod
    def of(cls, f: OomFacts) -> _Numbers | None:
        values = (f.tried_bytes, f.total_bytes, f.allocated_bytes, f.reserved_bytes, f.free_bytes)
        if any(v is None for v in values):
            return None
        tried, total, allocated, reserved, free = (int(v or 0) for v in values)
        return cls(tried, total, allocated, reserved, free)

    @property
    def cached(self) -> int:
        """Reserved by the allocator but not allocated to a tensor."""
        return self.reserved - self.allocated

    @property
    def outside(self) -> int:
        """Held outside PyTorch's allocator: contexts, NCCL, other processes."""
        return self.total - self.reserved - self.free

    @property
    def shortfall(self) -> int:
        """What the request lacks even with the cache compacted into one block."""
        return self.tried - (self.free + self.cached)


def _could_be_this_process(held: int, reserved: int, total: int | None) -> bool:
    """Whether a listed process holding ``held`` bytes can be this one: it holds the allocator's
    reserve plus about a context, or it holds so much that it and this process's reserve could
    not both fit in the GPU (then it is this process, with NCCL/cuBLAS workspaces or a second
    allocator outside PyTorch's reserve)."""
    if held < reserved:
        return False
    return held <= reserved + OUTSIDE_OTHER_MIN_BYTES or (
        total is not None and held + reserved > total
    )


def _others(facts: OomFacts) -> tuple[tuple[int, int], ...]:
    """The listed processes that are not this one. Without a "this process has" line NVML named
    this process by another PID (a container's host PID, or PyTorch ≥ 2.2, which lists every
    process): the entry that can be this process (``_could_be_this_process``) is."""
    listed = facts.other_processes
    if facts.this_process_bytes is not None or facts.reserved_bytes is None or not listed:
        return listed
    reserved = facts.reserved_bytes
    own = [p for p in listed if _could_be_this_process(p[1], reserved, facts.total_bytes)]
    if not own:
        return listed
    me = min(own, key=lambda p: p[1] - reserved)
    return tuple(p for p in listed if p is not me)


def _listed_process_votes(facts: OomFacts, n: _Numbers) -> list[Vote]:
    others = _others(facts)
    held = sum(b for _, b in others)
    if held < OTHER_PROCESS_MIN_BYTES:
        return []
    names = ", ".join(f"process {pid} holds {size(b)}" for pid, b in others if b >= GIB / 8)
    weight = 0.9 if n.shortfall <= held else 0.6
    return [
        Vote(
            "oom-other-process",
            weight,
            f"{names}: {size(held)} in other processes, {held / n.total:.0%} of the "
            f"{size(n.total)} GPU",
        )
    ]


def _other_process_votes(facts: OomFacts, n: _Numbers) -> list[Vote]:
    if facts.other_processes:
        return _listed_process_votes(facts, n)
    if facts.this_process_bytes is not None and not _unseen_by_nvml(facts, n):
        return _unlisted_others_votes(facts, n)
    arithmetic = (
        f"{size(n.total)} total − {size(n.reserved)} reserved by PyTorch − {size(n.free)} free = "
        f"{size(n.outside)} held outside PyTorch"
    )
    if n.outside >= OUTSIDE_OTHER_MIN_BYTES:
        weight = _unlisted_holder_weight(n.outside, n)
        return [Vote("oom-other-process", weight, f"{arithmetic} ≫ a CUDA context (0.3–1 GiB)")]
    if n.outside > CONTEXT_MAX_BYTES:
        return [
            Vote(
                "oom-other-process",
                0.3,
                f"{arithmetic}: a little more than a CUDA context (0.3–1 GiB) — NCCL or cuDNN "
                "workspaces, the desktop, or a small process",
                decides="nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
            )
        ]
    return []


def _unlisted_others_votes(facts: OomFacts, n: _Numbers) -> list[Vote]:
    """PyTorch 2.x's "Including non-PyTorch memory, this process has S memory in use" (NVML's
    figure for this process, its context and other pools included) leaves T − F − S to every
    other process: the bytes outside PyTorch beyond that are this process's own."""
    held = _held_by_others(facts, n)
    if held < OTHER_PROCESS_MIN_BYTES:
        return []
    this = size(facts.this_process_bytes or 0)
    arithmetic = (
        f"{size(n.total)} total − {size(n.free)} free − {this} this process has = {size(held)} "
        "held by other processes"
    )
    return [Vote("oom-other-process", _unlisted_holder_weight(held, n), arithmetic)]


def _unlisted_holder_weight(held: int, n: _Numbers) -> float:
    """How sure bytes the message gives to no listed process make another process the cause:
    sure when they are a quarter of the GPU or more."""
    return 0.85 if held >= n.total / 4 else 0.65


def _context_note(facts: OomFacts, n: _Numbers) -> str | None:
    if facts.other_processes or not 0 <= n.outside <= CONTEXT_MAX_BYTES:
        return None
    return (
        f"{size(n.reserved)} reserved + {size(n.free)} free of {size(n.total)}: "
        f"{size(n.outside)} held outside PyTorch ≈ a CUDA context (0.3–1 GiB)"
    )


def _fit_votes(n: _Numbers, other_strong: bool, held_by_others: int) -> list[Vote]:
    sums = (
        f"allocated {size(n.allocated)} + tried {size(n.tried)} = {size(n.allocated + n.tried)}; "
        f"reserved {size(n.reserved)} + free {size(n.free)} = {size(n.reserved + n.free)}"
    )
    big = 0.3 if other_strong else 0.85
    if n.shortfall > 0:
        short = (
            f"{sums}: short by {size(n.shortfall)} even with the allocator's cache compacted "
            f"(reserved ≈ allocated: {size(n.cached)} cached)"
        )
        if not other_strong and _others_cover_shortfall(n, held_by_others):
            # the bytes another holder has would cover what is missing: the job fits this GPU
            # alone, or does not — the numbers cannot tell
            return [
                Vote(
                    "oom-too-big",
                    COVERED_TOO_BIG,
                    f"{short}; the {size(held_by_others)} held outside PyTorch by other than "
                    "this process and its context would cover it",
                    decides=DECIDES_OOM,
                )
            ]
        return [Vote("oom-too-big", big, short)]
    if n.free >= n.tried and n.free + n.cached < FRAGMENTATION_MIN_SHARE * n.total:
        return _full_gpu_votes(n)
    if n.free >= n.tried:
        note = f"{size(n.free)} free ≥ {size(n.tried)} tried, yet the allocation failed"
        return [
            Vote("oom-framework-pool", 0.4, f"{note}: a per-process limit or another pool",
                 decides=DECIDES_OOM),
            Vote("oom-other-process", 0.3, f"{note}: another process allocated first",
                 decides=DECIDES_OOM),
            Vote("oom-fragmentation", 0.3, note, decides=DECIDES_OOM),
        ]  # fmt: skip
    room = -n.shortfall
    if n.cached >= n.tried and room >= max(n.tried, FRAGMENTATION_MIN_SHARE * n.total):
        return [
            Vote(
                "oom-fragmentation",
                0.85,
                f"reserved − allocated = {size(n.cached)} cached but unallocated ≥ "
                f"{size(n.tried)} tried: the memory is there, split into blocks too small",
            )
        ]
    return [
        Vote("oom-too-big", 0.3 if other_strong else 0.7,
             f"{sums}: the request fits in free + cached memory only by {size(room)} — the job "
             "is at the GPU's limit"),
        Vote("oom-fragmentation", 0.35, f"{size(n.cached)} cached but unallocated; expandable "
             "segments would give back little of it",
             decides="torch.cuda.memory_summary() at the failure (largest free block)"),
    ]  # fmt: skip


def _others_cover_shortfall(n: _Numbers, held_by_others: int) -> bool:
    """Whether another holder is in the numbers (``OUTSIDE_OTHER_MIN_BYTES`` outside PyTorch)
    and what it holds covers the shortfall: then "needs more than the GPU holds" is as open as
    "another process holds what it needed"."""
    return n.outside >= OUTSIDE_OTHER_MIN_BYTES and n.shortfall <= held_by_others


def _held_by_others(facts: OomFacts, n: _Numbers) -> int:
    """The bytes other holders than this process have, as far as the message tells: the listed
    processes that are not this one; else the GPU's used bytes beyond PyTorch 2.x's "this
    process has S memory in use" (S counts this process's context and its other pools), when
    NVML sees this process; else what is outside PyTorch beyond a context."""
    if facts.other_processes:
        return sum(held for _, held in _others(facts))
    if facts.this_process_bytes is not None and not _unseen_by_nvml(facts, n):
        return n.total - n.free - facts.this_process_bytes
    return n.outside - CONTEXT_MAX_BYTES


def _full_gpu_votes(n: _Numbers) -> list[Vote]:
    """Free ≥ tried, but free + cached is within what the allocator keeps rounded or split (and
    the driver keeps for its page tables): the GPU is full, the job is at its limit — the few MiB
    "free" are not an allocatable block."""
    left = f"{size(n.free)} free + {size(n.cached)} cached of {size(n.total)}"
    return [
        Vote("oom-too-big", 0.6, f"{left} (< {FRAGMENTATION_MIN_SHARE:.0%}): the GPU is full and "
             f"{size(n.tried)} more did not fit — the job is at the GPU's limit",
             decides=DECIDES_OOM),
        Vote("oom-fragmentation", 0.3, f"{left}: what is left may be split", decides=DECIDES_OOM),
    ]  # fmt: skip


DECIDES_MPS = (
    "rerun with PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 (no limit; the system may swap or stall): if "
    "it then runs, the allocator's limit was the bound; Activity Monitor's memory pressure"
)

DECIDES_MPS_NO_LIMIT = (
    "Activity Monitor's memory pressure and swap while it runs: with the watermark off only the "
    "Mac's unified memory bounds the job"
)


def mps_votes(facts: OomFacts) -> list[Vote]:
    """PyTorch's MPS allocator fails a request when its heaps + the process's other Metal memory
    + the request exceed its high-watermark limit (MPSAllocator.mm): the job does not fit the
    limit. The limit is a ratio of the device's recommended working set that the user may raise,
    so the verdict stays medium."""
    tried, limit = facts.tried_bytes, facts.total_bytes
    held = facts.this_process_bytes
    if limit is None:  # the watermark is off: the Mac's memory itself ran out
        return [Vote("oom-too-big", 0.45, "MPS ran out of memory with no allocator limit set",
                     decides=DECIDES_MPS_NO_LIMIT)]  # fmt: skip
    if tried is None or held is None:
        return [Vote("oom-too-big", 0.45, "the MPS message does not state every number",
                     decides=DECIDES_MPS)]  # fmt: skip
    return [
        Vote(
            "oom-too-big",
            0.6,
            f"MPS allocated + other allocations {size(held)} + tried {size(tried)} = "
            f"{size(held + tried)} > the allocator's limit {size(limit)} (max allowed)",
            decides=DECIDES_MPS,
        )
    ]


def torch_votes(facts: OomFacts) -> list[Vote]:
    if facts.device == "MPS":
        return mps_votes(facts)
    tried, total = facts.tried_bytes, facts.total_bytes
    if tried is not None and total is not None and tried > total:
        return [Vote("oom-too-big", 0.95, f"one request of {size(tried)} is larger than the "
                     f"whole {size(total)} GPU")]  # fmt: skip
    n = _Numbers.of(facts)
    if n is None:
        return _partial_torch_votes(facts)
    if n.reserved > n.total * 1.02 or n.allocated > n.reserved:
        what = (
            f"the numbers do not add up ({size(n.reserved)} reserved of a {size(n.total)} GPU): "
            "shared system memory (Windows WDDM) or several devices"
        )
        return [
            Vote("oom-too-big", 0.45, what, decides=DECIDES_OOM),
            Vote("oom-other-process", 0.3, what, decides=DECIDES_OOM),
        ]
    votes = _other_process_votes(facts, n)
    if _unseen_by_nvml(facts, n):
        votes = _unattributed_votes(facts, n, votes)
    votes += _fit_votes(
        n,
        other_strong=any(v.weight >= HIGH_VOTE for v in votes),
        held_by_others=_held_by_others(facts, n),
    )
    note = _context_note(facts, n)
    if note is not None:
        votes = [
            replace(v, evidence=f"{v.evidence}; {note}") if v.cause == "oom-too-big" else v
            for v in votes
        ]
    if facts.this_process_bytes is not None:
        outside_self = facts.this_process_bytes - n.reserved
        if outside_self >= OUTSIDE_OTHER_MIN_BYTES:
            votes.append(Vote("oom-framework-pool", 0.35, f"this process holds "
                              f"{size(outside_self)} outside PyTorch's allocator (NCCL buffers, "
                              "cuDNN/cuBLAS workspaces, another framework's pool)",
                              decides=DECIDES_OOM))  # fmt: skip
    return votes


def _unseen_by_nvml(facts: OomFacts, n: _Numbers) -> bool:
    """Whether the message's own "this process has S memory in use" is below what PyTorch
    reserved. PyTorch prints S from NVML's per-process list (usedGpuMemory of the entry with its
    PID); reserved memory is this process's own cudaMalloc'd memory, so S < R is no measurement:
    NVML did not attribute this process's memory to it (NVML reports no per-process usage under
    WDDM, and none it can see across some PID namespaces and virtualised GPUs)."""
    held = facts.this_process_bytes
    return held is not None and held < n.reserved


def _unattributed_votes(facts: OomFacts, n: _Numbers, votes: list[Vote]) -> list[Vote]:
    """T − R − F is still held outside PyTorch's allocator, but with NVML blind to this process
    the message cannot say whose it is: another process, or this process's own other pools (a
    second framework such as a colocated vLLM engine, NCCL buffers). Neither reading is high."""
    if n.outside < OUTSIDE_OTHER_MIN_BYTES:
        return votes
    seen = size(facts.this_process_bytes or 0)
    why = (
        f"{size(n.outside)} held outside PyTorch, but NVML reports this process at {seen} "
        f"although PyTorch reserved {size(n.reserved)}: NVML's per-process numbers do not see "
        "this process, so whose the bytes are is not in the message"
    )
    capped = [
        replace(v, weight=min(v.weight, UNATTRIBUTED_MAX), decides=DECIDES_OOM)
        if v.cause == "oom-other-process"
        else v
        for v in votes
    ]
    return [*capped, Vote("oom-framework-pool", 0.4, why, decides=DECIDES_OOM)]


def _partial_torch_votes(facts: OomFacts) -> list[Vote]:
    tried, allocated, reserved = facts.tried_bytes, facts.allocated_bytes, facts.reserved_bytes
    if tried is not None and allocated is not None and reserved is not None:
        cached = reserved - allocated
        if cached >= tried and cached >= reserved / 4:
            return [
                Vote(
                    "oom-fragmentation",
                    0.6,
                    f"{size(cached)} cached but unallocated ≥ {size(tried)} tried",
                    decides=DECIDES_OOM,
                )
            ]
    said = "" if tried is None else f"tried to allocate {size(tried)}; "
    return undecided(said + _device_numbers_stated(facts))


def _device_numbers_stated(facts: OomFacts) -> str:
    """The device's numbers a PyTorch message that lacks some of them states, and those it
    leaves out (which the arithmetic needs): the evidence says no less than the summary."""
    numbers = (
        ("total", facts.total_bytes),
        ("allocated", facts.allocated_bytes),
        ("reserved", facts.reserved_bytes),
        ("free", facts.free_bytes),
    )
    stated = [f"{name} {size(value)}" for name, value in numbers if value is not None]
    if not stated:
        return "the message does not state the device's numbers"
    unstated = [name for name, value in numbers if value is None]
    if not unstated:
        return "the message states " + ", ".join(stated)
    *rest, last = unstated
    left_out = f"{', '.join(rest)} or {last}" if rest else last
    return f"the message states {', '.join(stated)} but not the {left_out} memory"


def undecided(what: str, decides: str = DECIDES_OOM) -> list[Vote]:
    return [
        Vote("oom-too-big", 0.45, what, decides=decides),
        Vote("oom-other-process", 0.35, what, decides=decides),
        Vote("oom-fragmentation", 0.2, what, decides=decides),
    ]
