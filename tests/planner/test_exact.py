"""Exact mode (``plan --exact``): reference numbers of memory.md §5 and real-CPU ground truth.

The reference numbers were measured with torch 2.13 / transformers 5.23 (memory.md §5.2–5.4); the
ground-truth tests run the same tiny model for real on CPU and under FakeTensorMode and require the
same bytes. Tests that need torch are marked ``torch`` and skip without the extra.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.errors import GpuwardenError, InvalidConfigError, MissingExtraError
from gpuwarden.planner.exact import _quant, _recipe, run_exact
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    ExactReport,
    Framework,
    Mode,
    Optimizer,
    PlanRequest,
    Precision,
)

GIB = 1 << 30

# memory.md §5.2: "small Llama" (h=1024, L=8, a=16, i=2816, V=32000)
SMALL = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "intermediate_size": 2816,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
}
# Small enough to run for real on CPU in a fraction of a second.
TINY = {**SMALL, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
TINY |= {"num_key_value_heads": 2, "intermediate_size": 352, "vocab_size": 1000}
TINY_MOE = {**TINY, "architectures": ["MixtralForCausalLM"], "model_type": "mixtral"}
TINY_MOE |= {"intermediate_size": 224, "num_local_experts": 4, "num_experts_per_tok": 2}
TINY_DEEPSEEK = {**TINY, "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}
TINY_DEEPSEEK |= {"num_key_value_heads": 4, "num_hidden_layers": 3, "first_k_dense_replace": 1}
TINY_DEEPSEEK |= {"intermediate_size": 256, "moe_intermediate_size": 64, "n_routed_experts": 8}
TINY_DEEPSEEK |= {"n_shared_experts": 1, "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1}
TINY_DEEPSEEK |= {"q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 16}
TINY_DEEPSEEK |= {"qk_rope_head_dim": 8, "v_head_dim": 16}
TINY_GEMMA2 = {**TINY, "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2"}
TINY_GEMMA2 |= {"head_dim": 32, "intermediate_size": 256, "sliding_window": 16}


@pytest.fixture
def torch_extra() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")


@pytest.fixture(scope="module")
def model_from(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., ModelSpec]:
    """A ModelSpec from an HF config dict, through the catalog's config.json path."""

    def make(config: dict[str, Any], name: str = "model") -> ModelSpec:
        folder = tmp_path_factory.mktemp(name)
        (folder / "config.json").write_text(json.dumps(config))
        return resolve_model(str(folder / "config.json"))

    return make


def plan(spec: ModelSpec, **knobs: Any) -> ExactReport:
    return run_exact(PlanRequest(model=spec, **knobs))


# --- memory.md §5.2: saved activations, to the byte -------------------------------------------


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
@pytest.mark.parametrize(
    ("changes", "attention", "expected"),
    [
        ({}, Attention.SDPA, 263_104_524),
        ({}, Attention.EAGER, 464_168_972),
        ({"num_key_value_heads": 4}, Attention.SDPA, 250_521_612),
    ],
    ids=["sdpa", "eager", "gqa4"],
)
def test_small_llama_saved_activations_match_reference(
    model_from: Callable[..., ModelSpec],
    changes: dict[str, int],
    attention: Attention,
    expected: int,
) -> None:
    spec = model_from({**SMALL, **changes}, "small")
    report = plan(
        spec,
        precision=Precision.BF16,
        seq_len=512,
        attention=attention,
        optimizer=Optimizer.NONE,
    )
    assert report.saved_activation_bytes == expected
    assert report.versions.keys() >= {"torch", "transformers"}
    assert report.elapsed_seconds > 0


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_small_llama_autocast_saves_the_weight_casts(
    model_from: Callable[..., ModelSpec],
) -> None:
    # §5.2 "fp32 weights + autocast(bf16)": + 314 MB of bf16 weight copies saved by the matmuls.
    report = plan(model_from(SMALL, "small"), precision=Precision.BF16_MIXED, seq_len=512)
    assert report.saved_activation_bytes == 577_284_108
    assert any("PyTorch AMP" in note for note in report.notes)


# --- memory.md §5.4: whole step with MemTracker -----------------------------------------------


