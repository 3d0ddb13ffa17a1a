"""vLLM's start-up profile per release: sampler tensors and what non-torch memory counts."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.planner.overheads import cuda_context
from gpuwarden.planner.vllm_profile import (
    NEWEST_MODELLED,
    TRITON_TOPK_TOPP_BUFFERS,
    non_torch_bytes,
    sampler_peak_bytes,
    vllm_profile,
)
from gpuwarden.types.plan import Mode, PlanRequest, Precision
from gpuwarden.units import GIB


def _serve(version: str, seqs: int = 1024, **kw: object) -> PlanRequest:
    return PlanRequest(
        model=resolve_model("Meta-Llama-3-8B"),
        mode=Mode.INFER,
        precision=Precision.BF16,
        gpu=resolve_gpu("H100 80GB"),
        gpu_memory_utilization=0.95,
        max_model_len=8192,
        max_num_batched_tokens=8192,
        max_num_seqs=seqs,
        vllm_version=version,
        **kw,  # type: ignore[arg-type]
    )


def test_the_request_default_is_the_newest_modelled_release() -> None:
    default = {f.name: f.default for f in dataclasses.fields(PlanRequest)}["vllm_version"]
    assert default == NEWEST_MODELLED


@pytest.mark.parametrize(
    ("version", "engine", "per_element", "counts_context"),
    [
        ("0.6.4", "V0", 38, True),  # PR #9352: everything outside torch
        ("0.6.5", "V0", 38, False),  # PR #10511: baseline after the context
        ("v0.7.3", "V0", 38, False),
        ("0.8.5", "V1", 22, True),  # V1 before PR #19312: total used − torch allocated
        ("0.9.2", "V1", 22, False),
        ("0.19.0", "V1", 12, False),  # Triton top-k/top-p: masked in place
    ],
)
def test_release_behaviours(
    version: str, engine: str, per_element: int, counts_context: bool
) -> None:
    profile = vllm_profile(version)
    assert profile.engine == engine
    assert profile.sampler_bytes_per_element == per_element
    assert profile.counts_cuda_context is counts_context


def test_sampler_peak_is_requests_times_vocab_per_element() -> None:
    # Llama-3 vocabulary, 1024 requests, bf16 logits kept by the caller: 14 B per element
    newest = vllm_profile("0.19.0")
    expected = 1024 * 128_256 * 14 + TRITON_TOPK_TOPP_BUFFERS
    assert sampler_peak_bytes(newest, 1024, 128_256, 2) == expected
    v0 = vllm_profile("0.7.3")
    assert sampler_peak_bytes(v0, 256, 128_256, 2) == 256 * 128_256 * 40


def test_non_torch_leaves_out_the_bare_context_only_after_the_snapshot_change() -> None:
    ctx = cuda_context(resolve_gpu("H100 80GB"))
    assert 0 < ctx.bare_bytes < ctx.bytes
    whole = non_torch_bytes(vllm_profile("0.6.4"), ctx.bytes, ctx.bare_bytes, 7)
    after = non_torch_bytes(vllm_profile("0.19.0"), ctx.bytes, ctx.bare_bytes, 7)
    assert whole == ctx.bytes + 7
    assert after == ctx.bytes - ctx.bare_bytes + 7


def test_newer_vllm_profiles_less_than_v0_for_a_large_sampler_batch() -> None:
    # 1024 sequences × 128k vocabulary: V0's sort-based sampler dominates the profile
    v0 = plan_memory(_serve("0.7.3")).inference
    v1 = plan_memory(_serve("0.19.0")).inference
    assert v0 is not None and v1 is not None
    gap = (v0.non_kv_bytes - v1.non_kv_bytes) / GIB
    # 1024 × 128256 × (40 − 14) B = 3.18 GiB of sampler copies, less Triton's 80 MiB buffers
    assert gap == pytest.approx(1024 * 128_256 * 26 / GIB - 80 / 1024, abs=0.01)
    assert v1.kv_pool_bytes > v0.kv_pool_bytes


def test_tensor_parallel_does_not_split_the_sampler() -> None:
    plan_one = plan_memory(_serve("0.19.0"))
    plan_two = plan_memory(_serve("0.19.0", tp=2, num_gpus=2))
    one, two = plan_one.inference, plan_two.inference
    assert one is not None and two is not None
    weights_one = plan_one.component("parameters")
    weights_two = plan_two.component("parameters")
    assert one.non_kv_bytes - weights_one > 1.8 * GIB  # sampler over the full vocabulary
    assert two.non_kv_bytes - weights_two > 1.8 * GIB


def test_unreadable_version_is_bad_input() -> None:
    with pytest.raises(InvalidConfigError) as err:
        plan_memory(_serve("latest"))
    assert err.value.reference == "vllm-version-unreadable"


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=20))
def test_any_version_text_parses_or_raises_value_error(text: str) -> None:
    try:
        profile = vllm_profile(text)
    except ValueError:
        return
    assert profile.engine in {"V0", "V1"}
    assert profile.sampler_bytes_per_element > 0
