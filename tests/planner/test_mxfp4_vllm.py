"""gpt-oss's MXFP4 experts as vLLM holds them: the default MoE backend of a release on a GPU, the
sizes its ``Mxfp4MoEMethod.create_weights`` pads and what ``process_weights_after_loading``
keeps. Expected bytes are rebuilt here from vLLM's tensors (w13 / w2 values, scales, biases),
not from the validation logs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.planner import compute_plan
from gpuwarden.planner.checkpoint_formats import (
    FLASHINFER_TRTLLM_MXFP4,
    MARLIN_MXFP4,
    TRITON_HOPPER_MXFP4,
    VLLM_MXFP4_BACKENDS,
    vllm_mxfp4_backend,
)
from gpuwarden.planner.layout import distinct_layers
from gpuwarden.planner.weight_formats import (
    MoeKernelLayout,
    kernel_expert_bytes,
    padded_expert_shape,
    round_up,
)
from gpuwarden.types.plan import DEFAULT_VLLM_VERSION as DEFAULT_VLLM
from gpuwarden.types.plan import Mode, PlanRequest, Precision

# metadata.total_size of huggingface.co/openai/gpt-oss-120b's safetensors index
GPT_OSS_120B_TENSOR_BYTES = 65_248_815_744


def _vllm(gpu: str | None, version: str, **knobs: Any) -> PlanRequest:
    return PlanRequest(
        model=resolve_model("gpt-oss-120b"),
        mode=Mode.INFER,
        precision=Precision.BF16,
        gpu=resolve_gpu(gpu) if gpu else None,
        gpu_memory_utilization=0.9,
        vllm_version=version,
        **knobs,
    )


def _vllm_tensors(kernel: MoeKernelLayout, tp: int) -> int:
    """gpt-oss-120b's experts on one GPU from create_weights' tensors: w13 [E, 2I', H'/2],
    w13_weight_scale [E, 2I', H'/32], w13_bias [E, 2I'], w2 [E, H', I'/2], w2_weight_scale
    [E, H', I'/32], w2_bias [E, H'], and the Triton path's swizzled scale copies."""
    layers, experts, hidden, inter = 36, 128, 2880, 2880
    h = round_up(hidden, kernel.hidden_multiple)
    i = round_up(inter // tp, kernel.intermediate_multiple)
    w13 = experts * (2 * i * h // 2 + 2 * i * h // 32 + 2 * i * kernel.bias_bytes)
    w2 = experts * (h * i // 2 + h * i // 32 + h * kernel.bias_bytes)
    if kernel.scale_copy is not None:
        rows, cols = kernel.scale_copy
        w13 += experts * round_up(2 * i, rows) * round_up(h // 32, cols)
        w2 += experts * round_up(h, rows) * round_up(i // 32, cols)
    return layers * (w13 + w2)


@pytest.mark.parametrize(
    ("kernel", "gate_up", "down"),
    [
        # Marlin: n % 256 and k % 128 → hidden round_up(2880, 256), intermediate (2880, 128)
        (MARLIN_MXFP4, (2 * 2944, 3072), (3072, 2944)),
        # Triton: intermediate round_up(2880, 64) = 2880, hidden as is
        (TRITON_HOPPER_MXFP4, (5760, 2880), (2880, 2880)),
        # FlashInfer TRT-LLM (SM100): both round_up(·, 256)
        (FLASHINFER_TRTLLM_MXFP4, (2 * 3072, 3072), (3072, 3072)),
    ],
)
def test_each_backend_pads_the_expert_shapes_as_create_weights(
    kernel: MoeKernelLayout, gate_up: tuple[int, int], down: tuple[int, int]
) -> None:
    spec = resolve_model("gpt-oss-120b")
    shapes = {
        lin.name: padded_expert_shape(spec, lin, kernel, 1)
        for layer, _ in distinct_layers(spec)
        for lin in layer.linears
        if lin.expert
    }
    assert shapes == {"experts.gate_up_proj": gate_up, "experts.down_proj": down}


@pytest.mark.parametrize("kernel", [MARLIN_MXFP4, TRITON_HOPPER_MXFP4, FLASHINFER_TRTLLM_MXFP4])
@pytest.mark.parametrize("tp", [1, 2, 4])
def test_the_held_bytes_are_vllms_tensors(kernel: MoeKernelLayout, tp: int) -> None:
    spec = resolve_model("gpt-oss-120b")
    assert kernel_expert_bytes(spec, kernel, tp=tp, ep=1) == _vllm_tensors(kernel, tp)


def test_tensor_parallelism_pads_each_rank_slice() -> None:
    spec = resolve_model("gpt-oss-120b")
    down = next(
        lin for layer, _ in distinct_layers(spec) for lin in layer.linears if "down" in lin.name
    )
    # 2880 / 2 = 1440 per rank: Marlin round_up(1440, 128) = 1536, Triton round_up(1440, 64)
    assert padded_expert_shape(spec, down, MARLIN_MXFP4, 2) == (3072, 1536)
    assert padded_expert_shape(spec, down, TRITON_HOPPER_MXFP4, 2) == (2880, 1472)


@pytest.mark.parametrize(
    ("version", "gpu", "kernel"),
    [
        ("0.10.1", "H100", MARLIN_MXFP4),  # no triton_kernels / FlashInfer in a pip install
        ("0.11.0", "B200", MARLIN_MXFP4),
        ("0.11.1", "H100", TRITON_HOPPER_MXFP4),  # triton_kernels a dependency (PR #27370)
        ("0.14.1", "H100", TRITON_HOPPER_MXFP4),
        ("0.14.1", "B200", FLASHINFER_TRTLLM_MXFP4),  # FlashInfer a dependency (PR #26443)
        ("0.14.1", "A100-80GB", MARLIN_MXFP4),  # Triton only on 9.0 <= cc < 11.0
        ("0.14.1", "RTX-5090", MARLIN_MXFP4),  # SM120: Triton excluded, FlashInfer SM100 only
        (DEFAULT_VLLM, "H100", TRITON_HOPPER_MXFP4),
    ],
)
def test_the_default_backend_per_release_and_gpu(
    version: str, gpu: str, kernel: MoeKernelLayout
) -> None:
    request = _vllm(gpu, version)
    plan = compute_plan(request)
    stored = compute_plan(replace(request, gpu_memory_utilization=None))
    # transformers holds the checkpoint's bytes; vLLM the rest as stored, the experts as held
    assert stored.component("parameters") == pytest.approx(GPT_OSS_120B_TENSOR_BYTES, abs=8)
    held = kernel_expert_bytes(request.model, kernel, tp=1, ep=1)
    extra = plan.component("parameters") - stored.component("parameters")
    assert extra == pytest.approx(held - _stored_expert_bytes(), abs=64)
    assert kernel.backend in plan.notes["checkpoint_weights"]


def _stored_expert_bytes() -> int:
    """The checkpoint's experts: 4-bit weights + one E8M0 scale per 32, bf16 biases."""
    spec = resolve_model("gpt-oss-120b")
    experts = [
        (lin, times)
        for layer, times in distinct_layers(spec)
        for lin in layer.linears
        if lin.expert
    ]
    weights = sum(lin.in_features * lin.out_features * lin.count * t for lin, t in experts)
    biases = sum(lin.out_features * lin.count * t for lin, t in experts)
    return weights // 2 + weights // 32 + 2 * biases


def test_before_0_10_1_and_below_8_0_there_is_no_backend() -> None:
    assert vllm_mxfp4_backend((0, 10, 0), (9, 0)) is None
    assert vllm_mxfp4_backend((0, 14, 1), (7, 5)) is None
    old = compute_plan(_vllm("H100", "0.9.2"))
    assert old.component("parameters") == pytest.approx(GPT_OSS_120B_TENSOR_BYTES, abs=8)
    assert "no MXFP4 MoE backend of that release" in old.notes["checkpoint_weights"]


def test_the_notes_say_which_backend_and_padding() -> None:
    marlin = compute_plan(_vllm("H100", "0.10.1")).notes["checkpoint_weights"]
    assert "Marlin" in marlin
    assert "hidden 2880 → 3072, intermediate per GPU 2880 → 2944" in marlin
    assert "61.93 GiB of routed experts per GPU vs 56.80 GiB as stored" in marlin
    triton = compute_plan(_vllm("H100", "0.14.1")).notes["checkpoint_weights"]
    assert "hidden 2880, intermediate per GPU 2880, biases 32-bit" in triton
    assert "swizzled copy of the E8M0 scales" in triton
    assert "assumed unchanged" not in triton  # 0.14.1 is the newest release read
    default = compute_plan(_vllm("H100", DEFAULT_VLLM)).notes["checkpoint_weights"]
    assert "(the default release planned)" in default
    assert f"assumed unchanged in {DEFAULT_VLLM}" in default


def test_without_a_gpu_the_experts_are_planned_as_stored() -> None:
    plan = compute_plan(_vllm(None, "0.14.1"))
    assert plan.component("parameters") == pytest.approx(GPT_OSS_120B_TENSOR_BYTES, abs=8)
    assert "compute capability, not known here" in plan.notes["checkpoint_weights"]


def test_transformers_keeps_the_stored_layout() -> None:
    request = replace(_vllm("H100", "0.14.1"), gpu_memory_utilization=None)
    plan = compute_plan(request)
    assert plan.component("parameters") == pytest.approx(GPT_OSS_120B_TENSOR_BYTES, abs=8)
    assert "vLLM" not in plan.notes["checkpoint_weights"]


_RELEASES = st.tuples(st.integers(0, 1), st.integers(0, 30), st.integers(0, 5))
_CAPABILITIES = st.tuples(st.integers(5, 13), st.integers(0, 9))


@settings(max_examples=200, deadline=None)
@given(release=_RELEASES, capability=_CAPABILITIES)
def test_every_served_release_and_gpu_has_exactly_one_backend(
    release: tuple[int, int, int], capability: tuple[int, int]
) -> None:
    matches = [
        row
        for row in VLLM_MXFP4_BACKENDS
        if row.since <= release
        and (row.until is None or release < row.until)
        and row.min_capability <= capability
        and (row.below_capability is None or capability < row.below_capability)
    ]
    served = release >= (0, 10, 1) and capability >= (8, 0)
    assert len(matches) == (1 if served else 0)
    found = vllm_mxfp4_backend(release, capability)
    assert found == (matches[0] if matches else None)