def _gib(components: dict[str, int]) -> dict[str, float]:
    return {key: round(value / GIB, 3) for key, value in components.items() if value >= GIB / 2000}


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_small_llama_step_matches_reference_table(model_from: Callable[..., ModelSpec]) -> None:
    spec = model_from(SMALL, "small")
    forward_backward = plan(spec, precision=Precision.BF16, seq_len=512, optimizer=Optimizer.NONE)
    assert _gib(forward_backward.components) == {
        "parameters": 0.314,
        "activations": 0.245,
        "temporaries": 0.122,
    }
    assert round(forward_backward.peak_bytes / GIB, 3) == 0.681
    assert forward_backward.peak_phase == "backward"
    assert forward_backward.peak_bytes == max(forward_backward.phase_peaks.values())

    checkpointed = plan(
        spec,
        precision=Precision.BF16,
        seq_len=512,
        optimizer=Optimizer.NONE,
        checkpointing=Checkpointing.FULL,
    )
    assert _gib(checkpointed.components) == {
        "parameters": 0.314,
        "gradients": 0.252,
        "temporaries": 0.062,
    }
    # §5.2: with checkpointing the outer hook sees only the boundaries.
    assert checkpointed.saved_activation_bytes == 78_129_164


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_small_llama_single_tensor_adamw_matches_reference_table(
    model_from: Callable[..., ModelSpec],
) -> None:
    # The reference ran torch's single-tensor AdamW (the CPU default): its per-tensor temporaries
    # make the optimizer step the peak. Our default (fused) has none.
    from gpuwarden.planner.exact import _trace

    request = PlanRequest(model=model_from(SMALL, "small"), precision=Precision.BF16, seq_len=512)
    recipe = dataclasses.replace(_recipe.resolve(request), optimizer_impl="for-loop")
    traced = _trace.trace(request, recipe)
    assert _gib(traced.components) == {
        "parameters": 0.314,
        "gradients": 0.314,
        "optimizer_states": 0.749,
    }
    assert round(traced.peak_bytes / GIB, 3) == 1.376
    assert traced.peak_phase == "optimizer-step"

    fused = plan(request.model, precision=Precision.BF16, seq_len=512)
    # m and v in the parameter dtype + fused AdamW's fp32 step counter per tensor (8 · 9 + 3)
    assert fused.components["optimizer_states"] == 2 * fused.components["parameters"] + 4 * 75


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_llama2_7b_matches_reference() -> None:
    """§2.5 / §5.4: Llama-2-7B, bf16, SDPA, b=1, s=4096, AdamW (≈ 5 s under FakeTensorMode)."""
    report = plan(resolve_model("Llama-2-7b-hf"), precision=Precision.BF16, seq_len=4096)
    assert report.saved_activation_bytes == 25_106_137_100  # 23.382 GiB
    assert _gib(report.components) == {
        "parameters": 12.551,
        "activations": 23.382,
        "temporaries": 0.977,
        "optimizer_states": 25.103,
    }
    assert round(report.peak_bytes / GIB, 2) == 62.01
    assert report.trainable_parameters == 6_738_415_616


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_llama2_70b_saved_activations_match_reference() -> None:
    """§2.5: 122.071 GiB, the forward trace alone (the whole step is left to the benchmark)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpuwarden.planner.exact import _build, _run

    request = PlanRequest(
        model=resolve_model("Llama-2-70b-hf"), precision=Precision.BF16, seq_len=4096
    )
    recipe = _recipe.resolve(request)
    with _build.quiet(), FakeTensorMode(), _build.fake_safe_masks():
        built = _build.build(request, recipe)
        inputs = _run.training_inputs(built, 1, 4096)
        saved = _run.saved_activations(built, inputs, recipe)
    assert saved.bytes == 131_072_606_220


# --- the honest ground truth: a real CPU run of the same tiny model --------------------------

REAL_VS_FAKE = {
    "bf16-sdpa-b2": (TINY, {"precision": Precision.BF16, "micro_batch": 2}),
    "bf16-eager": (TINY, {"precision": Precision.BF16, "attention": Attention.EAGER}),
    "fp32-checkpointing": (
        TINY,
        {"precision": Precision.FP32, "checkpointing": Checkpointing.FULL},
    ),
    "bf16-mixed-foreach-adamw": (TINY, {"precision": Precision.BF16_MIXED}),
    "lora-checkpointing": (
        TINY,
        {
            "mode": Mode.LORA,
            "precision": Precision.BF16_MIXED,
            "checkpointing": Checkpointing.FULL,
        },
    ),
    "sgd-momentum-accumulation": (
        TINY,
        {"precision": Precision.BF16, "optimizer": Optimizer.SGD_MOMENTUM, "grad_accum": 2},
    ),
    "infer": (TINY, {"mode": Mode.INFER, "precision": Precision.BF16, "batch": 2}),
    "moe-bf16": (TINY_MOE, {"precision": Precision.BF16, "checkpointing": Checkpointing.FULL}),
    "moe-infer": (TINY_MOE, {"mode": Mode.INFER, "precision": Precision.BF16}),
    "deepseek-mla-moe": (TINY_DEEPSEEK, {"precision": Precision.BF16}),
}


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
@pytest.mark.parametrize("case", list(REAL_VS_FAKE))
def test_fake_trace_equals_a_real_cpu_run(model_from: Callable[..., ModelSpec], case: str) -> None:
    from gpuwarden.planner.exact import _trace

    config, knobs = REAL_VS_FAKE[case]
    request = PlanRequest(
        model=model_from(config, "tiny"),
        seq_len=64,
        prompt_tokens=32,
        new_tokens=16,
        **knobs,
    )
    recipe = _recipe.resolve(request)
    if case == "bf16-mixed-foreach-adamw":
        recipe = dataclasses.replace(recipe, optimizer_impl="foreach")
    fake = _trace.trace(request, recipe, fake=True)
    real = _trace.trace(request, recipe, fake=False)
    if "moe" in case:
        assert any("grouped_mm" in note for note in fake.notes)
    assert fake.peak_bytes > 0
    assert (fake.peak_bytes, fake.peak_phase, fake.phase_peaks) == (
        real.peak_bytes,
        real.peak_phase,
        real.phase_peaks,
    )
    assert fake.components == real.components
    assert fake.saved_activation_bytes == real.saved_activation_bytes


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_fake_mask_workaround_is_what_makes_fake_equal_real(
    model_from: Callable[..., ModelSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without it transformers builds an s×s mask under FakeTensorMode that a real run skips."""
    import contextlib

    from gpuwarden.planner.exact import _build, _trace

    request = PlanRequest(
        model=model_from(TINY, "tiny"),
        precision=Precision.BF16,
        seq_len=64,
        checkpointing=Checkpointing.FULL,
        optimizer=Optimizer.NONE,
    )
    recipe = _recipe.resolve(request)
    real = _trace.trace(request, recipe, fake=False)
    monkeypatch.setattr(_build, "fake_safe_masks", contextlib.nullcontext)
    unpatched = _trace.trace(request, recipe)
    assert unpatched.phase_peaks["forward"] > real.phase_peaks["forward"]


