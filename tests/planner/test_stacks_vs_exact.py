"""Stack behaviours against what real PyTorch code holds (exact mode, or the library itself).

* torchtitan's op-level SAC: exact mode applies torchtitan's policy (``_build.op_sac_context``)
  to each HF decoder layer; what is alive at the end of the forward is compared with the
  formula's saved activations (``formula_saved``), pure bf16 as torchtitan computes, LoRA and AMP.
* the fp32 load: the model built in fp32 under FakeTensorMode, then cast parameter by parameter
  as ``Module.to`` does (``param.data = ...``), against the plan's load phase.
* the evaluation forward: ``model(ids, labels=ids)`` under ``torch.no_grad`` against the plan's
  evaluation phase (the working set and the logits with their loss; weights excluded).
* LitGPT's FSDP units: torch's own ``FullyShardedDataParallel`` (CPU, gloo, one rank) wrapping
  each decoder layer with its LoRA adapters and ``use_orig_params=True``; the gradients it holds
  after a ``no_sync`` backward against the plan's accumulated gradients.
"""

from __future__ import annotations

import tempfile
import warnings
from dataclasses import replace
from typing import Any

import pytest

from gpuwarden.planner.exact import run_exact
from gpuwarden.planner.plan import compute_plan
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    Framework,
    FsdpKind,
    Mode,
    Optimizer,
    PlanRequest,
    Precision,
)
from tests.planner.test_formula_vs_exact import SMALL, TOLERANCE, formula_saved, small_spec

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True, scope="module")
def _torch_extra() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")


def _phase(request: PlanRequest, name: str) -> dict[str, int]:
    plan = compute_plan(request)
    return next(p for p in plan.phases if p.name == name).bytes_by_component


# --- op-level SAC --------------------------------------------------------------------------------

OP_CASES = [
    ("llama", {"precision": Precision.BF16}),
    ("llama-tied-gqa", {"precision": Precision.BF16}),
    # q/k/v with a bias run aten.addmm: neither saved nor counted by the policy
    ("qwen2", {"precision": Precision.BF16}),
    ("mistral", {"precision": Precision.BF16}),
    ("phi3", {"precision": Precision.BF16}),
    ("gemma", {"precision": Precision.BF16}),
    # PEFT's lora_A / lora_B matmuls join the count after their base Linear's
    ("llama", {"mode": Mode.LORA, "precision": Precision.BF16}),
    ("mistral", {"mode": Mode.LORA, "precision": Precision.BF16, "lora_dropout": 0.1}),
    # autocast: the weight casts inside a checkpointed block are recomputed, not kept
    ("llama", {"precision": Precision.BF16_MIXED}),
]


@pytest.mark.parametrize(
    ("family", "knobs"),
    OP_CASES,
    ids=[f"{f}-{'-'.join(map(str, k.values()))}" for f, k in OP_CASES],
)
def test_op_level_sac_keeps_what_the_exact_trace_keeps(family: str, knobs: dict[str, Any]) -> None:
    request = PlanRequest(
        model=small_spec(family),
        micro_batch=2,
        seq_len=48,
        optimizer=Optimizer.NONE,
        checkpointing=Checkpointing.OP,
        attention=Attention.SDPA,
        lora_targets=SMALL[family][2],
        **knobs,
    )
    exact = run_exact(request).saved_activation_bytes
    assert formula_saved(request) == pytest.approx(exact, rel=TOLERANCE)
    # and it is a real saving: more than full checkpointing keeps, less than none
    full = formula_saved(replace(request, checkpointing=Checkpointing.FULL))
    none = formula_saved(replace(request, checkpointing=Checkpointing.NONE))
    assert full < exact < none


@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_autocast_casts_inside_checkpointed_blocks_are_recomputed(family: str) -> None:
    request = PlanRequest(
        model=small_spec(family),
        precision=Precision.BF16_MIXED,
        micro_batch=2,
        seq_len=48,
        optimizer=Optimizer.NONE,
        checkpointing=Checkpointing.FULL,
        attention=Attention.SDPA,
    )
    exact = run_exact(request).saved_activation_bytes
    assert formula_saved(request) == pytest.approx(exact, rel=TOLERANCE)


def test_exact_mode_refuses_op_sac_with_eager_attention() -> None:
    from gpuwarden.errors import GpuwardenError

    request = PlanRequest(
        model=small_spec("llama"), checkpointing=Checkpointing.OP, attention=Attention.EAGER
    )
    with pytest.raises(GpuwardenError) as err:
        run_exact(request)
    assert err.value.reference == "exact-unsupported"


# --- the fp32 load -------------------------------------------------------------------------------


