"""Liger-Kernel (linkedin/Liger-Kernel): what its kernels keep for backward, from their code.

``--kernels liger`` plans a transformers model patched by Liger's
``apply_liger_kernel_to_<model_type>()`` with its defaults (``MODEL_TYPE_TO_APPLY_LIGER_FN``;
the HF Trainer's ``use_liger_kernel=True`` and ``AutoLigerKernelForCausalLM`` call the same
functions). Read in ``src/liger_kernel/ops/`` and ``transformers/monkey_patch.py`` at
linkedin/Liger-Kernel @05dd1f98 (2024-08), @43c5fe1b (2024-09), @7ff9e2ea (2024-09, the
monkey_patch of the HF example's logs) and @00eba634 (2026):

* ``LigerRMSNormFunction.forward`` saves ``(X, W, RSTD)``: the input as it comes (a view, no
  fp32 copy) and one inverse RMS per row (fp32 under the "llama" / "gemma" casting modes; the
  input dtype at @05dd1f98, one value per row either way). No normalised copy, no fp32 input:
  the same two tensors a fused norm keeps (``tensors.Ctx.fused_norms``). Its backward stores dX
  into dY ("we use dY to store the value of dX to save memory"): no fp32 norm gradient.
* ``LigerSiLUMulFunction`` / ``LigerGELUMulFunction`` (``swiglu.py``, ``geglu.py``) save
  ``(a, b)``, the gate and up projections' outputs, and recompute the activation in backward
  ("recomputation to save memory"): no activation output kept (``tensors.Ctx.fused_glu``). The
  backward kernel writes da and db into a and b (``tl.store(a_ptr ...)``): of the gated
  product's gradients only dc, the product's, is a new tensor.
* ``LigerRopeFunction`` rotates q and k in place and saves ``(cos, sin)``, as transformers'
  ``q * cos + rotate_half(q) * sin`` saves only the tables: no change to what a block keeps.
* ``LigerLayerNormFunction`` saves ``(X, W, B, Mean, RSTD)``, what ``native_layer_norm`` keeps.
* ``LigerFusedLinearCrossEntropyFunction`` (``fused_linear_cross_entropy.py``) computes the
  gradients in forward and saves them for backward: ``grad_input = torch.zeros_like(_input)``
  (every scored row × hidden, the hidden states' dtype) and ``grad_weight =
  torch.zeros_like(weight)`` (the head's vocabulary × hidden, the weight's dtype as the
  forward sees it) when the head trains; its backward allocates nothing (``grad_output`` is 1:
  the saved tensors are returned). In forward one logits chunk of ``flce_chunk_rows`` rows
  (``inc_factor = cdiv(V, H)``, ``next_power_of_2(cdiv(BT, inc_factor))`` rows, "approximately
  BT x H elements", capped at BT from @00eba634) and an fp32 loss per row; Liger's
  ``lce_forward`` passes it ``hidden_states[..., :-1, :].contiguous()``, a copy of the hidden
  states alive while the loss runs. (``loss.py``)

Liger's Gemma 2 and Mixtral patches of 2024 take ``LigerCrossEntropyLoss`` on the full logits
instead of the fused loss; ``--loss`` still says which loss runs.
"""

from __future__ import annotations

import math

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.weight_formats import FP32_BYTES
from gpuwarden.types.model import LayerParameters, ModelSpec, Structure
from gpuwarden.types.plan import Framework, Kernels, LossImpl, Mode, PlanRequest

# The stacks whose model Liger's monkey patch reaches: transformers' modeling classes.
PATCHED_FRAMEWORKS = frozenset({Framework.HF, Framework.HF_LEGACY})
# i-wide gradients a Liger MLP's backward allocates at its peak: dc only (da, db are written into
# the saved a, b); transformers' MulBackward makes three (working_set.GATED_PRODUCT_GRADS)
LIGER_GATED_PRODUCT_GRADS = 1
# where one Linear projects gate and up together (LigerPhi3SwiGLUMLP: gate_up_proj, then
# chunk(2)), the chunk's backward concatenates da and db into one new 2·i gradient
LIGER_FUSED_GATE_UP_GRADS = 2
# Gradients of the widest saved tensors alive at once in a Liger block's backward: one, where
# transformers' modules hold two (activations._grad_working).
LIGER_WIDEST_GRADS = 1
LOSS_ROW_BYTES = FP32_BYTES  # loss_1d: one fp32 loss per row while the forward runs


