"""KV cache and inference (memory.md §2.9, §4.2)."""

from __future__ import annotations

import pytest

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.overheads import cuda_context
from gpuwarden.types.plan import MemoryPlan, Mode, PlanRequest, Precision, Verdict
from gpuwarden.units import GIB, KIB


def infer(name: str, **knobs: object) -> MemoryPlan:
    base: dict[str, object] = {"model": resolve_model(name), "mode": Mode.INFER}
    base["precision"] = Precision.BF16
    return plan_memory(PlanRequest(**{**base, **knobs}))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "per_token_kib", "batch_gib"),
    [
        # memory.md §2.9 table: per token (bf16) and 8 × 4096 tokens
        ("Llama-2-7b-hf", 512, 16),
        ("Meta-Llama-3-8B", 128, 4),
        ("Llama-2-70b-hf", 320, 10),
    ],
)
def test_kv_per_token_table(name: str, per_token_kib: int, batch_gib: int) -> None:
    plan = infer(name, batch=8, prompt_tokens=4096, new_tokens=0)
    assert plan.inference is not None
    assert plan.inference.kv_bytes_per_token == per_token_kib * KIB
    assert plan.component("kv_cache") == batch_gib * GIB


def test_deepseek_mla_caches_the_latent_in_vllm() -> None:
    # memory.md §2.9: 61 layers × (kv_lora_rank 512 + rope 64) × 2 B = 68.6 KiB per token
    plan = infer("DeepSeek-V3", gpu_memory_utilization=0.9)
    assert plan.inference is not None
    assert plan.inference.kv_bytes_per_token == 61 * 576 * 2


def test_sliding_window_layers_hold_at_most_the_window() -> None:
    # Mistral-7B-v0.1: window 4096 on every layer; an 8192-token sequence keeps 4096.
    long = infer("Mistral-7B-v0.1", prompt_tokens=8192, new_tokens=0)
    short = infer("Mistral-7B-v0.1", prompt_tokens=4096, new_tokens=0)
    assert long.component("kv_cache") == short.component("kv_cache")


def test_fp8_kv_halves_the_cache() -> None:
    bf16 = infer("Meta-Llama-3-8B", batch=8, prompt_tokens=4096, new_tokens=0)
    fp8 = infer("Meta-Llama-3-8B", batch=8, prompt_tokens=4096, new_tokens=0, kv_cache_dtype="fp8")
    assert fp8.component("kv_cache") * 2 == bf16.component("kv_cache")


def test_kv_heads_replicate_when_tp_exceeds_them() -> None:
    # Llama-3-8B has 8 KV heads: at tp=16 each rank still holds one (memory.md §2.6).
    plan = infer("Meta-Llama-3-8B", tp=16, num_gpus=16, prompt_tokens=1000, new_tokens=0)
    assert plan.inference is not None
    assert plan.inference.kv_bytes_per_token == 32 * 2 * 1 * 128 * 2


@pytest.mark.parametrize(("tp", "exact_gib"), [(1, 138.5), (2, 69.2), (4, 34.6), (8, 17.3)])
def test_job_c_weights_and_kv_per_gpu(tp: int, exact_gib: float) -> None:
    # memory.md §4.2: Llama-2-70B bf16, batch 8, context 4096: weights 128.48 GiB + KV 10.0 GiB
    plan = infer("Llama-2-70b-hf", batch=8, prompt_tokens=3584, new_tokens=512, tp=tp, num_gpus=tp)
    weights, kv = plan.component("parameters"), plan.component("kv_cache")
    assert kv == pytest.approx(10 * GIB / tp)
    if tp == 1:
        assert weights / GIB == pytest.approx(128.48, abs=0.01)
    assert (weights + kv) / GIB == pytest.approx(exact_gib, abs=0.06)


def test_vllm_budget_sizes_the_pool_in_blocks() -> None:
    gpu = resolve_gpu("H100 80GB")
    plan = infer(
        "Meta-Llama-3-8B", gpu=gpu, gpu_memory_utilization=0.9, prompt_tokens=4000, new_tokens=96
    )
    cap = plan.inference
    assert cap is not None and cap.block_size == 16
    page = 16 * cap.kv_bytes_per_token  # one block, all 32 layers
    assert cap.kv_pool_bytes % page == 0
    assert cap.kv_tokens == cap.kv_pool_bytes // page * 16
    assert cap.max_sequences == cap.kv_tokens // 4096  # 256 blocks per 4096-token request
    budget = int(0.9 * gpu.usable_bytes)  # vLLM: utilization × CUDA's total (81080 MiB here)
    assert plan.usable_bytes == budget
    # The pool takes what the profile leaves. vLLM >= 0.6.5 (V1 >= 0.9.2) counts non-torch memory
    # from a snapshot taken once the CUDA context exists, so nvidia-smi shows the budget plus that
    # bare context, less one block; 0.6.4 counted the whole context inside the budget.
    bare = cuda_context(gpu).bare_bytes
    # CUDA graphs are captured after the pool, on top of the budget (before 0.21: vllm_graphs.py)
    smi = plan.predicted.nvidia_smi_used_bytes - plan.component("cuda_graphs")
    assert budget + bare - page < smi <= budget + bare
    old = infer(
        "Meta-Llama-3-8B",
        gpu=gpu,
        gpu_memory_utilization=0.9,
        prompt_tokens=4000,
        new_tokens=96,
        vllm_version="0.6.4",
    )
    old_smi = old.predicted.nvidia_smi_used_bytes - old.component("cuda_graphs")
    assert budget - page < old_smi <= budget
    assert plan.fits is True
    # Weights of the vLLM profile (PR 10511 log: 14.96 GiB)
    assert plan.component("parameters") / GIB == pytest.approx(14.96, abs=0.01)


def test_vllm_does_not_fit_when_weights_exceed_the_budget() -> None:
    plan = infer("Llama-2-70b-hf", gpu=resolve_gpu("A100 80GB"), gpu_memory_utilization=0.9)
    assert plan.fits is False
    assert plan.fixes and all(f.saved_bytes > 0 for f in plan.fixes)
    # Two-way TP halves the weights: the pool then holds the 1024-token request, with 4.7 GiB
    # to spare of a 71.4 GiB budget: less than the 10 % margin, so tight rather than fits.
    two = infer(
        "Llama-2-70b-hf", gpu=resolve_gpu("A100 80GB"), gpu_memory_utilization=0.9, tp=2, num_gpus=2
    )
    assert two.verdict is Verdict.TIGHT and two.fits is False
    assert two.inference is not None and two.inference.max_sequences
    assert 0 < two.headroom_bytes < two.margin_bytes
