"""The loaded trace: one rank's events as typed columns (numpy), names interned.

Contract shared by the loader (``traces.load``) and every analysis. A row is one event HTA keeps
(reference/traces.md §1.1 step 5): it has a ``dur`` and a ``cat``, and ``cat != "Trace"`` — so
``X`` complete events (CPU ops, annotations, runtime calls, kernels, memcpy, memset, syncs).
Rows are in file order; ``index`` is the event's position in ``traceEvents`` (all phases counted).
Times are **microseconds** as float64, raw from the file (no HTA rounding; the HTA-compatible
analyses apply ceil/floor themselves). The integer columns (``index`` and the ids) are int32 when
all of a rank's values fit, else int64 — one width for all of them in a rank. "Missing" integer
args are -1, the same convention HTA uses for ``stream``/``correlation`` — inside these arrays
only; nothing outside the traces layer sees a sentinel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    # int32 when every integer column of the rank fits, else int64 (one width per rank)
    IdArray = npt.NDArray[np.signedinteger[Any]]
    Float64Array = npt.NDArray[np.float64]
    Int32Array = npt.NDArray[np.int32]
    Int8Array = npt.NDArray[np.int8]
    BoolArray = npt.NDArray[np.bool_]


# Kineto's clock is an int64 of ns (libkineto), written as µs: no real ts or dur is beyond
# 2**63 ns ≈ 9.2e15 µs (the year 2262). Larger values are corruption, and would overflow the
# analyses' arithmetic (a std of 1e154 µs squares to inf), so the loader rejects them.
MAX_TIME_US = float(1 << 63) / 1000.0


# Why events were left out of the analyses, by key (TraceMetadata.skipped_events, the
# ``skipped_events`` of `trace analyze --json`): what the event was and what became of it.
# Events without ``dur`` or ``cat`` (metadata, flows, instants) are not here: leaving them out
# is HTA's rule for what an event is (reference/traces.md §1.1 step 5), not a problem.
SKIP_REASONS: dict[str, str] = {
    "dur-not-a-number": "dur is not a finite number: the event is dropped",
    "ts-not-a-number": "ts is not a finite number: the event is dropped",
    "ts-missing": "a dur but no ts: the event is dropped",
    "gpu-event-without-stream": (
        "a kernel, memcpy or memset whose args.stream is missing or not an integer: HTA's "
        "tables and the stream timelines leave it out (HTA's rule: no stream, no GPU event); "
        "the per-rank numbers keep it"
    ),
}


class AbsurdTimeError(ValueError):
    """A kept event's ts or dur is beyond MAX_TIME_US; ``index`` is its place in traceEvents."""

    def __init__(self, index: int, field: str, value: float) -> None:
        super().__init__(f"event {index} of traceEvents: {field} {value:g} µs")
        self.index = index
        self.field = field
        self.value = value


class Category(IntEnum):
    """``cat`` of an event, folded over Kineto's eras (legacy ``Kernel`` → KERNEL, ...)."""

    OTHER = 0  # any cat not listed here; its text is in RankTrace.cat_names
    CPU_OP = 1  # cpu_op, Operator
    USER_ANNOTATION = 2  # user_annotation (ProfilerStep#N, record_function ranges)
    PYTHON_FUNCTION = 3
    CUDA_RUNTIME = 4  # cuda_runtime, Runtime, hip runtime
    CUDA_DRIVER = 5  # cuda_driver (cuLaunchKernel: Triton)
    KERNEL = 6  # kernel, Kernel
    GPU_MEMCPY = 7  # gpu_memcpy, Memcpy
    GPU_MEMSET = 8  # gpu_memset, Memset
    GPU_USER_ANNOTATION = 9
    CUDA_SYNC = 10
    CPU_INSTANT_EVENT = 11
    MTIA_CCP_EVENTS = 12
    MTIA_RUNTIME = 13
    CUDA_PROFILER_RANGE = 14
    OVERHEAD = 15


# The categories HTA calls GPU events when they run on a stream: kernels, memcpy and memset.
GPU_CATEGORIES = (Category.KERNEL, Category.GPU_MEMCPY, Category.GPU_MEMSET)


