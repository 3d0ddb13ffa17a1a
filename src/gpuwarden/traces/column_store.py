"""The columns of a ``RankTrace`` while a file is decoded, shared by both decoders.

The simdjson scanner (``traces.native``) and the msgspec reference (``traces.columns``) write the
same columns the same way: reserved memory maps that grow by doubling, HTA's ``int()`` rule for
integer args, the per-row extras the analyses read, and one ``finish`` that turns them into
``RankTrace`` fields. Rows kept follow HTA's rule (reference/traces.md §1.1 step 5): the event has
a ``dur`` and a ``cat``, and ``cat != "Trace"``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuwarden.traces.memory import anonymous_map
from gpuwarden.traces.model import GPU_CATEGORIES, SKIP_REASONS, Category

if TYPE_CHECKING:
    import numpy.typing as npt

_INT64_MAX = (1 << 63) - 1
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
INT_COLUMNS = ("pid", "tid", "stream", "correlation", "external_id", "device", "bytes")
# every column, in the order the native scanner takes them
COLUMNS: tuple[tuple[str, Any], ...] = (
    ("index", np.int64),
    ("ts", np.float64),
    ("dur", np.float64),
    ("name_id", np.int32),
    ("cat_id", np.int32),
    *((k, np.int64) for k in INT_COLUMNS),
)

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

# args kept per row (RankTrace.args), per category, as (Struct attribute, args key). A cpu_op
# or user_annotation keeps them only when it is a collective (Collective name or Comms Id), a
# kernel only when it names its collective.
COLLECTIVE_ARGS: tuple[tuple[str, str], ...] = (
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
    Category.CPU_OP: COLLECTIVE_ARGS,
    Category.USER_ANNOTATION: COLLECTIVE_ARGS,
    Category.KERNEL: COLLECTIVE_ARGS,
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


def category_of(cat: Any) -> int:
    return int(CATEGORY_OF_CAT.get(str(cat), Category.OTHER))


def keeps_cat(cat: Any) -> bool:
    return cat is not None and cat != "Trace"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


# Kept rows per byte of JSON assumed when reserving the columns: a kept Kineto event takes at
# least ~100 bytes of JSON (cat, name, ph, pid, tid, ts, dur), typically 200-400 with args.
_JSON_BYTES_PER_ROW = 100
_MIN_CAPACITY = 1 << 12


def _reserve(dtype: Any, capacity: int) -> npt.NDArray[Any]:
    """An array over its own anonymous memory map: pages become resident only when written, and
    go back to the system when the array is freed, whatever the allocator did before."""
    region = anonymous_map(max(capacity, 1) * np.dtype(dtype).itemsize)
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

    def reserve(self, k: int) -> None:
        """Room for ``k`` more elements."""
        end = self.size + k
        if end > self.data.shape[0]:
            grown = _reserve(self.data.dtype, max(end, 2 * self.data.shape[0]))
            grown[: self.size] = self.data[: self.size]
            self.data = grown

    def slot(self, k: int) -> npt.NDArray[Any]:
        """The next ``k`` elements, to be written by the caller."""
        self.reserve(k)
        out = self.data[self.size : self.size + k]
        self.size += k
        return out

    def extend(self, values: Any) -> None:
        self.slot(len(values))[:] = values

    def result(self) -> npt.NDArray[Any]:
        return self.data[: self.size]


class ColumnStore:
    """The growing columns of one file, with its kept-row and event counts, per-row extras and
    the Python types seen for ts / dur (HTA's dtypes). ``json_bytes`` (the uncompressed size,
    when known) sizes the reservation."""

    def __init__(self, json_bytes: int = 0) -> None:
        capacity = max(_MIN_CAPACITY, json_bytes // _JSON_BYTES_PER_ROW)
        self.cols: dict[str, _Column] = {k: _Column(dtype, capacity) for k, dtype in COLUMNS}
        self.extras: dict[int, dict[str, Any]] = {}
        self.events = 0  # events seen (all phases)
        self.rows = 0  # rows kept
        self.ts_types: set[type] = set()  # Python types of ts / dur over all events
        self.dur_types: set[type] = set()
        self.cat_category: list[int] = []  # per cat id, its Category
        self.dropped: dict[str, int] = {}  # events not kept for a bad value, by SKIP_REASONS key

    def number_cats(self, cats: Iterable[Any]) -> None:
        """Record the Category of the cats just numbered (ids in order)."""
        self.cat_category.extend(category_of(c) for c in cats)

    def column(self, key: str) -> Any:
        return self.cols[key].result()

    def drop(self, reason: str, count: int) -> None:
        """``count`` events were not kept for ``reason`` (a SKIP_REASONS key)."""
        assert reason in SKIP_REASONS
        if count:
            self.dropped[reason] = self.dropped.get(reason, 0) + count

    def skipped_events(self, cols: dict[str, Any]) -> dict[str, int]:
        """Events left out of the analyses by reason (TraceMetadata.skipped_events), from the
        drops counted while decoding and the finished columns (``finish``'s result): GPU rows
        without a usable stream. Both decoders write the same columns, so they agree."""
        out = dict(self.dropped)
        gpu = np.isin(cols["category"], [int(c) for c in GPU_CATEGORIES])
        without_stream = int(np.count_nonzero(gpu & (cols["stream"] == -1)))
        if without_stream:
            out["gpu-event-without-stream"] = without_stream
        return {k: out[k] for k in SKIP_REASONS if k in out}

    def time_flags(self) -> dict[str, bool]:
        """How pandas would type HTA's ts/dur columns (TraceMetadata fields of the same names)."""
        return {
            "ts_is_float": self.ts_types - {int} != set(),
            "ts_missing": type(None) in self.ts_types,
            "dur_missing": type(None) in self.dur_types,
            "dur_is_float": self.dur_types - {int, type(None)} != set(),
        }

    def finish(self, names: Iterable[Any], cats: Iterable[Any]) -> dict[str, Any]:
        """RankTrace fields: the columns plus the interned tables (``names`` in id order, from
        kept rows only, as HTA builds its symbol table after dropping rows; ``cats`` in id order,
        from every event, each recorded by ``number_cats``). Extras are ordered by row: file
        order, whatever the batches were."""
        cat_list = list(cats)
        name_id = self.column("name_id")
        cat_id = self.column("cat_id")
        ids = self._id_columns()
        category = np.array(self.cat_category or [0], dtype=np.int8)
        return {
            "names": tuple(_text(n) for n in names),
            "cat_names": tuple(_text(c) for c in cat_list),
            "index": ids["index"],
            "ts": self.column("ts"),
            "dur": self.column("dur"),
            "name_id": name_id,
            "cat_id": cat_id,
            "category": category[cat_id] if len(cat_id) else np.zeros(0, np.int8),
            **{k: ids[k] for k in INT_COLUMNS},
            "args": dict(sorted(self.extras.items())),
        }

    def _id_columns(self) -> dict[str, npt.NDArray[Any]]:
        """``index`` and the id columns, as int32 when every value of every one of them fits
        (a third less memory for the rank, and for what the analyses derive from them), else as
        they are. Each int64 column is dropped once narrowed, so the peak is one column more."""
        keys = ("index", *INT_COLUMNS)
        fits = all(
            c.size == 0 or (int(c.min()) >= _INT32_MIN and int(c.max()) <= _INT32_MAX)
            for c in (self.column(k) for k in keys)
        )
        out: dict[str, npt.NDArray[Any]] = {}
        for k in keys:
            wide = self.column(k)
            if fits:
                narrow = _reserve(np.int32, wide.size)
                narrow[:] = wide
                self.cols[k] = _Column(np.int32, 0)  # the int64 map goes back to the system
                del wide
                out[k] = narrow
            else:
                out[k] = wide
        return out


class Picker:
    """The present (not None) args of one extras group, under their Kineto keys, from an object
    with the Struct attributes: one C-level attrgetter call per row."""

    def __init__(self, attrs: tuple[tuple[str, str], ...]) -> None:
        self._get = operator.attrgetter(*(attr for attr, _ in attrs))
        self.keys = tuple(key for _, key in attrs)
        self._one = len(attrs) == 1  # attrgetter of one name returns the bare value

    def __call__(self, args: Any) -> dict[str, Any]:
        values = (self._get(args),) if self._one else self._get(args)
        return {k: v for k, v in zip(self.keys, values, strict=True) if v is not None}


PICK_COLLECTIVE = Picker(COLLECTIVE_ARGS)
PICK_EXTRA = {cat: Picker(attrs) for cat, attrs in EXTRA_ARGS.items()}


def pick_keys(found: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``Picker`` over a dict of the args present: the keys of one group, in the group's order."""
    return {k: v for k in keys if (v := found.get(k)) is not None}


_CPU_OP = int(Category.CPU_OP)
_USER_ANNOTATION = int(Category.USER_ANNOTATION)
_KERNEL = int(Category.KERNEL)
_PICKED_ALONE = {int(c): PICK_EXTRA[c].keys for c in (Category.GPU_MEMCPY, Category.CUDA_SYNC)}


def add_row_extras(
    extras: dict[int, dict[str, Any]], row: int, category: int, found: dict[str, Any]
) -> None:
    """The extras of one kept row from the args it has (``found``: extra keys present, "Input
    Dims" only for matmul ops), by the rules ``columns.ColumnBuilder`` applies per batch."""
    if category in (_CPU_OP, _USER_ANNOTATION):
        get = found.get
        if get("Collective name") is not None or get("Comms Id") is not None:
            extras.setdefault(row, {}).update(pick_keys(found, PICK_COLLECTIVE.keys))
        if category == _CPU_OP and "Input Dims" in found:
            extras.setdefault(row, {})["Input Dims"] = found["Input Dims"]
    elif category == _KERNEL:
        if found.get("Collective name") is not None:
            extras[row] = pick_keys(found, PICK_COLLECTIVE.keys)
    elif (keys := _PICKED_ALONE.get(category)) is not None:
        picked = pick_keys(found, keys)
        if picked:
            extras[row] = picked
