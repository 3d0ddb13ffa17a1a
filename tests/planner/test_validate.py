"""Impossible settings raise InvalidConfigError naming value and constraint; no-ops warn."""

from __future__ import annotations

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import FsdpKind, Mode, Offload, PlanRequest, Precision


def request(name: str = "Llama-2-7b-hf", **knobs: object) -> PlanRequest:
    return PlanRequest(model=resolve_model(name), **knobs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "knobs", "reference", "words"),
    [
        ("Llama-2-7b-hf", {"tp": 3, "num_gpus": 3}, "tp-heads-mismatch", "32 attention heads"),
        ("Qwen2.5-7B", {"tp": 7, "num_gpus": 7}, "tp-kv-heads-mismatch", "4 KV heads"),
        ("Llama-2-7b-hf", {"pp": 33, "num_gpus": 33}, "pp-exceeds-layers", "32 layers"),
        ("Llama-2-7b-hf", {"tp": 2}, "parallelism-mismatch", "does not divide"),
        ("Llama-2-7b-hf", {"mode": Mode.QLORA}, "qlora-needs-4bit-base", "bf16-mixed"),
        ("Llama-2-7b-hf", {"precision": Precision.NF4}, "quantized-full-training", "nf4"),
        ("Llama-2-7b-hf", {"micro_batch": 0}, "value-out-of-range", "micro_batch"),
        ("Llama-2-7b-hf", {"seq_len": -1}, "value-out-of-range", "seq_len"),
        ("Llama-2-7b-hf", {"ep": 2, "num_gpus": 2}, "ep-without-experts", "no experts"),
        ("Mixtral-8x7B-v0.1", {"ep": 3, "num_gpus": 3}, "ep-experts-mismatch", "8 experts"),
        ("Llama-2-7b-hf", {"offload": Offload.OPTIMIZER}, "invalid-config", "ZeRO or FSDP"),
        ("Llama-2-7b-hf", {"zero_stage": 2, "fsdp": FsdpKind.FULL}, "invalid-config", "FSDP"),
        ("Llama-2-7b-hf", {"zero_stage": 4}, "value-out-of-range", "zero_stage"),
        (
            "Llama-2-7b-hf",
            {"mode": Mode.LORA, "lora_targets": ("q",)},
            "lora-targets-unknown",
            "q_proj",
        ),
        (
            "Llama-2-7b-hf",
            {"mode": Mode.INFER, "gpu_memory_utilization": 1.5},
            "value-out-of-range",
            "1.5",
        ),
        (
            "Llama-2-7b-hf",
            {"optimizer_in_backward": True, "grad_accum": 4},
            "invalid-config",
            "grad_accum=4",
        ),
    ],
)
def test_impossible_settings(
    name: str, knobs: dict[str, object], reference: str, words: str
) -> None:
    with pytest.raises(InvalidConfigError) as info:
        plan_memory(request(name, **knobs))
    assert info.value.reference == reference
    assert words in f"{info.value.message} {info.value.hint}"
    assert info.value.hint
    assert info.value.exit_code == 2


def test_zero_on_one_gpu_is_a_warning() -> None:
    plan = plan_memory(request(zero_stage=2))
    assert any("no-op" in w for w in plan.warnings)


def test_tp_may_replicate_kv_heads() -> None:
    # 64 heads, 8 KV heads: tp=16 splits queries and replicates KV heads (memory.md §2.6).
    plan_memory(request("Llama-2-70b-hf", tp=16, num_gpus=16))
