"""`fit`: configurations that fit, ranked by GPU count, priced first, step time, then price."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gpuwarden.catalog import instance_catalog, resolve_gpu, resolve_model
from gpuwarden.planner import compute_plan, fit
from gpuwarden.planner.search import PURE_BF16_TRADE, price
from gpuwarden.types.plan import Checkpointing, Mode, PlanRequest, Precision, Verdict


def test_ranked_by_gpu_count_then_priced_then_step_time_then_price() -> None:
    request = PlanRequest(model=resolve_model("Llama-2-7b-hf"), seq_len=4096)
    gpus = [resolve_gpu(n) for n in ("A100 40GB", "A100 80GB", "H100 80GB", "L4")]
    result = fit(request, gpus, instance_catalog(), max_gpus=16, top=8)
    assert result.options and result.considered > len(result.options)
    keys = [
        (o.num_gpus, o.usd_per_hour is None, o.step_seconds or math.inf, o.usd_per_hour or 0)
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
    assert price(resolve_gpu("B200"), 8, instances) is None
    # H100: the cheapest per GPU-hour of the priced rows, p5.48xlarge and Azure ND96isr_H100_v5,
    # both $98.32 for 8 GPUs: $12.29 per GPU-hour, whichever the job's GPU count.
    for n in (1, 16):
        cost = price(resolve_gpu("H100 80GB"), n, instances)
        assert cost is not None and cost.instance_gpus == 8
        assert cost.usd_per_gpu_hour == pytest.approx(98.32 / 8)
        assert cost.usd_per_hour == pytest.approx(n * 98.32 / 8)
        assert cost.instance in {"aws p5.48xlarge", "azure Standard_ND96isr_H100_v5"}


def test_one_gpu_of_an_eight_gpu_instance_costs_one_eighth() -> None:
    # The walk-through: a 1-GPU H200 row showed $84.80/hour, p5en.48xlarge's whole price.
    request = PlanRequest(model=resolve_model("Qwen2.5-0.5B"), mode=Mode.LORA)
    result = fit(request, [resolve_gpu("H200")], instance_catalog(), max_gpus=1, top=1)
    best = result.options[0]
    assert best.num_gpus == 1 and best.instance == "aws p5en.48xlarge"
    assert (best.usd_per_gpu_hour, best.usd_per_hour) == (84.8 / 8, 84.8 / 8)
    assert best.instance_gpus == 8


def test_unpriced_gpus_rank_after_priced_ones() -> None:
    # B200 and GB200 have no public price in the catalog: same GPU count, after the H100.
    request = PlanRequest(model=resolve_model("Qwen2.5-0.5B"), mode=Mode.LORA)
    gpus = [resolve_gpu(n) for n in ("B200", "GB200", "H100 80GB")]
    result = fit(request, gpus, instance_catalog(), max_gpus=1, top=20)
    priced = [o.usd_per_hour is not None for o in result.options]
    assert priced[0] and not priced[-1]
    assert priced == sorted(priced, reverse=True)
    assert {o.gpu.key for o in result.options if o.usd_per_hour is None} == {
        "b200-hgx-180gb",
        "gb200-186gb",
    }


def test_inference_search_uses_tensor_parallelism() -> None:
    request = PlanRequest(
        model=resolve_model("Llama-2-70b-hf"), mode=Mode.INFER, batch=8, prompt_tokens=4096
    )
    gpu = resolve_gpu("A100 80GB")
    result = fit(request, [gpu], instance_catalog(), top=3)
    # memory.md §4.2: 128.5 GiB of weights do not fit one 80 GB GPU; at TP=2 weights + KV are
    # ≈ 70 GiB per GPU (11.25 GiB of KV for 8 × 4608 tokens) + overheads: 74.8 of the 79.3 GiB
    # CUDA gives a job, inside the 10 % margin (tight), so the search offers TP=4.
    two = compute_plan(replace(request, gpu=gpu, tp=2, num_gpus=2))
    assert two.verdict is Verdict.TIGHT
    best = result.options[0]
    assert best.num_gpus == 4 and best.changes == {"tp": "4"}
    assert best.plan.verdict is Verdict.FITS
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


def test_the_prices_shown_say_when_they_were_read() -> None:
    """A price is a dated fact (AWS cut P4 / P5 on-demand prices in June 2025): the ranked
    options name the date of each instance's price, from the catalog."""
    request = PlanRequest(model=resolve_model("Llama-2-7b-hf"), mode=Mode.LORA, seq_len=512)
    result = fit(request, [resolve_gpu("H100 SXM5 80GB")], instance_catalog(), max_gpus=1, top=1)
    (option,) = result.options
    (spec,) = [
        i for i in instance_catalog() if f"{i.provider} {i.instance_type}" == option.instance
    ]
    dated = [a for a in result.assumptions if a.startswith("price dates:")]
    assert dated == [
        f"price dates: {option.instance} {spec.price_date} (`gpuwarden catalog instances` says "
        "where each price is from)"
    ]


def test_an_option_that_drops_fp32_master_weights_says_what_it_trades() -> None:
    request = PlanRequest(model=resolve_model("Llama-2-7b-hf"), mode=Mode.TRAIN)
    assert request.precision is Precision.BF16_MIXED
    result = fit(request, [resolve_gpu("H200")], instance_catalog(), max_gpus=1, top=5)
    pure = [o for o in result.options if o.changes.get("precision") == "bf16"]
    assert pure  # pure bf16 halves the optimizer's fp32 copies: it ranks among the first
    assert PURE_BF16_TRADE in result.assumptions
    kept = fit(
        PlanRequest(model=resolve_model("Llama-2-7b-hf"), mode=Mode.LORA),
        [resolve_gpu("H200")],
        instance_catalog(),
        max_gpus=1,
        top=5,
    )
    assert PURE_BF16_TRADE not in kept.assumptions  # LoRA: its recipe is not changed
