"""Decode one Kineto trace file into a ``RankTrace``, streaming, with bounded memory.

The (gunzipped) JSON is read in chunks; the ``traceEvents`` array is cut into batches at
``}, {`` boundaries and each batch is decoded straight into numpy columns, then dropped. So
neither the whole JSON text nor a Python object per event of the whole file is ever held
(reference/traces.md §6.1). Two decoders take the batches: simdjson's (``traces.native``: no
Python object per event) when it is built, and msgspec's typed Structs (``traces.columns``), the
reference, for files the scanner does not take. A cut that lands inside a string or a nested
value cannot decode (its brackets do not balance); then, and for any other surprise, the file is
decoded again with msgspec in one piece, which either works or names the problem.
Gunzip (``traces.gunzip``: ISA-L when installed) runs inline: a producer thread cost more in GIL
hand-offs than it overlapped. Batches are decoded in place from the read buffer (no copy).
"""

from __future__ import annotations

import gc
import mmap
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuwarden.errors import CorruptInputError, MissingExtraError
from gpuwarden.traces import gunzip
from gpuwarden.traces.memory import anonymous_map
from gpuwarden.traces.model import MAX_TIME_US, AbsurdTimeError, RankTrace, TraceMetadata

# compressed bytes per read and JSON bytes per decompressed chunk: under glibc's 128 KB mmap
# threshold, so these short-lived blocks come from the heap and are reused; a freed mapped
# block would raise the threshold and leave the analyses' arrays fragmenting the heap
_READ = 1 << 16
_CHUNK = 1 << 16
_BATCH = 1 << 18  # JSON bytes per decoded batch (256 KB: 3.5 MB less peak RSS than 512 KB
# on the 8-rank astra set, same CPU time within noise)
_MAX_HEADER = 64 << 20  # give up streaming if "traceEvents" has not appeared by then
# Text already searched for "traceEvents": [ is searched again only for its last bytes (where
# the key may have been cut by a chunk's end), so a long header costs one pass, not one per
# chunk (64 MB of blanks took 25 s). Writers put a blank or two between key and bracket; a
# header spread further falls back to the whole-file decoder, as any unusual layout does.
_HEADER_SEARCH_OVERLAP = 4096
# the most JSON decoded whole (the fallback holds it and every event as an object: ~5× in RAM)
_WHOLE_MAX = 2 << 30
_TAIL_PREFIX = b'{"traceEvents":'  # makes the text after the last batch a document
_PREFIX = len(_TAIL_PREFIX)
_PADDING = 64  # simdjson::SIMDJSON_PADDING: bytes it may read past the end
_TRACE_EVENTS = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*(?=\{)")
_JSON_SPACE = frozenset(b" \t\r\n")
_COMMA, _CLOSE, _SPACE = ord(","), ord("}"), ord(" ")
_RANK_IN_NAME = re.compile(r"rank[-_.]?(\d+)", re.IGNORECASE)


class _FallbackError(Exception):
    """Streaming could not cut this file safely; decode it in one piece."""


def _modules() -> tuple[Any, Any, Any]:
    """msgspec, the Structs and the column builder, imported lazily (the ``trace`` extra)."""
    try:
        import msgspec

        from gpuwarden.traces import columns, kineto_structs
    except ImportError as exc:
        raise MissingExtraError("trace analysis", "trace", exc.name or "msgspec") from exc
    return msgspec, kineto_structs, columns


def _native() -> Any:
    """``traces.native`` when the simdjson scanner is built and not switched off, else None."""
    try:
        from gpuwarden.traces import native
    except ImportError as exc:  # numpy missing: the trace extra
        raise MissingExtraError("trace analysis", "trace", exc.name or "numpy") from exc
    return native if native.available() else None


def releases_gil() -> bool:
    """Whether ``decode_file`` mostly runs without the GIL (the simdjson scanner is in use), so
    that several files decode in parallel in threads."""
    return _native() is not None


# The GPU list, and under its older name: Kineto of the PyTorch 1.8/1.9 era (tensorboard plugin
# test input of May 2021, kineto tb_plugin/test/gpu_metrics_input.json) wrote the same entries
# ("id", "name", ...) as "computeProperties"; later writers call it "deviceProperties".
DEVICES_KEY, LEGACY_DEVICES_KEY = "deviceProperties", "computeProperties"
# the trace's keys besides its events that the metadata reads (kineto_structs decodes these)
META_KEYS = (
    "schemaVersion",
    DEVICES_KEY,
    "distributedInfo",
    "baseTimeNanoseconds",
    LEGACY_DEVICES_KEY,
)


class _MsgspecSink:
    """Batches into msgspec Structs, folded into columns by ``columns.ColumnBuilder``."""

    def __init__(self, expected: int) -> None:
        _, self._structs, columns = _modules()
        self.builder = columns.ColumnBuilder(self._structs.STRICT.no_args, expected)

    def document(self, data: Any, length: int) -> dict[str, Any]:
        structs = self._structs
        trace = _decode_with(structs.STRICT.trace, structs.LENIENT.trace, data[:length])
        self.builder.add(trace.traceEvents or [])
        return {k: getattr(trace, k) for k in META_KEYS}

    def events(self, data: Any, length: int) -> None:
        structs = self._structs
        part = data[:length]
        events = _decode_with(structs.STRICT.events, structs.LENIENT.events, part)
        self.builder.add(events)
        del events
        part.release()


class _NativeSink:
    """Batches scanned by simdjson straight into columns (``native.NativeBuilder``)."""

    def __init__(self, native: Any, expected: int) -> None:
        self._unsupported = native.UnsupportedError
        self.builder = native.NativeBuilder(expected)

    def document(self, data: Any, length: int) -> dict[str, Any]:
        try:
            return self.builder.scan_document(data, length)  # type: ignore[no-any-return]
        except self._unsupported as exc:
            raise _FallbackError from exc

    def events(self, data: Any, length: int) -> None:
        try:
            self.builder.scan_events(data, length)
        except self._unsupported as exc:
            raise _FallbackError from exc


def _unreadable(path: Path, what: str, hint: str) -> CorruptInputError:
    return CorruptInputError(f"{path}: {what}", reference="trace-unreadable", hint=hint)


def _not_kineto(path: Path, why: str) -> CorruptInputError:
    return CorruptInputError(
        f"{path}: not a PyTorch profiler (Kineto) trace ({why})",
        reference="trace-not-kineto",
        hint="pass the *.pt.trace.json[.gz] file written by torch.profiler "
        "(tensorboard_trace_handler or export_chrome_trace), not an execution trace or "
        "memory timeline",
    )


def _gzip_error(path: Path, exc: Exception | str) -> CorruptInputError:
    return _unreadable(
        path,
        f"corrupt or truncated gzip data ({exc})",
        "re-copy the trace file; `gzip -t FILE` checks it",
    )


def json_chunks(path: Path) -> Iterator[bytes]:
    """The file's JSON text in chunks, gunzipped when it starts with the gzip magic."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise _unreadable(
            path, f"cannot read the file ({exc.strerror or exc})", "check the path"
        ) from exc
    with fh:
        magic = fh.read(2)
        if magic != gunzip.GZIP_MAGIC:
            data = magic + fh.read(_CHUNK)
            while data:
                yield data
                data = fh.read(_CHUNK)
            return
        d = gunzip.new_member()
        data = magic + fh.read(_READ)
        # after a member: zero bytes (a tape or block device pads the file), then maybe another
        # member — as gzip(1) and Python's gzip module read it
        between = False
        try:
            while data:
                if between:
                    data = data.lstrip(b"\0")  # one read's worth: linear in the padding
                while data:
                    between = False
                    out = d.decompress(data, _CHUNK)
                    if out:
                        yield out
                    data = d.unconsumed_tail
                    if d.eof:  # concatenated gzip members, or padding
                        data = d.unused_data.lstrip(b"\0")
                        d = gunzip.new_member()
                        between = True
                data = fh.read(_READ)
            tail = b"" if between else d.flush()
        except gunzip.ERRORS as exc:
            raise _gzip_error(path, exc) from exc
        if tail:
            yield tail
        if not between and not d.eof:
            raise _gzip_error(path, "the file ends before the gzip stream does")


def read_json(path: Path) -> bytes:
    """The whole JSON text, for the files the streamed decoders do not take. Text that does not
    open like JSON is refused at its first chunk, and at most ``_WHOLE_MAX`` bytes are read: a
    device or a pipe (``/dev/urandom``) reports no size and may never end. Blanks with no JSON
    after ``_MAX_HEADER`` bytes are no trace either (a gzip of blanks inflates 1000-fold)."""
    chunks: list[bytes] = []
    size = 0
    opened = False
    for chunk in json_chunks(path):
        if not opened:
            first = chunk.lstrip()[:1]
            if first not in (b"{", b"[", b""):
                raise _not_kineto(path, "the text is not JSON")
            opened = first != b""
        size += len(chunk)
        if not opened and size > _MAX_HEADER:
            raise _not_kineto(path, f"only blanks in its first {_MAX_HEADER >> 20} MiB")
        if size > _WHOLE_MAX:
            raise CorruptInputError(
                f"{path}: more than {_WHOLE_MAX >> 30} GiB of JSON that is not laid out as a "
                "profiler writes it (no streamed traceEvents): too large to decode whole",
                reference="trace-too-large",
                hint="re-export the trace from torch.profiler; a device or pipe is not a trace",
            )
        chunks.append(chunk)
    return b"".join(chunks)


def rank_from_name(path: Path) -> int | None:
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def decode_file(path: Path) -> RankTrace:
    """Decode one trace file; CorruptInputError (naming the file) for anything unusable."""
    native = _native()
    was_enabled = gc.isenabled()
    gc.disable()  # nothing decoded here makes cycles; collections would only cost time
    try:
        expected = gunzip.json_size(path)
        sink: Any = None
        if native is not None:
            try:
                sink = _NativeSink(native, expected)
                head, tail, size = _stream(path, sink)
            except _FallbackError:
                sink = None
        if sink is None:
            try:
                sink = _MsgspecSink(expected)
                head, tail, size = _stream(path, sink)
            except _FallbackError:
                sink = _MsgspecSink(expected)
                head, size = _whole(path, sink.builder)
                tail = head
        cols = sink.builder.finish_columns()
    except AbsurdTimeError as exc:
        raise CorruptInputError(
            f"{path}: {exc}, beyond any profiler clock (|value| > {MAX_TIME_US:.3g} µs, 2**63 ns)",
            reference="trace-absurd-time",
            hint="the file is corrupt or was edited; re-export it from torch.profiler",
        ) from exc
    finally:
        if was_enabled:
            gc.enable()
    return RankTrace(meta=_metadata(path, head, tail, size, sink.builder, cols), **cols)


def _decode_with(family: Any, lenient: Any, data: Any) -> Any:
    """Strict Structs first (fast); a batch with unexpected types goes through the lenient ones;
    invalid JSON (or a cut in the wrong place) falls back to decoding the whole file."""
    import msgspec

    try:
        return family.decode(data)
    except msgspec.ValidationError:
        try:
            return lenient.decode(data)
        except Exception as exc:
            raise _FallbackError from exc
    except Exception as exc:
        raise _FallbackError from exc


class _Window:
    """The JSON text read and not yet decoded: ``data[start:end]`` of one anonymous memory map
    reused for the whole file. A chunk is copied in at ``end``; a decoded batch only moves
    ``start``; the text left is moved to the front when a chunk does not fit. So no chunk or
    batch leaves a freed block behind, and the map goes back to the system when the file is
    done (with ``del buf[:cut]`` and ``buf += chunk`` on a bytearray, the allocator's churn
    showed as megabytes of peak RSS). ``_PREFIX`` bytes are kept free before ``start`` for the
    tail's ``{"traceEvents":``, and ``_PADDING`` after ``end`` for simdjson, which reads past
    the end."""

    def __init__(self, capacity: int) -> None:
        self.data = anonymous_map(capacity)
        self.start = self.end = _PREFIX

    def __len__(self) -> int:
        return self.end - self.start

    def append(self, chunk: bytes) -> None:
        k = len(chunk)
        if self.end + k + _PADDING > len(self.data):
            self.compact(k)
        self.data[self.end : self.end + k] = chunk
        self.end += k

    def compact(self, room: int = 0) -> None:
        """Move the text to the front, growing the array when ``room`` more would not fit."""
        left = len(self)
        text = memoryview(self.data)[self.start : self.end]
        need = _PREFIX + left + room + _PADDING
        if need > len(self.data):
            grown = anonymous_map(max(need, 2 * len(self.data)))
            grown[_PREFIX : _PREFIX + left] = text
            text.release()
            self.data = grown
        else:
            if left > self.start - _PREFIX:  # overlapping: through a copy
                text = memoryview(bytes(text))
            self.data[_PREFIX : _PREFIX + left] = text
            text.release()
        self.start, self.end = _PREFIX, _PREFIX + left


def _stream(path: Path, sink: Any) -> tuple[dict[str, Any], dict[str, Any], int]:
    text = _Window(_PREFIX + _BATCH + _CHUNK + _PADDING + 1024)
    head: dict[str, Any] | None = None
    size = 0
    searched = 0  # bytes of the text, from its start, that hold no header
    for chunk in json_chunks(path):
        size += len(chunk)
        text.append(chunk)
        del chunk
        data = text.data
        if head is None:
            m = _TRACE_EVENTS.search(data, text.start + searched, text.end)
            if m is None:
                searched = max(0, len(text) - _HEADER_SEARCH_OVERLAP)
                first = bytes(data[text.start : text.start + 64]).lstrip()[:1]
                if len(text) > _MAX_HEADER or first not in (b"{", b""):
                    raise _FallbackError
                continue
            opening = bytes(data[text.start : m.start()]) + b'"traceEvents":[]}'
            head = _with_legacy_devices(sink.document(opening, len(opening)), opening)
            text.start = m.end() - 1  # keep the '['
        while len(text) >= _BATCH:
            # at most _BATCH bytes per batch: the scanner's buffers are sized by the largest
            cut = _last_boundary(data, text.start, text.end, _BATCH)
            if cut is None:
                break
            # decoded in place, the cut comma turned into the closing bracket and then into the
            # next opening one; msgspec.Raw values point into the buffer, so the events are
            # folded into columns and dropped before it changes. The batch is not copied: the
            # scanner is given the buffer from the batch on, the bytes after it are the
            # padding simdjson reads past the end.
            data[cut] = ord("]")
            view = memoryview(data)[text.start :]
            sink.events(view, cut + 1 - text.start)
            try:
                view.release()
            except BufferError:  # something kept a Raw slice: leave it this buffer, go on in a copy
                text.data = data = anonymous_map(len(data))
                data[:] = view
            data[cut] = ord("[")
            text.start = cut
    if head is None:
        raise _FallbackError
    if text.end + _PADDING > len(text.data):
        text.compact()
    data = text.data
    comma = _closing_comma(data, text.start, text.end)
    if comma is not None:
        data[comma] = _SPACE
    begin = text.start - len(_TAIL_PREFIX)
    data[begin : text.start] = _TAIL_PREFIX
    view = memoryview(data)[begin:]
    tail = sink.document(view, text.end - begin)
    view.release()
    return head, tail, size


def _with_legacy_devices(head: dict[str, Any], opening: bytes) -> dict[str, Any]:
    """``head`` plus the GPU list under its pre-``deviceProperties`` name when the opening text
    has no ``deviceProperties`` (the simdjson scanner returns only the current keys)."""
    if head.get(DEVICES_KEY) is not None or LEGACY_DEVICES_KEY.encode() not in opening:
        return head
    msgspec, structs, _ = _modules()
    try:
        legacy = structs.LEGACY_DEVICES.decode(opening)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return head  # the events decode will name a broken file
    return {**head, LEGACY_DEVICES_KEY: getattr(legacy, LEGACY_DEVICES_KEY)}


def _last_boundary(buf: mmap.mmap, start: int, end: int, limit: int) -> int | None:
    """Position of the comma of the last ``}, {`` in ``buf[start:start + limit]`` (of the text
    ``buf[start:end]``), so that batches stay within ``limit`` bytes; else of the first one
    after it (an event longer than ``limit``). Walks back over the ``{`` of the last 64 KB
    (event and args starts: a few per event) before scanning the rest."""
    stop = min(start + limit, end)
    window = max(start + 1, stop - (1 << 16))
    scan_end = stop
    while (brace := buf.rfind(b"{", window, scan_end)) > start:
        comma = _skip_space_back(buf, brace - 1, start)
        if comma > start and buf[comma] == _COMMA:
            close = _skip_space_back(buf, comma - 1, start)
            if close > start and buf[close] == _CLOSE:
                return comma
        scan_end = brace
    last = None
    for last in _BOUNDARY.finditer(buf, start + 1, stop):  # noqa: B007 - we want the last one
        pass
    if last is None:
        last = _BOUNDARY.search(buf, stop, end)
    return None if last is None else buf.find(b",", last.start(), end)


def _closing_comma(buf: mmap.mmap | bytes | bytearray, start: int, end: int) -> int | None:
    """Where a comma stands just before the ``}`` that ends the text ``buf[start:end]``; None
    when none does. libkineto's ChromeTraceLogger::finalizeTrace ends the events with ``],``
    and closes the object with a key written after them (today ``"traceName"``, added because
    "the last entry MUST not end with a comma"); the writers before it end a trace ``],\n}``,
    a comma JSON does not allow. The trace is whole (a cut file does not end with ``}``)."""
    close = _skip_space_back(buf, end - 1, start)
    if close < start or buf[close] != _CLOSE:
        return None
    comma = _skip_space_back(buf, close - 1, start)
    return comma if comma >= start and buf[comma] == _COMMA else None


def _skip_space_back(buf: mmap.mmap | bytes | bytearray, i: int, start: int) -> int:
    """Index of the last non-whitespace byte at or before i, not before ``start`` (start - 1 if
    none)."""
    while i >= start and buf[i] in _JSON_SPACE:
        i -= 1
    return i


def _whole(path: Path, builder: Any) -> tuple[dict[str, Any], int]:
    msgspec, structs, _ = _modules()
    data: bytes | bytearray = read_json(path)
    if data.lstrip()[:1] == b"[":
        raise _not_kineto(path, "the JSON is a list, a Kineto trace is an object")
    comma = _closing_comma(data, 0, len(data))
    if comma is not None:  # a copy only for the old writers' traces
        data = bytearray(data)
        data[comma] = _SPACE
    try:
        trace = structs.LENIENT.trace.decode(data)
    except msgspec.ValidationError as exc:
        where = str(exc).partition(" - at ")[2]
        if where in ("", "`$.traceEvents`"):  # the top level is not a Kineto object
            raise _not_kineto(path, str(exc)) from exc
        raise _unreadable(
            path,
            f"unexpected value in the trace: {exc}",
            "the file does not follow the Kineto trace format; re-export it",
        ) from exc
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise _unreadable(
            path,
            f"invalid or truncated JSON: {exc}",
            "the file may be cut short (profiler killed while writing?); re-export it",
        ) from exc
    except RecursionError as exc:  # arrays or objects nested thousands deep
        raise _unreadable(
            path,
            f"values nested too deep to decode ({exc})",
            "the file does not follow the Kineto trace format; re-export it",
        ) from exc
    if trace.traceEvents is None:
        raise _not_kineto(path, "no `traceEvents` array")
    builder.add(trace.traceEvents)
    return {k: getattr(trace, k) for k in META_KEYS}, len(data)


def _metadata(
    path: Path,
    head: dict[str, Any],
    tail: dict[str, Any],
    size: int,
    builder: Any,
    cols: dict[str, Any],
) -> TraceMetadata:
    """The top-level keys (from the text before and after the events) and what the builder
    counted while decoding (``cols``: its finished columns)."""
    time_flags: dict[str, bool] = builder.time_flags()

    def pick(key: str) -> Any:
        value = head.get(key)
        return value if value is not None else tail.get(key)

    dist_raw = pick("distributedInfo")
    dist = dist_raw if isinstance(dist_raw, dict) else {}
    rank_value = dist.get("rank")
    if type(rank_value) is int and rank_value >= 0:
        rank, source = rank_value, "distributedInfo"
    elif (from_name := rank_from_name(path)) is not None:
        rank, source = from_name, "file name"
    else:
        rank, source = 0, "default"
    world = dist.get("world_size")
    backend = dist.get("backend")
    base = pick("baseTimeNanoseconds")
    schema = pick("schemaVersion")
    props_raw = pick(DEVICES_KEY)
    if props_raw is None:
        props_raw = pick(LEGACY_DEVICES_KEY)
    props = props_raw if isinstance(props_raw, list) else []
    return TraceMetadata(
        path=str(path),
        rank=rank,
        rank_source=source,
        world_size=world if type(world) is int else None,
        backend=backend if isinstance(backend, str) else None,
        base_time_ns=base if type(base) is int else None,
        schema_version=schema if type(schema) is int else None,
        device_properties=tuple(p for p in props if isinstance(p, dict)),
        distributed_info=dist,
        trace_bytes=size,
        event_count=builder.events,
        ts_is_float=time_flags["ts_is_float"],
        ts_missing=time_flags["ts_missing"],
        dur_missing=time_flags["dur_missing"],
        dur_is_float=time_flags["dur_is_float"],
        skipped_events=builder.skipped_events(cols),
    )
