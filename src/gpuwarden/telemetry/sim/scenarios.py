"""Scenarios as data: a workload every GPU runs, and faults that hit one GPU at a time.

Times are seconds since the backend opened. Levels are what DCGM/NVML report for such jobs
(utilization in percent, profiling pillars as ratios 0..1); they are illustrative, not measured,
except where ``hardware.py`` cites a capture.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class Workload:
    """What a job makes a GPU do, at full clocks."""

    gpu_utilization_percent: float
    sm_active_ratio: float
    sm_occupancy_ratio: float
    tensor_active_ratio: float
    dram_active_ratio: float
    memory_utilization_percent: float
    memory_used_gib: float
    pcie_rx_gb_per_s: float
    pcie_tx_gb_per_s: float
    nvlink_gb_per_s_per_link: float  # each direction
    steps_per_second: float  # training progress at full clocks; 0 = not a training job
    process_name: str | None  # None = no process on the GPU
    # data starvation: the job computes in bursts of ``busy_fraction`` of each period, then waits
    period_s: float | None = None
    busy_fraction: float = 1.0


IDLE = Workload(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None)
TRAINING = Workload(
    gpu_utilization_percent=99.0,
    sm_active_ratio=0.82,
    sm_occupancy_ratio=0.38,
    tensor_active_ratio=0.62,
    dram_active_ratio=0.45,
    memory_utilization_percent=38.0,
    memory_used_gib=71.0,
    pcie_rx_gb_per_s=0.6,
    pcie_tx_gb_per_s=0.2,
    nvlink_gb_per_s_per_link=9.0,
    steps_per_second=1.0,
    process_name="python train.py",
)
# Data-parallel peers stuck in an NCCL collective: kernels resident (utilization 100 %) but the
# SMs spin on a flag (SM active ~1 %), power near idle — what an 8-GPU job does when one rank dies.
NCCL_HANG = Workload(
    100.0, 0.012, 0.01, 0.0, 0.004, 0.0, 71.0, 0.0, 0.0, 0.0, 0.0, "python train.py"
)
FAKE_LOAD = Workload(
    100.0, 0.015, 0.012, 0.0, 0.006, 1.0, 3.2, 0.0, 0.0, 0.0, 0.0, "python serve.py"
)
STARVED = Workload(
    gpu_utilization_percent=99.0,
    sm_active_ratio=0.85,
    sm_occupancy_ratio=0.4,
    tensor_active_ratio=0.65,
    dram_active_ratio=0.5,
    memory_utilization_percent=40.0,
    memory_used_gib=42.0,
    pcie_rx_gb_per_s=3.5,
    pcie_tx_gb_per_s=0.1,
    nvlink_gb_per_s_per_link=0.0,
    steps_per_second=1.0,
    process_name="python train.py",
    period_s=6.0,
    busy_fraction=0.35,
)
BURN = Workload(100.0, 0.96, 0.55, 0.85, 0.6, 55.0, 64.0, 0.2, 0.1, 9.0, 1.0, "python train.py")


class FaultKind(StrEnum):
    COOLING_LOSS = "cooling-loss"  # value: thermal resistance multiplier
    POWER_CAP = "power-cap"  # value: enforced power limit in watts
    MEMORY_LEAK = "memory-leak"  # value: GiB per second until out of memory
    ECC_DBE = "ecc-dbe"  # a double-bit ECC error: Xid 48, row remap pending, the process dies
    FALLEN_OFF_BUS = "fallen-off-bus"  # Xid 79: the GPU is lost
    NVLINK_DOWN = "nvlink-down"  # value: link number; errors for 10 s, then Xid 74, link down
    STRAGGLER = "straggler"  # value: speed factor of this GPU (SM active, power, steps)


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    gpu: int
    at_s: float
    value: float = 0.0


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    gpu_key: str  # a key of hardware.SIM_GPU_KEYS
    gpus: int  # default number of GPUs
    workload: Workload
    faults: tuple[Fault, ...] = ()
    min_gpus: int = 1
    # what the other GPUs do once a fault killed the job on one of them (None: carry on)
    peers_after_fatal: Workload | None = None


NVLINK_ERROR_LEAD_S = 10.0  # errors grow this long before the link goes down

_LIST = (
    Scenario(
        "healthy-training",
        "8 x H100 data-parallel training at ~82% SM active, steady temperatures",
        "h100-sxm5-80gb",
        8,
        TRAINING,
    ),
    Scenario(
        "data-starvation",
        "the input pipeline cannot keep up: power and SM active in a sawtooth, 35% busy",
        "h100-sxm5-80gb",
        1,
        STARVED,
    ),
    Scenario(
        "thermal-throttling",
        "cooling fails at 10 s: temperature climbs past 85 C and the clocks drop",
        "h100-sxm5-80gb",
        1,
        BURN,
        (Fault(FaultKind.COOLING_LOSS, 0, 10.0, 2.8),),
    ),
    Scenario(
        "fake-load",
        "utilization.gpu 100% but SM active ~1.5% and near-idle power: busy doing nothing",
        "h100-sxm5-80gb",
        1,
        FAKE_LOAD,
    ),
    Scenario(
        "memory-leak",
        "memory grows 0.8 GiB/s from 30 GiB until out of memory; the process dies",
        "h100-sxm5-80gb",
        1,
        Workload(97.0, 0.7, 0.33, 0.5, 0.4, 30.0, 30.0, 0.5, 0.1, 0.0, 1.0, "python train.py"),
        (Fault(FaultKind.MEMORY_LEAK, 0, 0.0, 0.8),),
    ),
    Scenario(
        "ecc-double-bit",
        "8 x A100: GPU 0 hits a double-bit ECC error at 30 s (Xid 48, row remap pending)",
        "a100-sxm4-40gb",
        8,
        Workload(98.0, 0.78, 0.36, 0.58, 0.42, 36.0, 35.0, 0.5, 0.2, 8.0, 1.0, "python train.py"),
        (Fault(FaultKind.ECC_DBE, 0, 30.0),),
        peers_after_fatal=NCCL_HANG,
    ),
    Scenario(
        "gpu-fallen-off-bus",
        "8 x H100: GPU 3 falls off the bus at 30 s (Xid 79); the other 7 hang in NCCL",
        "h100-sxm5-80gb",
        8,
        TRAINING,
        (Fault(FaultKind.FALLEN_OFF_BUS, 3, 30.0),),
        min_gpus=4,
        peers_after_fatal=NCCL_HANG,
    ),
    Scenario(
        "nvlink-down",
        "8 x H100: link 7 of GPU 2 logs CRC/replay errors from 20 s and goes down at 30 s",
        "h100-sxm5-80gb",
        8,
        TRAINING,
        (Fault(FaultKind.NVLINK_DOWN, 2, 30.0, 7),),
        min_gpus=3,
    ),
    Scenario(
        "straggler",
        "8 x H100: GPU 5 runs at 65% of the others' speed, its step count falls behind",
        "h100-sxm5-80gb",
        8,
        TRAINING,
        (Fault(FaultKind.STRAGGLER, 5, 0.0, 0.65),),
        min_gpus=6,
    ),
    Scenario(
        "power-capping",
        "H100 capped at 450 W under a 550 W load: power flat at the cap, SW power cap active",
        "h100-sxm5-80gb",
        1,
        BURN,
        (Fault(FaultKind.POWER_CAP, 0, 0.0, 450.0),),
    ),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in _LIST}
