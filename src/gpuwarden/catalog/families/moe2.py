"""gpt-oss and Llama 4 (text): mixture-of-experts decoders whose experts are stored transposed.

Both keep their routed experts as 3-D parameters ``(experts, in, out)`` (transformers 5.24
``GptOssExperts`` / ``Llama4TextExperts``), listed here as ``experts.gate_up_proj`` (in = hidden,
out = 2 × expert width) and ``experts.down_proj``, like every other family.

gpt-oss: every block is MoE (``num_local_experts``, top-``num_experts_per_tok``, no shared expert);
the router is a weight and a bias (not an ``nn.Linear``); the experts carry biases; each attention
has q/k/v/o biases and one learned sink logit per head; blocks alternate sliding-window (even
indices) and full attention. The published checkpoints store the expert weights in MXFP4; the
counts here are parameters, whatever dtype they are stored in.

Llama 4: the multimodal config (``llama4``) nests the language model under ``text_config``; the
language model is what AutoModelForCausalLM builds (Llama4ForCausalLM), the ``parameters``. The
vision tower and projector of Llama4ForConditionalGeneration (``vision_model`` +
``multi_modal_projector``), which vLLM and SGLang load, are counted apart as
``engine_tower_parameters`` (Llama4VisionConfig defaults for absent ``vision_config`` keys):
the unfold patch Linear (no bias), a class embedding and ``(image_size // patch_size)² + 1``
position embeddings, two LayerNorms around ``num_hidden_layers`` pre-norm blocks (q/k/v/o with
biases, a GELU MLP with biases, two LayerNorms), the pixel-shuffle MLP (``intermediate_size`` →
``projector_input_dim`` → ``projector_output_dim``, no biases) and the projector Linear
(``vision_output_dim`` → the text hidden size, no bias). MoE blocks (every
``interleave_moe_layer_step``-th, or the explicit ``moe_layers``) run ``num_local_experts``
experts, a shared expert of the same width and an ``nn.Linear`` router; the other blocks have a
dense SwiGLU of ``intermediate_size_mlp``. Layers with RoPE attend in chunks of
``attention_chunk_size`` (transformers caches them like a sliding window of that size); every
``no_rope_layer_interval``-th layer has no RoPE and attends globally. The q/k L2 norm and the
attention temperature tuning have no parameters.
"""

from __future__ import annotations

from dataclasses import replace

from gpuwarden.catalog.families.blocks import (
    EXPERTS,
    SHARED_EXPERTS,
    Shape,
    dense_layer,
    gated_mlp,
    moe_layer,
    qkvo,
    rms_gated_decoder,
)
from gpuwarden.catalog.families.fields import (
    MAX_LAYERS,
    Config,
    core_sizes,
    divisible,
    field_bool,
    field_int,
    invalid,
    layer_types,
    optional_int,
    whole_numbers,
    within,
)
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    ModelSpec,
    MoeSpec,
)


def _transposed_experts(
    hidden: int, inner: int, count: int, *, bias: bool
) -> tuple[LinearShape, ...]:
    """Fused gate/up (hidden → 2 × inner) and down experts, ``count`` of each."""
    return (
        LinearShape(
            "experts.gate_up_proj",
            hidden,
            2 * inner,
            count=count,
            bias=bias,
            expert=True,
            part=EXPERTS,
        ),
        LinearShape(
            "experts.down_proj", inner, hidden, count=count, bias=bias, expert=True, part=EXPERTS
        ),
    )


# --- gpt-oss -------------------------------------------------------------------------------------


