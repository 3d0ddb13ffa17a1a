"""Review r26b of `plan --fit`'s warnings (planner/search.py ``_shared_warnings``): a warning
every shown option gives is printed as the request's, also when only the search's own change
causes it. `--zero 3 --zero3-max-live N` on 8 H100s: `plan` warns of nothing; the search drops
ZeRO-3 (its layouts start from zero_stage 0) and each of the top three options (one GPU, pure
bf16; tp 2) then warns "zero3_max_live ... have no effect without --zero 3" — a knob the user set
with --zero 3 told to need --zero 3. Mended (the lead, planner/search.py ``_request_warnings``):
a shared warning is kept only where the request itself gives it on the option's GPU.
"""

from __future__ import annotations

from gpuwarden.catalog import instance_catalog, resolve_gpu, resolve_model
from gpuwarden.planner import fit
from gpuwarden.planner.plan import compute_plan
from gpuwarden.types.plan import Mode, PlanRequest


def test_a_warning_only_the_search_s_changes_cause_is_not_the_request_s() -> None:
    h100 = resolve_gpu("H100")
    request = PlanRequest(
        model=resolve_model("Llama-3.1-8B"),
        mode=Mode.TRAIN,
        gpu=h100,
        num_gpus=8,
        zero_stage=3,
        zero3_max_live=200_000_000,
    )
    assert compute_plan(request).warnings == ()
    result = fit(request, [h100], instance_catalog(), max_gpus=8, top=3)
    assert all(o.plan.request.zero_stage != 3 for o in result.options)  # the search's change
    assert result.warnings == ()
