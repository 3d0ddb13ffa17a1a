"""Turn batches of msgspec-decoded events into the columns of a ``RankTrace``: the reference
decoder, and the fallback for files the simdjson scanner (``traces.native``) does not take.

Each batch is transposed with C-level helpers (``attrgetter`` + ``zip``) and converted to numpy
at once, so the per-event Python work is a few C calls, not a loop body. The columns, the row
rule and the extras rules are ``traces.column_store``'s, shared with the scanner.
"""

from __future__ import annotations

import operator
from itertools import islice, repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuwarden.traces.column_store import (
    MATMUL_OPS,
    PICK_COLLECTIVE,
    PICK_EXTRA,
    ColumnStore,
    as_int,
    keeps_cat,
)
from gpuwarden.traces.model import MAX_TIME_US, AbsurdTimeError, Category

if TYPE_CHECKING:
    import numpy.typing as npt

_BEYOND_INT64 = float(1 << 63)
_NONE = type(None)


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


class ColumnBuilder(ColumnStore):
    """Accumulates batches of msgspec Structs (in file order) into RankTrace columns.
    ``json_bytes`` (the uncompressed size, when known) sizes the columns' reservation."""

    def __init__(self, no_args: Any, json_bytes: int = 0) -> None:
        super().__init__(json_bytes)
        self._no_args = no_args
        self.name_ids = Interner()
        self.cat_ids = Interner()
        self._cat_keep: list[bool] = []
        self._matmul_name = np.zeros(0, dtype=bool)  # per name id: one of MATMUL_OPS
        self._dims: dict[bytes, Any] = {}  # "Input Dims" JSON text → decoded value

    def add(self, events: list[Any]) -> None:
        n = len(events)
        if n == 0:
            return
        raw_ts, raw_dur = [e.ts for e in events], [e.dur for e in events]
        ts = _time_column(raw_ts, self.ts_types)
        dur = _time_column(raw_dur, self.dur_types)
        cat_idx = _intern([e.cat for e in events], self.cat_ids)
        new_cats = list(islice(self.cat_ids, len(self._cat_keep), None))
        self._cat_keep.extend(keeps_cat(c) for c in new_cats)
        self.number_cats(new_cats)
        # a missing or non-finite (1e999, "x") ts/dur drops the event like a missing one
        has_cat = np.array(self._cat_keep, dtype=bool)[cat_idx]
        timed = np.isfinite(dur) & np.isfinite(ts)
        keep = has_cat & timed
        if not keep.all():
            self._count_drops(has_cat & ~timed, raw_ts, raw_dur, dur)
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

    def _count_drops(
        self,
        untimed: npt.NDArray[np.bool_],
        raw_ts: list[Any],
        raw_dur: list[Any],
        dur: npt.NDArray[np.float64],
    ) -> None:
        """Of the events with a cat but no usable ts/dur, those that had a dur: dropped for a
        bad value (SKIP_REASONS); without a dur it is HTA's rule, not a problem."""
        if not untimed.any():
            return
        bad = untimed & _present(raw_dur)
        if not bad.any():
            return
        bad_dur = bad & ~np.isfinite(dur)
        bad_ts = bad & ~bad_dur
        ts_missing = int(np.count_nonzero(bad_ts & ~_present(raw_ts)))
        self.drop("dur-not-a-number", int(np.count_nonzero(bad_dur)))
        self.drop("ts-missing", ts_missing)
        self.drop("ts-not-a-number", int(np.count_nonzero(bad_ts)) - ts_missing)

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

        category = np.array(self.cat_category, dtype=np.int8)[cat_idx]
        named = _present([a.collective_name for a in args])
        collective = named | _present([a.comms_id for a in args])
        cpu_op = category == int(Category.CPU_OP)
        matmul = cpu_op & self._matmul_name[name_idx]
        base = self.rows
        extras = self.extras
        for r in np.flatnonzero(collective & cpu_op).tolist():
            extras.setdefault(base + r, {}).update(PICK_COLLECTIVE(args[r]))
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
            extras.setdefault(base + r, {}).update(PICK_COLLECTIVE(args[r]))
        for r in np.flatnonzero(named & (category == int(Category.KERNEL))).tolist():
            extras[base + r] = PICK_COLLECTIVE(args[r])
        for cat in (Category.GPU_MEMCPY, Category.CUDA_SYNC):
            for r in np.flatnonzero(category == int(cat)).tolist():
                found = PICK_EXTRA[cat](args[r])
                if found:
                    extras[base + r] = found

    def finish_columns(self) -> dict[str, Any]:
        """RankTrace fields (names interned from kept rows only, cats from every event)."""
        return self.finish(self.name_ids, self.cat_ids)


def _present(values: list[Any]) -> npt.NDArray[np.bool_]:
    """values[i] is not None, as a mask (one C-level pass; none at all is the common case)."""
    if values.count(None) == len(values):
        return np.zeros(len(values), dtype=bool)
    return np.fromiter(map(operator.is_not, values, repeat(None)), dtype=bool, count=len(values))


def _pick(events: list[Any], rows: npt.NDArray[np.intp]) -> list[Any] | tuple[Any, ...]:
    """events[rows] (itemgetter: one C call; it returns a bare item for a single index)."""
    picked = operator.itemgetter(*rows.tolist())(events)
    return picked if len(rows) > 1 else [picked]
