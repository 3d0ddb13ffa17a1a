"""Build the HF model of a ``ModelSpec`` from its config, ready to trace (imports torch).

Call inside ``FakeTensorMode`` for planning (no memory is allocated) or outside it for the real-CPU
ground truth of a tiny model; the code path is the same.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import torch
import transformers
from torch import nn

from gpuwarden.errors import InvalidConfigError, MissingExtraError
from gpuwarden.planner.exact._quant import weight_bytes
from gpuwarden.planner.exact._recipe import Recipe, unsupported
from gpuwarden.planner.layout import lora_targets
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Mode, PlanRequest

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Built:
    model: nn.Module
    config: Any  # transformers.PretrainedConfig (loosely typed upstream)
    kind: str  # "causal", "seq2seq" or "masked"
    attention: str  # the attn_implementation actually used
    # traced bytes of the frozen Linear weights minus their size in the quantized format
    quantized_saving: int = 0
    notes: list[str] = field(default_factory=list)


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Create tensors in ``dtype``: ``Module.to(dtype)`` cannot swap fake parameters (§5.5.2)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence transformers' own logger and the deprecations our pinned calls trigger.

    A planner never prints; the filters are narrow so anything unexpected still surfaces.
    """
    hf_logging: Any = transformers.utils.logging  # untyped upstream
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    # FakeTensorMode logs a traceback before re-raising a failed meta kernel; we report it.
    fake_log = logging.getLogger("torch._subclasses.fake_tensor")
    fake_level = fake_log.level
    fake_log.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            # PEFT (≤ 0.21) still reads the attribute transformers 5 renamed.
            warnings.filterwarnings(
                "ignore", r"`is_gradient_checkpointing` is deprecated", FutureWarning
            )
            # PEFT switches fan_in_fan_out on by itself for GPT-2's Conv1D and says so.
            warnings.filterwarnings("ignore", r"fan_in_fan_out is set to False", UserWarning)
            # MemTracker's backward hooks can outlive a module of a discarded graph branch.
            warnings.filterwarnings("ignore", r"Module is None\. Skipping", UserWarning)
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        fake_log.setLevel(fake_level)


def _not_packed(position_ids: torch.Tensor) -> None:
    return None


@contextlib.contextmanager
def fake_safe_masks() -> Iterator[None]:
    """Let a fake run take the same attention-mask path as a real one.

    transformers reads ``position_ids`` (a data-dependent check) to detect packed sequences; a real
    run finds none in our unpacked batch and lets SDPA use ``is_causal`` without a mask. Under
    FakeTensorMode the values cannot be read, so transformers conservatively builds b×s×s masks
    that the real run never has (Llama-2-7B, s=4096, checkpointed: +48 MiB at the peak, the gap
    between memory.md §5.4's 25.56 GiB and 25.51 GiB with this fix; on tiny models the fixed fake
    run equals a real one to the byte). Our inputs are unpacked by construction, so we answer the
    check ourselves.
    """
    masking = getattr(transformers, "masking_utils", None)
    if masking is None or not hasattr(masking, "find_packed_sequence_indices"):
        yield
        return
    with mock.patch.object(masking, "find_packed_sequence_indices", _not_packed):
        yield


def load_config(spec: ModelSpec, *, use_cache: bool) -> tuple[Any, str, list[str]]:
    """transformers config from the spec's raw HF config; returns (config, kind, notes)."""
    raw = dict(spec.raw_config)
    model_type = str(raw.pop("model_type", spec.model_type))
    architectures = raw.pop("architectures", None)
    # The dtype is the request's, not the checkpoint's: from_config would obey torch_dtype.
    for key in ("torch_dtype", "dtype"):
        raw.pop(key, None)
    config = transformers.AutoConfig.for_model(model_type, **raw)
    config.use_cache = use_cache
    notes: list[str] = []
    if getattr(config, "is_encoder_decoder", False):
        kind = "seq2seq"
        if getattr(config, "decoder_start_token_id", None) is None:
            pad = getattr(config, "pad_token_id", None)
            config.decoder_start_token_id = 0 if pad is None else pad
            notes.append(
                "config has no decoder_start_token_id: used the pad token (T5 convention); "
                "decoder labels have --target-len tokens (default: the encoder input's length)"
            )
    elif isinstance(architectures, list) and any(
        str(name).endswith("ForMaskedLM") for name in architectures
    ):
        kind = "masked"
    else:
        kind = "causal"
    return config, kind, notes


def _auto_class(kind: str) -> Any:
    if kind == "seq2seq":
        return transformers.AutoModelForSeq2SeqLM
    if kind == "masked":
        return transformers.AutoModelForMaskedLM
    return transformers.AutoModelForCausalLM


