"""``--fit``: the configurations that fit, over GPUs and a grid of settings, cheapest first.

"Fits" is the verdict's (``verdict.py``): with the planner's error margin to spare. Ranked by GPU
count, then priced before unpriced (a GPU with no public price is never $0 and never first), then
estimated step time (``roofline.py``), then price per hour. Prices are per GPU-hour of the
cheapest instance type carrying the GPU, × the GPUs the job uses, with the instance named. For
each GPU type the search stops one GPU count after the first that fits: more GPUs only rank lower.
The largest micro-batch and sequence reported stop at the model's context (``context.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.context import model_context
from gpuwarden.planner.plan import compute_plan
from gpuwarden.planner.precision import runs_on
from gpuwarden.planner.quantization import checkpoint_warnings
from gpuwarden.planner.roofline import ASSUMPTIONS, step_time
from gpuwarden.planner.validate import tp_fits_heads, validate
from gpuwarden.planner.verdict import RULE
from gpuwarden.types.hardware import GpuSpec, InstanceSpec
from gpuwarden.types.plan import (
    Checkpointing,
    FitOption,
    FitResult,
    FsdpKind,
    MemoryPlan,
    Mode,
    PlanRequest,
    Precision,
)

COUNTS = (1, 2, 4, 8, 16, 32, 64, 128)
MAX_BATCH = 4096
MAX_SEQ = 1 << 20
PRICE_RULE = (
    "price: on-demand $ per GPU-hour of the cheapest instance type with the GPU (named) × the "
    "GPUs used; rows without a public price rank after priced ones"
)


def _strategies(r: PlanRequest, n: int) -> Iterator[tuple[dict[str, str], PlanRequest]]:
    """Parallel layouts for ``n`` GPUs (labels are the knobs that differ from ``r``)."""
    base = replace(r, num_gpus=n, zero_stage=0, fsdp=None, tp=1, pp=1, cp=1, ep=1)
    if r.mode is Mode.INFER:
        # One replica per configuration: n GPUs serve the model by tensor parallelism.
        if n <= r.gpus_per_node and tp_fits_heads(r.model, n):
            yield ({"tp": str(n)} if n > 1 else {}), replace(base, tp=n)
        return
    if n == 1:
        yield {}, base
        return
    yield {"parallel": "ddp"}, base
    for stage in (1, 2, 3):
        yield {"zero_stage": str(stage)}, replace(base, zero_stage=stage)
    yield {"fsdp": "full"}, replace(base, fsdp=FsdpKind.FULL)
    if n > r.gpus_per_node:
        yield {"fsdp": "hybrid"}, replace(base, fsdp=FsdpKind.HYBRID)
    for tp in (2, 4, 8):
        if tp <= min(n, r.gpus_per_node) and n % tp == 0 and tp_fits_heads(r.model, tp):
            zero = 1 if n > tp else 0
            yield (
                {"tp": str(tp), **({"zero_stage": "1"} if zero else {})},
                replace(base, tp=tp, zero_stage=zero, sequence_parallel=True),
            )
    for pp in (2, 4, 8):
        if pp <= n and n % pp == 0 and pp <= r.model.num_layers:
            yield (
                {"pp": str(pp), "grad_accum": str(max(r.grad_accum, 2 * pp))},
                replace(base, pp=pp, grad_accum=max(r.grad_accum, 2 * pp)),
            )


def _variants(r: PlanRequest) -> list[tuple[dict[str, str], PlanRequest]]:
    """Precision and checkpointing variants, the most memory-frugal first (see ``fit``)."""
    precisions = [r.precision]
    if r.mode is Mode.TRAIN and r.precision is Precision.BF16_MIXED:
        precisions.insert(0, Precision.BF16)
    checkpoints = [r.checkpointing]
    if r.mode is not Mode.INFER and r.checkpointing is not Checkpointing.FULL:
        checkpoints.insert(0, Checkpointing.FULL)
    out: list[tuple[dict[str, str], PlanRequest]] = []
    for p in precisions:
        for c in checkpoints:
            label: dict[str, str] = {}
            if p is not r.precision:
                label["precision"] = p.value
            if c is not r.checkpointing:
                label["checkpointing"] = c.value
            out.append((label, replace(r, precision=p, checkpointing=c)))
    return out


@dataclass(frozen=True, slots=True)
class Price:
    """What ``n`` GPUs of one type cost per hour at the cheapest per-GPU on-demand price known."""

    usd_per_gpu_hour: float
    usd_per_hour: float  # n × usd_per_gpu_hour: the job's share of the instance(s)
    instance: str  # "aws p5en.48xlarge", the instance type the price comes from
    instance_gpus: int


def price(gpu: GpuSpec, n: int, instances: Sequence[InstanceSpec]) -> Price | None:
    """The cheapest per-GPU-hour instance with this GPU, priced for ``n`` GPUs; None if no
    instance with this GPU has a public price (never $0)."""
    priced = [
        i
        for i in instances
        if i.gpu_key == gpu.key and i.usd_per_gpu_hour is not None and i.gpu_count > 0
    ]
    if not priced:
        return None
    best = min(priced, key=lambda i: (i.usd_per_gpu_hour or math.inf, i.gpu_count))
    per_gpu = best.usd_per_gpu_hour or 0.0
    return Price(per_gpu, per_gpu * n, f"{best.provider} {best.instance_type}", best.gpu_count)


def _instance_for(gpu: GpuSpec, instances: Sequence[InstanceSpec]) -> InstanceSpec | None:
    same = [i for i in instances if i.gpu_key == gpu.key]
    return max(same, key=lambda i: i.gpu_count) if same else None


def _with(r: PlanRequest, knob: str, value: int) -> PlanRequest:
    if knob == "batch":
        return replace(r, batch=value)
    if knob == "new_tokens":
        return replace(r, new_tokens=value)
    if knob == "micro_batch":
        return replace(r, micro_batch=value)
    return replace(r, seq_len=value)


def _largest(r: PlanRequest, knob: str, start: int, limit: int) -> int | None:
    """Largest value of ``knob`` (≥ start) that still fits: doubling, then bisection."""

    def fits(value: int) -> bool:
        try:
            return bool(compute_plan(_with(r, knob, value)).fits)
        except InvalidConfigError:
            return False

    if not fits(start):
        return None
    lo, hi = start, start * 2
    while hi <= limit and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _extend(option: FitOption) -> FitOption:
    """The option with the largest micro-batch (inference: batch) and sequence that fit, the
    sequence capped at the model's context."""
    r = option.plan.request
    context = model_context(r.model)
    if r.mode is Mode.INFER:
        batch = _largest(r, "batch", r.batch, MAX_BATCH)
        room = MAX_SEQ if context is None else context - r.prompt_tokens
        seq = _largest(r, "new_tokens", max(1, r.new_tokens), room) if room >= 1 else None
        tokens = r.prompt_tokens + seq if seq is not None else None
        return replace(option, max_micro_batch=batch, max_seq_len=tokens)
    batch = _largest(r, "micro_batch", r.micro_batch, MAX_BATCH)
    limit = max(r.seq_len, MAX_SEQ) if context is None else context
    seq = _largest(r, "seq_len", r.seq_len, limit) if r.seq_len <= limit else None
    if seq is not None and r.cp > 1:
        seq -= seq % r.cp
    return replace(option, max_micro_batch=batch, max_seq_len=seq)


