"""bitsandbytes < 0.43.2's 4-bit matmul, reproduced on the bf16 stand-in (imports torch).

``MatMul4Bit.forward`` kept its input ``A`` for backward whenever ``A`` or the weight needed a
gradient (``ctx.tensors = (A, B)``), although the frozen 4-bit weight never gets one and
``∂L/∂A = ∂L/∂out · dequant(B)`` does not read ``A``; bitsandbytes PR #1270 (0.43.2) dropped it.
The function below does the same through ``save_for_backward``, so the saved-tensor count and
MemTracker see what the old kernel kept. The weight is saved too, as bitsandbytes saved ``B``: it
is a parameter, so it adds no bytes.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 (torch's own convention)
from torch import nn


class LegacyMatMul4Bit(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, a: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        if any(ctx.needs_input_grad[:2]):
            ctx.save_for_backward(a, weight)
        else:
            ctx.save_for_backward(None, weight)
        return F.linear(a, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        _, weight = ctx.saved_tensors
        grad_a = grad_out @ weight.to(grad_out.dtype) if ctx.needs_input_grad[0] else None
        return grad_a, None, None


def _legacy_forward(module: nn.Linear) -> Any:
    apply: Any = LegacyMatMul4Bit.apply  # untyped upstream

    def forward(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = apply(x, module.weight, module.bias)
        return out

    return forward


def keep_linear_inputs(model: nn.Module) -> int:
    """Give every frozen-base ``nn.Linear`` but the output head the legacy 4-bit matmul; returns
    how many (the same Linears ``_build._quantized_saving`` prices as 4-bit)."""
    output_embeddings: Any = getattr(model, "get_output_embeddings", None)
    head = output_embeddings() if output_embeddings is not None else None
    head_weight = getattr(head, "weight", None)
    count = 0
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.weight is not head_weight:
            module.forward = _legacy_forward(module)  # type: ignore[method-assign]
            count += 1
    return count
