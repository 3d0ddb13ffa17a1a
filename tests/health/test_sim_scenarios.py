"""The simulator as the demo driver of the rules: for every scenario, watch-style (readings every
second, a 60 s window), the expected finding appears at the right time on the right GPU and
nothing else above info does."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gpuwarden.health.evaluate import evaluate_window
from gpuwarden.telemetry.sim import SCENARIOS, open_sim
from gpuwarden.telemetry.sim.scenarios import NVLINK_ERROR_LEAD_S, FaultKind
from gpuwarden.types.health import Finding, Severity
from gpuwarden.types.telemetry import Snapshot

T0 = 1_800_000_000.0
WINDOW_S = 60.0  # watch's default
JUDGE_EVERY_S = 2


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


Key = tuple[str, int | None]


@dataclass
class Run:
    """When each (code, GPU) above info was seen; the last finding of each code and GPU."""

    first: dict[Key, float] = field(default_factory=dict)
    last: dict[Key, float] = field(default_factory=dict)
    findings: dict[Key, Finding] = field(default_factory=dict)
    info: set[Key] = field(default_factory=set)


def run(name: str, until_s: int) -> Run:
    clock = Clock()
    backend = open_sim(name, seed=7, clock=clock)
    readings: list[Snapshot] = []
    seen = Run()
    for t in range(until_s + 1):
        clock.now = T0 + t
        readings.append(backend.read())
        readings = [s for s in readings if s.timestamp_s >= clock.now - WINDOW_S]
        if t % JUDGE_EVERY_S:
            continue
        for finding in evaluate_window(readings).findings:
            key = (finding.code, finding.device.index if finding.device else None)
            if finding.severity is Severity.INFO:
                seen.info.add(key)
                continue
            seen.first.setdefault(key, float(t))
            seen.last[key] = float(t)
            seen.findings[key] = finding
    return seen


def fault(name: str, kind: FaultKind) -> tuple[int, float]:
    (found,) = [f for f in SCENARIOS[name].faults if f.kind is kind]
    return found.gpu, found.at_s


def test_every_scenario_is_covered() -> None:
    tested = {
        "healthy-training", "data-starvation", "thermal-throttling", "fake-load", "memory-leak",
        "ecc-double-bit", "gpu-fallen-off-bus", "nvlink-down", "straggler", "power-capping",
    }  # fmt: skip
    assert set(SCENARIOS) == tested


def test_healthy_training_says_nothing() -> None:
    seen = run("healthy-training", 70)
    assert seen.first == {} and seen.info == set()


def test_data_starvation() -> None:
    seen = run("data-starvation", 40)
    assert set(seen.first) == {("data-starved", 0)}
    # judged once 20 s of sawtooth are in the window (data_starved_min_span_s)
    assert seen.first[("data-starved", 0)] == 20.0
    assert seen.findings[("data-starved", 0)].method == "dcgm-pillars"


def test_thermal_throttling() -> None:
    gpu, at = fault("thermal-throttling", FaultKind.COOLING_LOSS)
    seen = run("thermal-throttling", 60)
    assert set(seen.first) == {("temperature-high", gpu), ("thermal-slowdown", gpu)}
    # the temperature climbs for a few time constants after the cooling fails
    assert at < seen.first[("temperature-high", gpu)] <= seen.first[("thermal-slowdown", gpu)]
    assert seen.first[("thermal-slowdown", gpu)] < at + 30


def test_fake_load() -> None:
    seen = run("fake-load", 30)
    assert set(seen.first) == {("fake-load", 0)}
    assert seen.first[("fake-load", 0)] == 10.0  # window_min_span_s of fake load
    assert seen.findings[("fake-load", 0)].method == "dcgm-pillars"


def test_memory_leak_fills_the_gpu_then_frees_it() -> None:
    seen = run("memory-leak", 70)
    assert set(seen.first) == {("memory-nearly-full", 0)}
    # 30 GiB + 0.8 GiB/s passes 95 % of the H100's 79.6 GiB at 57 s; out of memory at ~61.5 s
    assert seen.first[("memory-nearly-full", 0)] == 58.0
    assert seen.last[("memory-nearly-full", 0)] == 60.0


@pytest.mark.parametrize(
    ("name", "kind", "failed"),
    [
        # the sim's Xid 48 event is judged like a kernel-log line: an `xid` finding
        ("ecc-double-bit", FaultKind.ECC_DBE, {"ecc-uncorrectable", "row-remap-pending", "xid"}),
        ("gpu-fallen-off-bus", FaultKind.FALLEN_OFF_BUS, {"gpu-lost"}),
    ],
)
def test_a_dead_gpu_and_its_hung_peers(name: str, kind: FaultKind, failed: set[str]) -> None:
    gpu, at = fault(name, kind)
    seen = run(name, 56)
    mine = {code for code, index in seen.first if index == gpu}
    # the driver also asks for a reset after the double-bit error (recovery action)
    assert mine - {"recovery-action-pending"} == failed
    assert all(seen.first[(code, gpu)] == at for code in mine)
    peers = {index for code, index in seen.first if code == "fake-load"}
    assert peers == set(range(SCENARIOS[name].gpus)) - {gpu}
    for index in peers:
        # the collective hangs from the fault on: fake load once it has lasted 10 s
        assert seen.first[("fake-load", index)] == at + 10
        assert seen.findings[("fake-load", index)].cause.startswith(f"GPU {gpu} ")
    assert {code for code, _ in seen.first} == mine | {"fake-load"}


def test_nvlink_down() -> None:
    gpu, at = fault("nvlink-down", FaultKind.NVLINK_DOWN)
    seen = run("nvlink-down", 40)
    # and the Xid 74 the driver logs when the link goes down
    assert set(seen.first) == {("nvlink-errors", gpu), ("nvlink-down", gpu), ("xid", gpu)}
    assert seen.first[("xid", gpu)] == at
    # replay errors rise for NVLINK_ERROR_LEAD_S before the link goes down
    assert at - NVLINK_ERROR_LEAD_S < seen.first[("nvlink-errors", gpu)] <= at
    assert seen.first[("nvlink-down", gpu)] == at


def test_straggler() -> None:
    gpu, _ = fault("straggler", FaultKind.STRAGGLER)
    seen = run("straggler", 20)
    assert set(seen.first) == {("straggler", gpu)}
    assert seen.first[("straggler", gpu)] == 10.0


def test_power_capping_is_information_only() -> None:
    seen = run("power-capping", 20)
    assert seen.first == {}
    assert seen.info == {("power-capped", 0)}
