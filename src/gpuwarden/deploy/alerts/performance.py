"""Throughput, bottlenecks and distributed jobs: the GPU works, but badly — idle while held,
busy doing nothing, starved, memory bound, without tensor cores, slower than its peers, or on
links that err. Codes and thresholds: diagnosis.md §2 and ``health.thresholds``."""

from __future__ import annotations

from gpuwarden.deploy.alerts.health import finding
from gpuwarden.deploy.alerts.spec import AlertSpec, Case, FailureMode, InputSeries
from gpuwarden.deploy.alerts.spec import series as _s
from gpuwarden.deploy.knobs import AlertKnobs
from gpuwarden.deploy.promql import EACH_GPU, GPU, GPU_INSTANCE, NODE, either, per_node
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.types.health import Severity

_WARN, _INFO, _CRIT = Severity.WARNING, Severity.INFO, Severity.CRITICAL
# A MIG instance's pillars are its own; joins between pillars keep instances apart (EACH_GPU).
_WHOLE_GPU = f'{GPU_INSTANCE}=""'
_PEERS = ("namespace", "pod")  # with pod labels, peers are the GPUs of one pod on one node


def throughput(t: Thresholds, k: AlertKnobs) -> tuple[AlertSpec, ...]:
    mode = FailureMode.THROUGHPUT
    util = f"avg_over_time(DCGM_FI_DEV_GPU_UTIL[{k.low_utilization_window}])"
    low, idle, held = (
        t.low_utilization_max_percent,
        k.idle_utilization_max_percent,
        k.process_memory_min_mib,
    )
    return (
        AlertSpec(
            "GpuLowUtilization",
            "low-utilization",
            mode,
            _WARN,
            "a process holds the GPU but uses little of it",
            f"utilization (mean over {k.low_utilization_window}) between {idle:g} and {low:g} % "
            f"while more than {held:g} MiB of memory are in use",
            f"{util} < {low:g} and {util} >= {idle:g}\n"
            f"and on({GPU}) DCGM_FI_DEV_FB_USED > {held:g}",
            finding("low-utilization"),
            for_="15m",
            cases=(
                Case(
                    "30 % busy, memory held",
                    (_s("DCGM_FI_DEV_GPU_UTIL", "30x60"), _s("DCGM_FI_DEV_FB_USED", "20000x60")),
                    (0,),
                    at_minutes=50,
                ),
                Case(
                    "healthy: no process holds it",
                    (_s("DCGM_FI_DEV_GPU_UTIL", "30x60"), _s("DCGM_FI_DEV_FB_USED", "0x60")),
                    at_minutes=50,
                ),
                Case(
                    "healthy: busy",
                    (_s("DCGM_FI_DEV_GPU_UTIL", "95x60"), _s("DCGM_FI_DEV_FB_USED", "20000x60")),
                    at_minutes=50,
                ),
                Case(
                    "healthy: idle is the cost alert's",
                    (_s("DCGM_FI_DEV_GPU_UTIL", "0x60"), _s("DCGM_FI_DEV_FB_USED", "20000x60")),
                    at_minutes=50,
                ),
            ),
        ),
        fake_load(t, k),
        memory_nearly_full(t),
    )


