"""Arbitrary readings — any field None, odd numbers, unknown strings — never make a rule raise."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.health.evaluate import evaluate_snapshot, evaluate_window
from gpuwarden.health.rules import CHECK_NAMES
from gpuwarden.telemetry.clock_events import CLOCK_EVENT_BITS
from gpuwarden.types.health import CheckStatus
from gpuwarden.types.telemetry import (
    DeviceInfo,
    DeviceSample,
    DeviceState,
    MigDeviceSample,
    NvLinkSample,
    ProcessSample,
    Snapshot,
)

numbers = st.none() | st.floats(allow_nan=True, allow_infinity=True) | st.floats(-5, 1e4)
ratios = st.none() | st.floats(-0.5, 1.5, allow_nan=False)
counts = st.none() | st.integers(-5, 10**6)
flags = st.none() | st.booleans()
words = (
    st.none()
    | st.text(max_size=12)
    | st.sampled_from(
        [
            "none",
            "reset",
            "reboot",
            "drain-p2p",
            "completed",
            "in-progress",
            "not-started",
            "success",
        ]
    )
)
names = st.sampled_from(
    ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "Tesla T4", "NVIDIA B200", "", "x"]
)
reasons = st.none() | st.lists(
    st.sampled_from([name for _, name in CLOCK_EVENT_BITS] + ["new_reason"]), max_size=4
).map(tuple)
links = st.none() | st.lists(
    st.builds(
        NvLinkSample, st.integers(0, 20), flags, numbers, counts, counts, counts, counts, counts
    ),
    max_size=20,
).map(tuple)
processes = st.none() | st.lists(
    st.builds(ProcessSample, st.integers(1, 99999), counts, st.none() | st.text(max_size=8),
              st.none() | st.sampled_from(["C", "G", "C+G", "M", "?"])),
    max_size=3,
).map(tuple)  # fmt: skip
migs = st.none() | st.lists(
    st.builds(MigDeviceSample, st.integers(0, 14), st.none() | st.integers(0, 7),
              st.none() | st.sampled_from(["1g.10gb", "3g.40gb"]), st.none(), counts, counts),
    max_size=3,
).map(tuple)  # fmt: skip


@st.composite
def samples(draw: st.DrawFn, index: int = 0, t: float = 0.0) -> DeviceSample:
    info = DeviceInfo(
        index=draw(st.integers(0, 3)) if index < 0 else index,
        uuid=draw(st.sampled_from(["GPU-a", "GPU-b", "index:0", ""])),
        name=draw(names),
        architecture=draw(st.none() | st.sampled_from(["Hopper", "Pascal", "Ampere"])),
        memory_total_bytes=draw(counts),
        mig_parent_uuid=draw(st.none() | st.just("GPU-a")),
        mig_profile=draw(st.none() | st.just("1g.10gb")),
    )
    return DeviceSample(
        info=info,
        timestamp_s=t,
        state=draw(st.sampled_from(list(DeviceState))),
        memory_used_bytes=draw(counts),
        memory_free_bytes=draw(counts),
        memory_reserved_bytes=draw(counts),
        gpu_utilization_percent=draw(numbers),
        memory_utilization_percent=draw(numbers),
        encoder_utilization_percent=draw(numbers),
        temperature_gpu_celsius=draw(numbers),
        temperature_memory_celsius=draw(numbers),
        temperature_slowdown_celsius=draw(numbers),
        power_draw_watts=draw(numbers),
        power_limit_watts=draw(numbers),
        power_enforced_limit_watts=draw(numbers),
        clock_sm_mhz=draw(numbers),
        clock_sm_max_mhz=draw(numbers),
        pstate=draw(st.none() | st.sampled_from(["P0", "P2", "P8", "P15"])),
        clock_event_reasons=draw(reasons),
        ecc_mode_enabled=draw(flags),
        ecc_errors_corrected_volatile=draw(counts),
        ecc_errors_uncorrected_volatile=draw(counts),
        retired_pages_single_bit=draw(counts),
        retired_pages_double_bit=draw(counts),
        retired_pages_pending=draw(flags),
        remapped_rows_pending=draw(flags),
        remapped_rows_failure=draw(flags),
        pcie_link_gen_current=draw(counts),
        pcie_link_gen_max=draw(counts),
        pcie_link_width_current=draw(counts),
        pcie_link_width_max=draw(counts),
        pcie_rx_bytes_per_second=draw(numbers),
        pcie_replay_total=draw(counts),
        nvlinks=draw(links),
        nvlink_tx_bytes_per_second=draw(numbers),
        persistence_mode=draw(flags),
        mig_mode=draw(flags),
        mig_devices=draw(migs),
        processes=draw(processes),
        sm_active_ratio=draw(ratios),
        tensor_active_ratio=draw(ratios),
        dram_active_ratio=draw(ratios),
        temperature_margin_celsius=draw(numbers),
        temperature_gpu_max_celsius=draw(numbers),
        temperature_memory_max_celsius=draw(numbers),
        sram_threshold_exceeded=draw(flags),
        remapped_rows_banks_exhausted=draw(counts),
        recovery_action=draw(words),
        fabric_state=draw(words),
        fabric_status=draw(words),
    )


@st.composite
def snapshots(draw: st.DrawFn, t: float = 0.0) -> Snapshot:
    devices = draw(st.lists(samples(index=-1, t=t), max_size=3))
    return Snapshot(
        t, "fuzz", draw(st.sampled_from(["nvml", "smi", "dcgm"])), False, tuple(devices)
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_any_reading_is_judged_without_raising(snapshot: Snapshot) -> None:
    result = evaluate_snapshot(snapshot)
    assert [c.name for c in result.checks] == list(CHECK_NAMES)
    for check in result.checks:
        if check.status in (CheckStatus.WARN, CheckStatus.FAIL):
            assert check.codes


@st.composite
def windows(draw: st.DrawFn) -> list[Snapshot]:
    times = draw(st.lists(st.floats(0, 120, allow_nan=False), min_size=0, max_size=8))
    return [draw(snapshots(t=t)) for t in sorted(times)]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows())
def test_any_window_is_judged_without_raising(readings: list[Snapshot]) -> None:
    result = evaluate_window(readings)
    assert [c.name for c in result.checks] == list(CHECK_NAMES)
