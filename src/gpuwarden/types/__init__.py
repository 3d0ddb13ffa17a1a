"""Plain data shared by every layer. No behaviour beyond derived properties."""

from __future__ import annotations

from gpuwarden.types.hardware import GpuSpec, InstanceSpec
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    MlaSpec,
    MlpKind,
    ModelSpec,
    MoeSpec,
    NormKind,
    ParameterBreakdown,
    PositionKind,
    Structure,
)
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    ExactReport,
    Fix,
    FsdpKind,
    MemoryComponent,
    MemoryPlan,
    Mode,
    Offload,
    Optimizer,
    PlanRequest,
    Precision,
    PredictedReadings,
)

__all__ = [
    "Attention",
    "Checkpointing",
    "ExactReport",
    "Fix",
    "FsdpKind",
    "GpuSpec",
    "InstanceSpec",
    "LayerParameters",
    "LinearShape",
    "MemoryComponent",
    "MemoryPlan",
    "MlaSpec",
    "MlpKind",
    "Mode",
    "ModelSpec",
    "MoeSpec",
    "NormKind",
    "Offload",
    "Optimizer",
    "ParameterBreakdown",
    "PlanRequest",
    "PositionKind",
    "Precision",
    "PredictedReadings",
    "Structure",
]