# The model types Liger has a patch for: the keys of MODEL_TYPE_TO_APPLY_LIGER_FN
# (transformers/monkey_patch.py @00218a06, 2026); for any other type _apply_liger_kernel logs
# "There are currently no Liger kernels supported for model type" and the model runs its own
# modules. Every one is a decoder (a causal LM, or the text decoder of a vision-language model).
LIGER_MODEL_TYPES = frozenset(
    {
        *("deepseek_v3", "deepseek_v4", "exaone4", "falcon_h1", "glm4", "glm4v", "glm4v_moe"),
        *("gemma", "gemma2", "gemma3", "gemma3_text", "gemma4", "gemma4_text", "gpt_oss"),
        *("granite", "hunyuan_v1_dense", "hunyuan_v1_moe", "internvl", "llama", "llama4"),
        *("llama4_text", "llava", "ministral", "mistral", "mixtral", "mllama"),
        *("mllama_text_model", "muse_glimmer", "nemotron", "olmo2", "olmo3", "paligemma"),
        *("phi3", "pixtral", "qwen2", "qwen2_5_vl", "qwen2_5_vl_text", "qwen2_vl"),
        *("qwen2_vl_text", "qwen3", "qwen3_5", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_5_text"),
        *("qwen3_moe", "qwen3_next", "qwen3_vl", "qwen3_vl_moe", "qwen3_vl_moe_text"),
        *("qwen3_vl_text", "smollm3", "smolvlm"),
    }
)
# The types whose Liger patch leaves the loss on the full logits (monkey_patch.py @00218a06;
# every other apply_liger_kernel_to_* defaults to fused_linear_cross_entropy=True):
# apply_liger_kernel_to_granite defaults to Liger's cross-entropy (granite scales its logits in
# forward, so the fused loss raises NotImplementedError); apply_liger_kernel_to_pixtral, a
# vision encoder's patch, has no loss option at all.
LIGER_FULL_LOGITS = frozenset({"granite", "pixtral"})


def runs_liger(request: PlanRequest) -> bool:
    """The job trains a model whose modules Liger's kernels replace."""
    return request.kernels is Kernels.LIGER and request.mode is not Mode.INFER


def patches_model(spec: ModelSpec) -> bool:
    """Liger has a patch for the model's type (``LIGER_MODEL_TYPES``), a decoder."""
    return spec.model_type in LIGER_MODEL_TYPES and spec.structure is Structure.DECODER


def default_loss(kernels: Kernels, spec: ModelSpec) -> LossImpl:
    """The loss a job runs when --loss is not given: Liger's patch brings its fused linear
    cross-entropy (its default for every type but those of ``LIGER_FULL_LOGITS``); the model's
    own, the full one."""
    if kernels is Kernels.LIGER and spec.model_type not in LIGER_FULL_LOGITS:
        return LossImpl.FUSED
    return LossImpl.FULL


def gated_product_grads(layer: LayerParameters, intermediate: int) -> int:
    """i-wide gradients a Liger gated MLP's backward holds at its peak (its gate and up
    projections apart, or fused in one Linear whose output is chunked)."""
    fused = any(
        lin.part == "mlp" and not lin.expert and lin.out_features == 2 * intermediate
        for lin in layer.linears
    )
    return LIGER_FUSED_GATE_UP_GRADS if fused else LIGER_GATED_PRODUCT_GRADS


def flce_chunk_rows(rows: int, vocab: float, hidden: int) -> int:
    """Rows of the logits chunk Liger's fused linear cross-entropy holds at once: the tokens
    split into ``cdiv(V, H)`` parts, rounded up to a power of two, never more than the rows
    (``fused_linear_cross_entropy_forward``; the slice ``_input[start:end]`` caps it in the
    versions before @00eba634's explicit ``min(chunk_size, BT)``)."""
    if rows <= 0:
        return 0
    inc_factor = max(1, math.ceil(vocab / hidden))
    per_part = math.ceil(rows / inc_factor)
    return min(1 << (per_part - 1).bit_length(), rows)


def check_kernels(request: PlanRequest) -> list[str]:
    """Refuse Liger where its patch cannot reach the model; warnings for where it does nothing."""
    if request.kernels is not Kernels.LIGER:
        return []
    if request.framework not in PATCHED_FRAMEWORKS:
        raise InvalidConfigError(
            f"--kernels liger patches transformers' modeling classes; --framework "
            f"{request.framework.value} runs its own modules",
            hint="drop --kernels liger, or plan the transformers model (--framework hf or "
            "hf-legacy)",
            reference="liger-framework",
        )
    if not patches_model(request.model):
        raise InvalidConfigError(
            f"--kernels liger: Liger-Kernel has no patch for model type "
            f"{request.model.model_type} ({request.model.structure.value}): the model would run "
            "its own modules",
            hint="drop --kernels liger for this model (Liger's MODEL_TYPE_TO_APPLY_LIGER_FN lists "
            "the types it patches)",
            reference="liger-model",
        )
    if request.mode is Mode.INFER:
        return ["--kernels liger is planned for training only; inference is planned as is"]
    return []


def kernel_notes(request: PlanRequest) -> dict[str, str]:
    """The plan's line on the kernels, where Liger's replace the model's own."""
    if not runs_liger(request):
        return {}
    return {
        "kernels": "Liger-Kernel: RMSNorm keeps its input and an fp32 rstd per row, SwiGLU / "
        "GeGLU the gate and up outputs (activation recomputed, gradients written in place), RoPE "
        "rotates q and k in place"
        + ("; fused linear cross-entropy" if request.loss is LossImpl.FUSED else "")
    }


def offers_liger(request: PlanRequest) -> bool:
    """A training job Liger's patch could reach that does not run it yet (a fix to offer)."""
    return (
        request.kernels is Kernels.NONE
        and request.mode is not Mode.INFER
        and request.framework in PATCHED_FRAMEWORKS
        and patches_model(request.model)
        and request.loss in {LossImpl.FULL, LossImpl.FUSED}
    )
