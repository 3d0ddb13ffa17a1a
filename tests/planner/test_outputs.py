"""What a step's outputs hold (planner/outputs.py) and an encoder-decoder's label length, checked
against exact mode's MemTracker on small real configs."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    MemoryPlan,
    Mode,
    PlanRequest,
    Precision,
    TrainLoop,
)


def small_llama() -> ModelSpec:
    raw = dict(resolve_model("Llama-3.2-1B").raw_config)
    small = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2}
    small |= {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64}
    return normalise("small-llama", {**raw, **small, "vocab_size": 4096}, "small Llama-3.2-1B")


def small_t5() -> ModelSpec:
    raw = dict(resolve_model("T0_3B").raw_config)
    small = {"d_model": 128, "d_ff": 512, "d_kv": 32, "num_heads": 4}
    small |= {"num_layers": 2, "num_decoder_layers": 2, "vocab_size": 2048}
    return normalise("small-t5", {**raw, **small}, "small T0_3B")


def t5_lora(target_len: int | None = None) -> PlanRequest:
    """T0_3B's shapes, small: LoRA on q, v, fp32, eager (the PEFT seq2seq example's setup)."""
    return PlanRequest(
        model=small_t5(),
        mode=Mode.LORA,
        lora_targets=("q", "v"),
        precision=Precision.FP32,
        attention=Attention.EAGER,
        micro_batch=2,
        seq_len=48,
        target_len=target_len,
    )


def held(plan: MemoryPlan, phase: str) -> int:
    return next(p.bytes_by_component.get("held_outputs", 0) for p in plan.phases if p.name == phase)


def test_trainer_loop_holds_nothing_and_script_loop_holds_logits_and_cache() -> None:
    spec = small_llama()
    request = PlanRequest(
        model=spec, precision=Precision.BF16, micro_batch=2, seq_len=64, use_cache=True
    )
    assert all(held(plan_memory(request), p) == 0 for p in ("forward", "optimizer-step"))
    script = plan_memory(dataclasses.replace(request, loop=TrainLoop.SCRIPT))
    tokens = 2 * 64
    logits = tokens * spec.vocab_size * 2
    cache = spec.num_layers * 2 * tokens * spec.kv_width * 2
    assert held(script, "forward") == logits + cache  # the previous step's
    assert held(script, "backward") == logits  # the cache's K/V are saved tensors here
    assert held(script, "optimizer-step") == logits + cache
    # gradient checkpointing turns use_cache off, and so does the config: the logits only
    ckpt = dataclasses.replace(request, loop=TrainLoop.SCRIPT, checkpointing=Checkpointing.FULL)
    assert held(plan_memory(ckpt), "forward") == logits
    off = dataclasses.replace(request, loop=TrainLoop.SCRIPT, use_cache=False)
    assert held(plan_memory(off), "forward") == logits


@pytest.mark.torch
@pytest.mark.parametrize("model", ["llama", "t5"])
def test_script_loop_holds_what_memtracker_holds(model: str) -> None:
    """exact mode runs a step after a step whose outputs are still bound: the forward's peak
    rises by what the formula says the previous outputs hold (logits + KV cache, and an
    encoder-decoder's cross-attention K/V over the encoder's tokens)."""
    pytest.importorskip("transformers")
    from gpuwarden.planner.exact import run_exact

    if model == "llama":
        request = PlanRequest(
            model=small_llama(),
            precision=Precision.BF16,
            attention=Attention.SDPA,
            seq_len=64,
            use_cache=True,
        )
    else:
        request = dataclasses.replace(t5_lora(target_len=5), use_cache=True)
    script = dataclasses.replace(request, loop=TrainLoop.SCRIPT)
    traced = run_exact(script).phase_peaks["forward"] - run_exact(request).phase_peaks["forward"]
    predicted = held(plan_memory(script), "forward")
    assert predicted == traced


@pytest.mark.torch
def test_target_len_shrinks_the_decoder_as_the_trace_does() -> None:
    """Labels of 5 tokens instead of 48: the formula's activations fall by what exact mode's
    saved tensors fall (T5's formula is within a few % of the trace; the change is what counts)."""
    pytest.importorskip("transformers")
    from gpuwarden.planner.exact import run_exact

    request = t5_lora()
    short = t5_lora(target_len=5)

    def formula(r: PlanRequest) -> int:
        return next(c.bytes for c in plan_memory(r).components if c.key == "activations")

    traced = run_exact(request).saved_activation_bytes - run_exact(short).saved_activation_bytes
    assert formula(request) - formula(short) == pytest.approx(traced, rel=0.08)
    assert formula(short) < formula(request)


def test_target_len_needs_an_encoder_decoder() -> None:
    request = PlanRequest(model=small_llama(), target_len=8)
    with pytest.raises(InvalidConfigError) as info:
        plan_memory(request)
    assert info.value.reference == "target-len-needs-encoder-decoder"
    with pytest.raises(InvalidConfigError):
        plan_memory(PlanRequest(model=small_t5(), target_len=0))


@pytest.mark.torch
def test_exact_mode_keeps_dropout_masks_as_cuda_does() -> None:
    """GPT-2 trains with dropout 0.1 everywhere. CUDA's dropout keeps a 1-byte mask per element;
    CPU's would keep an fp32 noise tensor. Exact mode, on CPU, must count the mask, as the
    formula does."""
    pytest.importorskip("transformers")
    from gpuwarden.planner.exact import run_exact

    raw = dict(resolve_model("gpt2").raw_config)
    small = normalise("small-gpt2", {**raw, "n_layer": 2, "n_embd": 128, "n_head": 4}, "gpt2")
    request = PlanRequest(
        model=small, precision=Precision.FP32, attention=Attention.EAGER, seq_len=64
    )
    activations = next(c.bytes for c in plan_memory(request).components if c.key == "activations")
    assert run_exact(request).saved_activation_bytes == pytest.approx(activations, rel=1e-4)


def test_training_only_knobs_warn_in_inference() -> None:
    request = PlanRequest(model=small_t5(), mode=Mode.INFER, target_len=4, loop=TrainLoop.SCRIPT)
    assert any("--target-len and --loop" in w for w in plan_memory(request).warnings)
    assert not any("--loop" in w for w in plan_memory(PlanRequest(model=small_t5())).warnings)


def forward_kv(request: PlanRequest) -> int:
    plan = plan_memory(request)
    return next(p.bytes_by_component.get("kv_cache", 0) for p in plan.phases if p.name == "forward")


@pytest.mark.torch
@pytest.mark.parametrize("attention", [Attention.EAGER, Attention.SDPA])
def test_training_kv_cache_adds_what_memtracker_adds(attention: Attention) -> None:
    """use_cache=True (transformers' default): eager attention keeps per-head copies of the
    grouped K/V, so the cache's grouped K/V are extra at the end of the forward; SDPA takes the
    grouped K/V, which the cache shares."""
    pytest.importorskip("transformers")
    from gpuwarden.planner.exact import run_exact

    request = PlanRequest(
        model=small_llama(), precision=Precision.BF16, attention=attention, seq_len=64
    )
    cached = dataclasses.replace(request, use_cache=True)
    traced = run_exact(cached).phase_peaks["forward"] - run_exact(request).phase_peaks["forward"]
    assert forward_kv(cached) == traced
    assert forward_kv(request) == 0
    grouped = 2 * 2 * 64 * small_llama().kv_width * 2  # 2 layers × K, V × 64 tokens × bf16
    assert traced == (grouped if attention is Attention.EAGER else 0)
