"""DoRA as PEFT runs it (``LoraConfig(use_dora=True)``, ``--lora-variant dora``): what each
adapted Linear keeps beyond plain LoRA.

Read in huggingface/peft at @d20332ed (``src/peft/tuners/lora/dora.py``) and in the installed
0.21.2 (``dora.py``, ``variants.py``, ``layer.py``):

* ``DoraLinearLayer.update_layer`` makes the magnitude a trainable parameter with one element per
  output feature (the column norm of W + s·B·A at init), in the adapters' dtype: it has a gradient
  and optimizer states like the adapters (``layout.lora_parameters`` counts it).
* ``DoraLinearVariant.forward`` / ``DoraLinearLayer.forward``: ``result_dora = (m / ‖W + s·B·A‖ −
  1) · base_result + m / ‖W + s·B·A‖ · lora_result · s``, the norm detached. The magnitude
  requires grad, so each of the two products saves its out-wide operand for the magnitude's
  gradient: ``base_result`` and ``lora_result = lora_B(lora_A(x))`` (plain LoRA only scales the
  latter by a Python number, which saves nothing).
* ``base_result`` is the base layer's own output when the adapter's dropout is ``nn.Identity``
  (PEFT >= 0.14, PR #2122); with dropout, and in every earlier release, it is recomputed as
  ``F.linear(dropout(x), W.to(x.dtype))``, whose weight operand autograd keeps for the input's
  gradient.
* per forward, ``get_lora_weight`` runs ``lora_B(lora_A(eye(d_in)))`` (the full d_out × d_in
  product) and ``get_weight_norm`` adds it, scaled, to ``W.to(x.dtype)``: transient inside one
  Linear's forward (the norm is detached, so that graph dies with the call), with ``eye`` kept by
  lora_A's graph until the product dies.

``x`` there is the adapter's input after ``_cast_input_dtype`` (the adapter dtype); under autocast
the adapters' matmuls compute in the 16-bit dtype.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.layout import adapted_names, distinct_layers, lora_targets
from gpuwarden.planner.precision import QUANTIZED, Recipe
from gpuwarden.planner.stacks import profile
from gpuwarden.planner.versions import PEFT_DORA_REUSES_BASE_RESULT
from gpuwarden.types.model import LinearShape
from gpuwarden.types.plan import LoraVariant, Mode, PlanRequest, Precision
from gpuwarden.units import KIB, MIB

# out × in tensors of the weight norm in the adapter dtype: the B·A product (lora_weight), and
# get_weight_norm's s · lora_weight and W + s · lora_weight alive beside it
PRODUCT = 1
NORM_TEMPORARIES = 2


def check_variant(request: PlanRequest) -> list[str]:
    """Refuse DoRA where PEFT does not run it; warnings where the plan does not size all of it
    or where the knob does nothing."""
    if request.lora_variant is not LoraVariant.DORA:
        return []
    if request.mode not in {Mode.LORA, Mode.QLORA}:
        return ["--lora-variant applies to --mode lora / qlora; it has no effect here"]
    if not profile(request).peft_lora:
        raise InvalidConfigError(
            f"--lora-variant dora is planned as PEFT runs it; --framework "
            f"{request.framework.value} builds its own LoRA modules",
            hint="plan it with --framework hf or hf-legacy (PEFT's LoraConfig(use_dora=True)), "
            "or drop --lora-variant",
            reference="dora-framework",
        )
    if request.precision is Precision.INT4:
        # PEFT's GPTQ and AWQ LoRA layers (tuners/lora/gptq.py, awq.py) raise in __init__
        raise InvalidConfigError(
            "--lora-variant dora on an int4 (GPTQ / AWQ) base: PEFT's QuantLinear LoRA layers "
            "raise 'does not support DoRA yet'",
            hint="use an NF4 base (--precision nf4, QDoRA through bitsandbytes), or plain LoRA",
            reference="dora-int4",
        )
    experts = sorted(
        name for name in adapted_names(request.model, request) if name.startswith("experts.")
    )
    if experts:
        # PEFT's ParamWrapper (target_parameters) raises "does not work with use_dora=True"
        raise InvalidConfigError(
            f"--lora-variant dora: PEFT's DoRA does not adapt routed-expert parameters "
            f"({', '.join(experts)})",
            hint="leave the experts out of --lora-targets, or drop --lora-variant dora",
            reference="dora-experts",
        )
    if "lm_head" in lora_targets(request.model, request):
        return [
            "DoRA on lm_head keeps its base and adapter outputs (logits-wide) for the magnitude's "
            "gradient; the plan counts the magnitude but not those tensors"
        ]
    return []


def runs_dora(request: PlanRequest) -> bool:
    """The job trains DoRA adapters."""
    return request.mode in {Mode.LORA, Mode.QLORA} and request.lora_variant is LoraVariant.DORA


def recomputes_base_result(request: PlanRequest) -> bool:
    """DoRA recomputes the base Linear's output on the adapter's (dropped) input instead of
    reusing the base layer's: with dropout, or before PEFT 0.14 (``versions.py``)."""
    before_reuse = (
        request.peft_version is not None and request.peft_version < PEFT_DORA_REUSES_BASE_RESULT
    )
    return request.lora_dropout > 0 or before_reuse