def fake_load(t: Thresholds, k: AlertKnobs) -> AlertSpec:
    """health.rules.utilization: utilization ≈ 100 % with SM active < 20 %; where the profiling
    pillars are not exported, near-idle power and no memory traffic instead."""
    w = k.fake_load_window
    util = f"avg_over_time(DCGM_FI_DEV_GPU_UTIL[{w}]) >= {t.fake_load_utilization_min_percent:g}"
    sm = f"avg_over_time(DCGM_FI_PROF_SM_ACTIVE{{{_WHOLE_GPU}}}[{w}])"
    limit = f"max by ({GPU}) (DCGM_FI_DEV_ENFORCED_POWER_LIMIT or DCGM_FI_DEV_POWER_MGMT_LIMIT)"
    power = f"avg_over_time(DCGM_FI_DEV_POWER_USAGE[{w}])\n  / on({GPU}) group_left() {limit}"
    memory = f"avg_over_time(DCGM_FI_DEV_MEM_COPY_UTIL[{w}])"
    expr = either(
        f"{util}\nand on({GPU}) {sm} < {t.fake_load_sm_active_max_ratio:g}",
        f"{util}\nand on({GPU}) (\n  {power} <= {t.fake_load_power_max_ratio:g}\n)\n"
        f"and on({GPU}) {memory} <= {t.fake_load_memory_utilization_max_percent:g}\n"
        f"unless on({GPU}) DCGM_FI_PROF_SM_ACTIVE",
    )

    def busy(sm_active: str | None, watts: float) -> tuple[InputSeries, ...]:
        pillar = (_s("DCGM_FI_PROF_SM_ACTIVE", sm_active),) if sm_active else ()
        return (
            _s("DCGM_FI_DEV_GPU_UTIL", "100x30"),
            _s("DCGM_FI_DEV_POWER_USAGE", f"{watts:g}x30"),
            _s("DCGM_FI_DEV_POWER_MGMT_LIMIT", "700x30"),
            _s("DCGM_FI_DEV_MEM_COPY_UTIL", "0x30"),
            *pillar,
        )

    return AlertSpec(
        "GpuFakeLoad",
        "fake-load",
        FailureMode.THROUGHPUT,
        _WARN,
        "utilization ≈ 100 % while almost no SM computes",
        f"utilization ≥ {t.fake_load_utilization_min_percent:g} % with SM active < "
        f"{t.fake_load_sm_active_max_ratio:g} (mean over {w}); without SM active, power ≤ "
        f"{t.fake_load_power_max_ratio:.0%} of the limit and no memory traffic",
        expr,
        finding("fake-load"),
        for_="10m",
        cases=(
            Case("spin-waiting: SM active 1 %", busy("0.012x30", 120), (0,)),
            Case("no pillars: near-idle power, no memory traffic", busy(None, 70), (0,)),
            Case("healthy: training, SM active 82 %", busy("0.82x30", 650)),
            Case("healthy: no pillars, real power", busy(None, 600)),
        ),
    )


# An 80 GB board's frame buffer as NVML splits it (MiB). The cases put the used share on either
# side of the threshold, whatever --thresholds sets it to: their promtool tests pass with it.
_FB_TOTAL_MIB = 81_500
_FB_RESERVED_MIB = 500


def _frame_buffer(share: float, *, reserved: bool) -> tuple[InputSeries, ...]:
    """FB_USED at ``share`` of the total, the rest FB_FREE (and FB_RESERVED, which the total
    counts when the exporter reports it)."""
    used = round(_FB_TOTAL_MIB * share)
    held = min(_FB_RESERVED_MIB, _FB_TOTAL_MIB - used) if reserved else 0
    series = (
        _s("DCGM_FI_DEV_FB_USED", f"{used}x30"),
        _s("DCGM_FI_DEV_FB_FREE", f"{_FB_TOTAL_MIB - used - held}x30"),
    )
    return (*series, _s("DCGM_FI_DEV_FB_RESERVED", f"{held}x30")) if reserved else series


def memory_nearly_full(t: Thresholds) -> AlertSpec:
    used = "DCGM_FI_DEV_FB_USED"
    total = f"({used} + DCGM_FI_DEV_FB_FREE + (DCGM_FI_DEV_FB_RESERVED or {used} * 0))"
    ratio = t.memory_used_max_ratio
    full, healthy = (1 + ratio) / 2, ratio * 0.92  # halfway to 100 %; a little below
    firing = (Case(f"{full:.0%} used", _frame_buffer(full, reserved=True), (0,)),)
    return AlertSpec(
        "GpuMemoryNearlyFull",
        "memory-nearly-full",
        FailureMode.THROUGHPUT,
        _WARN,
        "memory nearly full",
        f"DCGM_FI_DEV_FB_USED > {ratio:.0%} of used + free + reserved",
        f"{used}\n/ {total}\n> {ratio:g}",
        finding("memory-nearly-full"),
        for_="15m",
        cases=(
            *(firing if ratio < 1 else ()),  # above 100 % of the memory: never
            Case(f"healthy: {healthy:.0%} used", _frame_buffer(healthy, reserved=False)),
        ),
    )


