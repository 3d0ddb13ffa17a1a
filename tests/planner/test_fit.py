"""`fit`: configurations that fit, ranked by GPU count, step time, then price."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gpuwarden.catalog import instance_catalog, resolve_gpu, resolve_model
from gpuwarden.planner import compute_plan, fit
from gpuwarden.planner.search import price
from gpuwarden.types.plan import Checkpointing, Mode, PlanRequest, Precision


def test_ranked_by_gpu_count_then_step_time_then_price() -> None:
    request = PlanRequest(model=resolve_model("Llama-2-7b-hf"), seq_len=4096)
    gpus = [resolve_gpu(n) for n in ("A100 40GB", "A100 80GB", "H100 80GB", "L4")]
    result = fit(request, gpus, instance_catalog(), max_gpus=16, top=8)
    assert result.options and result.considered > len(result.options)
    keys = [
        (o.num_gpus, o.step_seconds or math.inf, o.usd_per_hour is None, o.usd_per_hour or 0)
        for o in result.options
    ]
    assert keys == sorted(keys)
    for option in result.options:
        assert option.plan.fits is True
        assert option.plan.request.gpu == option.gpu


def test_max_micro_batch_and_seq_len_are_the_largest_that_fit() -> None:
    request = PlanRequest(
        model=resolve_model("Qwen2.5-0.5B"), mode=Mode.LORA, checkpointing=Checkpointing.FULL
    )
    result = fit(request, [resolve_gpu("L4")], (), max_gpus=1, top=1)
    best = result.options[0]
    assert best.max_micro_batch is not None and best.max_seq_len is not None
    planned = best.plan.request
    assert compute_plan(replace(planned, micro_batch=best.max_micro_batch)).fits
    assert not compute_plan(replace(planned, micro_batch=best.max_micro_batch + 1)).fits
    assert compute_plan(replace(planned, seq_len=best.max_seq_len)).fits
    assert not compute_plan(replace(planned, seq_len=best.max_seq_len + 1)).fits


def test_unknown_price_is_none_not_zero() -> None:
    instances = instance_catalog()
    # No instance in the catalog lists a price for B200 (as of the catalog's data).
    b200 = resolve_gpu("B200")
    assert price(b200, 8, instances) == (None, None)
    h100 = resolve_gpu("H100 80GB")
    usd, name = price(h100, 16, instances)
    assert usd is not None and usd > 0 and name is not None and name.startswith(("aws", "azure"))


def test_inference_search_uses_tensor_parallelism() -> None:
    request = PlanRequest(
        model=resolve_model("Llama-2-70b-hf"), mode=Mode.INFER, batch=8, prompt_tokens=4096
    )
    result = fit(request, [resolve_gpu("A100 80GB")], instance_catalog(), top=3)
    # memory.md §4.2: 128.5 GiB of weights do not fit one 80 GB GPU; at TP=2 weights + KV are
    # ≈ 70 GiB per GPU (11.25 GiB of KV for 8 × 4608 tokens): two GPUs suffice.
    best = result.options[0]
    assert best.num_gpus == 2 and best.changes == {"tp": "2"}
    assert best.max_micro_batch is not None and best.max_micro_batch >= 8


def test_step_time_is_a_roofline_over_flops() -> None:
    # 6·P·tokens + 12·L·h·s·tokens at the A100's 312 dense bf16 TFLOPS × 40 % MFU (roofline.py)
    from gpuwarden.planner import step_time

    spec = resolve_model("Llama-2-7b-hf")
    plan = compute_plan(
        PlanRequest(model=spec, gpu=resolve_gpu("A100 80GB"), seq_len=4096, mode=Mode.LORA)
    )
    timing = step_time(plan)
    assert timing is not None and timing.bottleneck == "compute"
    tokens = 4096
    flops = 4 * spec.total_parameters * tokens + 12 * 32 * 4096 * 4096 * tokens  # frozen base
    assert timing.seconds == pytest.approx(flops / (312e12 * 0.4), rel=1e-6)
    assert timing.tokens_per_second == pytest.approx(tokens / timing.seconds)


def test_gpus_without_the_compute_dtype_are_skipped() -> None:
    # A T4 (Turing) has no bf16 tensor cores: a bf16 job is not planned on it; fp16 is.
    spec = resolve_model("Qwen2.5-0.5B")
    t4 = resolve_gpu("T4")
    assert fit(PlanRequest(model=spec), [t4], max_gpus=2).considered == 0
    fp16 = fit(PlanRequest(model=spec, precision=Precision.FP16_MIXED), [t4], max_gpus=2)
    assert fp16.options and fp16.options[0].gpu == t4
