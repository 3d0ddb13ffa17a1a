"""Device readings as flat JSON records: the device object of `gpuwarden.snapshot/1`, reused by
`gpuwarden.history/1` rows. One function, so the two schemas cannot drift apart."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from gpuwarden.types.telemetry import DeviceInfo, DeviceSample

# Most fields are scalars or None; checking the exact type first skips the slow dataclass probe.
_ATOMS = frozenset({type(None), bool, int, float, str})


def _plain(value: Any) -> Any:
    if type(value) in _ATOMS:
        return value
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def info_record(info: DeviceInfo) -> dict[str, Any]:
    return {f.name: _plain(getattr(info, f.name)) for f in dataclasses.fields(info)}


def device_record(sample: DeviceSample) -> dict[str, Any]:
    """Identity fields first (index, uuid, name, ...), then the reading; ``null`` = not reported."""
    record = info_record(sample.info)
    for f in dataclasses.fields(sample):
        if f.name in ("info", "extra"):
            continue
        record[f.name] = _plain(getattr(sample, f.name))
    if sample.extra:
        record["extra"] = dict(sample.extra)
    return record