def _option(
    gpu: GpuSpec,
    req: PlanRequest,
    plan: MemoryPlan,
    changes: dict[str, str],
    instances: Sequence[InstanceSpec],
) -> FitOption:
    timing = step_time(plan, _instance_for(gpu, instances))
    cost = price(gpu, req.num_gpus, instances)
    return FitOption(
        gpu=gpu,
        num_gpus=req.num_gpus,
        changes=changes,
        plan=plan,
        step_seconds=timing.seconds if timing else None,
        tokens_per_second=timing.tokens_per_second if timing else None,
        usd_per_hour=cost.usd_per_hour if cost else None,
        instance=cost.instance if cost else None,
        bottleneck=timing.bottleneck if timing else "",
        usd_per_gpu_hour=cost.usd_per_gpu_hour if cost else None,
        instance_gpus=cost.instance_gpus if cost else None,
    )


def _search_gpu(
    request: PlanRequest, gpu: GpuSpec, instances: Sequence[InstanceSpec], max_gpus: int
) -> tuple[list[FitOption], int]:
    """Every configuration of ``request`` on ``gpu`` that fits, and how many were planned.

    GPU counts double until one fits, and the search stops one count later: more GPUs only rank
    lower."""
    options: list[FitOption] = []
    considered = 0
    fitting_count: int | None = None
    for n in COUNTS:
        if n > max_gpus or (fitting_count is not None and n > 2 * fitting_count):
            break
        for layout_label, layout_req in _strategies(replace(request, gpu=gpu), n):
            for index, (variant_label, req) in enumerate(_variants(layout_req)):
                if not runs_on(gpu, req):
                    continue  # e.g. bf16 on a V100 or T4
                considered += 1
                try:
                    plan: MemoryPlan = compute_plan(req)
                except InvalidConfigError:
                    break
                if not plan.fits:
                    if index == 0:
                        # The frugal variant (pure bf16, full checkpointing) does not fit:
                        # neither will the others of this layout.
                        break
                    continue
                fitting_count = fitting_count or req.num_gpus
                changes = {**layout_label, **variant_label}
                options.append(_option(gpu, req, plan, changes, instances))
    return options, considered


