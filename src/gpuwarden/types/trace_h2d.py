"""Host-to-device copies of a rank (``RankInsights.h2d``).

A module of its own, imported where a trace calls for it: a trace without them does not pay
for creating their classes (see ``gpuwarden.types.trace_insights``), which still names them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class H2DReport:
    """Host-to-device copies: pinned vs pageable, blocking, achieved bandwidth vs the PCIe
    link. ``None`` in RankInsights when the trace has no HtoD copy."""

    copies: int
    bytes_total: int | None  # None when no copy recorded its size
    time_us: float  # sum of copy durations
    exposed_us: float  # copy time with no compute kernel running on the GPU
    pageable_copies: int
    pinned_copies: int
    unknown_source_copies: int  # names without Pageable/Pinned (e.g. ROCm "Host -> Device")
    pageable_bytes: int
    blocking_copies: int  # launched by a synchronous runtime call (cudaMemcpy, hipMemcpy...)
    achieved_gb_s: float | None  # Σ bytes ÷ Σ duration of copies with a size
    pageable_gb_s: float | None
    pinned_gb_s: float | None
    device_name: str | None  # deviceProperties name of the GPU used
    pcie_generation: int | None  # None when the device is not in our table
    pcie_limit_gb_s: float | None  # per direction, x16, PCI-SIG line rate after encoding
    achieved_ratio_of_pcie: float | None
    per_step_us: tuple[tuple[int, float], ...]  # (step, HtoD time in the step window)
    fix: str | None
