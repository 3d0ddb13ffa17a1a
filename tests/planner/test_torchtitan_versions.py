"""torchtitan by commit date (``torchtitan_version``, planner/stacks.py TORCHTITAN_CHANGES).

What each dated behaviour changes, checked as closed-form terms: the loss compiled or not under
--compile (PRs #755 / #859 / #1033), the PP microbatch default (PR #1073), and the FSDP root unit
that holds the embedding, the final norm and the output projection until PR #1094 (FSDP2 keeps the
root unsharded from forward to the end of backward).
"""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_model
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import stacks
from gpuwarden.planner.loss import loss_buffers
from gpuwarden.planner.plan import compute_plan
from gpuwarden.planner.precision import recipe
from gpuwarden.planner.versions import commit_date, names_day
from gpuwarden.types.plan import Checkpointing, Framework, FsdpKind, Mode, PlanRequest

# --- commit dates ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "date"),
    [
        ("2025-06-16", (2025, 6, 16)),
        ("2025-02", (2025, 2, 28)),  # a month is a checkout from its end
        ("2024-02", (2024, 2, 29)),
        (" 2025-04 ", (2025, 4, 30)),
        ("2025-13", None),
        ("2025-02-30", None),
        ("25-06", None),
        ("0.0.2", None),
        ("v2025-06", None),
        ("2025-06-16-1", None),
        ("２０２５-06", None),  # full-width digits are decimal to Python, not to a date
    ],
)
def test_commit_date_reads_a_month_or_a_day(text: str, date: tuple[int, int, int] | None) -> None:
    assert commit_date(text) == date


def test_names_day_tells_a_day_from_a_month() -> None:
    assert names_day("2025-04-02") and not names_day("2025-04")


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=14))
def test_commit_date_never_raises(text: str) -> None:
    date = commit_date(text)
    if date is not None:
        year, month, day = date
        assert 1 <= month <= 12 and 1 <= day <= 31 and year >= 1


# --- the profile at a date ------------------------------------------------------------------


def _at(version: str, framework: Framework = Framework.TORCHTITAN) -> stacks.StackProfile:
    return stacks.framework_profile(framework, version)


def _behaviours(profile: stacks.StackProfile) -> dict[str, object]:
    skip = {"framework", "version"}
    return {f.name: getattr(profile, f.name) for f in fields(profile) if f.name not in skip}


def test_the_two_reads_are_their_frameworks_profiles() -> None:
    assert _behaviours(_at("2025-06")) == _behaviours(stacks.PROFILES[Framework.TORCHTITAN])
    old = stacks.PROFILES[Framework.TORCHTITAN_2024]
    assert _behaviours(_at("2024-12")) == _behaviours(old)
    # the version names the checkout whichever torchtitan framework is given
    assert _behaviours(_at("2025-06", Framework.TORCHTITAN_2024)) == _behaviours(_at("2025-06"))


def test_each_change_takes_effect_on_its_date() -> None:
    for change in stacks.TORCHTITAN_CHANGES:
        year, month, day = change.since
        on = _at(f"{year:04d}-{month:02d}-{day:02d}")
        assert getattr(on, change.field) == change.value, change.field
        before = (year, month, day - 1) if day > 1 else (year, month - 1, 28)
        prior = _at("{:04d}-{:02d}-{:02d}".format(*before))
        assert getattr(prior, change.field) != change.value, change.field


def test_torchtitan_0_0_2_of_2025_02_runs_its_loss_eager_under_compile() -> None:
    # torchao's float8 README table (torchtitan 0.0.2, 2025-02): --training.compile compiled the
    # blocks only; PR #755's TODO kept the cross-entropy eager until PR #1033 (2025-04-01)
    request = PlanRequest(
        model=resolve_model("Meta-Llama-3-8B"),
        framework=Framework.TORCHTITAN,
        torchtitan_version="2025-02",
        compile=True,
        num_gpus=8,
        fsdp=FsdpKind.FULL,
        seq_len=8192,
        checkpointing=Checkpointing.OP,
    )
    elems = 8192 * request.model.vocab_size
    eager = loss_buffers(request, recipe(request), 8192, 1)
    assert (eager.saved, eager.transient_backward) == (4 * elems, 8 * elems)
    compiled = replace(request, torchtitan_version="2025-04-02")
    fused = loss_buffers(compiled, recipe(compiled), 8192, 1)
    assert (fused.saved, fused.transient_backward) == (2 * elems, 2 * elems)
    # the default (2025-06) compiles it, as before
    default = replace(request, torchtitan_version=None)
    assert loss_buffers(default, recipe(default), 8192, 1) == fused


def test_pp_microbatches_default_to_the_stage_count_before_pr_1073() -> None:
    training = Mode.TRAIN
    before = stacks.stack_defaults(Framework.TORCHTITAN, training, 64, "2025-04-07")
    after = stacks.stack_defaults(Framework.TORCHTITAN, training, 64, "2025-04-08")
    assert (before.pp_microbatch_size, after.pp_microbatch_size) == (None, 1)
    assert stacks.stack_defaults(Framework.TORCHTITAN_2024, training, 64).pp_microbatch_size is None