def gpt_oss(name: str, cfg: Config, source: str) -> ModelSpec:
    """gpt-oss-20b / -120b (transformers 5.24 ``GptOssForCausalLM``)."""
    h, n_layers, heads = core_sizes(cfg)
    kv_heads = field_int(cfg, "num_key_value_heads", default=8)
    head_dim = field_int(cfg, "head_dim", default=64)
    vocab = field_int(cfg, "vocab_size")
    i = field_int(cfg, "intermediate_size")
    tied = field_bool(cfg, "tie_word_embeddings", False)
    bias = field_bool(cfg, "attention_bias", True)
    divisible(("num_attention_heads", heads), ("num_key_value_heads", kv_heads))
    moe = MoeSpec(
        num_experts=field_int(cfg, "num_local_experts", default=128),
        experts_per_token=field_int(cfg, "num_experts_per_tok", default=4),
        expert_intermediate_size=i,
    )
    if moe.experts_per_token > moe.num_experts:
        raise invalid(
            f"num_experts_per_tok={moe.experts_per_token} exceeds "
            f"num_local_experts={moe.num_experts}"
        )
    attn = qkvo(h, heads * head_dim, kv_heads * head_dim, qkv_bias=bias, o_bias=bias)
    experts = _transposed_experts(h, i, moe.num_experts, bias=True)
    # The router is a weight and a bias of its own (GptOssTopKRouter), not an nn.Linear.
    layer = moe_layer(attn, (), experts, router=moe.num_experts * (h + 1), norms=2 * h)
    layer = replace(layer, other=heads)  # the attention sinks: one learned logit per head

    # transformers' default: even-indexed blocks slide, odd ones attend to everything.
    types = layer_types(cfg, n_layers)
    sliding = types.count("sliding_attention") if types is not None else (n_layers + 1) // 2
    window = optional_int(cfg, "sliding_window", 128)
    shape = Shape(h, n_layers, heads, kv_heads, head_dim, i, vocab, tied)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "gpt_oss",
        shape,
        (layer,) * n_layers,
        sliding_window=window if window and sliding else None,
        sliding_window_layers=sliding if window else 0,
        moe=moe,
    )


# --- Llama 4 -------------------------------------------------------------------------------------

_LLAMA4_LAYERS = frozenset({"chunked_attention", "full_attention"})


def _llama4_text(cfg: Config) -> Config:
    """The language model's config: ``text_config`` of a multimodal ``llama4`` config, with the
    checkpoint dtype of the outer config when the inner one has none."""
    if cfg.get("model_type") != "llama4":
        return cfg
    text: object = cfg.get("text_config")
    if not isinstance(text, dict):
        raise invalid(
            "field 'text_config' must be an object holding the language model's config, "
            f"got {text!r}",
            hint="a Llama 4 config.json nests the language model under 'text_config'",
        )
    inner: dict[str, object] = {**text, "model_type": "llama4_text"}
    for key in ("torch_dtype", "dtype"):
        if key in cfg and "torch_dtype" not in text and "dtype" not in text:
            inner[key] = cfg[key]
    return inner


def _llama4_rope_flags(cfg: Config, n_layers: int) -> list[int]:
    """1 for a layer with RoPE (and chunked attention), 0 for a NoPE layer (transformers'
    default: every ``no_rope_layer_interval``-th layer has no RoPE)."""
    flags = whole_numbers(cfg, "no_rope_layers", most=n_layers)
    if flags:  # transformers treats an empty list as absent
        if len(flags) != n_layers or any(f > 1 for f in flags):
            raise invalid(
                f"field 'no_rope_layers' must hold one 0/1 flag per layer ({n_layers}), "
                f"got {flags!r}"
            )
        return flags
    interval = field_int(cfg, "no_rope_layer_interval", default=4)
    return [int((index + 1) % interval != 0) for index in range(n_layers)]


def llama4_rope_layers(cfg: Config) -> int:
    """Layers of a Llama 4 text config that apply RoPE (and, with ``use_qk_norm``, the q/k L2
    norm); the others are NoPE layers (global attention, temperature tuning)."""
    n_layers = field_int(cfg, "num_hidden_layers", maximum=MAX_LAYERS)
    return sum(_llama4_rope_flags(cfg, n_layers))


def _llama4_moe_layers(cfg: Config, n_layers: int) -> frozenset[int]:
    explicit = whole_numbers(cfg, "moe_layers", most=n_layers)
    if explicit is not None:
        if any(index >= n_layers for index in explicit):
            raise invalid(f"field 'moe_layers' names a layer ≥ num_hidden_layers={n_layers}")
        return frozenset(explicit)
    step = field_int(cfg, "interleave_moe_layer_step", default=1)
    return frozenset(range(step - 1, n_layers, step))


def _llama4_chunked(cfg: Config, n_layers: int) -> tuple[int | None, int]:
    """(chunk size, chunked layers): transformers caches a chunked layer like a sliding window
    of ``attention_chunk_size`` tokens (cache_utils ``DynamicSlidingWindowLayer``)."""
    chunk = optional_int(cfg, "attention_chunk_size", 8192)
    types = layer_types(cfg, n_layers, _LLAMA4_LAYERS)
    if types is None:
        flags = _llama4_rope_flags(cfg, n_layers)
        count = sum(flags) if chunk is not None else 0
    else:
        count = types.count("chunked_attention")
    return (chunk, count) if chunk and count else (None, 0)


