"""DeviceSample / DeviceInfo ⇄ table rows, losslessly (timestamps at 1 ms resolution).

None stays NULL, 0 stays 0, bools come back as bools, nested tuples as the same dataclasses:
positional JSON arrays in dataclass field order (the schema version pins that order).

Reading checks what it rebuilds: every value must have a type its field takes (a BLOB, or text
where a number goes, is not something this module wrote), every time must lie in the years
1-9999. Anything else raises TypeError/ValueError and the caller names the file as damaged, so
a hand-edited or foreign row becomes ``store-corrupt``, not a crash further on.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections import deque
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

from gpuwarden.telemetry.store.schema import DEVICE_COLUMNS, SAMPLE_COLUMNS, Codec
from gpuwarden.types.telemetry import (
    DeviceInfo,
    DeviceSample,
    DeviceState,
    MigDeviceSample,
    NvLinkSample,
    PodSample,
    ProcessSample,
)

_GETTERS = {
    cls: attrgetter(*(f.name for f in dataclasses.fields(cls)))
    for cls in (NvLinkSample, MigDeviceSample, ProcessSample, PodSample)
}

# Fields without a default must always be written; the rest may be left off when None.
_REQUIRED = {
    cls: sum(
        f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        for f in dataclasses.fields(cls)
    )
    for cls in _GETTERS
}

STATE_CODES: dict[DeviceState, int] = {
    DeviceState.OK: 0,
    DeviceState.ERROR: 1,
    DeviceState.GPU_LOST: 2,
}
_STATES: dict[int, DeviceState] = {code: state for state, code in STATE_CODES.items()}

SAMPLE_FIELD_NAMES: tuple[str, ...] = tuple(c.name for c in SAMPLE_COLUMNS)
_get_fields = attrgetter(*SAMPLE_FIELD_NAMES)
_get_info = attrgetter("index", *DEVICE_COLUMNS[1:])


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def to_ms(seconds: float) -> int:
    """Unix seconds → integer milliseconds, the store's time resolution."""
    return math.floor(seconds * 1000 + 0.5)


# The times a store holds: the years 1 to 9999, what a date can name (ISO-8601, datetime).
EARLIEST_MS = -62_135_596_800_000
LATEST_MS = 253_402_300_799_999


def checked_ms(seconds: float) -> int:
    """``to_ms`` of a time to store: ValueError/OverflowError for NaN, inf or a time beyond
    the years 1-9999 (it could not be shown, and would read back as damage)."""
    ms = to_ms(seconds)
    if not EARLIEST_MS <= ms <= LATEST_MS:
        raise ValueError(f"time {seconds} s is beyond the years 1-9999")
    return ms


def time_s(ms: int) -> float:
    """A stored time back in seconds; ValueError for one no writer could have stored."""
    if not EARLIEST_MS <= ms <= LATEST_MS:
        raise ValueError(f"time {ms} ms is beyond the years 1-9999")
    return ms / 1000


_NONE = type(None)


