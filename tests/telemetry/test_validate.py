"""The one range check every backend's readings pass (telemetry.validate): real captures keep
every value; impossible ones become null with an event naming field, value and range."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.telemetry.collector import Collector
from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.telemetry.nvml import NvmlBackend
from gpuwarden.telemetry.sim import SCENARIOS, open_sim
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.validate import (
    MEMORY,
    SAMPLE_RANGES,
    TEMPERATURE,
    validate_sample,
    validate_snapshot,
)
from gpuwarden.types.telemetry import (
    DeviceSample,
    EventKind,
    MigDeviceSample,
    NvLinkSample,
    ProcessSample,
    Snapshot,
)
from tests.fakes.fake_pynvml import FakeClock, fake_host
from tests.fakes.fake_pynvml.captures import (
    A100_MIG_XML,
    H100,
    H100_MIG,
    P100_XML,
    RTX_2080,
    RTX_2080_WIN_XML,
    RTX_3060_XML,
    RTX_4080,
)

H100_Q = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
MIB = 1 << 20
GIB = 1 << 30


def _rejections(snapshot: Snapshot) -> list[str]:
    return [e.message for e in snapshot.events if "not reported (null)" in e.message]


def _real_smi_snapshots(fixtures: Path) -> list[tuple[str, Snapshot]]:
    out = []
    for path in sorted((fixtures / "nvidia-smi").rglob("*")):
        if path.suffix not in (".txt", ".csv", ".xml") or "mig-lgip" in path.name:
            continue
        out += [(path.name, s) for s in parse_smi_output(path.read_text(), path.name, 0.0)]
    return out


@pytest.fixture(scope="module")
def h100(fixtures: Path) -> DeviceSample:
    text = (fixtures / "nvidia-smi" / H100_Q).read_text()
    return parse_smi_output(text, H100_Q, 0.0)[0].samples[0]


# --- no real reading loses its value ------------------------------------------------------------


def test_every_nvidia_smi_capture_keeps_every_value(fixtures: Path) -> None:
    readings = _real_smi_snapshots(fixtures)
    assert len(readings) > 70  # every format of every capture, and the capture files
    for name, snapshot in readings:
        assert _rejections(snapshot) == [], name
        assert validate_snapshot(snapshot) is snapshot, name


def test_every_dcgm_scrape_keeps_every_value(fixtures: Path) -> None:
    for path in sorted((fixtures / "dcgm").glob("*.prom")):
        snapshot = parse_scrape(path.read_text(), path.name, 0.0).snapshot
        assert _rejections(snapshot) == [], path.name
        assert validate_snapshot(snapshot) is snapshot


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_sim_scenario_keeps_every_value(scenario: str) -> None:
    clock = FakeClock()
    backend = open_sim(scenario, clock=clock)
    for step in (0.0, 45.0, 600.0):
        clock.advance(step)
        assert _rejections(backend.read()) == []


@pytest.mark.parametrize(
    "name",
    [H100, H100_MIG, RTX_4080, RTX_2080, A100_MIG_XML, P100_XML, RTX_3060_XML, RTX_2080_WIN_XML],
)
def test_every_fake_nvml_host_keeps_every_value(fixtures: Path, name: str) -> None:
    host = fake_host(fixtures, name)
    backend = NvmlBackend(host.module, clock=host.clock)
    first = backend.read()
    host.clock.advance(5.0)
    second = backend.read()
    assert _rejections(first) == [] and _rejections(second) == []
    assert first.samples[0].temperature_gpu_celsius is not None


# --- impossible readings ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("temperature_gpu_celsius", -300.0, "outside -40..200 °C"),
        ("gpu_utilization_percent", 1000.0, "outside 0..100 %"),
        ("power_draw_watts", math.inf, "inf is not a finite number"),
        ("energy_consumed_joules", math.nan, "nan is not a finite number"),
        ("memory_free_bytes", -8192 * MIB, "outside 0..7.03687e+13 bytes"),
        ("sm_active_ratio", 1.5, "outside 0..1"),
        ("pcie_link_width_current", 0, "outside 1..32 lanes"),
        ("xid_last", -1, "outside 1..4.29497e+09"),
        ("ecc_errors_corrected_volatile", 2**70, "2^70+ is outside"),
        ("pstate", "P32", "is not a performance state P0..P15"),
        ("clock_event_reasons", math.inf, "is not a finite number"),  # a float in a tuple field
    ],
)
def test_an_impossible_reading_is_null_and_said(
    h100: DeviceSample, field: str, value: object, said: str
) -> None:
    checked, events = validate_sample(dataclasses.replace(h100, **{field: value}))
    assert getattr(checked, field) is None
    (event,) = events
    assert event.kind is EventKind.BACKEND_ERROR
    assert (event.uuid, event.index) == (h100.info.uuid, h100.info.index)
    assert event.message.startswith(f"{field} = ") and said in event.message
    assert event.message.endswith("not reported (null)")
    # the rest of the reading is kept as it was
    kept = {f.name for f in dataclasses.fields(h100)} - {field}
    assert all(getattr(checked, name) == getattr(h100, name) for name in kept)


def test_memory_used_above_total_is_dropped(h100: DeviceSample) -> None:
    total = h100.info.memory_total_bytes
    assert total == 81559 * MIB  # "Total : 81559 MiB" in the capture
    checked, (event,) = validate_sample(dataclasses.replace(h100, memory_used_bytes=total + MIB))
    assert checked.memory_used_bytes is None
    assert checked.memory_free_bytes == h100.memory_free_bytes
    assert f"above the device's memory_total_bytes {total}" in event.message


def test_a_negative_total_is_dropped_from_the_identity(h100: DeviceSample) -> None:
    info = dataclasses.replace(h100.info, memory_total_bytes=-8192 * MIB)
    checked, (event,) = validate_sample(dataclasses.replace(h100, info=info))
    assert checked.info.memory_total_bytes is None
    assert checked.info.uuid == h100.info.uuid
    assert event.message.startswith("memory_total_bytes = -8589934592 is outside")
    assert checked.memory_used_bytes == h100.memory_used_bytes  # no total: nothing to compare


def test_nested_readings_name_where_they_are(h100: DeviceSample) -> None:
    assert h100.processes is not None
    bad = dataclasses.replace(
        h100,
        nvlinks=(NvLinkSample(0, True), NvLinkSample(3, True, tx_bytes_total=-5)),
        mig_devices=(MigDeviceSample(2, 0, "3g.40gb", sm_active_ratio=7.0),),
        processes=(
            *h100.processes[:1],
            ProcessSample(pid=-1, used_memory_bytes=10**30, name="x"),
        ),
    )
    checked, events = validate_sample(bad)
    assert [e.message.split(" = ")[0] for e in events] == [
        "NVLink 3: tx_bytes_total",
        "MIG GI 2: sm_active_ratio",
        "process -1: pid",
        "process -1: used_memory_bytes",
    ]
    assert checked.nvlinks is not None and checked.nvlinks[1].tx_bytes_total is None
    assert checked.nvlinks[0] is bad.nvlinks[0]  # type: ignore[index]
    assert checked.mig_devices is not None and checked.mig_devices[0].sm_active_ratio is None
    assert checked.processes is not None and checked.processes[0] == h100.processes[0]
    assert checked.processes[1].pid is None and checked.processes[1].name == "x"


def test_a_non_finite_extra_is_left_out(h100: DeviceSample) -> None:
    extra = {**h100.extra, "dcgm_dev_nvlink_bandwidth_total": math.inf}
    checked, (event,) = validate_sample(dataclasses.replace(h100, extra=extra))
    assert checked.extra == h100.extra
    assert event.message.startswith("extra dcgm_dev_nvlink_bandwidth_total = inf")


def test_ranges_say_where_they_come_from() -> None:
    assert all(r.source and r.low < r.high for r in SAMPLE_RANGES.values())
    assert str(TEMPERATURE) == "-40..200 °C" and MEMORY.holds(0) and not MEMORY.holds(-1)


# Any value in any numeric field: what is left is finite, within its range, and JSON is strict.
_NUMERIC = sorted(SAMPLE_RANGES)
_ANY_NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**80), max_value=2**80),
)


@settings(max_examples=150, deadline=None)
@given(values=st.dictionaries(st.sampled_from(_NUMERIC), _ANY_NUMBER, min_size=1, max_size=8))
def test_fuzz_whatever_a_backend_reports_the_result_is_possible(values: dict[str, float]) -> None:
    from gpuwarden.report.telemetry_records import device_record

    sample = DeviceSample(
        info=dataclasses.replace(_FUZZ_INFO, memory_total_bytes=80 * GIB),
        timestamp_s=0.0,
        **values,  # type: ignore[arg-type]
    )
    checked, events = validate_sample(sample)
    for name in _NUMERIC:
        value = getattr(checked, name)
        assert value is None or SAMPLE_RANGES[name].holds(value), (name, value)
    json.dumps(device_record(checked), allow_nan=False)
    cleared = [n for n in values if getattr(checked, n) is None]
    assert len(events) == len(cleared)


_FUZZ_INFO = open_sim("healthy-training", gpus=1).devices()[0]


# --- the collector's rates pass the same check --------------------------------------------------


class _Jumping:
    """A backend whose energy counter leaps by 10**12 J in one second (a driver bug, a bad
    scrape): the derived power is no power a GPU draws."""

    name, simulated = "smi", False

    def __init__(self, sample: DeviceSample) -> None:
        self.sample, self.reads = sample, 0

    def devices(self) -> tuple[object, ...]:
        return (self.sample.info,)

    def read(self) -> Snapshot:
        self.reads += 1
        sample = dataclasses.replace(
            self.sample,
            timestamp_s=float(self.reads),
            energy_consumed_joules=1e6 + (self.reads - 1) * 1e12,
        )
        return Snapshot(float(self.reads), "node", "smi", False, (sample,))

    def close(self) -> None:
        return None


def test_a_derived_rate_outside_its_range_is_null_and_said(h100: DeviceSample) -> None:
    collector = Collector(_Jumping(h100), clock=lambda: 0.0)  # type: ignore[arg-type]
    collector.poll()
    second = collector.poll()
    assert second.samples[0].power_average_watts is None
    assert [e.message.split(" = ")[0] for e in second.events] == ["power_average_watts"]


def test_a_capture_with_impossible_numbers_keeps_the_rest(fixtures: Path) -> None:
    """The -q reader reads what is printed; the check drops what no GPU reports."""
    text = (fixtures / "nvidia-smi" / H100_Q).read_text()
    absurd = text.replace(": 59 C\n", ": -300 C\n").replace(": 629.45 W\n", ": 1e308 W\n")
    snapshot = parse_smi_output(absurd, "absurd", 0.0)[0]
    sample = snapshot.samples[0]
    assert sample.temperature_gpu_celsius is None and sample.power_draw_watts is None
    assert sample.temperature_memory_celsius == 55.0  # "Memory Current Temp : 55 C"
    assert [m.split(" = ")[0] for m in _rejections(snapshot)] == [
        "temperature_gpu_celsius",
        "power_draw_watts",
    ]
