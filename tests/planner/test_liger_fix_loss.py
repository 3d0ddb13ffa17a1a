"""The ``liger-kernels`` fix plans the loss Liger's own patch brings for the model's type.

Liger-Kernel's ``transformers/monkey_patch.py`` (@00218a06): every
``apply_liger_kernel_to_<type>`` defaults to ``fused_linear_cross_entropy=True`` except
``apply_liger_kernel_to_granite`` (``cross_entropy=True``, ``fused_linear_cross_entropy=False``:
granite scales its logits, so the fused loss raises NotImplementedError) and
``apply_liger_kernel_to_pixtral`` (a vision encoder's patch, no loss option).
``use_liger_kernel=True`` calls those functions with their defaults, so the fix's re-plan keeps
granite's full logits.
"""

from __future__ import annotations

import dataclasses

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import compute_plan, plan_memory
from gpuwarden.planner.liger import default_loss
from gpuwarden.types.plan import (
    Fix,
    Framework,
    Kernels,
    LossImpl,
    Mode,
    PlanRequest,
    Precision,
)

LIGER_FIX = "liger-kernels"


def _full_finetune(model: str) -> PlanRequest:
    """A transformers full fine-tune that does not fit one A100 80GB (the fixes are offered)."""
    return PlanRequest(
        model=resolve_model(model),
        gpu=resolve_gpu("A100 80GB"),
        mode=Mode.TRAIN,
        precision=Precision.BF16_MIXED,
        micro_batch=4,
        seq_len=4096,
        framework=Framework.HF,
    )


def _liger_fix(request: PlanRequest) -> Fix:
    plan = plan_memory(request)
    assert not plan.fits
    return next(f for f in plan.fixes if f.key == LIGER_FIX)


def test_the_granite_fix_keeps_the_full_logits_liger_uses() -> None:
    request = _full_finetune("granite-3.1-8b-instruct")
    assert request.model.model_type == "granite"
    fix = _liger_fix(request)
    assert fix.changes == {"kernels": "liger"}  # no fused loss: the loss stays "full"
    liger = compute_plan(dataclasses.replace(request, kernels=Kernels.LIGER, loss=LossImpl.FULL))
    assert fix.total_bytes == liger.peak_bytes
    fused = compute_plan(dataclasses.replace(request, kernels=Kernels.LIGER, loss=LossImpl.FUSED))
    assert fused.peak_bytes < liger.peak_bytes  # the old fix promised the fused loss's saving
    assert "linear cross-entropy" not in fix.description


def test_the_llama_fix_brings_the_fused_linear_cross_entropy() -> None:
    request = _full_finetune("Meta-Llama-3-8B")
    fix = _liger_fix(request)
    assert fix.changes == {"kernels": "liger", "loss": "fused"}
    liger = compute_plan(dataclasses.replace(request, kernels=Kernels.LIGER, loss=LossImpl.FUSED))
    assert fix.total_bytes == liger.peak_bytes
    assert "linear cross-entropy" in fix.description


def test_pixtral_patch_brings_no_loss() -> None:
    """apply_liger_kernel_to_pixtral has neither cross_entropy nor fused_linear_cross_entropy."""
    pixtral = dataclasses.replace(resolve_model("Meta-Llama-3-8B"), model_type="pixtral")
    assert default_loss(Kernels.LIGER, pixtral) is LossImpl.FULL