def _python_types(hint: Any) -> tuple[type, ...]:
    """What a field annotated ``hint`` takes from SQLite or JSON (an int where a float goes)."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    allowed = set(args)
    if float in allowed:
        allowed.add(int)
    return tuple(allowed)


def field_types(cls: type[Any]) -> tuple[tuple[type, ...], ...]:
    """Per dataclass field, in order, the Python types a stored value of it may have."""
    hints = typing.get_type_hints(cls)
    return tuple(_python_types(hints[f.name]) for f in dataclasses.fields(cls))


def check_types(
    values: Sequence[Any], allowed: Sequence[tuple[type, ...]], names: Sequence[str]
) -> None:
    """TypeError naming the first value whose type is not allowed for its column."""
    if all(map(isinstance, values, allowed)):
        return
    for value, ok, name in zip(values, allowed, names, strict=False):
        if not isinstance(value, ok):
            raise TypeError(f"{name} holds a {type(value).__name__} ({value!r:.40})")


def _trimmed(values: tuple[Any, ...], required: int) -> list[Any]:
    """Positional values without trailing Nones past the required fields (their defaults)."""
    end = len(values)
    while end > required and values[end - 1] is None:
        end -= 1
    return list(values[:end])


def _positional(items: Sequence[Any]) -> str:
    if not items:
        return "[]"
    cls = type(items[0])
    get, required = _GETTERS[cls], _REQUIRED[cls]
    return _dumps([_trimmed(get(item), required) for item in items])


def _nested(cls: type[Any]) -> Callable[[str], tuple[Any, ...]]:
    allowed = field_types(cls)
    names = tuple(f"{cls.__name__}.{f.name}" for f in dataclasses.fields(cls))
    required = _REQUIRED[cls]

    def decode(text: str) -> tuple[Any, ...]:
        items = json.loads(text)
        if not isinstance(items, list):
            raise TypeError(f"expected a JSON array for {cls.__name__}")
        for item in items:
            if not isinstance(item, list) or not required <= len(item) <= len(allowed):
                raise TypeError(f"{cls.__name__}: {item!r:.40} is not a positional array")
            check_types(item, allowed, names)
        return tuple(cls(*item) for item in items)

    return decode


def _decode_reasons(text: str) -> tuple[str, ...]:
    reasons = json.loads(text)
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise TypeError("expected a JSON array of strings for clock_event_reasons")
    return tuple(reasons)


def _decode_extra(text: str) -> dict[str, float]:
    extra = json.loads(text)
    if not isinstance(extra, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in extra.values()
    ):
        raise TypeError("expected a JSON object of numbers for extra")
    return extra


_ENCODERS: dict[Codec, Callable[[Any], Any]] = {
    Codec.STATE: STATE_CODES.__getitem__,
    Codec.REASONS: _dumps,
    Codec.NVLINKS: _positional,
    Codec.MIG: _positional,
    Codec.PROCESSES: _positional,
    Codec.PODS: _positional,
    Codec.EXTRA: lambda extra: _dumps(extra) if extra else None,
}
_DECODERS: dict[Codec, Callable[[Any], Any]] = {
    Codec.BOOL: bool,
    Codec.STATE: _STATES.__getitem__,
    Codec.REASONS: _decode_reasons,
    Codec.NVLINKS: _nested(NvLinkSample),
    Codec.MIG: _nested(MigDeviceSample),
    Codec.PROCESSES: _nested(ProcessSample),
    Codec.PODS: _nested(PodSample),
    Codec.EXTRA: _decode_extra,
}
_ENCODE_AT = tuple(
    (i, _ENCODERS[c.codec]) for i, c in enumerate(SAMPLE_COLUMNS) if c.codec in _ENCODERS
)
# JSON columns repeat from one reading to the next (same processes, same links): decode each
# distinct text once per query. Tuples of frozen dataclasses are safe to share; dicts are not.
_SHARED = frozenset({Codec.REASONS, Codec.NVLINKS, Codec.MIG, Codec.PROCESSES, Codec.PODS})
# Positions below are in DeviceSample's argument list: info and timestamp_s come first.
_DECODE_AT = tuple(
    (i + 2, _DECODERS[c.codec], c.codec in _SHARED)
    for i, c in enumerate(SAMPLE_COLUMNS)
    if c.codec in _DECODERS
)
# Rollups hold aggregates; a float in an integer column rounds back to the field's type.
_ROUND_AT = tuple(i + 2 for i, c in enumerate(SAMPLE_COLUMNS) if c.codec is Codec.INT)
_EXTRA_AT = SAMPLE_FIELD_NAMES.index("extra") + 2


_INT64 = (-(2**63), 2**63 - 1)
_INT_AT = tuple(i for i, c in enumerate(SAMPLE_COLUMNS) if c.codec is Codec.INT)
_FLOAT_AT = tuple(i for i, c in enumerate(SAMPLE_COLUMNS) if c.codec is Codec.FLOAT)


def encode_values(sample: DeviceSample) -> list[Any]:
    """One value per SAMPLE_COLUMNS entry. Raises ValueError naming the field for what SQLite
    cannot hold (an integer beyond 64 bits, e.g. an unfiltered NVML 0xFFFF... sentinel)."""
    values = list(_get_fields(sample))
    lo, hi = _INT64
    for i in _INT_AT:
        value = values[i]
        if value is not None and not lo <= value <= hi:
            raise ValueError(f"{SAMPLE_FIELD_NAMES[i]}={value} does not fit in 64 bits")
    for i in _FLOAT_AT:
        value = values[i]
        if type(value) is int and not lo <= value <= hi:
            values[i] = float(value)
    for i, encode in _ENCODE_AT:
        if values[i] is not None:
            values[i] = encode(values[i])
    return values


def encode_sample(
    sample: DeviceSample, snapshot_ms: int, device_id: int, snapshot_id: int, origin_id: int
) -> tuple[Any, ...]:
    """The row of ``samples``: key columns (schema.KEY_COLUMNS), then one value per
    SAMPLE_COLUMNS entry."""
    values = encode_values(sample)
    return sample_row(values, sample, snapshot_ms, device_id, snapshot_id, origin_id)


def sample_row(
    values: list[Any],
    sample: DeviceSample,
    snapshot_ms: int,
    device_id: int,
    snapshot_id: int,
    origin_id: int,
) -> tuple[Any, ...]:
    offset_ms = to_ms(sample.timestamp_s) - snapshot_ms
    return (snapshot_ms, device_id, snapshot_id, offset_ms, origin_id, *values)


# Building a DeviceSample by setting its 71 slots from C (map over the slot descriptors) takes
# 8.8 µs here against 20 µs for DeviceSample(*values): the generated __init__ runs one
# object.__setattr__ per field in bytecode. Valid only while __init__ does nothing else, so a
# __post_init__ (validation) switches back to the constructor.
_SLOTS = tuple(DeviceSample.__dict__[f.name] for f in dataclasses.fields(DeviceSample))
_SET_SLOT = type(_SLOTS[0]).__set__
_FAST_BUILD = not hasattr(DeviceSample, "__post_init__") and all(
    type(slot) is type(_SLOTS[0]) for slot in _SLOTS
)


def build_sample(values: Sequence[Any]) -> DeviceSample:
    """``DeviceSample(*values)`` (info, timestamp_s, then every other field in order)."""
    if not _FAST_BUILD:
        return DeviceSample(*values)
    sample: DeviceSample = object.__new__(DeviceSample)
    deque(map(_SET_SLOT, _SLOTS, repeat(sample), values), maxlen=0)
    return sample


def _column_types(codec: Codec, *, rollup: bool) -> tuple[type, ...]:
    if codec is Codec.FLOAT or (rollup and codec is Codec.INT):  # a rollup mean may be float
        return (float, int, _NONE)
    if codec in (Codec.INT, Codec.BOOL):
        return (int, _NONE)
    if codec is Codec.STATE:
        return (int,)
    return (str, _NONE)  # text and the JSON columns


_SAMPLE_TYPES = {
    rollup: tuple(_column_types(c.codec, rollup=rollup) for c in SAMPLE_COLUMNS)
    for rollup in (False, True)
}


class SampleDecoder:
    """Rebuilds DeviceSamples from rows of one query (it caches decoded JSON texts)."""

    def __init__(self, *, rollup: bool) -> None:
        self._rollup = rollup
        self._types = _SAMPLE_TYPES[rollup]
        self._cache: dict[str, Any] = {}

    def __call__(
        self, info: DeviceInfo, t_ms: int, dt_ms: int, values: Sequence[Any]
    ) -> DeviceSample:
        """Inverse of encode_sample for the value columns. Raises TypeError/ValueError/KeyError
        on values no encoder wrote (a damaged file); the caller names the file."""
        check_types(values, self._types, SAMPLE_FIELD_NAMES)
        row = [info, time_s(t_ms + dt_ms), *values]
        cache = self._cache
        for i, decode, shared in _DECODE_AT:
            value = row[i]
            if value is None:
                continue
            if shared:
                hit = cache.get(value)
                if hit is None:
                    hit = cache[value] = decode(value)
                    if len(cache) > 4096:
                        cache.clear()
                row[i] = hit
            else:
                row[i] = decode(value)
        if self._rollup:
            for i in _ROUND_AT:
                if type(row[i]) is float:
                    row[i] = round(row[i])
        if row[_EXTRA_AT] is None:
            row[_EXTRA_AT] = {}
        return build_sample(row)


def encode_info(info: DeviceInfo) -> tuple[Any, ...]:
    """Identity columns, then the whole identity as JSON (the UNIQUE key of ``devices``)."""
    values = _get_info(info)
    return (*values, _dumps(list(values)))


_INFO_TYPES = field_types(DeviceInfo)


def decode_info(values: Sequence[Any]) -> DeviceInfo:
    check_types(values, _INFO_TYPES, DEVICE_COLUMNS)
    return DeviceInfo(*values)
