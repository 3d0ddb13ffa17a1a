"""Fits, tight or does not fit: the prediction against the GPU, with the planner's error as margin.

A plan is an estimate, and users size clusters on its verdict, so "fits" has to hold when the
estimate is a little low. The margin comes from the planner's own error on measured jobs
(``benchmarks/README.md`` table (b), 2026-11-25, 30 eligible measurements): the prediction was
below the measurement by more than 5 % of it on 10 jobs and by more than 10 % on 5 (M123 −11.3 %,
M126 −12.6 %, M134 −11.0 %, and M131 −26.5 %, M133 −23.7 %, two nvidia-smi screenshots of
distributed runs).

The rule: a job **fits** when its need plus the margin is within the usable memory, the margin
being max(10 % of the usable memory, 1 GiB). With need ≤ 0.9 × usable, the job still fits when the
real peak is up to 1/0.9 of the prediction, i.e. when the plan is at most 10 % low (25 of the 30
measurements). Less headroom than that is **tight**: it fits as predicted, but the planner's error
could flip it. The 1 GiB floor covers what moves between two runs of one job on small GPUs
(allocator rounding, cuDNN/cuBLAS workspaces, the driver's context, ≈ 0.3-1 GiB).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.types.plan import Verdict
from gpuwarden.units import GIB

MARGIN_SHARE = 0.10  # of the usable memory: the plan may be this much low and "fits" still holds
MARGIN_FLOOR = GIB
RULE = (
    f"verdict: fits = at least max({MARGIN_SHARE:.0%} of usable, {MARGIN_FLOOR / GIB:.0f} GiB) to "
    f"spare, so it still fits if the plan is {MARGIN_SHARE:.0%} low (true of 25 of 30 measured "
    "jobs, benchmarks/README.md); tight = less to spare; does-not-fit = over the usable memory; "
    f"vLLM: its budget and what it keeps outside it must fit too (tight within {MARGIN_SHARE:.0%} "
    "of the bytes outside)"
)


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    usable_bytes: int  # what the job may use: the GPU's usable memory, or vLLM's budget
    headroom_bytes: int  # usable − need (negative: short by that much)
    margin_bytes: int
    beside_budget: bool = False  # a serving engine's budget and what it keeps outside it


def margin_bytes(usable_bytes: int) -> int:
    """Headroom below which a fitting job is "tight"."""
    return max(int(MARGIN_SHARE * usable_bytes), MARGIN_FLOOR)


def _classify(headroom: int, margin: int) -> Verdict:
    if headroom < 0:
        return Verdict.DOES_NOT_FIT
    if headroom < margin:
        return Verdict.TIGHT
    return Verdict.FITS


def judge(need_bytes: int, usable_bytes: int) -> Judgement:
    """The verdict for a job that needs ``need_bytes`` on a GPU (or budget) of ``usable_bytes``."""
    headroom = usable_bytes - need_bytes
    margin = margin_bytes(usable_bytes)
    return Judgement(_classify(headroom, margin), usable_bytes, headroom, margin)


def judge_beside_budget(budget_bytes: int, outside_bytes: int, usable_bytes: int) -> Judgement:
    """A serving engine that fills a budget of the GPU (vLLM: gpu_memory_utilization × total,
    its KV pool taking whatever the rest of the budget leaves) and holds ``outside_bytes`` beside
    it: both must fit in ``usable_bytes``. The budget is the engine's own arithmetic, not the
    plan's estimate, so the planner's error is only in the bytes outside it: the margin is
    MARGIN_SHARE of those (the rule above: it still fits when they are 10 % low). The 1 GiB floor
    is not applied: what it covers (allocator rounding, workspaces) sits inside the budget, whose
    own verdict keeps it."""
    headroom = usable_bytes - budget_bytes - outside_bytes
    margin = _outside_margin(outside_bytes)
    return Judgement(_classify(headroom, margin), usable_bytes, headroom, margin, True)


def _outside_margin(outside_bytes: int) -> int:
    """Headroom beside a serving engine's budget below which it is "tight"."""
    return int(MARGIN_SHARE * outside_bytes)


SEVERITY = {Verdict.FITS: 0, Verdict.TIGHT: 1, Verdict.DOES_NOT_FIT: 2}


def worse(first: Judgement, second: Judgement) -> Judgement:
    """The judgement with the worse verdict (the first on a tie)."""
    return second if SEVERITY[second.verdict] > SEVERITY[first.verdict] else first


def highest_utilization(usable_bytes: int, outside_bytes: int) -> float:
    """The largest gpu_memory_utilization, in hundredths, whose budget leaves room for
    ``outside_bytes`` and their margin beside it (``judge_beside_budget`` then fits)."""
    room = usable_bytes - outside_bytes - _outside_margin(outside_bytes)
    return max(0, 100 * room // usable_bytes) / 100
