"""``--fit``: the configurations that fit, over GPUs and a grid of settings, cheapest first.

Ranked by GPU count, then estimated step time (``roofline.py``), then price per hour; a GPU with
no known price ranks after priced ones at the same count and speed, never as $0. For each GPU
type the search stops one GPU count after the first that fits: more GPUs only rank lower.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.plan import compute_plan
from gpuwarden.planner.precision import runs_on
from gpuwarden.planner.roofline import ASSUMPTIONS, step_time
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


def _divides_heads(r: PlanRequest, tp: int) -> bool:
    heads, kv = r.model.num_heads, r.model.num_kv_heads
    return heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)


def _strategies(r: PlanRequest, n: int) -> Iterator[tuple[dict[str, str], PlanRequest]]:
    """Parallel layouts for ``n`` GPUs (labels are the knobs that differ from ``r``)."""
    base = replace(r, num_gpus=n, zero_stage=0, fsdp=None, tp=1, pp=1, cp=1, ep=1)
    if r.mode is Mode.INFER:
        # One replica per configuration: n GPUs serve the model by tensor parallelism.
        if n <= r.gpus_per_node and _divides_heads(r, n):
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
        if tp <= min(n, r.gpus_per_node) and n % tp == 0 and _divides_heads(r, tp):
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


def price(
    gpu: GpuSpec, n: int, instances: Sequence[InstanceSpec]
) -> tuple[float | None, str | None]:
    """Cheapest on-demand price for ``n`` GPUs of this type (whole instances), if any is known."""
    best: tuple[float, str] | None = None
    for inst in instances:
        if inst.gpu_key != gpu.key or inst.usd_per_hour is None or inst.gpu_count <= 0:
            continue
        count = math.ceil(n / inst.gpu_count)
        cost = count * inst.usd_per_hour
        name = inst.instance_type if count == 1 else f"{count}× {inst.instance_type}"
        if best is None or cost < best[0]:
            best = (cost, f"{inst.provider} {name}")
    return (best[0], best[1]) if best else (None, None)


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
    r = option.plan.request
    if r.mode is Mode.INFER:
        batch = _largest(r, "batch", r.batch, MAX_BATCH)
        seq = _largest(r, "new_tokens", max(1, r.new_tokens), MAX_SEQ)
        context = r.prompt_tokens + seq if seq is not None else None
        return replace(option, max_micro_batch=batch, max_seq_len=context)
    batch = _largest(r, "micro_batch", r.micro_batch, MAX_BATCH)
    limit = max(r.seq_len, MAX_SEQ)
    seq = _largest(r, "seq_len", r.seq_len, limit)
    if seq is not None and r.cp > 1:
        seq -= seq % r.cp
    return replace(option, max_micro_batch=batch, max_seq_len=seq)


def fit(
    request: PlanRequest,
    gpus: Sequence[GpuSpec],
    instances: Sequence[InstanceSpec] = (),
    *,
    max_gpus: int = 64,
    top: int = 10,
    progress: Callable[[str], None] | None = None,
) -> FitResult:
    """Configurations of ``request`` that fit, ranked (GPU count, step time, $/hour)."""
    options: list[FitOption] = []
    considered = 0
    for gpu in gpus:
        if progress is not None:
            progress(gpu.name)
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
                    instance = _instance_for(gpu, instances)
                    timing = step_time(plan, instance)
                    usd, name = price(gpu, req.num_gpus, instances)
                    options.append(
                        FitOption(
                            gpu=gpu,
                            num_gpus=req.num_gpus,
                            changes={**layout_label, **variant_label},
                            plan=plan,
                            step_seconds=timing.seconds if timing else None,
                            tokens_per_second=timing.tokens_per_second if timing else None,
                            usd_per_hour=usd,
                            instance=name,
                            bottleneck=timing.bottleneck if timing else "",
                        )
                    )

    def rank(o: FitOption) -> tuple[int, float, bool, float]:
        return (
            o.num_gpus,
            o.step_seconds if o.step_seconds is not None else math.inf,
            o.usd_per_hour is None,
            o.usd_per_hour if o.usd_per_hour is not None else math.inf,
        )

    options.sort(key=rank)
    best = tuple(_extend(o) for o in options[:top])
    return FitResult(
        request=request,
        options=best,
        considered=considered,
        assumptions=ASSUMPTIONS,
    )