# --- LoRA, QLoRA, 8-bit optimizers, inference -------------------------------------------------


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_lora_trains_only_the_adapters(model_from: Callable[..., ModelSpec]) -> None:
    spec = model_from(TINY, "tiny")
    full = plan(spec, precision=Precision.BF16_MIXED, seq_len=64)
    lora = plan(spec, mode=Mode.LORA, precision=Precision.BF16_MIXED, seq_len=64, lora_rank=4)
    # r·(d_in + d_out) per adapted Linear: q (128→128) and v (128→64 with 2 KV heads), 2 layers
    assert lora.trainable_parameters == 2 * 4 * ((128 + 128) + (128 + 64))
    base = spec.total_parameters
    # bf16 frozen base + fp32 adapters; their fp32 AdamW states (fused: no step temporaries)
    assert lora.components["parameters"] == 2 * base + 4 * lora.trainable_parameters
    # fp32 m and v + fused AdamW's fp32 step counter per adapter tensor (2 layers · 2 · A, B)
    assert lora.components["optimizer_states"] == 8 * lora.trainable_parameters + 4 * 8
    assert lora.peak_bytes < full.peak_bytes
    assert lora.versions["peft"]


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_qlora_counts_nf4_base_and_8bit_states(model_from: Callable[..., ModelSpec]) -> None:
    spec = model_from(TINY, "tiny")
    lora = plan(spec, mode=Mode.LORA, precision=Precision.BF16, seq_len=64)
    qlora = plan(
        spec,
        mode=Mode.QLORA,
        precision=Precision.BF16,
        seq_len=64,
        optimizer=Optimizer.PAGED_ADAMW_8BIT,
    )
    # the decoder blocks' Linear weights (q, k, v, o, gate, up, down); lm_head stays bf16
    shapes = [(128, 128), (64, 128), (64, 128), (128, 128), (352, 128), (352, 128), (128, 352)]
    linear = 2 * sum(o * i for o, i in shapes)
    nf4 = 2 * sum(_quant.weight_bytes("nf4", o, i) for o, i in shapes)
    # PEFT's default (autocast_adapter_dtype=True) upcasts the bf16 adapters to fp32
    adapters = 4 * lora.trainable_parameters
    assert qlora.components["parameters"] == 2 * (spec.total_parameters - linear) + nf4 + adapters
    assert qlora.saved_activation_bytes == lora.saved_activation_bytes
    # lora_A/B of (128 → 8 → 128) are 1,024 values: under bitsandbytes' 4,096 minimum → fp32 m, v
    states = sum(_quant.adam8bit_state_bytes(n) for n in [1024, 1024, 1024, 512] * 2) + 2 * 256 * 4
    assert qlora.components["optimizer_states"] == states
    assert any("NF4" in note or "nf4" in note for note in qlora.notes)