def _traced_cast(request: PlanRequest) -> int:
    """Peak bytes while the fp32-built model is cast to bf16 one parameter at a time."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpuwarden.planner.exact import _build, _run

    with _build.quiet(), FakeTensorMode(), _build.fake_safe_masks():
        config, kind, _ = _build.load_config(request.model, use_cache=False)
        with _build.default_dtype(torch.float32):
            model, _ = _build._instantiate(config, kind, "sdpa", [])
        tracker = _run.PeakTracker()
        tracker.track_external(model)
        with tracker:
            for param in model.parameters():  # Module._apply's non-swapping path
                param.data = param.data.to(torch.bfloat16)
        buffers = sum(b.numel() * b.element_size() for b in model.buffers())
        return int(tracker.peak()) - buffers


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma", "phi3"])
def test_the_fp32_load_phase_is_what_casting_the_model_holds(family: str) -> None:
    request = PlanRequest(
        model=small_spec(family),
        precision=Precision.BF16,
        framework=Framework.HF_LEGACY,  # transformers 4: from_pretrained loads fp32
        seq_len=32,
    )
    load = _phase(request, "load")
    assert load["parameters"] == 4 * request.model.total_parameters
    planned = load["parameters"] + load["temporaries"]
    assert planned == pytest.approx(_traced_cast(request), rel=0.005)


# --- the evaluation forward ---------------------------------------------------------------------


def _traced_eval(request: PlanRequest) -> int:
    """Peak bytes of ``model(ids, labels=ids)`` without autograd, weights and inputs excluded."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpuwarden.planner.exact import _build, _recipe, _run

    recipe = _recipe.resolve(request)
    with _build.quiet(), FakeTensorMode(), _build.fake_safe_masks():
        built = _build.build(request, recipe)
        built.model.eval()
        inputs = _run.training_inputs(built, request.micro_batch, request.seq_len)
        tracker = _run.PeakTracker()
        tracker.track_external(built.model, *inputs.values())
        with tracker, torch.no_grad():
            del built.model(**inputs).loss
        held = [*built.model.parameters(), *built.model.buffers(), *inputs.values()]
        return int(tracker.peak()) - sum(t.numel() * t.element_size() for t in held)


EVAL_FAMILIES = [
    "llama",
    "qwen2",
    "mistral",
    "phi3",
    pytest.param(
        "gemma",
        marks=pytest.mark.xfail(
            strict=True,
            reason="Gemma's MLP (i = 8·h here) outweighs the logits, so the block's working set "
            "is the peak, and the trace holds ~8 % more than working_set's 3·i + 2·h per token "
            "(~4.5·h B/token more; the op is not identified yet)",
        ),
    ),
]


@pytest.mark.parametrize("family", EVAL_FAMILIES)
@pytest.mark.parametrize(("batch", "seq"), [(2, 48), (1, 64)])
def test_the_evaluation_phase_is_what_a_no_grad_forward_holds(
    family: str, batch: int, seq: int
) -> None:
    request = PlanRequest(
        model=small_spec(family),
        precision=Precision.BF16,
        optimizer=Optimizer.NONE,
        micro_batch=batch,
        seq_len=seq,
        eval_batch=batch,
        attention=Attention.SDPA,
    )
    evaluation = _phase(request, "evaluation")
    planned = evaluation["activations"] + evaluation["logits"]
    assert planned == pytest.approx(_traced_eval(request), rel=0.01)


# --- LitGPT's FSDP units -------------------------------------------------------------------------


def _fsdp_no_sync_gradients(request: PlanRequest) -> tuple[int, int]:
    """(bytes of the gradients FSDP holds after a no_sync backward, frozen parameters that got
    one), each decoder layer a unit with its adapters, as LitGPT's FSDPStrategy wraps Blocks."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    from gpuwarden.planner.exact import _build, _recipe, _run

    plain = replace(request, framework=Framework.HF, num_gpus=1, fsdp=None)
    recipe = _recipe.resolve(replace(plain, checkpointing=Checkpointing.NONE))
    # LitGPT's own LoRA builds its adapters in the model's dtype (PEFT's would be fp32)
    recipe = replace(recipe, adapter_dtype=recipe.weight_dtype)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            with _build.quiet(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # FSDP warns about mixed frozen / trainable units
                built = _build.build(plain, recipe)
                layer = type(built.model.get_base_model().model.layers[0])
                model = FullyShardedDataParallel(
                    built.model,
                    auto_wrap_policy=ModuleWrapPolicy({layer}),
                    use_orig_params=True,
                    device_id=torch.device("cpu"),
                )
                inputs = _run.training_inputs(built, request.micro_batch, request.seq_len)
                with model.no_sync():
                    model(**inputs).loss.backward()
                graded = [p for p in model.parameters() if p.grad is not None]
                frozen = sum(1 for p in graded if not p.requires_grad)
                return _run.storage_bytes(p.grad for p in graded), frozen
        finally:
            dist.destroy_process_group()


def test_litgpt_fsdp_units_hold_a_gradient_as_large_as_the_unit() -> None:
    request = PlanRequest(
        model=small_spec("llama"),
        mode=Mode.LORA,
        precision=Precision.BF16,
        framework=Framework.LITGPT,
        num_gpus=2,
        fsdp=FsdpKind.FULL,
        grad_accum=4,
        micro_batch=1,
        seq_len=32,
        checkpointing=Checkpointing.FULL,
    )
    held, frozen_with_grad = _fsdp_no_sync_gradients(request)
    assert frozen_with_grad > 0  # the frozen base weights of each unit got a gradient too
    # the plan's gradients alive through the forward of an accumulation window: every unit's
    # full-size bf16 gradient, unsharded under no_sync
    assert _phase(request, "forward")["gradients"] == pytest.approx(held, rel=0.001)
    # PEFT without mixed units: the adapters' gradients only
    hf = replace(request, framework=Framework.HF)
    assert _phase(hf, "forward")["gradients"] < 0.05 * held
