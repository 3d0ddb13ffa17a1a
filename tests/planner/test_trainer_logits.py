"""The HF Trainer's logits at the loss, for ``--framework hf`` and ``hf-legacy``.

Under the Trainer's ``bf16=True`` / ``fp16=True`` accelerate's ``Accelerator.prepare_model`` wraps
the forward in ``torch.autocast`` and ``convert_outputs_to_fp32`` (``accelerator.py``), whose
``tensor.float()`` (``utils/operations.py`` ``convert_to_fp32``) copies every 16-bit output: from
transformers 4.46 on the model returns its 16-bit logits (``ForCausalLMLoss`` upcasts inside the
loss, ``loss/loss_utils.py``), so the Trainer receives a float32 copy of them. That copy is made
after the loss returned, when the loss's own float32 upcast is gone: the 16-bit logits, the copy
and the saved fp32 log-softmax, 2 + 4 + 4 bytes per logit, the same as inside the loss (the 16-bit
logits, their upcast and the log-softmax; from 4.49, 4.46-4.48 also copied the shifted logits:
stacks.py). ``Trainer.compute_loss`` drops the outputs when it
returns, before ``accelerator.backward``. The planned loss region (``LossBuffers.saved`` and the
forward phase's "logits": the larger of the forward and backward transients) is 12 bytes per
logit, the backward's start (log-softmax, its gradient, the logits' fp32 gradient), and the
copy fits inside it (``StackProfile.trainer_fp32_logits`` stays Unsloth's, whose kernel makes
no fp32 copy of its own).

The toy below runs the real ``ForCausalLMLoss`` through the real ``prepare_model`` under
FakeTensorMode and MemTracker: a head over a hidden state, the loss, the outputs dropped as
``compute_loss`` drops them, backward.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpuwarden.planner import plan_memory
from gpuwarden.planner.loss import loss_buffers
from gpuwarden.planner.precision import recipe
from gpuwarden.planner.stacks import PROFILES
from gpuwarden.types.plan import Framework, PlanRequest, Precision
from tests.planner.toy_head import BATCH, HIDDEN, SEQ, VOCAB, toy_head_request

LOGITS = BATCH * SEQ * VOCAB
HF_STACKS = (Framework.HF, Framework.HF_LEGACY)
FP32, HALF = 4, 2  # bytes of a float32 and of a bf16 / fp16 element


def _request(framework: Framework, precision: Precision) -> PlanRequest:
    return toy_head_request(framework=framework, precision=precision)


def _planned_loss_region(request: PlanRequest) -> int:
    forward = next(p for p in plan_memory(request).phases if p.name == "forward")
    saved = loss_buffers(request, recipe(request), BATCH * SEQ, 1).saved
    return int(saved + forward.bytes_by_component["logits"])


@pytest.mark.parametrize("framework", HF_STACKS)
def test_the_loss_keeps_an_fp32_log_softmax_next_to_one_fp32_copy(framework: Framework) -> None:
    request = _request(framework, Precision.BF16)
    lb = loss_buffers(request, recipe(request), BATCH * SEQ, 1)
    assert lb.saved == FP32 * LOGITS  # log_softmax's output, saved by nll_loss
    # the 16-bit logits and one float32 copy of them: ForCausalLMLoss's upcast, then (once the
    # loss returned) accelerate's convert_to_fp32 copy of the returned logits
    assert lb.transient_forward == (HALF + FP32) * LOGITS
    # backward's start: the log-softmax's gradient and the logits' fp32 gradient
    assert lb.transient_backward == 2 * FP32 * LOGITS


@pytest.mark.parametrize("framework", HF_STACKS)
def test_accelerates_copy_lies_inside_the_planned_region(framework: Framework) -> None:
    request = _request(framework, Precision.BF16)
    copy_moment = (FP32 + HALF + FP32) * LOGITS  # log-softmax, returned logits, their copy
    assert _planned_loss_region(request) == 12 * LOGITS
    assert copy_moment < _planned_loss_region(request)
    assert not PROFILES[framework].trainer_fp32_logits


@pytest.fixture
def bf16_accelerator() -> Iterator[Any]:
    """accelerate's Accelerator under bf16 mixed precision on the CPU (native AMP there too);
    its process-wide state is reset afterwards."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    accelerate = pytest.importorskip("accelerate")
    from accelerate.state import AcceleratorState

    accelerator = accelerate.Accelerator(mixed_precision="bf16", cpu=True)
    try:
        yield accelerator
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def _trainer_step(accelerator: Any, weight_bytes: int) -> tuple[int, Any]:
    """Peak bytes of one Trainer step's loss region (weights, hidden state and their autocast
    casts left out) and the dtype of the logits the step's forward returned."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker
    from transformers.loss.loss_utils import ForCausalLMLoss
    from transformers.modeling_outputs import CausalLMOutputWithPast

    dtype = torch.float32 if weight_bytes == FP32 else torch.bfloat16

    class Head(torch.nn.Module):
        """A causal LM's last step: the LM head, then transformers' loss on its logits."""

        def __init__(self) -> None:
            super().__init__()
            self.lm_head = torch.nn.Linear(HIDDEN, VOCAB, bias=False, dtype=dtype)

        def forward(self, hidden: Any, labels: Any) -> Any:
            logits = self.lm_head(hidden)
            loss = ForCausalLMLoss(logits, labels, VOCAB)
            return CausalLMOutputWithPast(loss=loss, logits=logits)

    with FakeTensorMode():
        model = accelerator.prepare_model(Head(), device_placement=False)
        hidden = torch.empty(BATCH, SEQ, HIDDEN, dtype=dtype, requires_grad=True)
        labels = torch.zeros(BATCH, SEQ, dtype=torch.long)
        returned: dict[str, Any] = {}

        def compute_loss() -> Any:
            outputs = model(hidden, labels)
            returned["dtype"] = outputs["logits"].dtype
            return outputs["loss"]  # the outputs die here, before backward

        tracker = MemTracker()
        tracker.track_external(model, hidden, labels)
        with tracker:
            compute_loss().backward()
        peak = sum(s["Total"] for s in tracker.get_tracker_snapshot("peak").values())
    inputs = weight_bytes * (HIDDEN * VOCAB + BATCH * SEQ * HIDDEN)
    # an fp32 head under autocast: its bf16 weight cast (cached) and the hidden state's bf16 cast
    # (saved by the matmul) are the planner's `casts` / activations, not the loss's
    casts = HALF * (HIDDEN * VOCAB + BATCH * SEQ * HIDDEN) if weight_bytes == FP32 else 0
    return int(peak - inputs - casts), returned["dtype"]


@pytest.mark.torch
@pytest.mark.parametrize(
    ("framework", "precision", "weight_bytes"),
    [
        # transformers 5.x loads the checkpoint's bf16; the Trainer's bf16=True autocasts it
        (Framework.HF, Precision.BF16, HALF),
        # 4.x without torch_dtype loads float32: bf16=True is AMP over fp32 weights
        (Framework.HF_LEGACY, Precision.BF16_MIXED, FP32),
    ],
)
def test_trainer_loss_region_matches_memtracker(
    bf16_accelerator: Any, framework: Framework, precision: Precision, weight_bytes: int
) -> None:
    import torch

    measured, returned = _trainer_step(bf16_accelerator, weight_bytes)
    assert returned == torch.float32  # the wrapper ran: the step saw accelerate's copy
    assert _planned_loss_region(_request(framework, precision)) == pytest.approx(measured, rel=0.01)