def test_nf4_bytes_per_weight_matches_memory_md() -> None:
    # §2.2: NF4 with double quantization ≈ 0.5159 B/param
    assert _quant.weight_bytes("nf4", 4096, 4096) / 4096**2 == pytest.approx(0.5159, abs=1e-4)
    assert _quant.weight_bytes("int8", 4096, 4096) == 4096**2 + 4 * 4096
    assert _quant.adam8bit_state_bytes(1 << 20) == 2 * ((1 << 20) + 4 * 4096)


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_inference_counts_weights_kv_cache_and_prefill(
    model_from: Callable[..., ModelSpec],
) -> None:
    spec = model_from(TINY, "tiny")
    knobs = {"mode": Mode.INFER, "batch": 2, "prompt_tokens": 48, "new_tokens": 16}
    report = plan(spec, precision=Precision.BF16, **knobs)
    # K and V · layers · KV heads · head_dim · 2 B · batch · (prompt + new)
    assert report.components["kv_cache"] == 2 * 2 * 2 * 32 * 2 * 2 * (48 + 16)
    assert report.components["parameters"] == 2 * spec.total_parameters
    assert report.components["activations"] > 0
    assert report.saved_activation_bytes == 0
    assert set(report.phase_peaks) == {"prefill", "decode"}
    assert report.peak_bytes == max(report.phase_peaks.values())

    fp8 = plan(spec, precision=Precision.BF16, kv_cache_dtype="fp8", **knobs)
    assert fp8.components["kv_cache"] == report.components["kv_cache"] // 2
    assert fp8.peak_bytes < report.peak_bytes


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_model_without_sdpa_falls_back_to_eager_and_says_so(
    model_from: Callable[..., ModelSpec],
) -> None:
    report = plan(model_from(TINY_GEMMA2, "gemma2"), precision=Precision.BF16, seq_len=64)
    assert any("no SDPA support" in note for note in report.notes)


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_progress_reports_each_stage(model_from: Callable[..., ModelSpec]) -> None:
    messages: list[str] = []
    run_exact(
        PlanRequest(model=model_from(TINY, "tiny"), precision=Precision.BF16, seq_len=32),
        progress=messages.append,
    )
    assert [m.split()[0] for m in messages] == ["building", "tracing", "simulating"]


# --- failures ---------------------------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_data_dependent_moe_routing_fails_with_the_op(model_from: Callable[..., ModelSpec]) -> None:
    # transformers' eager experts loop over `nonzero()` of the routing: a data-dependent shape.
    spec = model_from({**TINY_MOE, "experts_implementation": "eager"}, "moe")
    with pytest.raises(GpuwardenError) as caught:
        plan(spec, precision=Precision.BF16, seq_len=32)
    assert caught.value.reference == "exact-trace-failed"
    assert "aten.nonzero" in caught.value.message
    assert spec.name in caught.value.message
    assert "without --exact" in (caught.value.hint or "")


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_a_model_transformers_cannot_build_fails_cleanly(
    model_from: Callable[..., ModelSpec],
) -> None:
    spec = dataclasses.replace(
        model_from(TINY, "tiny"), raw_config={**TINY, "model_type": "no-such-architecture"}
    )
    with pytest.raises(GpuwardenError) as caught:
        plan(spec, precision=Precision.BF16, seq_len=32)
    assert caught.value.reference == "exact-trace-failed"
    assert len(caught.value.message) < 400


