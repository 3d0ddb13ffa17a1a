"""Which attention implementation ran: PyTorch SDPA's backend per call (its CPU op) and the
fused attention kernels by family (kernel names).

``torch.nn.functional.scaled_dot_product_attention`` records ``aten::scaled_dot_product_attention``
and, under it, the op of the backend it picked (PyTorch aten/src/ATen/native/transformers/
attention.cpp, ``scaled_dot_product_attention``): ``_scaled_dot_product_flash_attention``,
``_scaled_dot_product_efficient_attention``, ``_scaled_dot_product_cudnn_attention``, or, when no
fused backend accepts the inputs, ``_scaled_dot_product_attention_math`` — plain matmuls and a
softmax over the whole (sequence × sequence) score matrix.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from gpuwarden.traces.arrays import distinct_counts, distinct_inverse
from gpuwarden.traces.classify import attention_backend
from gpuwarden.traces.insights.view import RankView
from gpuwarden.traces.model import Category
from gpuwarden.types.trace_insights import KernelKind, SdpaBackend

if TYPE_CHECKING:
    from gpuwarden.types.trace_attention import AttentionReport

SDPA_OP = "aten::scaled_dot_product_attention"
# The backend ops SDPA dispatches to (forward; their backward ops follow the same choice).
BACKEND_OPS: dict[str, SdpaBackend] = {
    "aten::_scaled_dot_product_flash_attention": SdpaBackend.FLASH,
    "aten::_scaled_dot_product_flash_attention_for_cpu": SdpaBackend.FLASH,  # CPU tensors
    "aten::_scaled_dot_product_efficient_attention": SdpaBackend.EFFICIENT,
    "aten::_scaled_dot_product_cudnn_attention": SdpaBackend.CUDNN,
    "aten::_scaled_dot_product_attention_math": SdpaBackend.MATH,
    "aten::_scaled_dot_product_fused_attention_overrideable": SdpaBackend.OTHER_FUSED,
}

# What keeps SDPA off its fused backends (PyTorch sdp_utils.cpp checks): flash wants fp16/bf16
# and a head dim up to 256, memory-efficient a head dim multiple of 8 (4 in fp32), neither fp64.
# Restricted to one backend, SDPA warns "<backend> kernel not used because: ..." with each reason,
# then raises "No available kernel".
MATH_FIX = (
    "the SDPA math fallback ran (unfused matmuls and a softmax over the whole score matrix): "
    "make the attention inputs fit a fused backend (flash: fp16/bf16 and a head dim up to 256; "
    "memory-efficient: a head dim multiple of 8, 4 in fp32; neither takes fp64), and run one step "
    "inside torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION): PyTorch warns why that "
    "backend cannot run"
)


def _op_calls(view: RankView) -> tuple[int, dict[SdpaBackend, int]]:
    rank = view.rank
    wanted = {i: n for i, n in enumerate(rank.names) if n == SDPA_OP or n in BACKEND_OPS}
    if not wanted:
        return 0, {}
    cpu_op = rank.category == int(Category.CPU_OP)
    ids, counts = distinct_counts(rank.name_id[cpu_op])
    calls: dict[SdpaBackend, int] = {}
    sdpa = 0
    for i, n in zip(ids.tolist(), counts.tolist(), strict=True):
        name = wanted.get(i)
        if name == SDPA_OP:
            sdpa += n
        elif name is not None:
            backend = BACKEND_OPS[name]
            calls[backend] = calls.get(backend, 0) + n
    return sdpa, calls


def _kernel_times(view: RankView) -> dict[SdpaBackend, float]:
    rank = view.rank
    rows = np.flatnonzero(view.kinds == int(KernelKind.ATTENTION))
    if rows.size == 0:
        return {}
    ids, inverse = distinct_inverse(rank.name_id[rows])
    per_name = np.bincount(inverse, weights=rank.dur[rows], minlength=ids.size)
    out: dict[SdpaBackend, float] = {}
    for i, us in zip(ids.tolist(), per_name.tolist(), strict=True):
        backend = attention_backend(rank.names[int(i)])
        out[backend] = out.get(backend, 0.0) + float(us)
    return out


def attention(view: RankView) -> AttentionReport | None:
    """The attention backends of one rank; None when it has no SDPA op and no fused attention
    kernel."""
    sdpa, calls = _op_calls(view)
    kernel_us = _kernel_times(view)
    if not sdpa and not calls and not kernel_us:
        return None
    from gpuwarden.types.trace_attention import AttentionReport, SdpaBackendUse

    uses = [
        SdpaBackendUse(backend=b, calls=calls.get(b, 0), kernel_time_us=kernel_us.get(b, 0.0))
        for b in SdpaBackend
        if b in calls or b in kernel_us
    ]
    uses.sort(key=lambda u: (-u.calls, -u.kernel_time_us, u.backend))
    report = AttentionReport(sdpa_calls=sdpa, backends=tuple(uses), fix=None)
    return replace(report, fix=MATH_FIX) if report.math_calls else report
