"""Properties that must hold for any job (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    MemoryPlan,
    Mode,
    Optimizer,
    PlanRequest,
    Precision,
)

MODELS = ("Llama-3.2-1B", "Qwen2.5-0.5B", "Mistral-7B-v0.1", "Phi-3-mini-4k-instruct")
FAST = settings(max_examples=25, deadline=None)


def states(plan: MemoryPlan) -> int:
    return sum(plan.component(k) for k in ("parameters", "gradients", "optimizer_states"))


@FAST
@given(
    name=st.sampled_from(MODELS),
    exponent=st.integers(min_value=0, max_value=6),
    precision=st.sampled_from([Precision.BF16_MIXED, Precision.BF16, Precision.FP32]),
)
def test_more_gpus_under_zero3_never_increase_model_states(
    name: str, exponent: int, precision: Precision
) -> None:
    spec = resolve_model(name)
    fewer = plan_memory(
        PlanRequest(model=spec, zero_stage=3, num_gpus=2**exponent, precision=precision)
    )
    more = plan_memory(
        PlanRequest(model=spec, zero_stage=3, num_gpus=2 ** (exponent + 1), precision=precision)
    )
    assert states(more) <= states(fewer)


@FAST
@given(
    name=st.sampled_from(MODELS),
    batch=st.integers(min_value=1, max_value=8),
    seq=st.sampled_from([128, 512, 2048, 4096]),
    attention=st.sampled_from(list(Attention)),
    mode=st.sampled_from([Mode.TRAIN, Mode.LORA]),
)
def test_checkpointing_never_increases_activations(
    name: str, batch: int, seq: int, attention: Attention, mode: Mode
) -> None:
    def act(ckpt: Checkpointing) -> int:
        request = PlanRequest(
            model=resolve_model(name),
            mode=mode,
            micro_batch=batch,
            seq_len=seq,
            attention=attention,
            checkpointing=ckpt,
        )
        return plan_memory(request).component("activations")

    none, selective, full, op = (act(c) for c in Checkpointing)
    assert full <= selective <= none
    # torchtitan's op-level SAC keeps the block inputs and then some: between full and none
    assert full <= op <= none


@FAST
@given(
    name=st.sampled_from(MODELS),
    batch=st.integers(min_value=1, max_value=16),
    seq=st.sampled_from([256, 1024, 4096]),
    mode=st.sampled_from(list(Mode)),
    ckpt=st.sampled_from(list(Checkpointing)),
)
def test_bigger_batch_never_decreases_memory(
    name: str, batch: int, seq: int, mode: Mode, ckpt: Checkpointing
) -> None:
    precision = Precision.NF4 if mode is Mode.QLORA else Precision.BF16_MIXED

    def peak(b: int) -> int:
        request = PlanRequest(
            model=resolve_model(name),
            mode=mode,
            precision=precision,
            optimizer=Optimizer.NONE if mode is Mode.INFER else Optimizer.ADAMW,
            micro_batch=b,
            batch=b,
            seq_len=seq,
            prompt_tokens=seq,
            checkpointing=ckpt,
        )
        plan = plan_memory(request)
        assert plan.predicted.max_allocated_bytes <= plan.predicted.max_reserved_bytes
        assert plan.predicted.max_reserved_bytes <= plan.predicted.nvidia_smi_used_bytes
        return plan.peak_bytes

    assert peak(batch + 1) >= peak(batch)


@FAST
@given(
    name=st.sampled_from(MODELS),
    batch=st.integers(min_value=1, max_value=8),
    seq=st.sampled_from([1024, 4096, 8192]),
    gpus=st.sampled_from([1, 2, 8]),
    mode=st.sampled_from(list(Mode)),
    gpu=st.sampled_from(["T4", "L4", "A100 40GB"]),
)
def test_fixes_always_save_memory(
    name: str, batch: int, seq: int, gpus: int, mode: Mode, gpu: str
) -> None:
    request = PlanRequest(
        model=resolve_model(name),
        mode=mode,
        gpu=resolve_gpu(gpu),
        num_gpus=gpus,
        precision=Precision.NF4 if mode is Mode.QLORA else Precision.BF16_MIXED,
        optimizer=Optimizer.NONE if mode is Mode.INFER else Optimizer.ADAMW,
        micro_batch=batch,
        batch=batch,
        seq_len=seq,
        prompt_tokens=seq,
    )
    plan = plan_memory(request, gpus=[resolve_gpu(n) for n in ("A100 80GB", "H200")])
    if plan.fits:
        assert plan.fixes == ()
    for fix in plan.fixes:
        assert fix.saved_bytes > 0
        if fix.key != "bigger-gpu":  # capacity gained, not bytes saved
            assert fix.total_bytes < plan.peak_bytes or request.gpu_memory_utilization