def _instantiate(config: Any, kind: str, attention: str, notes: list[str]) -> tuple[Any, str]:
    auto = _auto_class(kind)
    try:
        return auto.from_config(config, attn_implementation=attention), attention
    except ValueError as exc:
        if attention != "sdpa" or "does not support" not in str(exc):
            raise
    model = auto.from_config(config, attn_implementation="eager")
    notes.append(
        f"{type(model).__name__} has no SDPA support in transformers {transformers.__version__}: "
        "traced with eager attention, which keeps the s² attention scores (FlashAttention on a "
        "GPU would not)"
    )
    return model, "eager"


def _quantized_saving(model: Any, scheme: str, notes: list[str]) -> int:
    """Bytes saved by storing the frozen ``nn.Linear`` weights (not lm_head) in ``scheme``.

    bitsandbytes and GPTQ/AWQ quantize ``nn.Linear`` layers only and skip the output head;
    anything else (embeddings, norms, MoE experts kept as 3-D parameters) stays in float.
    """
    head = model.get_output_embeddings()
    head_weight = getattr(head, "weight", None)
    saving = 0
    count = 0
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.weight is not head_weight:
            out_features, in_features = module.weight.shape
            traced = module.weight.numel() * module.weight.element_size()
            saving += traced - weight_bytes(scheme, out_features, in_features)
            count += 1
    notes.append(f"{count} nn.Linear weights counted as {scheme}")
    return saving


def _materialise_meta(model: nn.Module) -> None:
    """Replace parameters and buffers left on the meta device by CPU (fake) tensors.

    Zeros: values never matter to a memory count, and under FakeTensorMode they cost nothing.
    """
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is not None and param.device.type == "meta":
                module._parameters[name] = nn.Parameter(
                    torch.zeros(param.shape, dtype=param.dtype, device="cpu"),
                    requires_grad=param.requires_grad,
                )
        for name, buffer in list(module._buffers.items()):
            if buffer is not None and buffer.device.type == "meta":
                module._buffers[name] = torch.zeros(buffer.shape, dtype=buffer.dtype, device="cpu")


