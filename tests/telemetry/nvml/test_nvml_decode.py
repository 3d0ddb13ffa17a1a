"""The fast paths of a reading give what the plain paths give: field-value decoding by layout
and the DeviceSample builder."""

from __future__ import annotations

import struct

import pynvml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.telemetry.nvml.construct import builder
from gpuwarden.telemetry.nvml.fields import _convert, _Decoder
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample

_ENTRY = struct.Struct("<IIqqIIQ")
entry = st.tuples(st.integers(0, 8), st.sampled_from([0, 0, 0, 3]), st.integers(0, (1 << 64) - 1))
entries = st.lists(entry, min_size=1, max_size=12)


def _fill(array: object, rows: list[tuple[int, int, int]]) -> None:
    raw = b"".join(_ENTRY.pack(i, 0, 0, 0, k, r, v) for i, (k, r, v) in enumerate(rows))
    memoryview(array).cast("B")[:] = raw  # type: ignore[call-overload]


@settings(max_examples=60, deadline=None)
@given(entries, st.data())
def test_decoder_matches_entry_by_entry_across_layout_changes(rows, data) -> None:  # type: ignore[no-untyped-def]
    array = (pynvml.c_nvmlFieldValue_t * len(rows))()
    decoder = _Decoder(array)
    for _ in range(3):  # first (slow path), same layout (fast path), then a mutated one
        _fill(array, rows)
        want = [None if r else _convert(k, v) for k, r, v in rows]
        # repr: a double union may hold NaN, which is not equal to itself
        assert repr(decoder.decode()) == repr(want)
        assert repr(decoder.decode()) == repr(want)
        rows = data.draw(st.lists(entry, min_size=len(rows), max_size=len(rows)))


def test_builder_equals_constructor() -> None:
    info = DeviceInfo(index=0, uuid="u", name="n", driver_version="1", cuda_driver_version="1")
    values = {"info": info, "timestamp_s": 1.0, "pstate": "P0", "fan_speed_percent": 3.0}
    built = builder(DeviceSample)(dict(values))
    assert type(built) is DeviceSample
    assert built == DeviceSample(**values) and repr(built) == repr(DeviceSample(**values))
    assert built.extra == {} and built.extra is not builder(DeviceSample)(dict(values)).extra
