"""The peak is the largest phase of a step, not a sum (memory.md §2.11, §5.4)."""

from __future__ import annotations

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.planner.overheads import cublas_workspace
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    LossImpl,
    MemoryPlan,
    Optimizer,
    OptimizerImpl,
    PlanRequest,
    Precision,
)
from gpuwarden.units import GIB


def step(checkpointing: Checkpointing, optimizer: Optimizer) -> MemoryPlan:
    # memory.md §5.4: Llama-2-7B, s=4096, b=1, pure-bf16 params, AdamW states in bf16, traced by
    # MemTracker on CPU, where AdamW runs its single-tensor (for-loop) implementation.
    return plan_memory(
        PlanRequest(
            model=resolve_model("Llama-2-7b-hf"),
            precision=Precision.BF16,
            seq_len=4096,
            attention=Attention.SDPA,
            checkpointing=checkpointing,
            optimizer=optimizer,
            optimizer_impl=OptimizerImpl.FOR_LOOP,
        )
    )


def tensors(plan: MemoryPlan) -> float:
    """GiB of tensors, as MemTracker counts them (no cuBLAS workspace, no allocator slack)."""
    return (plan.predicted.max_allocated_bytes - cublas_workspace(None, 2)) / GIB


@pytest.mark.parametrize(
    ("checkpointing", "optimizer", "phase", "memtracker_gib", "tolerance"),
    [
        (Checkpointing.NONE, Optimizer.ADAMW, "forward", 62.01, 0.002),
        (Checkpointing.FULL, Optimizer.ADAMW, "optimizer-step", 50.69, 0.002),
        (Checkpointing.NONE, Optimizer.NONE, "forward", 36.91, 0.002),
        # MemTracker's backward peak comes a little before layer 0: 25.56 GiB
        (Checkpointing.FULL, Optimizer.NONE, "backward-end", 25.56, 0.01),
    ],
)
def test_memtracker_peaks(
    checkpointing: Checkpointing,
    optimizer: Optimizer,
    phase: str,
    memtracker_gib: float,
    tolerance: float,
) -> None:
    plan = step(checkpointing, optimizer)
    assert plan.peak_phase == phase
    assert tensors(plan) == pytest.approx(memtracker_gib, rel=tolerance)


def test_peak_is_the_largest_phase_and_components_sum_at_the_peak() -> None:
    plan = step(Checkpointing.FULL, Optimizer.ADAMW)
    totals = {p.name: p.total for p in plan.phases}
    assert max(totals.values()) == totals[plan.peak_phase] == plan.peak_bytes
    assert sum(plan.at_peak().values()) == plan.peak_bytes
    # A sum of every component's own peak over-states the job: activations and gradients do
    # not peak together under checkpointing.
    assert sum(c.bytes for c in plan.components) > plan.peak_bytes


def test_gradient_accumulation_keeps_gradients_through_the_forward() -> None:
    spec = resolve_model("Llama-2-7b-hf")
    one = plan_memory(PlanRequest(model=spec, precision=Precision.BF16, seq_len=4096))
    four = plan_memory(
        PlanRequest(model=spec, precision=Precision.BF16, seq_len=4096, grad_accum=4)
    )
    forward = {p.name: p for p in four.phases}["forward"]
    assert forward.bytes_by_component["gradients"] == spec.total_parameters * 2
    assert four.peak_bytes > one.peak_bytes


def _tied_checkpointed() -> PlanRequest:
    return PlanRequest(
        model=resolve_model("Llama-3.2-1B"),  # tied embedding, 128,256 × 2,048
        precision=Precision.BF16,
        attention=Attention.SDPA,
        seq_len=512,
        checkpointing=Checkpointing.FULL,
        optimizer=Optimizer.NONE,
    )