@pytest.mark.torch
@pytest.mark.usefixtures("torch_extra")
def test_unknown_lora_target_names_the_real_modules(model_from: Callable[..., ModelSpec]) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        plan(model_from(TINY, "tiny"), mode=Mode.LORA, lora_targets=("c_attn",), seq_len=32)
    assert "q_proj" in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("knobs", "named"),
    [
        ({"tp": 2}, "tensor parallelism"),
        ({"zero_stage": 3}, "ZeRO stage 3"),
        ({"precision": Precision.FP8}, "fp8"),
        ({"precision": Precision.NF4}, "full fine-tuning"),
        ({"checkpointing": Checkpointing.SELECTIVE, "attention": Attention.EAGER}, "selective"),
        ({"framework": Framework.TORCHTUNE}, "--framework torchtune"),
    ],
)
def test_jobs_exact_mode_cannot_trace_are_refused(knobs: dict[str, Any], named: str) -> None:
    request = PlanRequest(model=resolve_model("Llama-2-7b-hf"), **knobs)
    with pytest.raises(GpuwardenError) as caught:
        _recipe.resolve(request)
    assert caught.value.reference == "exact-unsupported"
    assert named in caught.value.message


def test_the_cli_refuses_a_job_exact_mode_cannot_trace_as_the_users_input(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Flags exact mode cannot run together are the user's input: exit 2 with the reference,
    as every other invalid combination of plan flags (it exited 1, as an internal failure)."""
    from gpuwarden.cli.main import main

    assert main(["plan", "Llama-2-7b-hf", "--tp", "2", "--exact", "--json"]) == 2
    error = json.loads(capsys.readouterr().err)
    assert error["reference"] == "exact-unsupported"
    assert "tensor parallelism" in error["message"]


def test_sequence_longer_than_learned_positions_is_an_input_error() -> None:
    with pytest.raises(InvalidConfigError, match="1024 tokens"):
        _recipe.resolve(PlanRequest(model=resolve_model("gpt2"), seq_len=2048))


def test_a_model_without_its_hf_config_is_refused() -> None:
    spec = dataclasses.replace(resolve_model("Llama-2-7b-hf"), raw_config={})
    with pytest.raises(GpuwardenError, match="no HF config"):
        _recipe.resolve(PlanRequest(model=spec))


def test_unknown_kv_cache_dtype_is_an_input_error() -> None:
    request = PlanRequest(
        model=resolve_model("Llama-2-7b-hf"), mode=Mode.INFER, kv_cache_dtype="fp3"
    )
    with pytest.raises(InvalidConfigError):
        _recipe.resolve(request)


def test_missing_transformers_is_a_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(MissingExtraError) as caught:
        run_exact(PlanRequest(model=resolve_model("Llama-2-7b-hf")))
    assert caught.value.extra == "torch"
    assert "transformers" in caught.value.message


_WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # as if the extra were not installed
sys.modules["transformers"] = None
import gpuwarden.planner
from gpuwarden.catalog import resolve_model
from gpuwarden.errors import MissingExtraError
from gpuwarden.planner.exact import run_exact
from gpuwarden.types.plan import PlanRequest
try:
    run_exact(PlanRequest(model=resolve_model("Llama-2-7b-hf")))
except MissingExtraError as exc:
    print(exc.reference, exc.extra, exc.message, exc.hint, sep="|")
"""


def test_without_torch_the_planner_imports_and_exact_mode_asks_for_the_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TORCH], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    reference, extra, message, hint = done.stdout.strip().split("|")
    assert (reference, extra) == ("missing-extra", "torch")
    assert "'torch'" in message
    # the CPU wheel (exact mode runs on the CPU), not PyPI's multi-GB CUDA build
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in hint
    assert "pip install 'gpuwarden[torch]'" in hint


@pytest.fixture(autouse=True)
def _restore_default_dtype() -> Iterator[None]:
    """Exact mode switches torch's default dtype while building; it must always restore it."""
    torch = sys.modules.get("torch")
    before = torch.get_default_dtype() if torch else None
    yield
    if torch is not None and sys.modules.get("torch") is torch:
        assert torch.get_default_dtype() == before


def test_recipe_documents_what_was_traced() -> None:
    request = PlanRequest(model=resolve_model("Llama-2-7b-hf"), num_gpus=8)
    recipe = _recipe.resolve(request)
    assert recipe.weight_dtype == "float32"
    assert recipe.autocast_dtype == "bfloat16"
    assert recipe.attention == "sdpa"
    joined = " ".join(recipe.notes)
    assert "DDP" in joined
    assert "flash" in joined
    assert "CUDA context" in joined


def test_qlora_defaults_to_nf4_with_fp32_adapters() -> None:
    recipe = _recipe.resolve(PlanRequest(model=resolve_model("Llama-2-7b-hf"), mode=Mode.QLORA))
    assert (recipe.quantization, recipe.weight_dtype, recipe.adapter_dtype) == (
        "nf4",
        "bfloat16",
        "float32",
    )
