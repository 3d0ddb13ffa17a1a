"""Turn batches of decoded events into the columns of a ``RankTrace``.

Each batch is transposed with C-level helpers (``attrgetter`` + ``zip``) and converted to numpy
at once, so the per-event Python work is a few C calls, not a loop body. Rows kept follow HTA's
rule (reference/traces.md §1.1 step 5): the event has a ``dur`` and a ``cat``, ``cat != "Trace"``.
"""

from __future__ import annotations

import mmap
import operator
from itertools import islice, repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuwarden.traces.model import Category

if TYPE_CHECKING:
    import numpy.typing as npt

_INT64_MAX = (1 << 63) - 1
_BEYOND_INT64 = float(1 << 63)
_NONE = type(None)
# Kineto's clock is an int64 of ns (libkineto), written as µs: no real ts or dur is beyond
# 2**63 ns ≈ 9.2e15 µs (the year 2262). Larger values are corruption, and would overflow the
# analyses' arithmetic (a std of 1e154 µs squares to inf), so the loader rejects them.
MAX_TIME_US = float(1 << 63) / 1000.0


class AbsurdTimeError(ValueError):
    """A kept event's ts or dur is beyond MAX_TIME_US; ``index`` is its place in traceEvents."""

    def __init__(self, index: int, field: str, value: float) -> None:
        super().__init__(f"event {index} of traceEvents: {field} {value:g} µs")
        self.index = index
        self.field = field
        self.value = value


INT_COLUMNS = ("pid", "tid", "stream", "correlation", "external_id", "device", "bytes")

# cat text → Category, over Kineto's eras (reference §5.3).
CATEGORY_OF_CAT: dict[str, Category] = {
    "cpu_op": Category.CPU_OP,
    "Operator": Category.CPU_OP,
    "user_annotation": Category.USER_ANNOTATION,
    "python_function": Category.PYTHON_FUNCTION,
    "cuda_runtime": Category.CUDA_RUNTIME,
    "Runtime": Category.CUDA_RUNTIME,
    "cuda_driver": Category.CUDA_DRIVER,
    "kernel": Category.KERNEL,
    "Kernel": Category.KERNEL,
    "gpu_memcpy": Category.GPU_MEMCPY,
    "Memcpy": Category.GPU_MEMCPY,
    "gpu_memset": Category.GPU_MEMSET,
    "Memset": Category.GPU_MEMSET,
    "gpu_user_annotation": Category.GPU_USER_ANNOTATION,
    "cuda_sync": Category.CUDA_SYNC,
    "cpu_instant_event": Category.CPU_INSTANT_EVENT,
    "mtia_ccp_events": Category.MTIA_CCP_EVENTS,
    "mtia_runtime": Category.MTIA_RUNTIME,
    "cuda_profiler_range": Category.CUDA_PROFILER_RANGE,
    "overhead": Category.OVERHEAD,
}

# args kept per row (RankTrace.args), per category: (Struct attribute, args key). Only rows of
# these categories are looked at, and a cpu_op only when it is a collective (Collective name or
# Comms Id), so this is a loop over a few rows, not over every event.
_COLLECTIVE_ARGS: tuple[tuple[str, str], ...] = (
    ("collective_name", "Collective name"),
    ("in_msg_nelems", "In msg nelems"),
    ("out_msg_nelems", "Out msg nelems"),
    ("group_size", "Group size"),
    ("dtype", "dtype"),
    ("process_group_name", "Process Group Name"),
    ("process_group_desc", "Process Group Description"),
    ("process_group_ranks", "Process Group Ranks"),
    ("comms_id", "Comms Id"),
)
EXTRA_ARGS: dict[Category, tuple[tuple[str, str], ...]] = {
    Category.CPU_OP: _COLLECTIVE_ARGS,
    Category.USER_ANNOTATION: _COLLECTIVE_ARGS,
    Category.KERNEL: _COLLECTIVE_ARGS,
    Category.GPU_MEMCPY: (("memory_bandwidth", "memory bandwidth (GB/s)"),),
    Category.CUDA_SYNC: (
        ("cuda_sync_kind", "cuda_sync_kind"),
        ("wait_on_stream", "wait_on_stream"),
        ("wait_on_event_corr", "wait_on_cuda_event_record_corr_id"),
    ),
}
# cpu_ops whose "Input Dims" are kept (GEMM shapes for the tensor-core check).
MATMUL_OPS = frozenset(
    {
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::matmul",
        "aten::linear",
        "aten::_scaled_mm",
        "aten::addmv",
    }
)


