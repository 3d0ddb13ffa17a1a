"""LitGPT's loss region against PyTorch's MemTracker: Lightning Fabric's float32 outputs.

Fabric's ``_FabricModule.forward`` hands a model's outputs back through
``precision.convert_output``, which casts every floating tensor to ``torch.get_default_dtype()``
(float32 outside the plugin's forward context), so LitGPT's fit loop receives float32 logit chunks
from a bf16 head, holds them in ``logits`` until the next forward returns, and
``chunked_cross_entropy`` keeps a float32 log-softmax per chunk. The toy below is that loss region
alone (a bf16 head over a bf16 hidden state, ``lm_head_chunk_size=128``, the chunks cast as
``convert_output`` casts them, per-chunk cross-entropy, backward) under FakeTensorMode and
MemTracker; the plan's side is what its forward phase adds for it: the saved log-softmax
(``LossBuffers.saved``), the loss's transient (the phase's "logits") and the previous step's
logits ("held_outputs"). The head is small next to the logits, so its weight gradient and the
hidden state's gradient are the tolerance.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.planner import plan_memory
from gpuwarden.planner.loss import loss_buffers
from gpuwarden.planner.precision import recipe
from gpuwarden.types.plan import Framework, PeakStep, PlanRequest
from tests.planner.toy_head import BATCH, HIDDEN, SEQ, VOCAB, toy_head_request

pytestmark = pytest.mark.torch

CHUNK = 128
TOLERANCE = 0.03  # the head's weight gradient (3 copies) and the hidden state's gradient


def _request(peak_step: PeakStep) -> PlanRequest:
    return toy_head_request(framework=Framework.LITGPT, peak_step=peak_step)


def _planned_loss_region(request: PlanRequest) -> int:
    plan = plan_memory(request)
    forward = next(p for p in plan.phases if p.name == "forward").bytes_by_component
    saved = loss_buffers(request, recipe(request), BATCH * SEQ, 1).saved
    return int(saved + forward["logits"] + forward["held_outputs"])


def _measured_loss_region(previous_step: bool) -> int:
    """Peak bytes of one fit-loop step's loss region, less the head and the hidden state."""
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    functional = torch.nn.functional
    with FakeTensorMode():
        head = torch.nn.Linear(HIDDEN, VOCAB, bias=False, dtype=torch.bfloat16)
        hidden = torch.empty(BATCH, SEQ, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
        targets = torch.zeros(BATCH, SEQ, dtype=torch.long)

        def fabric_model() -> list[Any]:
            # GPT.forward(..., lm_head_chunk_size=128), then convert_output's float32 copies
            # (the Linear's function: MemTracker refuses a module called more than once a step)
            chunks = [functional.linear(part, head.weight) for part in hidden.split(CHUNK, dim=1)]
            return [chunk.to(torch.get_default_dtype()) for chunk in chunks]

        def chunked_cross_entropy(logits: list[Any]) -> Any:
            parts = zip(logits, targets.split(CHUNK, dim=1), strict=True)
            losses = [
                functional.cross_entropy(c.reshape(-1, VOCAB), t.reshape(-1), reduction="none")
                for c, t in parts
            ]
            return torch.cat(losses).sum() / targets.numel()

        held: dict[str, list[Any]] = {}
        if previous_step:
            held["logits"] = fabric_model()
            chunked_cross_entropy(held["logits"]).backward()
            head.weight.grad = hidden.grad = None
        fixed = sum(t.untyped_storage().nbytes() for t in (head.weight, hidden, targets))
        tracker = MemTracker()
        tracker.track_external(head, hidden, targets, *held.get("logits", []))
        with tracker:
            held["logits"] = fabric_model()  # the previous step's die when the name is rebound
            chunked_cross_entropy(held["logits"]).backward()
        peak = sum(s["Total"] for s in tracker.get_tracker_snapshot("peak").values())
    return int(peak - fixed)


@pytest.mark.parametrize(
    ("peak_step", "previous_step"), [(PeakStep.STEADY, True), (PeakStep.FIRST, False)]
)
def test_litgpt_loss_region_matches_memtracker(peak_step: PeakStep, previous_step: bool) -> None:
    planned = _planned_loss_region(_request(peak_step))
    measured = _measured_loss_region(previous_step)
    assert planned == pytest.approx(measured, rel=TOLERANCE)


def test_fabric_logits_are_float32_and_dominate_the_region() -> None:
    """10 bytes per logit at a steady step: the previous step's float32 copies, this step's bf16
    chunks and their float32 copies at the head's end (the bf16 loop had 4)."""
    request = _request(PeakStep.STEADY)
    elems = BATCH * SEQ * VOCAB
    assert loss_buffers(request, recipe(request), BATCH * SEQ, 1).saved == 4 * elems
    assert _planned_loss_region(request) == 10 * elems