def bottlenecks(t: Thresholds, k: AlertKnobs) -> tuple[AlertSpec, ...]:
    mode = FailureMode.BOTTLENECKS
    w = k.pillar_window
    dram = f"avg_over_time(DCGM_FI_PROF_DRAM_ACTIVE[{w}])"
    sm = f"avg_over_time(DCGM_FI_PROF_SM_ACTIVE[{w}])"
    tensor = f"avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE[{w}])"

    def pillars(sm_v: float, dram_v: float, tensor_v: float) -> tuple[InputSeries, ...]:
        return (
            _s("DCGM_FI_PROF_SM_ACTIVE", f"{sm_v:g}x40"),
            _s("DCGM_FI_PROF_DRAM_ACTIVE", f"{dram_v:g}x40"),
            _s("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", f"{tensor_v:g}x40"),
        )

    return (
        AlertSpec(
            "GpuDataStarved",
            "data-starved",
            mode,
            _WARN,
            "the input pipeline cannot keep up",
            "gpuwarden's 1 Hz window (an SM-activity sawtooth with power following); scrapes "
            "every 15-60 s cannot see it",
            None,
            finding("data-starved"),
        ),
        AlertSpec(
            "GpuMemoryBound",
            "memory-bound",
            mode,
            _INFO,
            "memory-bandwidth bound",
            f"DRAM active > {t.memory_bound_dram_active_min_ratio:g} with SM active < "
            f"{t.memory_bound_sm_active_max_ratio:g} (means over {w})",
            f"{dram} > {t.memory_bound_dram_active_min_ratio:g}\n"
            f"and on({EACH_GPU}) {sm} < {t.memory_bound_sm_active_max_ratio:g}",
            finding("memory-bound"),
            for_="10m",
            cases=(
                Case("DRAM 90 %, SM 20 %", pillars(0.2, 0.9, 0.1), (0,), at_minutes=30),
                Case("healthy: training", pillars(0.82, 0.45, 0.62), at_minutes=30),
            ),
        ),
        AlertSpec(
            "GpuNoTensorCores",
            "no-tensor-cores",
            mode,
            _INFO,
            "SMs busy, tensor cores idle",
            f"tensor active < {t.no_tensor_tensor_active_max_ratio:g} with SM active > "
            f"{t.no_tensor_sm_active_min_ratio:g} (means over {w})",
            f"{tensor} < {t.no_tensor_tensor_active_max_ratio:g}\n"
            f"and on({EACH_GPU}) {sm} > {t.no_tensor_sm_active_min_ratio:g}",
            finding("no-tensor-cores"),
            for_="10m",
            cases=(
                Case("FP32 on CUDA cores", pillars(0.8, 0.4, 0.0), (0,), at_minutes=30),
                Case("healthy: bf16 training", pillars(0.82, 0.45, 0.62), at_minutes=30),
            ),
        ),
    )