def _linear_names(model: nn.Module) -> list[str]:
    return sorted(
        {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    )


def _attach_lora(model: Any, request: PlanRequest, recipe: Recipe) -> Any:
    try:
        import peft
    except ImportError as exc:
        raise MissingExtraError("exact mode for LoRA/QLoRA", "torch", "peft") from exc
    # the targets the formula plans: PEFT's default for the type when the request names none
    targets = lora_targets(request.model, request)
    lora = peft.LoraConfig(
        r=request.lora_rank,
        lora_alpha=2 * request.lora_rank,
        target_modules=list(targets),
        lora_dropout=recipe.lora_dropout,
        use_dora=recipe.dora,
    )
    # Adapters are created on the meta device so that PEFT's `.to(device of the base layer)` is
    # skipped: FakeTensorMode cannot swap a fake parameter in `Module._apply`. They are then
    # materialised as (fake) CPU tensors in the adapter dtype.
    try:
        with (
            default_dtype(DTYPES[recipe.adapter_dtype or recipe.weight_dtype]),
            torch.device("meta"),
        ):
            # the recipe names the adapter dtype, PEFT's default upcast included (fp32 adapters
            # on a bf16 / fp16 base: _recipe), so PEFT is not asked to cast again
            wrapped = peft.get_peft_model(model, lora, autocast_adapter_dtype=False)
    except ValueError as exc:
        if "not found in the base model" not in str(exc):
            raise
        raise InvalidConfigError(
            f"LoRA targets {', '.join(targets)} are not modules of {request.model.name}",
            hint="its Linear modules are: " + ", ".join(_linear_names(model)),
        ) from exc
    _materialise_meta(wrapped)
    return wrapped


def op_sac_save_list() -> frozenset[Any]:
    """The ops whose outputs torchtitan's op-level SAC saves (parallelize.py ``_save_list``):
    matmuls (every other one, see ``op_sac_context``), the fused SDPA kernels and ``max`` (the
    float8 amax); CPU's SDPA kernel stands in for CUDA's, what a CPU trace runs."""
    aten = torch.ops.aten
    return frozenset(
        {
            aten.mm.default,
            aten._scaled_dot_product_flash_attention.default,
            aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_flash_attention_for_cpu.default,
            aten.max.default,
        }
    )


def op_sac_context() -> tuple[Any, Any]:
    """A selective-checkpoint context for one call of one layer, with torchtitan's policy: save
    the outputs of the listed ops, except every second ``aten.mm`` (counted afresh per call, the
    forward and the recomputation apart); recompute everything else."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    save = op_sac_save_list()
    matmuls = {False: 0, True: 0}  # ctx.is_recompute → aten.mm calls so far

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        if func == torch.ops.aten.mm.default:
            matmuls[ctx.is_recompute] += 1
            keep = matmuls[ctx.is_recompute] % 2 == 1
        else:
            keep = func in save
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    make = create_selective_checkpoint_contexts  # untyped upstream
    contexts: tuple[Any, Any] = make(policy)  # type: ignore[no-untyped-call]
    return contexts


def _enable_checkpointing(model: Any, *, op_sac: bool = False) -> None:
    kwargs: dict[str, Any] = {"use_reentrant": False}
    if op_sac:
        kwargs["context_fn"] = op_sac_context
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:  # transformers ≥ 5
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def wrap_decoder_layers(model: Any, layer_classes: frozenset[str]) -> int:
    """torch's ``apply_activation_checkpointing`` on every decoder layer, as llama-recipes'
    ``apply_fsdp_checkpointing`` (check_fn: an instance of the decoder layer class) and
    accelerate's ``fsdp_activation_checkpointing`` (the classes of ``_no_split_modules``) apply
    it: ``checkpoint_wrapper`` with ``CheckpointImpl.NO_REENTRANT``. transformers'
    ``gradient_checkpointing`` switch stays off, so its loop keeps ``use_cache``. Returns how
    many layers were wrapped."""
    from functools import partial

    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )

    def is_layer(module: nn.Module) -> bool:
        return type(module).__name__ in layer_classes

    wrapped = sum(1 for module in model.modules() if is_layer(module))
    wrapper = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper, check_fn=is_layer)
    return wrapped


def _decoder_layer_classes(model: Any, name: str) -> frozenset[str]:
    """The decoder layer classes: the ones transformers keeps whole (``_no_split_modules``),
    which accelerate wraps by default."""
    classes = frozenset(getattr(model, "_no_split_modules", None) or ())
    if not classes:
        raise unsupported(
            f"torch's checkpoint wrapper on {name}: transformers names no decoder layer class "
            "for it (_no_split_modules)"
        )
    return classes


def build(request: PlanRequest, recipe: Recipe) -> Built:
    """The model the request describes, in train or eval mode, with adapters if any."""
    # A training forward builds a KV cache when the request plans use_cache=True, as transformers
    # does (it turns the cache off itself under its own gradient checkpointing, not under torch's
    # checkpoint wrapper).
    use_cache = not recipe.trains or (request.use_cache and request.model.returns_cache)
    config, kind, notes = load_config(request.model, use_cache=use_cache)
    with default_dtype(DTYPES[recipe.weight_dtype]):
        model, attention = _instantiate(config, kind, recipe.attention, notes)
    if request.model.moe is not None:
        experts = getattr(model.config, "_experts_implementation", None) or "eager"
        notes.append(
            f"MoE experts run transformers' {experts} implementation"
            + (
                ": each token's top-k expert rows are computed with static shapes, so the count "
                "does not depend on the routing; capacity-factor implementations (Megatron, "
                "DeepSpeed-MoE) pad or drop tokens and differ"
                if experts == "grouped_mm"
                else ""
            )
        )
    saving = 0
    if recipe.quantization is not None:
        saving = _quantized_saving(model, recipe.quantization, notes)
    if recipe.keeps_linear_inputs:
        from gpuwarden.planner.exact._bnb_legacy import keep_linear_inputs

        # before the adapters: only the base Linears run bitsandbytes' matmul
        count = keep_linear_inputs(model)
        notes.append(f"{count} nn.Linear run a MatMul4Bit stand-in that keeps its input")
    layer_classes = frozenset[str]()
    if recipe.checkpoint_wrapper:
        layer_classes = _decoder_layer_classes(model, request.model.name)
    elif recipe.checkpointing or recipe.op_sac:
        _enable_checkpointing(model, op_sac=recipe.op_sac)
    if recipe.mode in (Mode.LORA, Mode.QLORA):
        model = _attach_lora(model, request, recipe)
    if recipe.checkpoint_wrapper:
        # after the adapters, as llama-recipes applies it (PEFT, FSDP, then the wrapper)
        count = wrap_decoder_layers(model, layer_classes)
        notes.append(f"{count} decoder layers wrapped by torch's checkpoint_wrapper")
    if recipe.trains:
        model.train()
    else:
        model.eval()
    return Built(
        model=model,
        config=config,
        kind=kind,
        attention=attention,
        quantized_saving=saving,
        notes=notes,
    )
