"""Tensor-core use and GEMM precision of a rank (``RankInsights.tensor_cores``).

A module of its own, imported where a trace calls for it: a trace without them does not pay
for creating their classes (see ``gpuwarden.types.trace_insights``), which still names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuwarden.types.trace_insights import GemmDtype


@dataclass(frozen=True, slots=True)
class KernelTime:
    """GPU time of one kernel name: ``count`` launches, ``time_us`` summed durations."""

    name: str
    count: int
    time_us: float


@dataclass(frozen=True, slots=True)
class DtypeTime:
    """GEMM kernels of one input precision: ``kernels`` launches, ``time_us`` summed."""

    dtype: GemmDtype
    kernels: int
    time_us: float


@dataclass(frozen=True, slots=True)
class GemmShape:
    """A matmul op (and its recorded Input Dims) whose K or N is not a multiple of 8."""

    op: str
    dims: str  # the recorded Input Dims, as text
    count: int


@dataclass(frozen=True, slots=True)
class TensorCoreReport:
    """Share of GEMM time in tensor-core kernels (HMMA/WGMMA/MFMA) vs FP32 SIMT kernels, from
    kernel names. ``None`` in RankInsights when the trace has no GEMM kernel."""

    gemm_kernels: int
    gemm_time_us: float
    tensor_core_us: float
    simt_us: float
    unknown_us: float  # names that do not say
    tensor_core_ratio: float  # ÷ gemm_time_us
    simt_ratio: float
    top_simt_kernels: tuple[KernelTime, ...]
    matmul_ops_with_shapes: int | None  # None: no shapes recorded (record_shapes off)
    misaligned_ops: int | None  # matmul ops with K or N not a multiple of 8 (GEMV-like left out)
    misaligned_examples: tuple[GemmShape, ...]
    fix: str | None
    # GEMM time per input precision read from the kernel names (by time desc), and the time of
    # kernels whose names do not say it (nvjet, Triton templates)
    dtypes: tuple[DtypeTime, ...] = ()
    unknown_dtype_us: float = 0.0
