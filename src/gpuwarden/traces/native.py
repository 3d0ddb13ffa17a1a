"""The fast decoder: simdjson's On-Demand parser reads each batch of events straight into the
columns reserved here, with no Python object per event.

``traces._kineto`` is a C++ extension built at install time against simdjson (Debian's
``libsimdjson-dev``); where it could not be built, or with ``GPUWARDEN_TRACE_DECODER=msgspec``,
``available()`` is False and the decoder uses msgspec (``traces.columns``). The scanner reads the
common Kineto grammar; anything else (a bool where a number belongs, an integer beyond 64 bits,
an event that is not an object, invalid JSON) raises ``UnsupportedError`` and the caller decodes the
whole file with msgspec, so odd files get the reference behaviour and its error messages.
This module does the little that needs Python: HTA's ``int()`` on integer args written as text,
the per-row extras by category, and the interned tables.
"""

from __future__ import annotations

import os
from typing import Any

from gpuwarden.traces.column_store import (
    COLUMNS,
    MATMUL_OPS,
    ColumnStore,
    add_row_extras,
    as_int,
)
from gpuwarden.traces.model import AbsurdTimeError

try:
    from gpuwarden.traces import _kineto

    SCANNER_BUILT = True
except ImportError:  # not built here (no compiler or no simdjson at install time)
    SCANNER_BUILT = False

DECODER_ENV = "GPUWARDEN_TRACE_DECODER"  # "msgspec" forces the reference decoder
# the scanner's flags: Python types seen for ts / dur over all events
_TS_FLOAT, _TS_NONE, _DUR_FLOAT, _DUR_NONE = 1, 2, 4, 8
# a kept event has at least {"cat":"","ts":0,"dur":0} and a comma: a batch of n bytes holds at
# most n // 26 + 1 rows, the room made in the columns before each batch
_MIN_KEPT_EVENT_BYTES = 26
_CAT_ID = [name for name, _ in COLUMNS].index("cat_id")


class UnsupportedError(Exception):
    """The scanner does not take this file; decode it with msgspec."""


def available() -> bool:
    return SCANNER_BUILT and os.environ.get(DECODER_ENV, "").lower() != "msgspec"


class NativeBuilder(ColumnStore):
    """One file's columns, filled batch by batch by a ``_kineto.Scanner``."""

    def __init__(self, json_bytes: int = 0) -> None:
        super().__init__(json_bytes)
        if not SCANNER_BUILT:
            raise UnsupportedError("the simdjson scanner is not built")
        self._scanner = _kineto.Scanner(sorted(MATMUL_OPS))
        self.names: list[str | None] = []
        self.cats: list[str | None] = []

    def scan_events(self, data: Any, length: int) -> None:
        """A batch: a JSON array of events, the first ``length`` bytes of ``data`` (bytes after
        it are read as simdjson's padding instead of copying the batch)."""
        self._scan(data, length, document=False)

    def scan_document(self, data: Any, length: int) -> dict[str, Any]:
        """A top-level JSON object (the first ``length`` bytes of ``data``): its
        ``traceEvents`` go into the columns; returns its other keys the metadata reads
        (schemaVersion, deviceProperties, distributedInfo, baseTimeNanoseconds)."""
        meta = self._scan(data, length, document=True)
        return meta if meta is not None else {}

    def _scan(self, data: Any, length: int, *, document: bool) -> dict[str, Any] | None:
        columns = list(self.cols.values())
        bound = length // _MIN_KEPT_EVENT_BYTES + 1
        for col in columns:
            col.reserve(bound)
        views = tuple(col.data[col.size :] for col in columns)
        try:
            found = self._scanner.scan(data, length, views, self.events, document)
        except _kineto.UnsupportedError as exc:
            raise UnsupportedError(str(exc)) from exc
        events, rows, new_cats, new_names, extras, patches, flags, absurd, meta = found
        if absurd is not None:
            raise AbsurdTimeError(*absurd)
        self.cats.extend(new_cats)
        self.number_cats(new_cats)
        self.names.extend(new_names)
        for row, column, text in patches:  # integer args written as text: HTA's int()
            views[column][row] = as_int(text)
        if extras:
            cat_id = views[_CAT_ID]
            for row, present in extras:
                category = self.cat_category[int(cat_id[row])]
                add_row_extras(self.extras, self.rows + row, category, present)
        for col in columns:
            col.size += rows
        self.rows += rows
        self.events += events
        for bit, types, kind in (
            (_TS_FLOAT, self.ts_types, float),
            (_TS_NONE, self.ts_types, type(None)),
            (_DUR_FLOAT, self.dur_types, float),
            (_DUR_NONE, self.dur_types, type(None)),
        ):
            if flags & bit:
                types.add(kind)
        return meta

    def finish_columns(self) -> dict[str, Any]:
        return self.finish(self.names, self.cats)