# --- the FSDP root unit ---------------------------------------------------------------------


def _fsdp(version: str) -> PlanRequest:
    return PlanRequest(
        model=resolve_model("Meta-Llama-3-8B"),
        framework=Framework.TORCHTITAN,
        torchtitan_version=version,
        num_gpus=8,
        fsdp=FsdpKind.FULL,
        seq_len=8192,
        checkpointing=Checkpointing.OP,
    )


def _forward_comm(request: PlanRequest) -> int:
    phase = next(p for p in compute_plan(request).phases if p.name == "forward")
    return phase.bytes_by_component["communication"]


def test_the_root_unit_keeps_embedding_and_head_unsharded_until_pr_1094() -> None:
    p = resolve_model("Meta-Llama-3-8B").parameters
    embedding, head = p.embedding, p.lm_head
    assert embedding == head == 128_256 * 4096  # untied
    block = (p.total - embedding - head - 4096) / 32  # the final norm's 4096 weights aside
    bf16 = 2
    # 2025-06: the root (embedding, final norm, output) unsharded through the step, with the
    # current and the prefetched block
    root_held = _forward_comm(_fsdp("2025-06"))
    assert root_held == pytest.approx(bf16 * (2 * block + embedding + head + 4096), abs=64)
    # after PR #1094 the embedding and [norm, output] are units of their own: a block and the
    # larger of {block, head} are unsharded at once, the root keeps the final norm only
    own_units = _forward_comm(_fsdp("2025-08"))
    assert own_units == pytest.approx(bf16 * (block + max(block, head) + 4096), abs=64)
    # the difference at the forward peak is one block and the embedding: 1.39 GiB for Llama-3-8B
    assert (root_held - own_units) / 2**30 == pytest.approx(1.39, abs=0.01)


def test_the_root_term_raises_the_planned_peak_by_as_much() -> None:
    held, own = compute_plan(_fsdp("2025-06")), compute_plan(_fsdp("2025-08"))
    diff = held.predicted.max_allocated_bytes - own.predicted.max_allocated_bytes
    assert diff == _forward_comm(_fsdp("2025-06")) - _forward_comm(_fsdp("2025-08"))


# --- notes and errors -----------------------------------------------------------------------


def test_a_month_holding_a_change_asks_for_the_day() -> None:
    notes = stacks.unknowns(_fsdp("2025-07"))
    assert "shards_root on 2025-07-29" in notes["torchtitan_release"]
    assert "torchtitan_release" not in stacks.unknowns(_fsdp("2025-07-15"))
    assert "torchtitan_release" not in stacks.unknowns(_fsdp("2025-06"))


def test_a_checkout_older_than_the_oldest_read_is_planned_as_of_it_with_a_note() -> None:
    old = _fsdp("2024-10")
    assert "before 2024-12-19 was not read" in stacks.unknowns(old)["stack_unknown"]
    assert _behaviours(stacks.profile(old)) == _behaviours(_at("2024-12-19"))


def test_an_unreadable_version_is_an_input_error() -> None:
    with pytest.raises(InvalidConfigError) as err:
        compute_plan(_fsdp("main"))
    assert err.value.reference == "torchtitan-version-unreadable"
    assert "main" in str(err.value) and err.value.hint


def test_a_version_with_another_framework_is_refused_by_the_planner_too() -> None:
    # validate() refuses it for every caller, not only the CLI: the version would be ignored
    request = replace(_fsdp("2025-02"), framework=Framework.HF)
    with pytest.raises(InvalidConfigError) as err:
        compute_plan(request)
    assert err.value.reference == "torchtitan-version-without-torchtitan" and err.value.hint


@pytest.mark.parametrize(
    "text", ["9" * 5000 + "-01", "2025-" + "1" * 5000, "2025-01-" + "1" * 5000]
)
def test_a_date_of_thousands_of_digits_is_no_date_and_no_crash(text: str) -> None:
    # int() refuses strings of more than 4300 digits: the lengths decide first
    assert commit_date(text) is None


def test_a_month_and_day_with_leading_zeros_still_read() -> None:
    assert commit_date("2025-0004-008") == (2025, 4, 8)


def test_every_dated_change_names_a_bool_behaviour_of_the_profile() -> None:
    names = {f.name for f in fields(stacks.StackProfile)}
    for change in stacks.TORCHTITAN_CHANGES:
        assert change.field in names
        assert isinstance(getattr(stacks.PROFILES[Framework.TORCHTITAN], change.field), bool)
    dates = [c.since for c in stacks.TORCHTITAN_CHANGES]
    assert dates == sorted(dates) and dates[0] > stacks.TORCHTITAN_EARLIEST