def llama4(name: str, cfg: Config, source: str) -> ModelSpec:
    """Llama 4 Scout / Maverick: the language model of ``llama4`` (with its vision tower counted
    apart), or a ``llama4_text`` config."""
    text = _llama4_text(cfg)
    if text is cfg:
        return _llama4_language_model(name, text, source)
    with within("text_config"):
        spec = _llama4_language_model(name, text, source)
    return replace(spec, engine_tower_parameters=_llama4_vision(cfg, spec.hidden_size))


def _llama4_vision(cfg: Config, text_hidden: int) -> int:
    """Parameters of Llama4VisionModel and Llama4MultiModalProjector (the module docstring)."""
    vision: object = cfg.get("vision_config", {})  # absent: Llama4VisionConfig's defaults
    if not isinstance(vision, dict):
        raise invalid(f"field 'vision_config' must be an object, got {vision!r}")
    with within("vision_config"):
        h = field_int(vision, "hidden_size", default=768)
        depth = field_int(vision, "num_hidden_layers", default=34, maximum=MAX_LAYERS)
        heads = field_int(vision, "num_attention_heads", default=16)
        inner = field_int(vision, "intermediate_size", default=5632)
        channels = field_int(vision, "num_channels", default=3)
        image = field_int(vision, "image_size", default=448)
        patch = field_int(vision, "patch_size", default=14)
        output = field_int(vision, "vision_output_dim", default=7680)
        adapter_in = field_int(vision, "projector_input_dim", default=4096)
        adapter_out = field_int(vision, "projector_output_dim", default=4096)
    width = heads * (h // heads)  # Llama4VisionAttention: heads × (hidden // heads)
    attention = 3 * (h * width + width) + width * h + h
    block = attention + (h * inner + inner) + (inner * h + h) + 2 * 2 * h
    embeddings = channels * patch * patch * h + h + ((image // patch) ** 2 + 1) * h
    adapter = inner * adapter_in + adapter_out * adapter_out
    return embeddings + 2 * 2 * h + depth * block + adapter + output * text_hidden


def _llama4_language_model(name: str, text: Config, source: str) -> ModelSpec:
    h, n_layers, heads = core_sizes(text)
    # Llama4TextConfig defaults num_key_value_heads to 8, not to num_attention_heads
    kv_heads = field_int(text, "num_key_value_heads", default=8)
    head_dim = field_int(text, "head_dim", default=128)
    vocab = field_int(text, "vocab_size")
    expert_i = field_int(text, "intermediate_size")
    dense_i = field_int(text, "intermediate_size_mlp", default=16384)
    tied = field_bool(text, "tie_word_embeddings", False)
    bias = field_bool(text, "attention_bias", False)
    divisible(("num_attention_heads", heads), ("num_key_value_heads", kv_heads))
    n_experts = field_int(text, "num_local_experts", default=16)
    top_k = field_int(text, "num_experts_per_tok", default=1)
    if top_k > n_experts:
        raise invalid(f"num_experts_per_tok={top_k} exceeds num_local_experts={n_experts}")
    moe_layers = _llama4_moe_layers(text, n_layers)
    _llama4_rope_flags(text, n_layers)  # checked here, used by the attention recipe

    attn = qkvo(h, heads * head_dim, kv_heads * head_dim, qkv_bias=bias, o_bias=bias)
    dense = dense_layer(attn, gated_mlp(h, dense_i), norms=2 * h)
    shared = gated_mlp(h, expert_i, part=SHARED_EXPERTS)
    experts = _transposed_experts(h, expert_i, n_experts, bias=False)
    # Llama4Router subclasses nn.Linear (hidden → experts, no bias); like every family's router
    # it is not listed with the Linears: it stays 16-bit under weight quantization (vLLM builds
    # it unquantized) and is not a LoRA target.
    sparse = moe_layer(attn, shared, experts, router=h * n_experts, norms=2 * h)
    layers: tuple[LayerParameters, ...] = tuple(
        sparse if index in moe_layers else dense for index in range(n_layers)
    )
    moe = (
        MoeSpec(
            num_experts=n_experts,
            experts_per_token=top_k,
            expert_intermediate_size=expert_i,
            num_shared_experts=1,
            shared_intermediate_size=expert_i,
            first_dense_layers=min(moe_layers),
            layer_frequency=field_int(text, "interleave_moe_layer_step", default=1),
        )
        if moe_layers
        else None
    )
    window, window_layers = _llama4_chunked(text, n_layers)
    shape = Shape(h, n_layers, heads, kv_heads, head_dim, dense_i, vocab, tied)
    return rms_gated_decoder(
        name,
        text,
        source,
        "llama4_text",
        shape,
        layers,
        sliding_window=window,
        sliding_window_layers=window_layers,
        moe=moe,
    )
