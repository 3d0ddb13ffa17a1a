"""Which compute dtypes a GPU's tensor cores multiply, by compute capability (a module of its own,
with no imports: the trace verdicts read it without loading the GPU catalog)."""

from __future__ import annotations

# The first compute capability with tensor-core math of each dtype (NVIDIA's architecture
# whitepapers: Volta's tensor cores multiply FP16; Xavier's and Turing's add INT8; Ampere adds
# TF32 and BF16; Ada and Hopper FP8; cuBLASLt's FP8 matmul needs compute capability 8.9 or
# above). FP32 runs on the CUDA cores of every GPU.
_TENSOR_MATH_FROM = {"fp16": (7, 0), "int8": (7, 2), "tf32": (8, 0), "bf16": (8, 0), "fp8": (8, 9)}


def has_tensor_math(capability: tuple[int, int], dtype: str) -> bool | None:
    """Whether a GPU of ``capability`` has tensor-core math for ``dtype``; None for a dtype the
    table does not hold (fp32 runs on CUDA cores)."""
    first = _TENSOR_MATH_FROM.get(dtype)
    return None if first is None else capability >= first
