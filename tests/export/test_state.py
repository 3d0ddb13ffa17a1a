"""The exporter's state and families: Xid counters, lost GPUs, verdicts, staleness, and bounded
memory — driven by the simulator's fault scenarios (the same readings `watch` judges) and by
hand-made readings for the edges."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwarden.catalog.xid import xid_info
from gpuwarden.export.families import build_families, reading_age
from gpuwarden.export.fields import Kind
from gpuwarden.export.service import CollectionLoop
from gpuwarden.export.state import MAX_XID_SERIES, ExporterState, ExportSettings, View
from gpuwarden.telemetry.open import open_backend
from gpuwarden.types.health import DeviceRef, Finding, Severity
from gpuwarden.types.telemetry import (
    DeviceEvent,
    DeviceInfo,
    DeviceSample,
    EventKind,
    Snapshot,
)

VERSION = "test"


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def series(view: View, now: float, name: str) -> list[tuple[dict[str, str], float]]:
    families = {f.name: f for f in build_families(view, now_s=now, version=VERSION)}
    family = families.get(name)
    return [] if family is None else [(dict(labels), value) for labels, value in family.samples]


def run_scenario(scenario: str, seconds: int, *, gpus: int | None = None):
    """The sim scenario read once a second for ``seconds`` (simulated time = the fake clock)."""
    clock = Clock()
    backend = open_backend("sim", scenario=scenario, gpus=gpus, clock=clock)
    state = ExporterState(
        ExportSettings(backend="sim", simulated=True, hostname="node-1"), clock=clock
    )
    loop = CollectionLoop(backend, state, interval_s=1.0)
    loop.poll()
    for _ in range(seconds):
        clock.now += 1.0
        loop.poll()
    return state, clock


def test_an_xid_is_counted_once_and_the_last_value_kept_as_dcgm_does():
    # ecc-double-bit: GPU 0 of 8 A100s hits a double-bit error (Xid 48) at 30 s
    state, clock = run_scenario("ecc-double-bit", 45)
    view = state.view
    xids = series(view, clock.now, "gpuwarden_xid_total")
    assert [(lab["xid"], lab["gpu"], v) for lab, v in xids] == [("48", "0", 1.0)]
    last = {lab["gpu"]: v for lab, v in series(view, clock.now, "DCGM_FI_DEV_XID_ERRORS")}
    assert last == {"0": 48.0, **{str(i): 0.0 for i in range(1, 8)}}  # the sim watches Xids
    families = {f.name: f for f in build_families(view, now_s=clock.now, version=VERSION)}
    assert families["gpuwarden_xid_total"].kind is Kind.COUNTER
    # dcgm-exporter's err_code / err_msg (3.3.6+): an alert on {err_code="48"} works on ours
    words = {
        lab["gpu"]: (lab["err_code"], lab["err_msg"])
        for lab, _ in series(view, clock.now, "DCGM_FI_DEV_XID_ERRORS")
    }
    assert words["1"] == ("0", "No Error")
    info = xid_info(48)
    assert info is not None and words["0"] == ("48", info.meaning)
    assert "double-bit" in words["0"][1]


def test_a_lost_gpu_has_no_readings_only_its_verdicts():
    # gpu-fallen-off-bus: GPU 3 of 8 is lost at 30 s (Xid 79); the others hang in NCCL
    state, clock = run_scenario("gpu-fallen-off-bus", 40)
    view = state.view
    lost = {lab["gpu"]: v for lab, v in series(view, clock.now, "gpuwarden_gpu_lost")}
    assert lost == {str(i): (1.0 if i == 3 else 0.0) for i in range(8)}
    temps = {lab["gpu"] for lab, _ in series(view, clock.now, "DCGM_FI_DEV_GPU_TEMP")}
    assert temps == {"0", "1", "2", "4", "5", "6", "7"}
    findings = series(view, clock.now, "gpuwarden_finding")
    gone = [lab for lab, _ in findings if lab["code"] == "gpu-lost"]
    uuid3 = next(s.info.uuid for s in view.snapshot.samples if s.info.index == 3)
    assert gone == [
        {"code": "gpu-lost", "severity": "critical", "gpu": "3", "UUID": uuid3,
         "pci_bus_id": "00000000:48:00.0", "modelName": "NVIDIA H100 80GB HBM3",
         "Hostname": "node-1", "hostname": "node-1", "simulated": "true"}
    ]  # fmt: skip
    assert all(v == 1.0 for _, v in findings)


def test_clock_event_reasons_are_one_series_each():
    # thermal-throttling: cooling fails at 10 s and the GPU slows itself down
    state, clock = run_scenario("thermal-throttling", 40)
    active = {
        lab["reason"]: v for lab, v in series(state.view, clock.now, "gpuwarden_clock_event_active")
    }
    assert len(active) == 9
    throttled = {reason for reason, v in active.items() if v == 1.0}
    assert throttled & {"hw_thermal_slowdown", "sw_thermal_slowdown", "hw_slowdown"}
    assert "thermal-slowdown" in {
        lab["code"] for lab, _ in series(state.view, clock.now, "gpuwarden_finding")
    }


def test_a_healthy_fleet_has_no_finding_above_info():
    state, clock = run_scenario("healthy-training", 20)
    findings = series(state.view, clock.now, "gpuwarden_finding")
    assert all(lab["severity"] == "info" for lab, _ in findings)
    assert state.view.counters.polls == 21 and state.view.counters.collection_errors == 0


# --- hand-made readings for the edges ------------------------------------------------------------


def gpu(index: int, uuid: str | None = None, **values: object) -> DeviceSample:
    info = DeviceInfo(index, uuid or f"GPU-{index:08d}", "NVIDIA H100 80GB HBM3")
    return DeviceSample(info=info, timestamp_s=0.0, **values)  # type: ignore[arg-type]


def reading(t: float, samples: tuple[DeviceSample, ...], events=(), source="test") -> Snapshot:
    samples = tuple(dataclasses.replace(s, timestamp_s=t) for s in samples)
    return Snapshot(t, "host-a", "nvml", False, samples, tuple(events), source)


def xid(t: float, index: int, code: int | None) -> DeviceEvent:
    return DeviceEvent(EventKind.XID, t, f"GPU-{index:08d}", index, code, f"Xid {code}")


def make_state(clock: Clock, **settings: object) -> ExporterState:
    return ExporterState(
        ExportSettings(backend="nvml", simulated=False, hostname=None, **settings),  # type: ignore[arg-type]
        judge=lambda snapshots: (),
        clock=clock,
    )


def test_xid_series_are_bounded_and_the_rest_counted_as_other():
    clock = Clock()
    state = make_state(clock)
    codes = range(1, MAX_XID_SERIES + 51)
    state.record(reading(1.0, (gpu(0),), [xid(1.0, 0, c) for c in codes]))
    counts = {x.xid: x.count for x in state.view.xids}
    assert len(counts) == MAX_XID_SERIES + 1
    assert counts[-1] == 50  # "other"
    assert sum(counts.values()) == len(codes)
    labels = {lab["xid"] for lab, _ in series(state.view, clock.now, "gpuwarden_xid_total")}
    assert "other" in labels and len(labels) == MAX_XID_SERIES + 1


def test_the_same_saved_reading_read_again_counts_nothing_again():
    clock = Clock()
    state = make_state(clock)
    saved = reading(5.0, (gpu(0),), [xid(5.0, 0, 13)])
    for _ in range(3):
        clock.now += 1
        state.record(saved)
    assert [(x.xid, x.count) for x in state.view.xids] == [(13, 1)]
    assert state.view.counters.polls == 3
    assert state.view.received_s == clock.now  # still fresh: the capture is what there is


def test_a_gpu_gone_for_longer_than_expire_after_loses_its_counters():
    clock = Clock()
    state = make_state(clock, expire_after_s=60.0)
    state.record(reading(1.0, (gpu(0), gpu(1)), [xid(1.0, 0, 79), xid(1.0, 1, 13)]))
    clock.now += 30
    state.record(reading(31.0, (gpu(1),)))  # GPU 0 is no longer listed (a MIG re-layout, ...)
    assert {x.device.index for x in state.view.xids} == {0, 1}
    clock.now += 40
    state.record(reading(71.0, (gpu(1),)))
    assert [(x.device.index, x.xid) for x in state.view.xids] == [(1, 13)]


def test_a_failed_reading_keeps_the_last_one_until_it_is_stale():
    clock = Clock()
    state = make_state(clock, stale_after_s=10.0)
    state.record(reading(1.0, (gpu(0, temperature_gpu_celsius=61.0),)))
    failure = Snapshot(
        2.0,
        "host-a",
        "nvml",
        False,
        (),
        (DeviceEvent(EventKind.BACKEND_ERROR, 2.0, None, None, None, "boom"),),
    )
    clock.now += 5
    state.record(failure)
    view = state.view
    assert view.counters.collection_errors == 1 and view.counters.polls == 2
    assert series(view, clock.now, "DCGM_FI_DEV_GPU_TEMP")[0][1] == 61.0
    clock.now += 6  # 11 s after the last good reading: stale
    assert series(view, clock.now, "DCGM_FI_DEV_GPU_TEMP") == []
    assert series(view, clock.now, "gpuwarden_gpu_lost") != []  # verdicts stay
    errors = series(view, clock.now, "gpuwarden_collection_errors_total")
    assert errors == [({"backend": "nvml"}, 1.0)]
    age = reading_age(view, wall_s=100.0)
    assert age is not None and age.samples[0][1] == 99.0


def test_a_health_rule_that_raises_keeps_the_previous_verdict():
    clock = Clock()
    verdict = Finding(
        "temperature-high", Severity.WARNING, "hot", "cause", "fix", DeviceRef(index=0)
    )
    calls = iter([(verdict,), ZeroDivisionError("a rule's bug")])

    def judge(snapshots):
        result = next(calls)
        if isinstance(result, Exception):
            raise result
        return result

    state = ExporterState(
        ExportSettings(backend="nvml", simulated=False, hostname="n"), judge=judge, clock=clock
    )
    state.record(reading(1.0, (gpu(0),)))
    clock.now += 5.0
    state.record(reading(6.0, (gpu(0),)))
    assert state.view.findings == (verdict,)
    assert state.view.counters.health_errors == 1


def test_finding_labels_for_the_node_a_mig_instance_and_a_bus_id():
    clock = Clock()
    findings = (
        Finding("fabric-manager-down", Severity.CRITICAL, "t", "c", "r"),
        Finding("xid", Severity.WARNING, "t", "c", "r", DeviceRef(pci_bus_id="00000000:3B:00.0")),
        Finding("low-utilization", Severity.WARNING, "t", "c", "r",
                DeviceRef(index=1, uuid="GPU-00000001", gpu_instance_id=7)),
    )  # fmt: skip
    state = ExporterState(
        ExportSettings(backend="nvml", simulated=False, hostname="node-7"),
        judge=lambda snapshots: findings,
        clock=clock,
    )
    bus = dataclasses.replace(
        gpu(0), info=dataclasses.replace(gpu(0).info, pci_bus_id="00000000:3b:00.0")
    )
    state.record(reading(1.0, (bus, gpu(1))))
    got = {lab["code"]: lab for lab, _ in series(state.view, clock.now, "gpuwarden_finding")}
    assert got["fabric-manager-down"] == {
        "code": "fabric-manager-down", "severity": "critical",
        "Hostname": "node-7", "hostname": "node-7",
    }  # fmt: skip
    assert got["xid"]["gpu"] == "0" and got["xid"]["UUID"] == "GPU-00000000"
    assert got["low-utilization"]["GPU_I_ID"] == "7" and got["low-utilization"]["gpu"] == "1"


def test_the_window_is_bounded_in_time():
    clock = Clock()
    seen: list[int] = []
    state = ExporterState(
        ExportSettings(backend="nvml", simulated=False, hostname=None, window_s=10.0),
        judge=lambda snapshots: seen.append(len(snapshots)) or (),
        clock=clock,
    )
    for t in range(100):
        clock.now += 1.0
        state.record(reading(float(t), (gpu(0),)))
    assert max(seen) == 11  # 10 s at one reading a second, both ends included
    assert len(seen) == 20  # the rules ran every 5 s, not on each of the 100 readings


def test_a_reading_with_events_is_judged_at_once():
    clock = Clock()
    runs: list[float] = []
    state = ExporterState(
        ExportSettings(backend="nvml", simulated=False, hostname=None),
        judge=lambda snapshots: runs.append(snapshots[-1].timestamp_s) or (),
        clock=clock,
    )
    for t in range(1, 4):
        clock.now += 1.0
        events = [xid(float(t), 0, 79)] if t == 3 else []
        state.record(reading(float(t), (gpu(0),), events))
    assert runs == [1.0, 3.0]


@pytest.mark.parametrize("count", [1, 2])
def test_pods_using_a_gpu_label_its_series(count):
    from gpuwarden.export.pod_resources import Allocation, pod_map

    clock = Clock()
    state = make_state(clock)
    pods = pod_map(
        Allocation("ml", f"trainer-{i}", "main", "nvidia.com/gpu", ("GPU-00000000::" + str(i),))
        for i in range(count)
    )
    state.record_pods(pods)
    state.record(reading(1.0, (gpu(0, power_draw_watts=300.0), gpu(1, power_draw_watts=90.0))))
    power = series(state.view, clock.now, "DCGM_FI_DEV_POWER_USAGE")
    on_gpu0 = sorted(lab["pod"] for lab, _ in power if lab["gpu"] == "0")
    assert on_gpu0 == [f"trainer-{i}" for i in range(count)]
    assert all("pod" not in lab for lab, _ in power if lab["gpu"] == "1")