def distributed(t: Thresholds, k: AlertKnobs) -> tuple[AlertSpec, ...]:
    mode = FailureMode.DISTRIBUTED
    w = k.counter_rate_window
    crc = t.nvlink_crc_max_per_second
    errors = t.nvlink_replay_recovery_max_count
    nvlink = "DCGM_FI_DEV_NVLINK_{}_ERROR_COUNT_TOTAL"
    return (
        straggler(t, k),
        AlertSpec(
            "GpuCommBound",
            "comm-bound",
            mode,
            _WARN,
            "time goes to communication that does not overlap with compute",
            "gpuwarden's 1 Hz window across the node's GPUs (SM activity dropping in lockstep "
            "while NVLink/PCIe traffic peaks)",
            None,
            finding("comm-bound"),
        ),
        AlertSpec(
            "GpuNvlinkDown",
            "nvlink-down",
            mode,
            _CRIT,
            "an NVLink is down",
            "gpuwarden's per-link state (dcgm-exporter exports no link state by default)",
            None,
            finding("nvlink-down"),
        ),
        AlertSpec(
            "GpuNvlinkErrors",
            "nvlink-errors",
            mode,
            _WARN,
            "NVLink errors rising",
            f"NVLink replay or recovery errors (≥ {errors} over {w}), or CRC errors faster than "
            f"{crc:g}/s",
            either(
                f"increase({nvlink.format('REPLAY')}[{w}]) >= {errors}",
                f"increase({nvlink.format('RECOVERY')}[{w}]) >= {errors}",
                f"rate({nvlink.format('CRC_FLIT')}[{w}]) > {crc:g}",
                f"rate({nvlink.format('CRC_DATA')}[{w}]) > {crc:g}",
            ),
            finding("nvlink-errors"),
            cases=(
                Case(
                    "a replay error",
                    (_s(nvlink.format("REPLAY"), "0x10 1x10"),),
                    (0,),
                    at_minutes=13,
                ),
                Case(
                    "CRC errors at 200/s",
                    (_s(nvlink.format("CRC_FLIT"), f"0+{120 * crc:g}x20"),),
                    (0,),
                ),
                Case(
                    "healthy: CRC errors at 10/s, no replays",
                    (
                        _s(nvlink.format("CRC_FLIT"), f"0+{6 * crc:g}x20"),
                        _s(nvlink.format("REPLAY"), "0x20"),
                        _s(nvlink.format("RECOVERY"), "0x20"),
                    ),
                ),
            ),
        ),
    )


def straggler(t: Thresholds, k: AlertKnobs) -> AlertSpec:
    """Peers are the busy whole GPUs of one node (and one pod where pods are labelled); the gap
    is the health rules' fallback gap, as PromQL has no robust z-score over a window."""
    busy_ratio = t.busy_utilization_min_percent / 100
    gap = t.straggler_fallback_min_gap_ratio
    sm = f"avg_over_time(DCGM_FI_PROF_SM_ACTIVE{{{_WHOLE_GPU}}}[{k.peer_window}])"
    busy = f"({sm} >= {busy_ratio:g})"
    on = f"on({NODE}, {', '.join(_PEERS)})"
    median = per_node("quantile", f"0.5, {busy}", *_PEERS)
    count = per_node("count", busy, *_PEERS)
    expr = (
        f"{busy}\n< {on} group_left() ({1 - gap:g} * {median})\n"
        f"and {on} {count} >= {t.peers_min_gpus_count}"
    )

    def gpus(*active: float, pods: tuple[str, ...] = ()) -> tuple[InputSeries, ...]:
        return tuple(
            InputSeries(
                "DCGM_FI_PROF_SM_ACTIVE",
                f"{a:g}x30",
                {"namespace": "ml", "pod": pods[i]} if pods else {},
                i,
            )
            for i, a in enumerate(active)
        )

    return AlertSpec(
        "GpuStraggler",
        "straggler",
        FailureMode.DISTRIBUTED,
        _WARN,
        "slower than its peers",
        f"SM active (mean over {k.peer_window}) more than {gap:.0%} below the median of the busy "
        f"GPUs of its node (and pod), {t.peers_min_gpus_count} peers or more",
        expr,
        finding("straggler"),
        for_="10m",
        cases=(
            Case("65 % of its peers' speed", gpus(0.82, 0.81, 0.83, 0.53), (3,), at_minutes=25),
            Case(
                "the same in pods",
                gpus(0.82, 0.81, 0.83, 0.53, pods=("a", "a", "a", "a")),
                (3,),
                {"namespace": "ml", "pod": "a"},
                at_minutes=25,
            ),
            Case("healthy: peers within a few %", gpus(0.82, 0.8, 0.83, 0.79), at_minutes=25),
            Case(
                "healthy: an idle GPU is not a straggler", gpus(0.82, 0.8, 0.83, 0.0), at_minutes=25
            ),
            Case(
                "healthy: another pod's job is not a peer",
                gpus(0.82, 0.8, 0.83, 0.4, pods=("a", "a", "a", "b")),
                at_minutes=25,
            ),
        ),
    )
