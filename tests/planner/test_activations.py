"""Saved activations against traced HF models (memory.md §2.5, §5.2; traces of transformers 5.23).

Reference values are bytes that autograd keeps for backward, counted as unique storages under
FakeTensorMode (memory.md §5.1) with transformers 5.23 and torch 2.13 on CPU, for the forward of
``model(ids, labels=ids)`` — so they include the fp32 log-softmax the HF loss keeps.
"""

from __future__ import annotations

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.planner import plan_memory
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Attention, Checkpointing, Mode, Optimizer, PlanRequest, Precision
from gpuwarden.units import GIB

SMALL_LLAMA = {  # memory.md §5.2: the small Llama of the tracing experiments
    "model_type": "llama",
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 2816,
    "vocab_size": 32000,
}


def saved(spec: ModelSpec, **knobs: object) -> int:
    request = PlanRequest(model=spec, **knobs)  # type: ignore[arg-type]
    return plan_memory(request).component("activations")


def test_llama2_7b_and_70b_match_the_hf_trace_table() -> None:
    # memory.md §2.5 table: bf16, b=1, s=4096, SDPA — 23.382 GiB and 122.071 GiB.
    for name, gib in (("Llama-2-7b-hf", 23.382), ("Llama-2-70b-hf", 122.071)):
        got = saved(resolve_model(name), precision=Precision.BF16, seq_len=4096)
        assert got / GIB == pytest.approx(gib, abs=5e-4)


@pytest.mark.parametrize(
    ("overrides", "knobs", "traced"),
    [
        # memory.md §5.2, real CPU runs = FakeTensorMode, "verified to ±12 bytes"
        ({}, {"precision": Precision.BF16, "seq_len": 512}, 263_104_524),
        (
            {},
            {"precision": Precision.BF16, "seq_len": 512, "attention": Attention.EAGER},
            464_168_972,
        ),
        ({}, {"precision": Precision.FP32, "seq_len": 512}, 424_716_300),
        # fp32 weights + autocast(bf16): the bf16 weight casts are saved by the matmuls
        ({}, {"precision": Precision.BF16_MIXED, "seq_len": 512}, 577_284_108),
        ({"num_key_value_heads": 4}, {"precision": Precision.BF16, "seq_len": 512}, 250_521_612),
        ({}, {"precision": Precision.BF16, "seq_len": 1024, "micro_batch": 2}, 1_052_155_908),
    ],
)
def test_small_llama_matches_memory_md_traces(
    overrides: dict[str, int], knobs: dict[str, object], traced: int
) -> None:
    spec = normalise("small-llama", {**SMALL_LLAMA, **overrides}, "memory.md §5.2")
    assert abs(saved(spec, **{"attention": Attention.SDPA, **knobs}) - traced) <= 16


@pytest.mark.parametrize(
    ("name", "batch", "seq", "traced"),
    [
        # traced with transformers 5.23 / torch 2.13, SDPA, bf16 (FakeTensorMode, memory.md §5.1),
        # training settings: use_cache=False, unpacked batch
        ("Meta-Llama-3-8B", 2, 2048, 28_561_195_012),
        ("Qwen2.5-7B", 1, 4096, 28_461_711_372),
        # s reaches the 4096 window: SDPA gets an additive mask per block and HF expands the
        # GQA K/V with repeat_kv (CUDA SDPA cannot mask and group at once)
        ("Mistral-7B-v0.1", 1, 4096, 29_669_539_852),
        # Phi-3: window 2047 (mask per block), a copied o_proj input (RoPE built by cat), and
        # the fused qkv output kept whole (v is a view of it when no KV cache is used)
        ("Phi-3-mini-4k-instruct", 2, 2048, 21_851_095_044),
        # MoE: transformers 5 grouped_mm experts, top-2 of 8
        ("Mixtral-8x7B-v0.1", 1, 512, 5_790_968_844),
    ],
)
def test_families_match_their_hf_traces(name: str, batch: int, seq: int, traced: int) -> None:
    got = saved(
        resolve_model(name),
        precision=Precision.BF16,
        micro_batch=batch,
        seq_len=seq,
        attention=Attention.SDPA,
    )
    assert got == pytest.approx(traced, rel=1e-4)


