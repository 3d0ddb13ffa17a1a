"""The simulator's health readings follow its physics and faults, on the captures' limits."""

from __future__ import annotations

from pathlib import Path

from gpuwarden.telemetry.sim import SCENARIOS
from gpuwarden.telemetry.smi import open_smi
from gpuwarden.types.telemetry import DeviceState

H100_Q = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
A100_XML = "nvidia-smi/netdata__a100-sxm4-mig.xml"


def test_healthy_h100_training_reads_like_the_capture(sim, fixtures: Path) -> None:
    real = open_smi(str(fixtures / H100_Q)).read().samples[0]
    for snap in sim("healthy-training").series([0.0, 30.0, 120.0]):
        for s in snap.samples:
            assert s.temperature_gpu_celsius is not None
            assert s.temperature_margin_celsius is not None
            # margin + temperature = the max operating temperature the capture implies (85 °C)
            assert s.temperature_margin_celsius + s.temperature_gpu_celsius == 85
            assert s.temperature_gpu_max_celsius == real.temperature_gpu_max_celsius == 85
            assert s.temperature_margin_celsius > 0  # healthy: headroom
            assert s.temperature_memory_max_celsius is None  # the capture prints no degrees
            # the capture's fabric, SRAM, remap banks and recovery action
            for name in (
                "fabric_state",
                "fabric_status",
                "sram_threshold_exceeded",
                "remapped_rows_banks_exhausted",
                "recovery_action",
            ):
                assert getattr(s, name) == getattr(real, name), name


def test_cooling_loss_uses_up_the_margin(sim) -> None:
    samples = [snap.samples[0] for snap in sim("thermal-throttling").series(list(range(0, 121, 2)))]
    margins = [s.temperature_margin_celsius for s in samples]
    assert all(m is not None for m in margins)
    assert margins[0] == 25  # idle-to-burn steady state: 60 °C against 85 °C
    crossed = next(i for i, m in enumerate(margins) if m is not None and m <= 0)
    # the clocks come down from there and hold the GPU around its limit: no headroom left
    after = samples[crossed:]
    assert all("sw_thermal_slowdown" in (s.clock_event_reasons or ()) for s in after)
    assert all(abs(s.temperature_margin_celsius or 0) <= 5 for s in after)
    assert all(s.recovery_action == "none" for s in samples)  # heat asks for no recovery


def test_ecc_double_bit_error_asks_for_a_reset_on_that_gpu_only(sim, fixtures: Path) -> None:
    gpu = next(f.gpu for f in SCENARIOS["ecc-double-bit"].faults)
    driven = sim("ecc-double-bit")
    before, after = driven.at(29.0), driven.at(31.0)
    assert {s.recovery_action for s in before.samples} == {"none"}
    assert after.samples[gpu].recovery_action == "reset"
    assert after.samples[gpu].remapped_rows_pending is True
    assert {s.recovery_action for i, s in enumerate(after.samples) if i != gpu} == {"none"}
    # A100: limits from the XML capture; no fabric state before Hopper
    a100 = open_smi(str(fixtures / A100_XML)).read().samples[0]
    s = after.samples[gpu]
    assert s.temperature_gpu_max_celsius == a100.temperature_gpu_max_celsius == 85
    assert s.temperature_memory_max_celsius == a100.temperature_memory_max_celsius == 95
    assert (s.fabric_state, s.fabric_status) == (None, None)


def test_a_lost_gpu_reports_no_health_readings(sim) -> None:
    snap = sim("gpu-fallen-off-bus").at(40.0)
    lost = [s for s in snap.samples if s.state is DeviceState.GPU_LOST]
    assert len(lost) == 1
    assert (lost[0].recovery_action, lost[0].temperature_margin_celsius) == (None, None)
    assert all(s.fabric_state == "completed" for s in snap.samples if s not in lost)