@dataclass(frozen=True, slots=True)
class TraceMetadata:
    """Top-level keys of a Kineto file other than ``traceEvents``."""

    path: str
    rank: int
    rank_source: str  # "distributedInfo", "file name", "default", "given" (load_traces mapping)
    world_size: int | None
    backend: str | None  # distributedInfo.backend
    base_time_ns: int | None  # baseTimeNanoseconds
    schema_version: int | None
    device_properties: tuple[dict[str, Any], ...] = ()
    distributed_info: dict[str, Any] = field(default_factory=dict)
    trace_bytes: int = 0  # uncompressed JSON size
    event_count: int = 0  # len(traceEvents), all phases
    # True when HTA's ``ts`` column would be float64: some event (any phase) has a fractional
    # ``ts`` or none at all. HTA then rounds ts up and ends down (reference §1.1 step 3).
    ts_is_float: bool = False
    # The dtypes pandas gives HTA's ts/dur columns, which decide its float rounding on large
    # timestamps (traces.hta.frame): some event (any phase) has no ts / no dur / a fractional dur.
    ts_missing: bool = False
    dur_missing: bool = False
    dur_is_float: bool = False
    # events left out, by SKIP_REASONS key (only reasons that happened)
    skipped_events: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RankTrace:
    """One rank's kept events, columnar. All arrays have the same length ``len(self)``."""

    meta: TraceMetadata
    names: tuple[str, ...]  # interned event names; name_id indexes it
    cat_names: tuple[str, ...]  # interned raw cat strings; cat_id indexes it
    index: IdArray  # position in traceEvents
    ts: Float64Array  # µs, raw
    dur: Float64Array  # µs, raw
    name_id: Int32Array
    cat_id: Int32Array  # raw cat text (cat_names), for HTA's cat-set rules
    category: Int8Array  # Category value
    pid: IdArray  # OS pid / device ordinal; string pids → -1
    tid: IdArray  # OS tid / CUDA stream id; string tids → -1
    stream: IdArray  # args.stream; non-integer (AMD "0x0") or absent → -1 (HTA's rule)
    correlation: IdArray  # args.correlation (ROCm: also "cid"?) absent → -1
    external_id: IdArray  # args["External id"], absent → -1
    device: IdArray  # args.device, absent → -1
    bytes: IdArray  # args.bytes (memcpy/memset), absent → -1
    # Per-row extras, keyed by row number, only for the rows that carry them (traces.column_store):
    # collective cpu_ops / user_annotations / NCCL kernels ("Collective name" or "Comms Id" set):
    #   "Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype",
    #   "Process Group Name", "Process Group Description", "Process Group Ranks", "Comms Id";
    # memcpy: "memory bandwidth (GB/s)"; cuda_sync: "cuda_sync_kind",
    # "wait_on_stream", "wait_on_cuda_event_record_corr_id"; matmul cpu_ops (aten::mm, addmm,
    # bmm, baddbmm, matmul, linear, _scaled_mm, addmv): "Input Dims". Nothing else is decoded.
    args: dict[int, dict[str, Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def name(self, row: int) -> str:
        return self.names[int(self.name_id[row])]


# torch.distributed holds a job's size and its ranks as C ints (ProcessGroup::getSize() and
# getRank() return int): a distributedInfo.world_size past that is no job's.
MAX_WORLD_SIZE = 2**31 - 1


@dataclass(frozen=True, slots=True)
class LoadedTrace:
    """Every rank of one job, plus what could not be read."""

    ranks: dict[int, RankTrace]
    skipped: tuple[tuple[str, str], ...] = ()  # (path, reason) for rank files that failed

    def world_sizes(self) -> set[int]:
        """The world sizes the ranks' distributedInfo gives that a job can have (empty when none
        does): above the rank of the trace that states it (so at least 1) and within torch's
        int. A trace whose world size is 0, negative, 10**12 or not above its own rank states
        nothing: "1 of 1000000000000 ranks loaded" and "rank 5 of 2" were said as facts."""
        return {
            meta.world_size
            for meta in (t.meta for t in self.ranks.values())
            if meta.world_size is not None and meta.rank < meta.world_size <= MAX_WORLD_SIZE
        }