def as_int(value: Any) -> int:
    """HTA's ``int(value)`` rule for integer args: ints, integral floats and numeric strings pass,
    anything else is -1. Values beyond int64 wrap to two's complement, which keeps equality."""
    if type(value) is not int:
        if value is None or type(value) is bool:
            return -1
        try:
            value = int(value)
        except (TypeError, ValueError, OverflowError):
            return -1
    if value > _INT64_MAX or value < -_INT64_MAX - 1:
        value = ((value + (1 << 63)) % (1 << 64)) - (1 << 63)
    return int(value)


def int_column(values: Any) -> npt.NDArray[np.int64]:
    try:  # fromiter: no dtype discovery pass, ~30% faster than np.array on a list; same casts
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (OverflowError, TypeError, ValueError):
        return np.array([as_int(v) for v in values], dtype=np.int64)


def _float_column(values: Any) -> npt.NDArray[np.float64]:
    """µs as float64; missing → NaN; anything not a number → NaN too (the row is then dropped)."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_to_float(v) for v in values], dtype=np.float64)


def _time_column(values: list[Any], types: set[type]) -> npt.NDArray[np.float64]:
    """``_float_column`` that also adds to ``types`` what decides the time flags: a type other
    than int (float, or text in odd files) and None. Once a flag is known, only the other one is
    looked for: after a float, a NaN (None or text) is the only news; after a None, a non-int.
    Before either, numpy's type discovery answers the common cases in its conversion pass: all
    ints → int64; some float → float64 (or an int beyond int64: then look at each value)."""
    other_known = any(t is not int and t is not _NONE for t in types)
    none_known = _NONE in types
    if other_known:
        arr = _float_column(values)
        if not none_known and np.isnan(arr).any():
            types.update(map(type, values))
        return arr
    if none_known:
        types.update(map(type, values))
        return _float_column(values)
    arr = np.array(values)
    if arr.dtype == np.int64:
        types.add(int)
        return arr.astype(np.float64)
    if arr.dtype == np.float64 and not (np.abs(arr) >= _BEYOND_INT64).any():
        types.add(float)
        return arr
    types.update(map(type, values))
    return _float_column(values)


def _to_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


class Interner(dict[Any, int]):
    """value → id in order of first appearance; a lookup numbers a new value (one C-level
    ``dict.__getitem__`` per known value, Python only for new ones)."""

    def __missing__(self, key: Any) -> int:
        n = self[key] = len(self)
        return n


def _intern(values: list[Any], table: Interner) -> npt.NDArray[np.int32]:
    return np.fromiter(map(table.__getitem__, values), dtype=np.int32, count=len(values))


# Kept rows per byte of JSON assumed when reserving the columns: a kept Kineto event takes at
# least ~100 bytes of JSON (cat, name, ph, pid, tid, ts, dur), typically 200-400 with args.
_JSON_BYTES_PER_ROW = 100
_MIN_CAPACITY = 1 << 12


def _reserve(dtype: Any, capacity: int) -> npt.NDArray[Any]:
    """An array over its own anonymous memory map: pages become resident only when written, and
    go back to the system when the array is freed, whatever the allocator did before."""
    itemsize = np.dtype(dtype).itemsize
    try:
        region = mmap.mmap(-1, max(capacity, 1) * itemsize)
    except OSError as exc:  # ENOMEM under strict overcommit: the loader's "not enough memory"
        raise MemoryError(str(exc)) from exc
    return np.frombuffer(region, dtype=dtype)[:capacity]


class _Column:
    """One growing column: batches are written into a reserved array, so no list of per-batch
    pieces and no final concatenation (which left the pieces' memory behind, fragmented, next
    to the joined copy). The reservation is a memory map: its unwritten tail costs address
    space only. Outgrowing it doubles the array (a copy); the estimate makes that rare."""

    __slots__ = ("data", "size")

    def __init__(self, dtype: Any, capacity: int) -> None:
        self.data: npt.NDArray[Any] = _reserve(dtype, capacity)
        self.size = 0

    def slot(self, k: int) -> npt.NDArray[Any]:
        """The next ``k`` elements, to be written by the caller."""
        end = self.size + k
        if end > self.data.shape[0]:
            grown = _reserve(self.data.dtype, max(end, 2 * self.data.shape[0]))
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        out = self.data[self.size : end]
        self.size = end
        return out

    def extend(self, values: Any) -> None:
        self.slot(len(values))[:] = values

    def result(self) -> npt.NDArray[Any]:
        return self.data[: self.size]


class ColumnBuilder:
    """Accumulates batches of events (in file order) into RankTrace columns. ``json_bytes``
    (the uncompressed size, when known) sizes the columns' reservation."""

    def __init__(self, no_args: Any, json_bytes: int = 0) -> None:
        self._no_args = no_args
        self.name_ids = Interner()
        self.cat_ids = Interner()
        self._cat_keep: list[bool] = []
        self._cat_category: list[int] = []
        self._matmul_name = np.zeros(0, dtype=bool)  # per name id: one of MATMUL_OPS
        capacity = max(_MIN_CAPACITY, json_bytes // _JSON_BYTES_PER_ROW)
        self.cols: dict[str, _Column] = {
            k: _Column(dtype, capacity)
            for k, dtype in (
                ("index", np.int64),
                ("ts", np.float64),
                ("dur", np.float64),
                ("name_id", np.int32),
                ("cat_id", np.int32),
                *((k, np.int64) for k in INT_COLUMNS),
            )
        }
        self.extras: dict[int, dict[str, Any]] = {}
        self._dims: dict[bytes, Any] = {}  # "Input Dims" JSON text → decoded value
        self.events = 0  # events seen (all phases)
        self.rows = 0  # rows kept
        self.ts_types: set[type] = set()  # Python types of ts / dur over all events (HTA dtypes)
        self.dur_types: set[type] = set()

    def add(self, events: list[Any]) -> None:
        n = len(events)
        if n == 0:
            return
        ts = _time_column([e.ts for e in events], self.ts_types)
        dur = _time_column([e.dur for e in events], self.dur_types)
        cat_idx = _intern([e.cat for e in events], self.cat_ids)
        for c in islice(self.cat_ids, len(self._cat_keep), None):
            self._cat_keep.append(c is not None and c != "Trace")
            self._cat_category.append(int(CATEGORY_OF_CAT.get(str(c), Category.OTHER)))
        # a missing or non-finite (1e999) ts/dur drops the event like a missing one
        keep = np.array(self._cat_keep, dtype=bool)[cat_idx] & np.isfinite(dur) & np.isfinite(ts)
        rows = np.flatnonzero(keep)
        k = len(rows)
        if k:
            self._check_times(rows, ts, dur)
            kept = events if k == n else _pick(events, rows)
            args = [e.args for e in kept]
            if None in args:  # explicit "args": null
                args = [self._no_args if a is None else a for a in args]
            c = self.cols
            np.add(rows, self.events, out=c["index"].slot(k))
            np.take(ts, rows, out=c["ts"].slot(k))
            np.take(dur, rows, out=c["dur"].slot(k))
            name_idx = _intern([e.name for e in kept], self.name_ids)
            if len(self.name_ids) > len(self._matmul_name):
                new = islice(self.name_ids, len(self._matmul_name), None)
                flags = np.array([name in MATMUL_OPS for name in new], dtype=bool)
                self._matmul_name = np.concatenate([self._matmul_name, flags])
            c["name_id"].extend(name_idx)
            kept_cat = c["cat_id"].slot(k)
            np.take(cat_idx, rows, out=kept_cat)
            c["pid"].extend(int_column([e.pid for e in kept]))
            c["tid"].extend(int_column([e.tid for e in kept]))
            c["stream"].extend(int_column([a.stream for a in args]))
            c["correlation"].extend(int_column([a.correlation for a in args]))
            c["external_id"].extend(int_column([a.external_id for a in args]))
            c["device"].extend(int_column([a.device for a in args]))
            c["bytes"].extend(int_column([a.bytes for a in args]))
            self._add_extras(kept_cat, name_idx, args)
        self.events += n
        self.rows += k

    def _check_times(
        self, rows: npt.NDArray[np.intp], ts: npt.NDArray[np.float64], dur: npt.NDArray[np.float64]
    ) -> None:
        for field, values in (("ts", ts), ("dur", dur)):
            bad = np.flatnonzero(np.abs(values[rows]) > MAX_TIME_US)
            if bad.size:
                i = int(rows[bad[0]])
                raise AbsurdTimeError(self.events + i, field, float(values[i]))

    def _add_extras(
        self, cat_idx: npt.NDArray[np.int32], name_idx: npt.NDArray[np.int32], args: list[Any]
    ) -> None:
        """RankTrace.args for the rows of this batch that carry extras. The rows are found with
        numpy masks; Python only touches those rows (in the order: cpu_op collectives, matmul
        cpu_ops, user_annotation collectives, NCCL kernels, memcpy, cuda_sync)."""
        import msgspec

        category = np.array(self._cat_category, dtype=np.int8)[cat_idx]
        named = _present([a.collective_name for a in args])
        collective = named | _present([a.comms_id for a in args])
        cpu_op = category == int(Category.CPU_OP)
        matmul = cpu_op & self._matmul_name[name_idx]
        base = self.rows
        extras = self.extras
        for r in np.flatnonzero(collective & cpu_op).tolist():
            extras.setdefault(base + r, {}).update(_PICK_COLLECTIVE(args[r]))
        for r in np.flatnonzero(matmul).tolist():
            text = args[r].input_dims
            if not len(text):
                continue
            # the same shapes repeat every layer and step: decode each text once and share
            # the (read-only) value between rows
            raw = bytes(text)
            dims = self._dims.get(raw)
            if dims is None:
                dims = self._dims[raw] = msgspec.json.decode(raw)
            extras.setdefault(base + r, {})["Input Dims"] = dims
        annotation = category == int(Category.USER_ANNOTATION)
        for r in np.flatnonzero(collective & annotation).tolist():
            extras.setdefault(base + r, {}).update(_PICK_COLLECTIVE(args[r]))
        for r in np.flatnonzero(named & (category == int(Category.KERNEL))).tolist():
            extras[base + r] = _PICK_COLLECTIVE(args[r])
        for cat in (Category.GPU_MEMCPY, Category.CUDA_SYNC):
            for r in np.flatnonzero(category == int(cat)).tolist():
                found = _PICK_EXTRA[cat](args[r])
                if found:
                    extras[base + r] = found

    def column(self, key: str) -> Any:
        return self.cols[key].result()

    def time_flags(self) -> dict[str, bool]:
        """How pandas would type HTA's ts/dur columns (TraceMetadata fields of the same names)."""
        return {
            "ts_is_float": self.ts_types - {int} != set(),
            "ts_missing": type(None) in self.ts_types,
            "dur_missing": type(None) in self.dur_types,
            "dur_is_float": self.dur_types - {int, type(None)} != set(),
        }

    def finish(self) -> dict[str, Any]:
        """Columns plus interned tables (names interned from kept rows only, in order of first
        appearance, so the symbol table matches HTA's, which is built after dropping rows)."""
        name_id = self.column("name_id")  # only kept rows' names were interned
        cat_id = self.column("cat_id")
        category_of = np.array(self._cat_category or [0], dtype=np.int8)
        return {
            "names": tuple(_text(n) for n in self.name_ids),
            "cat_names": tuple(_text(c) for c in self.cat_ids),
            "index": self.column("index"),
            "ts": self.column("ts"),
            "dur": self.column("dur"),
            "name_id": name_id,
            "cat_id": cat_id,
            "category": category_of[cat_id] if len(cat_id) else np.zeros(0, np.int8),
            **{k: self.column(k) for k in INT_COLUMNS},
            "args": self.extras,
        }


def _present(values: list[Any]) -> npt.NDArray[np.bool_]:
    """values[i] is not None, as a mask (one C-level pass; none at all is the common case)."""
    if values.count(None) == len(values):
        return np.zeros(len(values), dtype=bool)
    return np.fromiter(map(operator.is_not, values, repeat(None)), dtype=bool, count=len(values))


class _Picker:
    """The present (not None) args of one extras group, under their Kineto keys: one C-level
    attrgetter call per row."""

    def __init__(self, attrs: tuple[tuple[str, str], ...]) -> None:
        self._get = operator.attrgetter(*(attr for attr, _ in attrs))
        self._keys = tuple(key for _, key in attrs)
        self._one = len(attrs) == 1  # attrgetter of one name returns the bare value

    def __call__(self, args: Any) -> dict[str, Any]:
        values = (self._get(args),) if self._one else self._get(args)
        return {k: v for k, v in zip(self._keys, values, strict=True) if v is not None}


_PICK_COLLECTIVE = _Picker(_COLLECTIVE_ARGS)
_PICK_EXTRA = {cat: _Picker(attrs) for cat, attrs in EXTRA_ARGS.items()}


def _pick(events: list[Any], rows: npt.NDArray[np.intp]) -> list[Any] | tuple[Any, ...]:
    """events[rows] (itemgetter: one C call; it returns a bare item for a single index)."""
    picked = operator.itemgetter(*rows.tolist())(events)
    return picked if len(rows) > 1 else [picked]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))