def saved_per_token(request: PlanRequest, rc: Recipe, lin: LinearShape) -> float:
    """Bytes per token one DoRA Linear saves for its magnitude's gradient: ``base_result`` (the
    base layer's output, or its recomputation in the adapters' dtype) and ``lora_result``."""
    if not runs_dora(request):
        return 0.0
    adapter_out = rc.adapter_compute_bytes
    base_out = adapter_out if recomputes_base_result(request) else rc.act_bytes
    return lin.out_features * (base_out + adapter_out)


def _copies_weight(request: PlanRequest, rc: Recipe) -> bool:
    """``W.to(x.dtype)`` makes a new tensor: a dequantized 4 / 8-bit weight, or one stored in
    another dtype than the adapters' (x is cast to the adapter dtype first)."""
    return request.precision in QUANTIZED or rc.linear_bytes != rc.adapter_bytes


def kept_weight_bytes(request: PlanRequest, rc: Recipe, lin: LinearShape, grad_free: bool) -> float:
    """Bytes of the weight copy the recomputed base output keeps for the input's gradient (0 when
    the input needs none, or when the weight is already stored in the dtype the matmul runs in)."""
    if not runs_dora(request) or not recomputes_base_result(request) or grad_free:
        return 0.0
    if rc.adapters_autocast:
        # autocast casts the non-leaf W.to(x.dtype) for this matmul: a fresh 16-bit copy
        element = rc.act_bytes
    elif _copies_weight(request, rc):
        element = rc.adapter_bytes
    else:
        return 0.0  # W.to(x.dtype) returns the stored weight itself
    return lin.in_features * lin.out_features * element


def _weight_norm_bytes(request: PlanRequest, rc: Recipe, lin: LinearShape) -> float:
    """Bytes one DoRA Linear's weight norm holds at once: eye(d_in) (and its autocast cast,
    saved by lora_A), the B·A product in the adapter dtype, get_weight_norm's two temporaries,
    and W in the adapter dtype where that is a copy."""
    eye = lin.in_features * lin.in_features * rc.adapter_bytes
    eye_cast = lin.in_features * lin.in_features * rc.act_bytes if rc.adapters_autocast else 0
    matrix = lin.in_features * lin.out_features * rc.adapter_bytes
    weight_copy = matrix if _copies_weight(request, rc) else 0
    return eye + eye_cast + matrix * (PRODUCT + NORM_TEMPORARIES) + weight_copy


def _adapted_linears(request: PlanRequest) -> Iterator[tuple[LinearShape, int]]:
    """Each distinct block's adapted Linears, with the number of blocks of that kind."""
    adapted = adapted_names(request.model, request)
    for layer, times in distinct_layers(request.model):
        for lin in layer.linears:
            if lin.name in adapted:
                yield lin, times


def weight_norm_peak(request: PlanRequest, rc: Recipe) -> float:
    """The largest weight-norm transient of the adapted Linears (one Linear runs at a time)."""
    if not runs_dora(request):
        return 0.0
    return max(
        (_weight_norm_bytes(request, rc, lin) for lin, _ in _adapted_linears(request)),
        default=0.0,
    )


def _saved_per_token_all_blocks(request: PlanRequest, rc: Recipe) -> float:
    """``saved_per_token`` summed over every adapted Linear of every block."""
    return sum(
        saved_per_token(request, rc, lin) * times for lin, times in _adapted_linears(request)
    )


def dora_notes(request: PlanRequest, rc: Recipe) -> dict[str, str]:
    """The plan note on what DoRA adds (empty without DoRA)."""
    if not runs_dora(request):
        return {}
    base = (
        "recomputed on the adapter's input, with the weight copy it keeps"
        if recomputes_base_result(request)
        else "the base layer's own"
    )
    per_token = _saved_per_token_all_blocks(request, rc) / KIB
    norm = weight_norm_peak(request, rc) / MIB
    return {
        "dora": f"PEFT's forward: every adapted Linear keeps its base output ({base}) and its "
        f"adapter output for the magnitude's gradient, {per_token:.1f} KiB per token over the "
        f"blocks; its weight norm holds up to {norm:.0f} MiB inside one Linear's forward"
    }
