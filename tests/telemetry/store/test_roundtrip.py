"""What goes in comes out: every DeviceSample field, nested tuples, None vs 0, bools, events."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.errors import InputError
from gpuwarden.telemetry.store import Store
from gpuwarden.telemetry.store.schema import DEVICE_COLUMNS, SAMPLE_COLUMNS, Codec
from gpuwarden.types.telemetry import (
    DeviceInfo,
    DeviceSample,
    DeviceState,
    EventKind,
    MigDeviceSample,
    NvLinkSample,
    PodSample,
    ProcessSample,
)

from .captures import snapshot
from .conftest import xid_event


def _fields(sample: DeviceSample) -> dict[str, Any]:
    """Every field including ``extra`` (excluded from ==), with exact types."""
    return {f.name: getattr(sample, f.name) for f in dataclasses.fields(sample)}


def _assert_same(got: DeviceSample, want: DeviceSample) -> None:
    assert got == want
    for name, value in _fields(want).items():
        back = getattr(got, name)
        assert back == value, name
        # None stays None, 0 stays 0, False stays False (bool is not int here).
        assert (back is None) == (value is None), name
        if isinstance(value, bool):
            assert type(back) is bool, name


def test_schema_columns_are_the_sample_fields_in_order() -> None:
    fields = [f.name for f in dataclasses.fields(DeviceSample)]
    assert fields[:2] == ["info", "timestamp_s"]
    assert [c.name for c in SAMPLE_COLUMNS] == fields[2:]
    info_fields = [f.name for f in dataclasses.fields(DeviceInfo)]
    assert ["index", *DEVICE_COLUMNS[1:]] == info_fields


def test_real_samples_round_trip_every_field(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float, xid_lines: dict[int, str]
) -> None:
    h100 = rich_samples[0]
    event = xid_event(h100, round((t0 + 0.004) * 1000) / 1000, 79, xid_lines[79])
    snap = snapshot(rich_samples, t0, events=(event,))
    with Store.open(tmp_path / "t.db") as store:
        store.write(snap)
    with Store.open(tmp_path / "t.db", readonly=True) as store:
        back = store.samples()
        events = store.events()
        (snapshot_back,) = store.snapshots()
        devices = store.devices()
    assert len(back) == 3
    for got, want in zip(back, snap.samples, strict=True):
        _assert_same(got, want)
    assert back[0].nvlinks is not None and len(back[0].nvlinks) == 12
    assert back[0].extra == {"power.draw.instant": 625.68}
    assert back[1].mig_devices == rich_samples[1].mig_devices
    assert back[1].gpu_utilization_percent is None  # "[N/A]" under MIG stays "not reported"
    assert back[0].clock_event_reasons == ()  # none active, not "not reported"
    assert back[0].ecc_errors_corrected_volatile == 0
    assert back[0].remapped_rows_pending is False
    assert events == [event]
    assert snapshot_back == snap
    assert devices == tuple(s.info for s in snap.samples)


def test_gpu_sample_of_the_h100_capture_is_under_a_kilobyte(
    tmp_path: Path, fixtures: Path, t0: float
) -> None:
    from . import captures

    path = tmp_path / "size.db"
    with Store.open(path, flush_every_samples=10_000) as store:
        for k in range(600):
            store.write(snapshot(captures.h100_samples(fixtures, 8, t0), t0 + k))
    size = path.stat().st_size + sum(
        p.stat().st_size for p in tmp_path.glob("size.db-*") if p.is_file()
    )
    assert size / (600 * 8) < 1024


# --- hypothesis: any value of any field -------------------------------------------------------

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_FLOAT = st.floats(allow_nan=False)
_TEXT = st.text(max_size=12)


def _opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


_NESTED: dict[type[Any], dict[str, st.SearchStrategy[Any]]] = {
    NvLinkSample: {"link": st.integers(0, 17), "active": _opt(st.booleans())},
    MigDeviceSample: {"gpu_instance_id": st.integers(0, 14)},
    ProcessSample: {"pid": st.integers(1, 2**22)},
    PodSample: {"pod": _TEXT},
}


def _nested(cls: type[Any]) -> st.SearchStrategy[Any]:
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(cls):
        if f.name in _NESTED[cls]:
            kwargs[f.name] = _NESTED[cls][f.name]
        elif "int" in str(f.type):
            kwargs[f.name] = _opt(_INT64)
        elif "float" in str(f.type):
            kwargs[f.name] = _opt(_FLOAT)
        elif "bool" in str(f.type):
            kwargs[f.name] = _opt(st.booleans())
        else:
            kwargs[f.name] = _opt(_TEXT)
    return st.builds(cls, **kwargs)


_BY_CODEC: dict[Codec, st.SearchStrategy[Any]] = {
    Codec.INT: _opt(_INT64),
    Codec.FLOAT: _opt(_FLOAT),
    Codec.TEXT: _opt(_TEXT),
    Codec.BOOL: _opt(st.booleans()),
    Codec.STATE: st.sampled_from(list(DeviceState)),
    Codec.REASONS: _opt(st.lists(_TEXT, max_size=3).map(tuple)),
    Codec.NVLINKS: _opt(st.lists(_nested(NvLinkSample), max_size=3).map(tuple)),
    Codec.MIG: _opt(st.lists(_nested(MigDeviceSample), max_size=3).map(tuple)),
    Codec.PROCESSES: _opt(st.lists(_nested(ProcessSample), max_size=3).map(tuple)),
    Codec.PODS: _opt(st.lists(_nested(PodSample), max_size=3).map(tuple)),
    Codec.EXTRA: st.dictionaries(_TEXT, _FLOAT, max_size=3),
}

_samples = st.builds(
    DeviceSample,
    info=st.builds(
        DeviceInfo,
        index=st.integers(0, 15),
        uuid=_TEXT,
        name=_TEXT,
        memory_total_bytes=_opt(_INT64),
        gpu_instance_id=_opt(st.integers(0, 14)),
    ),
    timestamp_s=st.integers(0, 4_000_000_000_000).map(lambda ms: ms / 1000),
    **{c.name: _BY_CODEC[c.codec] for c in SAMPLE_COLUMNS},
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sample=_samples)
def test_any_field_values_round_trip(tmp_path_factory: Any, sample: DeviceSample) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "t.db"
    snap = snapshot((sample,), sample.timestamp_s)
    with Store.open(path) as store:
        store.write(snap)
        (back,) = store.samples()
    _assert_same(back, sample)
    os.remove(path)


def test_state_error_and_event_kinds_round_trip(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float, xid_lines: dict[int, str]
) -> None:
    lost = replace(rich_samples[0], state=DeviceState.GPU_LOST, error="GPU is lost")
    snap = snapshot((lost,), t0, events=(xid_event(lost, t0, 79, xid_lines[79]),))
    with Store.open(tmp_path / "t.db") as store:
        store.write(snap)
        (back,) = store.samples()
        (event,) = store.events()
    assert back.state is DeviceState.GPU_LOST
    assert back.error == "GPU is lost"
    assert event.kind is EventKind.XID
    assert event.code == 79


def test_series_matches_the_samples_it_projects(
    tmp_path: Path, rich_samples: tuple[DeviceSample, ...], t0: float
) -> None:
    fields = ["memory_used_bytes", "power_draw_watts", "ecc_mode_enabled", "pstate"]
    with Store.open(tmp_path / "t.db") as store:
        for k in range(5):
            store.write(snapshot(rich_samples, t0 + k))
        samples = store.samples()
        rows = store.series(fields, since_s=t0 + 1, uuids=[rich_samples[2].info.uuid])
        everything = store.series(fields)
        with pytest.raises(InputError) as caught:
            store.series(["processes"])
    assert caught.value.reference == "unknown-field"
    assert everything == [
        (s.timestamp_s, s.info.uuid, *(getattr(s, f) for f in fields)) for s in samples
    ]
    assert [r[0] for r in rows] == [s.timestamp_s for s in samples if s.info.index == 2][1:]
    assert all(type(r[4]) is bool or r[4] is None for r in everything)
