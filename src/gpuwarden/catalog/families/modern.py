"""Gemma 3, OLMo 2, Granite and StarCoder2: 2024-25 decoders that are Llama-like with a twist.

* Gemma 3 (``gemma3_text``; ``gemma3`` nests it under ``text_config`` next to a SigLIP vision
  tower): Gemma-2's four norms per block plus RMSNorms on each q and k head (``head_dim`` wide),
  ``sliding_window_pattern - 1`` sliding layers for every global one, SDPA (no soft-capping).
* OLMo 2: no norm before attention or MLP; RMSNorms after them (post-norm on the branch) and on
  the whole q and k projections (``heads · head_dim`` and ``kv_heads · head_dim`` wide).
* Granite: a Llama block; its embedding / residual / attention / logits multipliers are scalars
  that change no shape and keep no tensor.
* StarCoder2: LayerNorms (weight + bias), q/k/v/o and c_fc/c_proj with biases (``use_bias``),
  GQA, a sliding window on every layer, plain GELU MLP.

Defaults are each family's transformers 5.24 config defaults, so a config that leaves a field out
counts the parameters ``AutoConfig.for_model`` would.
"""

from __future__ import annotations

from contextlib import nullcontext

from gpuwarden.catalog.families.blocks import (
    MLP,
    Shape,
    breakdown,
    decoder_shape,
    dense_layer,
    gated_mlp,
    model_spec,
    plain_mlp,
    qkvo,
    rms_gated_decoder,
)
from gpuwarden.catalog.families.fields import (
    Config,
    core_sizes,
    divisible,
    field_bool,
    field_int,
    invalid,
    layer_types,
    optional_int,
    sub_config,
    within,
)
from gpuwarden.types.model import LayerParameters, MlpKind, ModelSpec, NormKind

# --- Gemma 3 --------------------------------------------------------------------------------------


def _gemma3_layer_types(text: Config, n_layers: int) -> list[str]:
    """``layer_types`` as Gemma3TextConfig builds it: explicit, or every
    ``sliding_window_pattern``-th block global and the others sliding."""
    kinds = layer_types(text, n_layers)
    if kinds is not None:
        return kinds
    pattern = field_int(text, "sliding_window_pattern", default=6)
    return [
        "full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n_layers)
    ]


def _gemma3_window(text: Config) -> int | None:
    window = optional_int(text, "sliding_window", 4096)
    if window is not None and field_bool(text, "use_bidirectional_attention", False):
        # Gemma3TextConfig: bidirectional (EmbeddingGemma) windows are exclusive on both sides.
        return window // 2 + 1
    return window


def _siglip_vision(vision: Config) -> int:
    """Parameters of transformers' SiglipVisionModel (SiglipVisionConfig defaults): patch
    convolution, learned positions, pre-norm ViT blocks, final LayerNorm, optional pooling head."""
    h = field_int(vision, "hidden_size", default=768)
    i = field_int(vision, "intermediate_size", default=3072)
    layers = field_int(vision, "num_hidden_layers", default=12)
    channels = field_int(vision, "num_channels", default=3)
    image = field_int(vision, "image_size", default=224)
    patch = field_int(vision, "patch_size", default=16)
    # SiglipVisionEmbeddings: a square image of (image // patch)² patches
    embeddings = channels * patch * patch * h + h + (image // patch) ** 2 * h
    # q, k, v, out projections with biases, two LayerNorms, fc1 / fc2 with biases
    block = 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h)
    # probe, nn.MultiheadAttention (in_proj 3h × h + 3h, out_proj), LayerNorm, MLP
    head = h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * i + i) + (i * h + h)
    with_head = field_bool(vision, "vision_use_head", True)
    return embeddings + layers * block + 2 * h + (head if with_head else 0)


def _gemma3_vision(cfg: Config, text_hidden: int) -> int:
    """The SigLIP tower and Gemma3MultiModalProjector (a vision × text matrix and an RMSNorm)."""
    vision = _sub_config(cfg, "vision_config")
    if vision.get("model_type", "siglip_vision_model") != "siglip_vision_model":
        raise invalid(
            f"field 'vision_config.model_type' is {vision.get('model_type')!r}: Gemma 3's vision "
            "tower is counted as 'siglip_vision_model'",
            hint="plan the language model alone: pass its text_config with model_type gemma3_text",
        )
    v = field_int(vision, "hidden_size", default=768)
    return _siglip_vision(vision) + v * text_hidden + v


def _sub_config(cfg: Config, name: str) -> Config:
    # absent or null: the nested config's own defaults, as transformers builds it
    return sub_config(cfg, name) or {}


