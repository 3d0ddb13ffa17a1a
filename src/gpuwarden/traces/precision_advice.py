"""How to move FP32 GEMMs onto tensor cores, said for the GPU a trace ran on."""

from __future__ import annotations

from gpuwarden.catalog.tensor_math import has_tensor_math


def cheaper_precision(capability: tuple[int, int] | None) -> str:
    """How FP32 GEMMs move onto tensor cores on the GPU of ``capability`` (deviceProperties):
    bf16/fp16 or TF32 from Ampere on; fp16 only on Volta and Turing (no bf16, no TF32)."""
    autocast, tf32 = "(torch.autocast)", "(torch.set_float32_matmul_precision('high'))"
    if capability is None:
        return f"train in bf16/fp16 {autocast} or, on NVIDIA Ampere and newer, allow TF32 {tf32}"
    if has_tensor_math(capability, "bf16"):
        return f"train in bf16/fp16 {autocast} or allow TF32 {tf32}"
    said = f"compute capability {capability[0]}.{capability[1]}"
    if has_tensor_math(capability, "fp16"):
        return (
            "train in fp16 (torch.autocast(dtype=torch.float16) with a GradScaler): "
            f"{said} has fp16 tensor cores but no bf16 or TF32"
        )
    return f"{said} has no tensor cores: a GPU of 7.0 or newer runs these GEMMs on them"
