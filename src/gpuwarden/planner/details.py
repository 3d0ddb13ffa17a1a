"""The detail lines of the training components: what a user reads next to each number.

Kept apart from the arithmetic in ``training.py``: these only describe what it computed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwarden.planner.activations import Activations
from gpuwarden.planner.layout import Layout, StageParams
from gpuwarden.planner.loss import LossBuffers
from gpuwarden.planner.precision import Recipe, Stack
from gpuwarden.planner.quant_kernel import BNB_FIX, nf4_label
from gpuwarden.planner.quantization import format_label
from gpuwarden.types.plan import Checkpointing, PlanRequest, Precision
from gpuwarden.units import GIB, MIB

if TYPE_CHECKING:
    from gpuwarden.planner.training import ModelStates


def activation_detail(
    request: PlanRequest, act: Activations, lb: LossBuffers | None, casts: float
) -> str:
    parts = [f"{kind} {size / MIB:,.0f} MiB" for kind, size in act.per_layer.items()]
    text = "per block per micro-batch: " + ", ".join(parts)
    if request.checkpointing is Checkpointing.FULL:
        text += "; full checkpointing keeps block inputs, recomputes one block in backward"
    if request.checkpointing is Checkpointing.OP:
        text += (
            "; op-level SAC keeps block inputs, every other matmul's and SDPA's outputs, "
            "recomputes the rest (torchtitan)"
        )
    if act.in_flight > 1:
        text += f"; {act.in_flight:g} micro-batches in flight"
    if lb is not None and lb.saved:
        text += f"; loss keeps {lb.saved / GIB:.2f} GiB"
    if casts:
        fp8 = request.precision is Precision.FP8
        kind = "fp8 weight copies (Float8Linear)" if fp8 else "autocast weight casts"
        text += f"; {kind} {casts / GIB:.2f} GiB"
    if act.offloaded:
        text += f"; {act.offloaded / GIB:.2f} GiB offloaded to host"
    if act.kernel_saved or act.kernel_one_layer:
        full = request.checkpointing is Checkpointing.FULL
        kept = act.kernel_one_layer if full else act.kernel_saved
        text += (
            f"; of which {kept / GIB:.2f} GiB are 4-bit Linear inputs bitsandbytes < 0.43.2 keeps"
            + (" in the recomputed block" if full else "")
            + f" (MatMul4Bit ctx.tensors = (A, B); dropped by {BNB_FIX})"
        )
    return text


def gradient_detail(request: PlanRequest, rc: Recipe, lay: Layout, trainable: float) -> str:
    """Bytes per trainable parameter the gradients component holds at its peak, and why."""
    sharded = f", sharded over {lay.grad_shard}" if lay.grad_shard > 1 else ""
    if rc.stack is Stack.DEEPSPEED and request.zero_stage >= 3 and rc.grad32_bytes:
        # one partition or the other (see step_grads): the larger is the component's peak
        return (
            f"{int(trainable):,} trainable × {max(rc.grad_bytes, rc.grad32_bytes):g} B{sharded}: "
            f"the {rc.grad_bytes:g} B partition through backward, converted to the fp32 "
            f"{rc.grad32_bytes:g} B partition at the step (one at a time)"
        )
    copy = f" + fp32 copy {rc.grad32_bytes:g} B" if rc.grad32_bytes else ""
    return f"{int(trainable):,} trainable × {rc.grad_bytes:g} B{copy}{sharded}"


def parameter_detail(
    request: PlanRequest, rc: Recipe, lay: Layout, sp: StageParams, st: ModelStates
) -> str:
    quantized = rc.linear_bytes != rc.weight_bytes
    return (
        f"{int(sp.total + st.adapters_local):,} params on this GPU"
        + (f" / {lay.param_shard} shards" if lay.param_shard > 1 else "")
        + (
            f"; Linear weights at {rc.linear_bytes:.5g} B"
            + (nf4_label(request) or format_label(request))
            if quantized
            else ""
        )
        + ("; offloaded to host" if st.offload_params else "")
        + (
            f"; bitsandbytes quantization state {st.replicated / GIB:.2f} GiB whole on each GPU "
            "(not sharded or offloaded)"
            if st.replicated and (st.offload_params or lay.param_shard > 1)
            else ""
        )
    )