def gemma3(name: str, cfg: Config, source: str) -> ModelSpec:
    """Gemma 3: ``gemma3_text`` (1B) or ``gemma3`` (4B-27B, language model + vision tower; the
    tower's parameters count as weights, its activations are not planned: text-only batches)."""
    multimodal = cfg.get("model_type") == "gemma3"
    text = _sub_config(cfg, "text_config") if multimodal else cfg
    with within("text_config") if multimodal else nullcontext():
        h, n_layers, heads = core_sizes(text)
        kv_heads = field_int(text, "num_key_value_heads", default=4)
        head_dim = field_int(text, "head_dim", default=256)
        vocab = field_int(text, "vocab_size", default=262_208)
        i = field_int(text, "intermediate_size")
        divisible(("num_attention_heads", heads), ("num_key_value_heads", kv_heads))
        bias = field_bool(text, "attention_bias", False)
        kinds = _gemma3_layer_types(text, n_layers)
        window = _gemma3_window(text)
        max_positions = optional_int(text, "max_position_embeddings", 131_072)
    tied = field_bool(cfg, "tie_word_embeddings", True)

    attn = qkvo(h, heads * head_dim, kv_heads * head_dim, qkv_bias=bias, o_bias=bias)
    # input, post-attention, pre- and post-feedforward norms; q_norm and k_norm per head
    layer = dense_layer(attn, gated_mlp(h, i), norms=4 * h + 2 * head_dim)
    sliding = kinds.count("sliding_attention") if window else 0
    shape = Shape(h, n_layers, heads, kv_heads, head_dim, i, vocab, tied)
    other = _gemma3_vision(cfg, h) if multimodal else 0
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "gemma3" if multimodal else "gemma3_text",
        shape,
        (layer,) * n_layers,
        other=other,
        max_position_embeddings=max_positions,
        sliding_window=window if sliding else None,
        sliding_window_layers=sliding,
    )


def _gated_rms_decoder(
    name: str, cfg: Config, source: str, model_type: str, shape: Shape, layer: LayerParameters
) -> ModelSpec:
    """RMSNorm + gated-MLP blocks, all alike, and a final RMSNorm (OLMo 2, Granite)."""
    return rms_gated_decoder(
        name,
        cfg,
        source,
        model_type,
        shape,
        (layer,) * shape.layers,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", 2048),
    )


# --- OLMo 2 ---------------------------------------------------------------------------------------


def olmo2(name: str, cfg: Config, source: str) -> ModelSpec:
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h = shape.hidden
    bias = field_bool(cfg, "attention_bias", False)
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    attn = qkvo(h, q, kv, qkv_bias=bias, o_bias=bias)
    # post-attention and post-feedforward norms; q_norm / k_norm over the whole projections
    layer = dense_layer(attn, gated_mlp(h, shape.intermediate), norms=2 * h + q + kv)
    return _gated_rms_decoder(name, cfg, source, "olmo2", shape, layer)


# --- Granite --------------------------------------------------------------------------------------


def granite(name: str, cfg: Config, source: str) -> ModelSpec:
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h = shape.hidden
    bias = field_bool(cfg, "attention_bias", False)
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    attn = qkvo(h, q, kv, qkv_bias=bias, o_bias=bias)
    mlp = gated_mlp(h, shape.intermediate, bias=field_bool(cfg, "mlp_bias", False))
    layer = dense_layer(attn, mlp, norms=2 * h)
    return _gated_rms_decoder(name, cfg, source, "granite", shape, layer)


# --- StarCoder2 -----------------------------------------------------------------------------------


def starcoder2(name: str, cfg: Config, source: str) -> ModelSpec:
    shape = decoder_shape(
        cfg, kv_default=2, head_dim_default=None, tied_default=True, vocab_default=49152
    )
    h, n_layers = shape.hidden, shape.layers
    bias = field_bool(cfg, "use_bias", True)
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    attn = qkvo(h, q, kv, qkv_bias=bias, o_bias=bias)
    mlp = plain_mlp(h, shape.intermediate, bias=bias, names=("c_fc", "c_proj"), part=MLP)
    # input and post-attention LayerNorms, weight + bias (nn.LayerNorm ignores use_bias)
    layer: LayerParameters = dense_layer(attn, mlp, norms=2 * 2 * h)
    window = optional_int(cfg, "sliding_window")
    return model_spec(
        name,
        cfg,
        source,
        "starcoder2",
        shape,
        breakdown(shape, (layer,) * n_layers, final_norm=2 * h),
        norm=NormKind.LAYER,
        mlp=MlpKind.PLAIN,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", 4096),
        # Starcoder2 masks every layer to the window (and transformers caches that much)
        sliding_window=window,
        sliding_window_layers=n_layers if window else 0,
    )
