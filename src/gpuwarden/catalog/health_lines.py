"""The lines a GPU is judged by both on its node (``health``: watch, doctor, the exporter) and
across a fleet (``fleet``: Prometheus), each with where it comes from.

``health.thresholds`` and ``fleet.thresholds`` take these defaults from here: the two analyses are
siblings and may not import each other, and a GPU judged by ``watch`` and by ``fleet report``
should meet the same line. The lines only one of them uses stay in its own thresholds module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

N = TypeVar("N", int, float)

_DIAG = "shared/reference/diagnosis.md §2 (the seeds' healthy ranges)"
_DCGM_LIMITS = "DCGM dcgmlib/dcgm_gpu_hardware_limits.h"


@dataclass(frozen=True, slots=True)
class Line(Generic[N]):
    """A default and its source (a document, a datasheet, or gpuwarden's reasoning)."""

    value: N
    source: str


# --- what "busy" and "low" mean
BUSY_UTILIZATION_MIN_PERCENT = Line(
    10.0, "gpuwarden: a GPU below 10 % utilization runs no job worth comparing with its peers"
)
LOW_UTILIZATION_MAX_PERCENT = Line(50.0, f"{_DIAG}: a process holds the GPU but utilization < 50 %")

# --- peers
PEERS_MIN_GPUS_COUNT = Line(
    3, "gpuwarden: a median and its MAD name an outlier only among three GPUs or more"
)
STRAGGLER_ROBUST_Z_MIN = Line(
    3.5, "Iglewicz & Hoaglin's modified z-score: |0.6745 (x − median) / MAD| > 3.5 is an outlier"
)
STRAGGLER_MIN_GAP_RATIO = Line(
    0.10,
    "gpuwarden: a 10 % slower rank slows a synchronous job by 10 %; identical GPUs on one job "
    "read within a few % of each other",
)
THERMAL_OUTLIER_MIN_CELSIUS = Line(10.0, f"{_DIAG}: ≥ 10 °C above the peer median")
THERMAL_OUTLIER_LOAD_MATCH_RATIO = Line(
    0.15, "gpuwarden: 'matched load' = power within ±15 % of the peer median"
)

# --- memory errors
ECC_CORRECTED_MAX_PER_MINUTE = Line(
    10.0,
    f"{_DCGM_LIMITS}: DCGM_LIMIT_MAX_SBE_RATE 10 over its health watch's 1-minute window (DCGM "
    "marks it a placeholder value)",
)
RETIRED_PAGES_DBE_LIMIT_COUNT = Line(
    60,
    f"{_DIAG}: retired pages ≥ 60 from DBE, the pre-Ampere RMA criterion "
    f"(DCGM_LIMIT_MAX_RETIRED_PAGES was 60 in {_DCGM_LIMITS})",
)
