"""The OOM playbook: only fixes that apply, each re-planned (its savings and new verdict)."""

from __future__ import annotations

from gpuwarden.catalog import gpu_catalog, resolve_gpu, resolve_model
from gpuwarden.planner import compute_plan, plan_memory
from gpuwarden.types.plan import Checkpointing, Mode, Optimizer, PlanRequest, Precision


def test_llama_7b_full_finetune_on_a100_80gb() -> None:
    request = PlanRequest(
        model=resolve_model("Llama-2-7b-hf"), gpu=resolve_gpu("A100 80GB"), seq_len=4096
    )
    plan = plan_memory(request, gpus=gpu_catalog())
    assert plan.fits is False
    keys = [f.key for f in plan.fixes]
    # Single GPU: no ZeRO/FSDP/offload offered; the playbook's single-GPU levers are.
    assert {"activation-checkpointing", "8bit-optimizer", "lora", "qlora"} <= set(keys)
    assert not any(k.startswith(("zero", "fsdp", "offload")) for k in keys)
    assert "smaller-micro-batch" not in keys  # micro-batch is already 1
    # Fixes that fit come first; each one's numbers are a re-plan with its change.
    fits = [f.fits for f in plan.fixes if f.key != "bigger-gpu"]
    assert fits == sorted(fits, reverse=True)
    lora = next(f for f in plan.fixes if f.key == "lora")
    replanned = compute_plan(
        PlanRequest(
            model=request.model,
            gpu=request.gpu,
            seq_len=4096,
            mode=Mode.LORA,
            precision=Precision.BF16_MIXED,
        )
    )
    assert lora.total_bytes == replanned.peak_bytes
    assert lora.saved_bytes == plan.peak_bytes - replanned.peak_bytes
    bigger = next(f for f in plan.fixes if f.key == "bigger-gpu")
    assert bigger.fits and bigger.changes["gpu"] != request.gpu.key  # type: ignore[union-attr]


def test_sharding_fixes_need_several_gpus() -> None:
    request = PlanRequest(
        model=resolve_model("Llama-2-7b-hf"),
        gpu=resolve_gpu("A100 40GB"),
        num_gpus=8,
        seq_len=4096,
        checkpointing=Checkpointing.FULL,
    )
    plan = plan_memory(request)
    keys = {f.key for f in plan.fixes}
    assert {"zero-2", "zero-3", "fsdp-full"} <= keys
    zero3 = next(f for f in plan.fixes if f.key == "zero-3")
    assert zero3.fits is True and zero3.changes == {"zero_stage": "3"}


def test_no_fixes_when_it_fits_or_without_a_gpu() -> None:
    spec = resolve_model("Qwen2.5-0.5B")
    assert plan_memory(PlanRequest(model=spec, gpu=resolve_gpu("H100 80GB"))).fixes == ()
    unknown = plan_memory(PlanRequest(model=resolve_model("Llama-2-70b-hf")))
    assert unknown.fits is None and unknown.fixes == ()


def test_optimizer_fix_not_offered_for_8bit() -> None:
    request = PlanRequest(
        model=resolve_model("Llama-2-7b-hf"),
        gpu=resolve_gpu("L4"),
        optimizer=Optimizer.ADAMW_8BIT,
        precision=Precision.BF16,
    )
    assert "8bit-optimizer" not in {f.key for f in plan_memory(request).fixes}


def test_a_bigger_gpu_is_shown_as_room_gained_not_bytes_saved() -> None:
    from gpuwarden.report.plan import _saves
    from gpuwarden.units import GIB

    request = PlanRequest(model=resolve_model("Llama-2-7b-hf"), gpu=resolve_gpu("RTX 4090"))
    plan = plan_memory(request, gpus=gpu_catalog())
    bigger = next(f for f in plan.fixes if f.key == "bigger-gpu")
    gained = bigger.saved_bytes / GIB
    assert _saves(bigger) == f"+{gained:.2f} room"
    other = next(f for f in plan.fixes if f.key != "bigger-gpu")
    assert _saves(other) == f"{other.saved_bytes / GIB:.2f}"