def test_peft_lora_under_autocast_keeps_bf16_input_copies_per_adapter() -> None:
    # Exact trace (run_exact's counting), transformers 5.23 + PEFT 0.21.2: fp32 adapters on a
    # bf16 base under bf16 autocast (HF Trainer bf16=True), Llama h=512, i=1376, 8 heads / 2 KV
    # heads, s=128, b=2; bytes per token of one block: full fine-tuning 21800, LoRA r=8 on q,v
    # 17136, LoRA r=8 on every Linear 24522. Each adapter keeps its own bf16 copy of its input,
    # its bf16 lora_A output, and bf16 casts of its A and B weights (per block, over 256 tokens).
    cfg = {
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
    }
    one = normalise("tiny", {**cfg, "num_hidden_layers": 1}, "test")
    two = normalise("tiny", {**cfg, "num_hidden_layers": 2}, "test")
    tokens = 256

    def per_block(**knobs: object) -> float:
        base = {"seq_len": 128, "micro_batch": 2, "attention": Attention.SDPA, **knobs}
        return (saved(two, **base) - saved(one, **base)) / tokens

    assert per_block(precision=Precision.BF16) == 21800
    lora = {"mode": Mode.LORA, "precision": Precision.BF16_MIXED}
    assert per_block(**lora, lora_targets=("q_proj", "v_proj")) == 17136
    assert per_block(**lora, lora_targets=("all-linear",)) == 24522


def test_full_checkpointing_keeps_block_inputs_and_recomputes_one_block() -> None:
    # memory.md §5.4, MemTracker: Llama-2-7B, s=4096, grad ckpt → ACT 0.708 GiB at the peak.
    spec = resolve_model("Llama-2-7b-hf")
    plan = plan_memory(
        PlanRequest(
            model=spec,
            precision=Precision.BF16,
            seq_len=4096,
            checkpointing=Checkpointing.FULL,
            optimizer=Optimizer.NONE,
        )
    )
    assert plan.peak_phase == "backward-end"
    assert plan.at_peak()["activations"] / GIB == pytest.approx(0.708, rel=0.01)


def _peft_block_bytes(precision: Precision, targets: tuple[str, ...], dropout: float) -> float:
    """Bytes per token one block of the tiny Llama below saves under LoRA r=8, s=128, b=2."""
    cfg = {
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 1376,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
    }
    one = normalise("tiny", {**cfg, "num_hidden_layers": 1}, "test")
    two = normalise("tiny", {**cfg, "num_hidden_layers": 2}, "test")
    knobs = {
        "mode": Mode.LORA,
        "precision": precision,
        "seq_len": 128,
        "micro_batch": 2,
        "attention": Attention.SDPA,
        "lora_targets": targets,
        "lora_dropout": dropout,
    }
    return (saved(two, **knobs) - saved(one, **knobs)) / 256


@pytest.mark.parametrize(
    ("targets", "dropout", "traced"),
    [
        (("q_proj", "v_proj"), 0.0, 19112),
        (("q_proj", "v_proj"), 0.1, 20136),
        (("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), 0.0, 32968),
        (("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), 0.1, 37416),
    ],
)
def test_peft_fp32_adapters_on_a_pure_bf16_base_compute_in_fp32(
    targets: tuple[str, ...], dropout: float, traced: int
) -> None:
    # Exact trace (run_exact's counting, CUDA's dropout), transformers 5.24 + PEFT 0.21.2,
    # get_peft_model's default autocast_adapter_dtype=True on a bf16 Llama, no autocast: each
    # adapter keeps an fp32 cast of its input (4·in B; with dropout the fp32 dropped copy and a
    # bool mask, 5·in B) and its fp32 lora_A output (4·r B), where bf16 adapters without dropout
    # would read the Linear's own input.
    assert _peft_block_bytes(Precision.BF16, targets, dropout) == traced