def test_tied_embedding_gradient_lives_through_backward_and_peaks_at_the_lookup() -> None:
    request = _tied_checkpointed()
    plan = plan_memory(request)
    phases = {p.name: p.bytes_by_component for p in plan.phases}
    emb_grad = request.model.parameters.embedding * 2
    grads = request.model.total_parameters * 2
    layers = len(request.model.parameters.layers)
    # the head's part of the tied gradient exists from the start of backward: only the first
    # block's share is missing at the end (an untied embedding's would be missing too)
    assert phases["backward-end"]["gradients"] == pytest.approx(grads * (1 - 1 / layers), rel=1e-6)
    assert phases["embedding-backward"]["gradients"] == grads + 2 * emb_grad
    assert plan.peak_phase == "embedding-backward"
    untied = plan_memory(PlanRequest(model=resolve_model("Llama-2-7b-hf"), seq_len=512))
    assert "embedding-backward" not in {p.name for p in untied.phases}


@pytest.mark.torch
def test_tied_embedding_peak_matches_memtracker() -> None:
    """Exact mode (MemTracker, FakeTensorMode; a real CPU run gives the same bytes) on the
    full-size model: the peak is the lookup's gradient added to the head's, to 0.1 %."""
    pytest.importorskip("transformers")
    from gpuwarden.planner.exact import run_exact

    request = _tied_checkpointed()
    exact = run_exact(request)
    plan = plan_memory(request)
    assert exact.peak_phase == "backward"
    assert plan.peak_phase == "embedding-backward"
    assert tensors(plan) * GIB == pytest.approx(exact.peak_bytes, rel=1e-3)


@pytest.mark.torch
def test_chunked_head_gradient_copies_are_what_autograd_holds() -> None:
    """A weight used by several chunks gets one gradient part per chunk; autograd adds them out
    of place. MemTracker on a real CPU run counts the copies the loss model assumes."""
    torch = pytest.importorskip("torch")
    from torch.distributed._tools.mem_tracker import MemTracker

    from gpuwarden.planner.loss import CHUNKS, loss_buffers
    from gpuwarden.planner.precision import recipe

    chunked = PlanRequest(model=resolve_model("Llama-3.2-1B"), loss=LossImpl.CHUNKED)
    copies = loss_buffers(chunked, recipe(chunked), 512, 1).head_grad_copies

    weight = torch.nn.Parameter(torch.randn(1000, 64))
    holder = torch.nn.Module()
    holder.weight = weight
    tracker = MemTracker()
    tracker.track_external(holder)
    x = torch.randn(2 * CHUNKS, 64)
    with tracker:
        loss = sum(
            torch.nn.functional.linear(c, weight).logsumexp(-1).sum() for c in x.chunk(CHUNKS)
        )
        tracker.reset_mod_stats()
        loss.backward()
        peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]
    temps = next(v for k, v in peak.items() if getattr(k, "name", "") == "TEMP")
    assert temps == copies * weight.numel() * 4


@pytest.mark.torch
def test_kept_gradients_add_what_memtracker_adds() -> None:
    """zero_grad(set_to_none=False): exact mode (MemTracker) and the formula both add exactly
    one gradient per trainable parameter to the forward's peak."""
    pytest.importorskip("transformers")
    import dataclasses

    from gpuwarden.catalog.configs import normalise
    from gpuwarden.planner.exact import run_exact

    raw = dict(resolve_model("Llama-3.2-1B").raw_config)
    small = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2}
    small |= {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64}
    spec = normalise("small-llama", {**raw, **small, "vocab_size": 4096}, "small Llama-3.2-1B")
    request = PlanRequest(
        model=spec, precision=Precision.BF16, attention=Attention.SDPA, seq_len=64
    )
    kept = dataclasses.replace(request, keep_grads=True)
    grads = spec.total_parameters * 2

    def forward(plan: MemoryPlan) -> int:
        return next(p.total for p in plan.phases if p.name == "forward")

    assert forward(plan_memory(kept)) - forward(plan_memory(request)) == grads
    traced = run_exact(kept).phase_peaks["forward"] - run_exact(request).phase_peaks["forward"]
    assert traced == grads
