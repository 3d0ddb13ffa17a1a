"""Held-out batch 24 (benchmarks/data/validation.csv V480-V482): Axolotl's own printed memory read
against the planner.

Axolotl's ``log_gpu_memory_usage`` (src/axolotl/utils/bench.py, read at @74189367 and @079671b8)
prints "memory usage {msg}: X GB (+Y GB cache, +Z GB misc)" with X = torch.cuda.memory_allocated
/ 2**30 to three decimals, Y = reserved - allocated and Z = nvidia-smi used - reserved. The
"after model load" line holds the loaded weights only (no batch has run) and "after adapters" adds
the PEFT adapters, so the two lines check the planner's ``parameters`` component directly: the
base weights at the load dtype and the LoRA weights, which PEFT keeps in float32."""

from __future__ import annotations

from pathlib import Path

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import Framework, MemoryPlan, Mode, PlanRequest, Precision

GIB = 2**30
ADAPTER_BYTES_PER_PARAMETER = 4  # PEFT creates the LoRA weights in float32
BF16_BYTES = 2
AXOLOTL_CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "axolotl_configs"

# axolotl-ai-cloud/axolotl PR #2608 (2025-05-19), NousResearch/Llama-3.2-1B LoRA on one GPU
PR2608_AFTER_LOAD_GIB = 2.313
PR2608_AFTER_ADAPTERS_GIB = 2.355
PR2608_TRAINABLE = 11_272_192
PR2608_ALL_PARAMS = 1_247_086_592


def _printed(nbytes: float) -> float:
    """What log_gpu_memory_usage prints for ``nbytes`` allocated."""
    return round(nbytes / GIB, 3)


def _lora_plan(model: str, rank: int, targets: tuple[str, ...]) -> MemoryPlan:
    return plan_memory(
        PlanRequest(
            model=resolve_model(model),
            mode=Mode.LORA,
            precision=Precision.BF16,
            load_dtype="bf16",
            micro_batch=1,
            seq_len=128,
            framework=Framework.HF_LEGACY,
            lora_rank=rank,
            lora_targets=targets,
        )
    )


def test_llama32_1b_adapter_line_is_the_float32_adapters() -> None:
    # PR #2608's log: "cuda memory usage after model load: 2.313GB", "trainable params:
    # 11,272,192 || all params: 1,247,086,592", "cuda memory usage after adapters: 2.355GB".
    # Rank 16 on every Linear but the head gives exactly the printed count (Axolotl's
    # lora_target_linear), so the planner's adapter is the one the run built.
    plan = _lora_plan("Llama-3.2-1B", 16, ("all-linear",))
    assert plan.trainable_parameters == PR2608_TRAINABLE
    assert plan.total_parameters == PR2608_ALL_PARAMS - PR2608_TRAINABLE
    base_bytes = plan.total_parameters * BF16_BYTES
    adapter_bytes = plan.component("parameters") - base_bytes
    assert adapter_bytes == PR2608_TRAINABLE * ADAPTER_BYTES_PER_PARAMETER
    printed_step = round(PR2608_AFTER_ADAPTERS_GIB - PR2608_AFTER_LOAD_GIB, 3)
    assert _printed(adapter_bytes) == printed_step


def test_llama32_1b_after_load_line_is_the_bf16_weights() -> None:
    # The planner's bf16 weights are 2.302 GiB; the line prints 2.313. The 0.011 GiB (12 MB)
    # between them is not read (no batch has run; rotary buffers are 256 bytes): the check is
    # that the load holds 2 bytes per parameter, not 4 (fp32 would print 4.604).
    plan = _lora_plan("Llama-3.2-1B", 16, ("all-linear",))
    base_gib = plan.total_parameters * BF16_BYTES / GIB
    assert abs(base_gib - PR2608_AFTER_LOAD_GIB) / PR2608_AFTER_LOAD_GIB < 0.005


def test_batch24_configs_give_the_published_sizes() -> None:
    # Mistral-7B-Instruct-v0.3 is published as 7.25B parameters (the v0.2 shape with a
    # 32,768-token vocabulary); SmolLM2-1.7B as 1.71B
    for name, published_billions in (
        ("Mistral-7B-Instruct-v0.3", 7.25),
        ("SmolLM2-1.7B", 1.71),
    ):
        model = resolve_model(str(AXOLOTL_CONFIGS / f"{name}.json"))
        plan = plan_memory(
            PlanRequest(model=model, mode=Mode.INFER, batch=1, prompt_tokens=16, new_tokens=1)
        )
        assert round(plan.total_parameters / 1e9, 2) == published_billions