def rank(option: FitOption) -> tuple[int, bool, float, float]:
    """GPU count, then priced before unpriced, then estimated step time, then $/hour."""
    return (
        option.num_gpus,
        option.usd_per_hour is None,
        option.step_seconds if option.step_seconds is not None else math.inf,
        option.usd_per_hour if option.usd_per_hour is not None else math.inf,
    )


def fit(
    request: PlanRequest,
    gpus: Sequence[GpuSpec],
    instances: Sequence[InstanceSpec] = (),
    *,
    max_gpus: int = 64,
    top: int = 10,
    progress: Callable[[str], None] | None = None,
) -> FitResult:
    """Configurations of ``request`` that fit (with the verdict's margin), ranked by ``rank``.
    Bad settings raise here, before the search (``validate``)."""
    asked = (*validate(request), *checkpoint_warnings(request))
    options: list[FitOption] = []
    considered = 0
    for gpu in gpus:
        if progress is not None:
            progress(gpu.name)
        found, planned = _search_gpu(request, gpu, instances, max_gpus)
        options += found
        considered += planned
    options.sort(key=rank)
    best = tuple(_extend(o) for o in options[:top])
    dated = _price_dates(best, instances)
    return FitResult(
        request=request,
        options=best,
        considered=considered,
        assumptions=(*ASSUMPTIONS, PRICE_RULE, *dated, *_recipe_changes(best), RULE),
        warnings=_request_warnings(request, best) if best else asked,
    )


def _request_warnings(request: PlanRequest, options: Sequence[FitOption]) -> tuple[str, ...]:
    """The warnings every shown option's plan gives that the request itself gives on each of
    their GPUs: one that holds for some layouts only (sequence parallelism without tp) is not
    the request's, nor one only the search's own change causes (ZeRO-3's knobs once the search
    drops ZeRO-3)."""
    first, *rest = (o.plan.warnings for o in options)
    gpus = {o.gpu.key: o.gpu for o in options}.values()
    own = [compute_plan(replace(request, gpu=gpu)).warnings for gpu in gpus]
    return tuple(w for w in first if all(w in other for other in (*rest, *own)))


# What an option trades when it drops the fp32 master weights the request asked for
PURE_BF16_TRADE = (
    "precision bf16 (pure): weights, gradients and AdamW states in bf16, no fp32 master copy — "
    "an update smaller than bf16's resolution (about 1/256 of the weight) is lost, which can "
    "slow or stall long runs; keep bf16-mixed, or use an optimizer that compensates "
    "(Kahan summation, stochastic rounding)"
)


def _recipe_changes(options: Sequence[FitOption]) -> list[str]:
    """What a shown option changes beyond memory and speed: the numerics of training."""
    pure = any(o.changes.get("precision") == Precision.BF16.value for o in options)
    return [PURE_BF16_TRADE] if pure else []


def _price_dates(options: Sequence[FitOption], instances: Sequence[InstanceSpec]) -> list[str]:
    """When each price shown was read (a dated fact: clouds cut GPU prices, as AWS did for P4 /
    P5 in June 2025), so an old one is not taken for today's."""
    named = {f"{i.provider} {i.instance_type}": i for i in instances}
    shown = dict.fromkeys(o.instance for o in options if o.instance in named)
    dates = [f"{label} {named[label].price_date}" for label in shown if named[label].price_date]
    if not dates:
        return []
    return [
        f"price dates: {'; '.join(dates)} (`gpuwarden catalog instances` says where each "
        "price is from)"
    ]


def smallest_fit(
    request: PlanRequest, gpu: GpuSpec, *, max_gpus: int = COUNTS[-1]
) -> FitOption | None:
    """The fewest GPUs of this type (then the fastest layout) that run ``request``: what "needs N
    GPUs" answers when no single change fits."""
    found, _ = _search_gpu(request, gpu, (), max_gpus)
    return min(found, key=rank) if found else None
