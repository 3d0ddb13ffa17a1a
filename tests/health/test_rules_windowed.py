"""Windowed rules over series of readings: the real H100 load reading (from the -q capture), moved
through time the way each bottleneck moves it; every rule's minimum evidence; what never fires."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.health.evaluate import HealthResult, evaluate_window
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS
from gpuwarden.telemetry.open import open_backend
from gpuwarden.types.health import CheckStatus, Confidence, Severity
from gpuwarden.types.telemetry import (
    DeviceSample,
    DeviceState,
    NvLinkSample,
    ProcessSample,
    Snapshot,
)

H100_LOAD = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
T0 = 1_784_016_773.0  # the capture's own timestamp
Reading = Callable[[int, float], dict[str, Any]]  # (gpu, t) -> fields that differ


@pytest.fixture(scope="module")
def base(fixtures: Path) -> DeviceSample:
    sample = open_backend("smi", str(fixtures / H100_LOAD)).read().samples[0]
    # the capture: 100 % utilization, 629 W of 700, gpu_burn + memhog holding it
    assert (sample.gpu_utilization_percent, sample.power_draw_watts) == (100, 629.45)
    assert sample.processes and {p.name for p in sample.processes} >= {"./gpu_burn"}
    return sample


def window(
    base: DeviceSample, reading: Reading, *, seconds: int = 30, gpus: int = 1, step: float = 1.0
) -> list[Snapshot]:
    snapshots = []
    for k in range(int(seconds / step) + 1):
        t = k * step
        samples = []
        for g in range(gpus):
            info = dataclasses.replace(base.info, index=g, uuid=f"GPU-{g:08d}")
            fields = {"timestamp_s": T0 + t, **reading(g, t)}
            samples.append(dataclasses.replace(base, info=info, **fields))
        snapshots.append(Snapshot(T0 + t, "node-1", "nvml", False, tuple(samples)))
    return snapshots


def found(result: HealthResult) -> list[tuple[str, int | None]]:
    return [(f.code, f.device.index if f.device else None) for f in result.findings]


def detail(result: HealthResult, name: str) -> tuple[CheckStatus, str]:
    check = next(c for c in result.checks if c.name == name)
    return check.status, check.detail


PILLARS_TRAINING = {
    "sm_active_ratio": 0.85,
    "tensor_active_ratio": 0.55,
    "dram_active_ratio": 0.45,
}


def test_a_steady_busy_gpu_has_nothing_to_say(base: DeviceSample) -> None:
    result = evaluate_window(window(base, lambda g, t: PILLARS_TRAINING))
    assert result.findings == ()
    status, text = detail(result, "utilization")
    assert status is CheckStatus.PASS
    assert "fake-load: judged 1 GPU(s) (dcgm-pillars)" in text
    # the same without pillars: judged by the NVML fallback, still nothing
    plain = evaluate_window(window(base, lambda g, t: {}))
    assert plain.findings == ()
    assert "fake-load: judged 1 GPU(s) (nvml-fallback)" in detail(plain, "utilization")[1]
    assert (
        "memory-bound: needs the dram active and sm active pillars"
        in detail(plain, "utilization")[1]
    )


def test_too_few_readings_are_not_judged(base: DeviceSample) -> None:
    result = evaluate_window(window(base, lambda g, t: {"sm_active_ratio": 0.01}, seconds=4))
    assert result.findings == ()
    status, text = detail(result, "utilization")
    assert status is CheckStatus.SKIP
    assert "fake-load: not enough data (5 readings over 4 s; needs ≥ 5 over ≥ 10 s)" in text


# --- fake load


def test_fake_load_by_the_pillars_appears_after_the_minimum_span(base: DeviceSample) -> None:
    def hang(g: int, t: float) -> dict[str, Any]:
        return PILLARS_TRAINING | ({"sm_active_ratio": 0.012} if t >= 20 else {})

    early = evaluate_window(window(base, hang, seconds=28))  # 9 s of hang
    assert early.findings == ()
    (finding,) = evaluate_window(window(base, hang, seconds=30)).findings
    assert (finding.code, finding.method, finding.confidence) == (
        "fake-load",
        "dcgm-pillars",
        Confidence.HIGH,
    )
    assert finding.first_seen_s == T0 + 20 and finding.last_seen_s == T0 + 30
    assert finding.title == "GPU 0: utilization 100 % with SM active 1 % for 10 s"
    assert [e.field for e in finding.evidence] == ["gpu_utilization_percent", "sm_active_ratio"]


def test_fake_load_by_nvml_alone_needs_idle_power_and_no_memory_traffic(
    base: DeviceSample,
) -> None:
    idle_power = {"power_draw_watts": 71.0, "memory_utilization_percent": 0.0}
    (finding,) = evaluate_window(window(base, lambda g, t: idle_power)).findings
    assert (finding.code, finding.method, finding.confidence) == (
        "fake-load",
        "nvml-fallback",
        Confidence.MEDIUM,
    )
    assert "71 W ≤ 25 % of 700 W" in finding.evidence[1].detail
    # real kernels move memory: the same power with the capture's 11 % memory utilization
    busy_memory = {"power_draw_watts": 71.0}
    assert evaluate_window(window(base, lambda g, t: busy_memory)).findings == ()


def test_peers_of_a_lost_gpu_spin_in_their_collective(base: DeviceSample) -> None:
    def job(g: int, t: float) -> dict[str, Any]:
        if g == 1 and t >= 5:
            return {"state": DeviceState.GPU_LOST}
        return PILLARS_TRAINING | ({"sm_active_ratio": 0.01} if t >= 5 else {})

    result = evaluate_window(window(base, job, gpus=3))
    assert found(result) == [("gpu-lost", 1), ("fake-load", 0), ("fake-load", 2)]
    hung = result.findings[1]
    assert hung.cause.startswith("GPU 1 is lost (fell off the bus)")
    assert "restart it from its last checkpoint" in hung.remedy


def test_an_old_uncorrectable_count_explains_no_hang(base: DeviceSample) -> None:
    """A peer whose ECC count was already 1 before the window did not just die: the fake load
    gets the generic cause, not 'waiting for GPU 1'."""

    def job(g: int, t: float) -> dict[str, Any]:
        spin = {"sm_active_ratio": 0.01} if g == 0 else PILLARS_TRAINING
        return spin | ({"ecc_errors_uncorrected_volatile": 1} if g == 1 else {})

    result = evaluate_window(window(base, job, gpus=2))
    codes = [(f.code, f.device.index if f.device else None) for f in result.findings]
    assert codes == [("ecc-uncorrectable", 1), ("fake-load", 0)]
    assert result.findings[1].cause.startswith("utilization reads ≈ 100 %")


# --- low utilization


def test_low_utilization_of_a_held_gpu(base: DeviceSample) -> None:
    low = {"gpu_utilization_percent": 20.0, "power_draw_watts": 250.0}
    (finding,) = evaluate_window(window(base, lambda g, t: low, seconds=40)).findings
    assert finding.code == "low-utilization" and finding.severity is Severity.WARNING
    assert "held by ./gpu_burn, /root/tools/memhog but 20 % busy for 40 s" in finding.title
    # 29 s is not sustained (low_utilization_min_span_s = 30)
    assert evaluate_window(window(base, lambda g, t: low, seconds=29)).findings == ()


def test_video_engines_and_desktops_are_not_low_utilization(base: DeviceSample) -> None:
    encoding = {"gpu_utilization_percent": 8.0, "encoder_utilization_percent": 100.0}
    assert evaluate_window(window(base, lambda g, t: encoding, seconds=40)).findings == ()
    desktop = {
        "gpu_utilization_percent": 2.0,
        "processes": (ProcessSample(1696, 184549376, name="/usr/bin/gnome-shell", kind="G"),),
    }
    assert evaluate_window(window(base, lambda g, t: desktop, seconds=40)).findings == ()
    unknown = {"gpu_utilization_percent": 2.0, "processes": None}
    result = evaluate_window(window(base, lambda g, t: unknown, seconds=40))
    assert "low-utilization: no process list in this input" in detail(result, "utilization")[1]


# --- data starvation


def _starved(
    period: float, busy: float, *, jitter: Callable[[int], float] = lambda n: 0.0
) -> Reading:
    def reading(g: int, t: float) -> dict[str, Any]:
        cycle = int(t // period)
        start = cycle * period + jitter(cycle)
        computing = start <= t < start + busy
        return {
            "sm_active_ratio": 0.82 if computing else 0.02,
            "gpu_utilization_percent": 99.0 if computing else 3.0,
            "power_draw_watts": 560.0 if computing else 90.0,
            "pcie_rx_bytes_per_second": 3.2e9 if computing else 0.05e9,
        }

    return reading


def test_data_starvation_is_a_regular_sawtooth(base: DeviceSample) -> None:
    result = evaluate_window(window(base, _starved(6.0, 2.0), seconds=60))
    (finding,) = result.findings  # no low-utilization on top: data-starved explains it
    assert finding.code == "data-starved" and finding.confidence is Confidence.MEDIUM
    assert finding.title == "GPU 0: computes in bursts, idle 66 % of 60 s over 10 cycles"
    fields = [e.field for e in finding.evidence]
    assert fields == ["sm_active_ratio", "power_draw_watts", "pcie_rx_bytes_per_second"]


def test_readings_far_apart_cannot_show_the_rhythm(base: DeviceSample) -> None:
    """The same 60 s starved pipeline read every 30 s (dcgm-exporter's default, dmon -d 30):
    whatever two readings show, they cannot show a rhythm of 6 s cycles."""
    result = evaluate_window(window(base, _starved(60.0, 20.0), seconds=600, step=30.0))
    assert "data-starved" not in [f.code for f in result.findings]
    assert "data-starved: readings 30 s apart" in detail(result, "utilization")[1]


def test_irregular_bursts_are_load_not_a_pipeline(base: DeviceSample) -> None:
    jitter = [0.0, 4.0, 0.0, 9.0, 1.0, 0.0, 7.0]
    result = evaluate_window(
        window(base, _starved(10.0, 1.0, jitter=lambda n: jitter[n % 7]), seconds=60)
    )
    assert "data-starved" not in [f.code for f in result.findings]


# --- pillars


def test_memory_bound_and_no_tensor_cores_are_information(base: DeviceSample) -> None:
    bound = {"sm_active_ratio": 0.2, "dram_active_ratio": 0.92, "tensor_active_ratio": 0.1}
    (finding,) = evaluate_window(window(base, lambda g, t: bound)).findings
    assert (finding.code, finding.severity) == ("memory-bound", Severity.INFO)
    fp32 = {"sm_active_ratio": 0.8, "dram_active_ratio": 0.3, "tensor_active_ratio": 0.0}
    (finding,) = evaluate_window(window(base, lambda g, t: fp32)).findings
    assert (finding.code, finding.severity) == ("no-tensor-cores", Severity.INFO)
    pascal = dataclasses.replace(base, info=dataclasses.replace(base.info, architecture="Pascal"))
    result = evaluate_window(window(pascal, lambda g, t: fp32))
    assert result.findings == ()
    assert "no-tensor-cores: Pascal GPUs have no tensor cores" in detail(result, "utilization")[1]


def test_comm_bound_gpus_stall_together_while_links_are_busy(base: DeviceSample) -> None:
    def step(g: int, t: float) -> dict[str, Any]:
        talking = int(t) % 4 >= 2  # 2 s compute, 2 s all-reduce, on every GPU at once
        return {
            "sm_active_ratio": 0.12 if talking else 0.86,
            "tensor_active_ratio": 0.0 if talking else 0.6,
            "nvlink_tx_bytes_per_second": 180e9 if talking else 2e9,
            "nvlink_rx_bytes_per_second": 180e9 if talking else 2e9,
        }

    result = evaluate_window(window(base, step, gpus=4))
    assert found(result) == [("comm-bound", g) for g in range(4)]
    assert result.findings[0].confidence is Confidence.MEDIUM

    def shifted(g: int, t: float) -> dict[str, Any]:
        return step(0, t + g)  # the same pattern, out of step: no lockstep

    assert evaluate_window(window(base, shifted, gpus=4)).findings == ()


# --- peers


def test_a_straggler_among_eight(base: DeviceSample) -> None:
    def job(g: int, t: float) -> dict[str, Any]:
        sm = 0.55 if g == 5 else 0.82 + 0.01 * ((g + int(t)) % 3 - 1)
        return {"sm_active_ratio": sm}

    result = evaluate_window(window(base, job, gpus=8))
    assert found(result) == [("straggler", 5)]
    finding = result.findings[0]
    assert finding.confidence is Confidence.MEDIUM and finding.method == "dcgm-pillars"
    assert "33 % below its 7 peers" in finding.title


def test_identical_gpus_and_an_idle_one_are_not_stragglers(base: DeviceSample) -> None:
    def job(g: int, t: float) -> dict[str, Any]:
        if g == 7:  # not part of the job
            return {"gpu_utilization_percent": 0.0, "power_draw_watts": 70.0, "processes": ()}
        return {"power_draw_watts": 620.0 + 12 * (g % 3)}  # ~2 % apart: silicon, not a fault

    assert evaluate_window(window(base, job, gpus=8)).findings == ()


def test_gpus_of_another_job_are_not_peers(base: DeviceSample) -> None:
    """A shared node: four GPUs train, four serve at a lower level — two jobs, no straggler."""

    def job(g: int, t: float) -> dict[str, Any]:
        if g < 4:
            return {"sm_active_ratio": 0.82}
        serving = (ProcessSample(7000 + g, 2 << 30, name="python serve.py", kind="C"),)
        return {"sm_active_ratio": 0.45, "processes": serving}

    result = evaluate_window(window(base, job, gpus=8))
    assert result.findings == ()
    assert "straggler: judged 8 GPU(s) (dcgm-pillars)" in detail(result, "peers")[1]


def test_thermal_outlier_at_matched_load(base: DeviceSample) -> None:
    def hot(g: int, t: float) -> dict[str, Any]:
        return {"temperature_gpu_celsius": 72.0 if g == 2 else 60.0 + g % 2}

    result = evaluate_window(window(base, hot, gpus=5))
    assert found(result) == [("thermal-outlier", 2)]

    def loaded(g: int, t: float) -> dict[str, Any]:
        return hot(g, t) | ({"power_draw_watts": 699.0} if g == 2 else {"power_draw_watts": 500.0})

    # 40 % more power than its peers: hotter for a reason (and busier — a straggler by the
    # power fallback, which is the right reading of it)
    codes = [f.code for f in evaluate_window(window(base, loaded, gpus=5)).findings]
    assert codes == ["straggler"]


# --- counters


def test_corrected_ecc_storm_follows_dcgm_s_rate(base: DeviceSample) -> None:
    storm = evaluate_window(
        window(base, lambda g, t: {"ecc_errors_corrected_volatile": int(t)}, seconds=12)
    )
    assert found(storm) == [("ecc-correctable-storm", 0)]
    assert "+12 over 12 s = 12.0/min ≥ 10/min" in storm.findings[0].evidence[0].detail
    slow = window(base, lambda g, t: {"ecc_errors_corrected_volatile": int(t // 10)}, seconds=90)
    assert evaluate_window(slow).findings == ()  # 9 in 90 s = 6/min


def test_pcie_replays_above_eight_a_minute(base: DeviceSample) -> None:
    nine = window(base, lambda g, t: {"pcie_replay_total": 9 + int(t * 9 // 30)}, seconds=30)
    (finding,) = evaluate_window(nine).findings
    assert finding.code == "pcie-errors"
    eight = window(base, lambda g, t: {"pcie_replay_total": 9 + int(t * 8 // 30)}, seconds=30)
    assert evaluate_window(eight).findings == ()


def test_nvlink_errors(base: DeviceSample) -> None:
    def links(replay: int, crc: int) -> tuple[NvLinkSample, ...]:
        return tuple(
            NvLinkSample(k, True, replay_errors_total=replay if k == 3 else 0,
                         crc_errors_total=crc if k == 3 else 0, recovery_errors_total=0)
            for k in range(18)
        )  # fmt: skip

    replay = window(base, lambda g, t: {"nvlinks": links(int(t > 5), 0)}, seconds=10)
    (finding,) = evaluate_window(replay).findings
    assert finding.code == "nvlink-errors" and "link 3 replay +1" in finding.title
    few_crc = window(base, lambda g, t: {"nvlinks": links(0, int(50 * t))}, seconds=10)
    assert evaluate_window(few_crc).findings == ()  # 50/s: under DCGM's 100/s
    many_crc = window(base, lambda g, t: {"nvlinks": links(0, int(150 * t))}, seconds=10)
    assert "link 3 CRC 150/s" in evaluate_window(many_crc).findings[0].title


def test_thresholds_move_the_verdicts(base: DeviceSample) -> None:
    low = {"gpu_utilization_percent": 40.0}
    assert evaluate_window(window(base, lambda g, t: low, seconds=40)).findings != ()
    lenient = dataclasses.replace(DEFAULT_THRESHOLDS, low_utilization_max_percent=30.0)
    result = evaluate_window(window(base, lambda g, t: low, seconds=40), thresholds=lenient)
    assert result.findings == ()
