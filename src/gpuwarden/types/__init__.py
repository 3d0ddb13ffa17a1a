"""Plain data shared by every layer. No behaviour beyond derived properties.

The names below are loaded on first use (PEP 562): a trace analysis does not pay for the
planner's types, nor the planner for telemetry's."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuwarden.types.hardware import GpuSpec, InstanceSpec
    from gpuwarden.types.model import (
        DeltaNetShape,
        KvGroup,
        LayerParameters,
        LinearShape,
        Mamba1Shape,
        Mamba2Shape,
        Mixer,
        MlaSpec,
        MlpKind,
        ModelSpec,
        MoeSpec,
        NormKind,
        ParameterBreakdown,
        PositionKind,
        ScanNorms,
        StateKind,
        StateSpec,
        Structure,
    )
    from gpuwarden.types.plan import (
        Attention,
        Checkpointing,
        ExactReport,
        FitOption,
        FitResult,
        Fix,
        Framework,
        FsdpKind,
        InferenceCapacity,
        LossImpl,
        MemoryComponent,
        MemoryPlan,
        Mode,
        Offload,
        Optimizer,
        OptimizerImpl,
        Phase,
        PipelineSchedule,
        PlanRequest,
        Precision,
        PredictedReadings,
        QuantKernel,
        SaveMode,
        TrainLoop,
    )

_MODULE_OF = {
    "GpuSpec": "hardware",
    "InstanceSpec": "hardware",
    "LayerParameters": "model",
    "LinearShape": "model",
    "MlaSpec": "model",
    "MlpKind": "model",
    "ModelSpec": "model",
    "MoeSpec": "model",
    "KvGroup": "model",
    "Mixer": "model",
    "StateKind": "model",
    "StateSpec": "model",
    "DeltaNetShape": "model",
    "Mamba1Shape": "model",
    "Mamba2Shape": "model",
    "ScanNorms": "model",
    "NormKind": "model",
    "ParameterBreakdown": "model",
    "PositionKind": "model",
    "Structure": "model",
    "Attention": "plan",
    "Checkpointing": "plan",
    "ExactReport": "plan",
    "FitOption": "plan",
    "FitResult": "plan",
    "Fix": "plan",
    "Framework": "plan",
    "FsdpKind": "plan",
    "InferenceCapacity": "plan",
    "LossImpl": "plan",
    "MemoryComponent": "plan",
    "MemoryPlan": "plan",
    "Mode": "plan",
    "Offload": "plan",
    "Optimizer": "plan",
    "OptimizerImpl": "plan",
    "Phase": "plan",
    "PipelineSchedule": "plan",
    "TrainLoop": "plan",
    "PeakStep": "plan",
    "PlanRequest": "plan",
    "Precision": "plan",
    "PredictedReadings": "plan",
    "QuantKernel": "plan",
    "SaveMode": "plan",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Attention",
    "Checkpointing",
    "DeltaNetShape",
    "ExactReport",
    "FitOption",
    "FitResult",
    "Fix",
    "Framework",
    "FsdpKind",
    "GpuSpec",
    "InferenceCapacity",
    "InstanceSpec",
    "KvGroup",
    "LayerParameters",
    "LinearShape",
    "LossImpl",
    "Mamba1Shape",
    "Mamba2Shape",
    "MemoryComponent",
    "MemoryPlan",
    "Mixer",
    "MlaSpec",
    "MlpKind",
    "Mode",
    "ModelSpec",
    "MoeSpec",
    "NormKind",
    "Offload",
    "Optimizer",
    "OptimizerImpl",
    "ParameterBreakdown",
    "PeakStep",
    "Phase",
    "PipelineSchedule",
    "PlanRequest",
    "PositionKind",
    "Precision",
    "PredictedReadings",
    "QuantKernel",
    "SaveMode",
    "ScanNorms",
    "StateKind",
    "StateSpec",
    "Structure",
    "TrainLoop",
]
