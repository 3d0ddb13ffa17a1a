"""Gemma 4 (``gemma4_text`` / ``gemma4``, the encoder-free ``gemma4_unified(_text)``) and Gemma 3n.

Counts follow transformers 5.24 models/gemma4/modeling_gemma4.py and
models/gemma4_unified/modeling_gemma4_unified.py (configuration_*.py for the defaults). What
differs from Gemma 3 (``modern.gemma3``):

* Per-layer attention geometry (transformers' ``per_layer_config``): the ``full_attention``
  blocks use ``global_head_dim`` (default 512) and, when ``attention_k_eq_v``,
  ``num_global_key_value_heads``; the sliding blocks ``head_dim`` / ``num_key_value_heads``. A
  config saved by transformers ≥ 5.24 spells this out as ``per_layer_config`` instead.
* ``attention_k_eq_v``: full-attention blocks have no ``v_proj`` (V is the un-roped, v-normed K;
  the cache still keeps both).
* Every block has q_norm and k_norm (``head_dim`` wide) and a scale-less v_norm; the last block is
  always full attention (the config forces it).
* KV sharing (``num_kv_shared_layers``): the last N blocks reuse the K/V of the last earlier
  block of their kind, so they build no k_proj / v_proj / k_norm and hold no cache of their own;
  with ``use_double_wide_mlp`` their MLP is twice as wide.
* Per-layer embeddings (PLE, gemma4_text only, ``hidden_size_per_layer_input`` > 0): one packed
  table of ``vocab_size_per_layer_input × layers · p``, a ``hidden → layers · p`` projection and a
  ``p`` RMSNorm for the model, a gate (hidden → p), a projection (p → hidden) and an RMSNorm per
  block.
* MoE (gemma4_text only, ``enable_moe_block``): every block keeps its dense MLP and adds a router
  (a scale-less RMSNorm, ``proj`` hidden → experts, a hidden-wide ``scale`` and a
  ``per_expert_scale``), fused routed experts and three more RMSNorms.

Gemma 3n's language model (``gemma3n_text``, models/gemma3n/modeling_gemma3n.py) shares the KV
sharing and per-layer embeddings, with one head width for all blocks, every 5th block full
attention, per-block ``intermediate_size``, AltUp (``altup_num_inputs`` streams: per block a
correction scale, correction / prediction coefficients and a modality router with its norm; per
model n - 1 projections and unembedding projections) and Laurel (a rank-``laurel_rank``
bottleneck and its norm per block). Its multimodal wrapper (a timm MobileNet tower) is not read.

The KV cache is described per kind (``ModelSpec.kv_groups``, ``gemma4_kv_groups``): the published
Gemma 4 blocks cache K/V of different widths (sliding 256-wide heads over the window, full
512-wide over every token), and KV-shared blocks cache nothing (they are in no group). The spec's
single ``num_kv_heads`` / ``head_dim`` are those of the kind with the most blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, replace

from gpuwarden.catalog.families.blocks import (
    Shape,
    dense_layer,
    gated_mlp,
    moe_layer,
    qkvo,
    rms_gated_decoder,
    routed_experts,
    shape_attention,
    total,
)
from gpuwarden.catalog.families.fields import (
    Config,
    core_sizes,
    divisible,
    field_bool,
    field_int,
    invalid,
    layer_types,
    sub_config,
    within,
)
from gpuwarden.errors import InvalidConfigError
from gpuwarden.types.model import (
    KvGroup,
    LayerParameters,
    LinearShape,
    ModelSpec,
    MoeSpec,
    ParameterBreakdown,
)

# the wrapper types and the text model each builds (AutoModelForCausalLM of the wrapper is its
# *ForConditionalGeneration: towers + language model + head)
_TEXT_OF = {"gemma4": "gemma4_text", "gemma4_unified": "gemma4_unified_text"}
PER_LAYER_INPUT = "per_layer_input"  # LinearShape.part of the PLE gate / projection


@dataclass(frozen=True, slots=True)
class _Defaults:
    """Config-class defaults that differ between the two text models."""

    sliding_window: int
    max_positions: int
    bidirectional: str | None
    # PLE and MoE: Gemma4TextConfig has them; Gemma4UnifiedTextConfig has neither (its keys,
    # if a config carries them, build nothing)
    ple_and_moe: bool


_DEFAULTS = {
    "gemma4_text": _Defaults(512, 131_072, None, ple_and_moe=True),
    "gemma4_unified_text": _Defaults(1024, 262_144, "vision", ple_and_moe=False),
}
_GLOBAL_HEAD_DIM = 512  # Gemma4TextConfig.__post_init__: global_head_dim default
_SLIDING_PATTERN = 6  # Gemma4TextConfig.__post_init__: every 6th block is full attention
_OVERRIDABLE = frozenset({"head_dim", "num_key_value_heads"})  # what the attention reads per block


@dataclass(frozen=True, slots=True)
class _Block:
    """One decoder block's attention: its kind, K/V heads and head width, and whether it reuses
    an earlier block's K/V (no k/v projections, no cache)."""

    kind: str
    head_dim: int
    kv_heads: int
    shares_kv: bool


@dataclass(frozen=True, slots=True)
class _Text:
    """What the text model's config says, read once."""

    shape: Shape
    blocks: tuple[_Block, ...]
    window: int
    max_positions: int
    attention_bias: bool
    k_eq_v: bool
    double_wide_mlp: bool
    per_layer_input: int  # p (0: no PLE)
    per_layer_vocab: int
    moe: MoeSpec | None


def _layer_kinds(text: Config, n_layers: int) -> list[str]:
    """``layer_types`` as the config class builds it: explicit, or every 6th block full; the last
    block is forced to full attention either way."""
    kinds = layer_types(text, n_layers) or [
        "sliding_attention" if (i + 1) % _SLIDING_PATTERN else "full_attention"
        for i in range(n_layers)
    ]
    kinds[-1] = "full_attention"
    return kinds


def _overrides(text: Config, kinds: list[str]) -> dict[int, Mapping[str, object]]:
    """Per-block attention overrides: the config's ``per_layer_config``, or what
    Gemma4TextConfig.__post_init__ derives from global_head_dim / num_global_key_value_heads."""
    if "per_layer_config" in text:
        return _explicit_overrides(text.get("per_layer_config"), len(kinds))
    derived: dict[str, object] = {
        "head_dim": field_int(text, "global_head_dim", default=_GLOBAL_HEAD_DIM)
    }
    global_kv = text.get("num_global_key_value_heads")
    if field_bool(text, "attention_k_eq_v", False) and global_kv is not None:
        derived["num_key_value_heads"] = field_int(text, "num_global_key_value_heads")
    return {i: derived for i, kind in enumerate(kinds) if kind == "full_attention"}


def _explicit_overrides(value: object, n_layers: int) -> dict[int, Mapping[str, object]]:
    if value is None:
        return {}  # an explicit null: every block takes the global sizes
    if not isinstance(value, dict):
        raise invalid(f"field 'per_layer_config' must be an object, got {value!r}")
    out: dict[int, Mapping[str, object]] = {}
    for key, overrides in value.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else -1
        if not 0 <= index < n_layers or not isinstance(overrides, dict):
            raise invalid(
                f"field 'per_layer_config' entry {key!r}: {overrides!r} is not a block index "
                f"below num_hidden_layers={n_layers} with an object of overrides"
            )
        unknown = sorted(set(overrides) - _OVERRIDABLE)
        if unknown:
            raise InvalidConfigError(
                f"field 'per_layer_config' overrides {unknown} on block {index}: the formula "
                "planner models per-block head_dim and num_key_value_heads only",
                reference="unsupported-architecture",
                hint="`--exact` traces any HF model",
            )
        out[index] = overrides
    return out


def _shared_from(
    text: Config, kinds: list[str], *, default: int = 0, all_may_share: bool = True
) -> int:
    """Index of the first block that reuses earlier K/V (len(kinds): none). As
    Gemma4TextConfig.kv_sharing_modes: every kind among the shared blocks needs an earlier
    block of that kind to take its K/V from, unless every block shares (a Gemma 4 assistant
    reads its target's cache; Gemma3nTextConfig refuses that)."""
    n_layers = len(kinds)
    shared = field_int(text, "num_kv_shared_layers", default=default, minimum=0, maximum=n_layers)
    if shared > n_layers:  # the class default (15 for Gemma 3n) on a smaller model
        raise invalid(
            f"num_kv_shared_layers={shared} (the default when absent) exceeds "
            f"num_hidden_layers={n_layers}",
            hint="set num_kv_shared_layers as the model's published config.json does",
        )
    first = n_layers - shared
    every = shared == n_layers and all_may_share
    if shared and not every and set(kinds[:first]) != set(kinds):
        raise invalid(
            f"num_kv_shared_layers={shared}: the first {first} blocks have no "
            f"{sorted(set(kinds) - set(kinds[:first]))} block for the shared ones to reuse"
        )
    return first


def _blocks(text: Config, n_layers: int, head_dim: int, kv_heads: int) -> tuple[_Block, ...]:
    kinds = _layer_kinds(text, n_layers)
    overrides = _overrides(text, kinds)
    first_shared = _shared_from(text, kinds)
    blocks = []
    for i, kind in enumerate(kinds):
        layer = overrides.get(i, {})
        block_head_dim = field_int(layer, "head_dim", default=head_dim)
        block_kv = field_int(layer, "num_key_value_heads", default=kv_heads)
        blocks.append(_Block(kind, block_head_dim, block_kv, shares_kv=i >= first_shared))
    for kind in set(kinds):
        # Gemma4TextRotaryEmbedding builds one rotary table per kind from that kind's config
        sizes = {(b.head_dim, b.kv_heads) for b in blocks if b.kind == kind}
        if len(sizes) > 1:
            raise invalid(
                f"field 'per_layer_config' gives the {kind} blocks different head_dim / "
                f"num_key_value_heads {sorted(sizes)}: transformers needs one per kind"
            )
    return tuple(blocks)


def _window(text: Config, defaults: _Defaults) -> int:
    window = field_int(text, "sliding_window", default=defaults.sliding_window)
    mode = text.get("use_bidirectional_attention", defaults.bidirectional)
    if mode not in (None, "all", "vision"):
        raise invalid(
            f'field \'use_bidirectional_attention\' must be "all", "vision" or null, got {mode!r}'
        )
    # Gemma4TextConfig: fully bidirectional windows are exclusive on both sides
    return window // 2 + 1 if mode == "all" else window


def _moe(text: Config) -> MoeSpec | None:
    if not field_bool(text, "enable_moe_block", False):
        return None
    experts = field_int(text, "num_experts")
    return MoeSpec(
        num_experts=experts,
        experts_per_token=field_int(text, "top_k_experts", maximum=experts),
        expert_intermediate_size=field_int(text, "moe_intermediate_size"),
        # the block's dense MLP runs on every token next to the routed experts
        num_shared_experts=1,
        shared_intermediate_size=field_int(text, "intermediate_size"),
    )


def _read_text(text: Config, model_type: str, *, tied: bool) -> _Text:
    defaults = _DEFAULTS[model_type]
    h, n_layers, heads = core_sizes(text)
    kv_heads = field_int(text, "num_key_value_heads", default=4)
    head_dim = field_int(text, "head_dim", default=256)
    blocks = _blocks(text, n_layers, head_dim, kv_heads)
    for block in blocks:
        divisible(("num_attention_heads", heads), ("num_key_value_heads", block.kv_heads))
    ple = field_int(text, "hidden_size_per_layer_input", default=256, minimum=0)
    return _Text(
        shape=Shape(
            h,
            n_layers,
            heads,
            kv_heads,
            head_dim,
            field_int(text, "intermediate_size", default=9216),
            field_int(text, "vocab_size", default=262_144),
            tied,
        ),
        blocks=blocks,
        window=_window(text, defaults),
        max_positions=field_int(text, "max_position_embeddings", default=defaults.max_positions),
        attention_bias=field_bool(text, "attention_bias", False),
        k_eq_v=field_bool(text, "attention_k_eq_v", False),
        double_wide_mlp=field_bool(text, "use_double_wide_mlp", False),
        per_layer_input=ple if defaults.ple_and_moe else 0,
        per_layer_vocab=field_int(text, "vocab_size_per_layer_input", default=262_144),
        moe=_moe(text) if defaults.ple_and_moe else None,
    )


def _attention(t: _Text, block: _Block) -> tuple[tuple[LinearShape, ...], int]:
    """The block's projections and the weights of its q/k norms (v_norm has no scale)."""
    h, q = t.shape.hidden, t.shape.heads * block.head_dim
    bias = t.attention_bias
    q_proj, k_proj, v_proj, o_proj = qkvo(
        h, q, block.kv_heads * block.head_dim, qkv_bias=bias, o_bias=bias
    )
    if block.shares_kv:
        return (q_proj, o_proj), block.head_dim
    if t.k_eq_v and block.kind == "full_attention":
        return (q_proj, k_proj, o_proj), 2 * block.head_dim
    return (q_proj, k_proj, v_proj, o_proj), 2 * block.head_dim


def _block_parameters(t: _Text, block: _Block) -> LayerParameters:
    """Gemma4TextDecoderLayer / Gemma4UnifiedTextDecoderLayer."""
    h = t.shape.hidden
    attn, qk_norms = _attention(t, block)
    wide = 2 if t.double_wide_mlp and block.shares_kv else 1
    mlp = gated_mlp(h, t.shape.intermediate * wide)
    # input, post-attention, pre- and post-feedforward norms
    norms = 4 * h + qk_norms
    p = t.per_layer_input
    ple: tuple[LinearShape, ...] = ()
    if p:
        ple = (
            LinearShape("per_layer_input_gate", h, p, part=PER_LAYER_INPUT),
            LinearShape("per_layer_projection", p, h, part=PER_LAYER_INPUT),
        )
        norms += h  # post_per_layer_input_norm
    experts: tuple[LinearShape, ...] = ()
    router = 0
    if t.moe is not None:
        e = t.moe.num_experts
        experts = routed_experts(h, t.moe.expert_intermediate_size, e)
        router = h * e + h + e  # proj, scale, per_expert_scale
        norms += 3 * h  # post_feedforward_layernorm_1 / _2, pre_feedforward_layernorm_2
    layer = moe_layer(attn, mlp, experts, router=router, norms=norms)
    return LayerParameters(
        attention=layer.attention,
        mlp=layer.mlp,
        experts=layer.experts,
        router=layer.router,
        norms=layer.norms,
        linears=layer.linears + ple,
        other=total(ple),
    )


def _per_layer_embeddings(t: _Text) -> int:
    """Gemma4TextModel's PLE: the packed table, the model projection and its norm."""
    p = t.per_layer_input
    if not p:
        return 0
    packed = t.shape.layers * p
    return t.per_layer_vocab * packed + t.shape.hidden * packed + p


# --- the multimodal wrappers' towers --------------------------------------------------------------


def _check_type(sub: Config, field: str, expected: str) -> None:
    kind = sub.get("model_type", expected)
    if kind != expected:
        raise InvalidConfigError(
            f"field '{field}.model_type' is {kind!r}: this tower is counted as {expected!r}",
            reference="unsupported-architecture",
            hint="plan the language model alone: pass its text_config",
        )


def _vision_tower(vision: Config, text_hidden: int) -> int:
    """Gemma4VisionModel (patch embedder with 2-D learned positions, pre/post-norm blocks of
    bias-free clippable linears with q/k norms; no final norm, a parameter-free pooler) and
    Gemma4MultimodalEmbedder (a vision × text matrix after a scale-less RMSNorm)."""
    _check_type(vision, "vision_config", "gemma4_vision")
    h = field_int(vision, "hidden_size", default=768)
    i = field_int(vision, "intermediate_size", default=3072)
    layers = field_int(vision, "num_hidden_layers", default=16)
    heads = field_int(vision, "num_attention_heads", default=12)
    kv_heads = field_int(vision, "num_key_value_heads", default=12)
    head_dim = field_int(vision, "head_dim", default=64)
    patch = field_int(vision, "patch_size", default=16)
    positions = field_int(vision, "position_embedding_size", default=10 * 1024)
    embedder = 3 * patch * patch * h + 2 * positions * h
    attn = qkvo(h, heads * head_dim, kv_heads * head_dim, qkv_bias=False, o_bias=False)
    block = total(attn) + total(gated_mlp(h, i)) + 4 * h + 2 * head_dim
    return embedder + layers * block + h * text_hidden


def _audio_tower(audio: Config, text_hidden: int) -> int:
    """Gemma4AudioModel (two conv + LayerNorm subsampling stages, conformer blocks: two
    feed-forwards, relative-position attention, a light depthwise convolution; an output
    projection with bias) and its Gemma4MultimodalEmbedder (output_proj_dims × text)."""
    _check_type(audio, "audio_config", "gemma4_audio")
    h = field_int(audio, "hidden_size", default=1024)
    layers = field_int(audio, "num_hidden_layers", default=12)
    heads = field_int(audio, "num_attention_heads", default=8)
    kernel = field_int(audio, "conv_kernel_size", default=5)
    out = field_int(audio, "output_proj_dims", default=1536)
    c0, c1 = _subsampling_channels(audio)
    # conv 3×3 (bias-free) + LayerNorm weight per stage; input_proj_linear from (c0 // 4) · c1
    subsample = 9 * c0 + c0 + 9 * c0 * c1 + c1 + (c0 // 4) * c1 * h
    width = heads * (h // heads)
    feed_forward = 2 * 4 * h * h + 2 * h
    # q, k, v, relative_k_proj (h → width), post (h → h), per_dim_scale (head dim)
    attention = 4 * h * width + h * h + h // heads
    # linear_start (h → 2h), linear_end, depthwise kernel, pre_layer_norm, conv_norm
    light_conv = 2 * h * h + h * h + h * kernel + 2 * h
    block = 2 * feed_forward + attention + light_conv + 3 * h
    return subsample + layers * block + (h * out + out) + out * text_hidden


def _subsampling_channels(audio: Config) -> tuple[int, int]:
    value = audio.get("subsampling_conv_channels", [128, 32])
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise invalid(
            f"field 'audio_config.subsampling_conv_channels' must be two positive integers, "
            f"got {value!r}"
        )
    return value[0], value[1]


def _unified_vision(vision: Config, text_hidden: int) -> int:
    """Gemma4UnifiedVisionEmbedder: LayerNorm → Dense → LayerNorm over merged raw patches, a
    factorized 2-D position table and its LayerNorm, then the multimodal embedder."""
    _check_type(vision, "vision_config", "gemma4_unified_vision")
    merged = field_int(vision, "patch_size", default=16) * field_int(
        vision, "pooling_kernel_size", default=3
    )
    patch_dim = 3 * merged * merged
    embed = field_int(vision, "mm_embed_dim", default=3840)
    positions = field_int(vision, "mm_posemb_size", default=1120)
    out = field_int(vision, "output_proj_dims", default=3840)
    layer_norms = 2 * patch_dim + 2 * embed + 2 * embed
    return layer_norms + patch_dim * embed + embed + 2 * positions * embed + out * text_hidden


def _unified_audio(audio: Config, text_hidden: int) -> int:
    """Gemma4UnifiedModel's audio path: raw waveform frames → the multimodal embedder."""
    _check_type(audio, "audio_config", "gemma4_unified_audio")
    return field_int(audio, "audio_embed_dim", "hidden_size", default=640) * text_hidden


def _towers(cfg: Config, wrapper: str, text_hidden: int) -> int:
    vision, audio = sub_config(cfg, "vision_config"), sub_config(cfg, "audio_config")
    unified = wrapper == "gemma4_unified"
    count = 0
    if vision is not None:
        count += (_unified_vision if unified else _vision_tower)(vision, text_hidden)
    if audio is not None:
        count += (_unified_audio if unified else _audio_tower)(audio, text_hidden)
    return count


# --- the model ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Model:
    text: _Text
    layers: tuple[LayerParameters, ...]
    parameters: ParameterBreakdown


def _read(cfg: Config) -> _Model:
    wrapper = cfg.get("model_type")
    text_type = _TEXT_OF.get(str(wrapper), str(wrapper))
    if text_type not in _DEFAULTS:
        raise invalid(f"model_type {wrapper!r} is not a Gemma 4 type")
    nested = wrapper in _TEXT_OF
    text_cfg = (sub_config(cfg, "text_config") or {}) if nested else cfg
    # the head is tied as the outermost config says (the wrapper's own tie_word_embeddings)
    tied = field_bool(cfg, "tie_word_embeddings", True)
    with within("text_config") if nested else nullcontext():
        text = _read_text(text_cfg, text_type, tied=tied)
    shape = text.shape
    layers = tuple(_block_parameters(text, block) for block in text.blocks)
    towers = _towers(cfg, str(wrapper), shape.hidden) if nested else 0
    embedding = shape.vocab * shape.hidden
    parameters = ParameterBreakdown(
        embedding=embedding,
        position_embedding=0,
        lm_head=0 if tied else embedding,
        final_norm=shape.hidden,
        layers=layers,
        other=_per_layer_embeddings(text) + towers,
    )
    return _Model(text, layers, parameters)


def gemma4_parameters(cfg: Config) -> ParameterBreakdown:
    """The exact parameter breakdown of a Gemma 4 config (any of the four types)."""
    return _read(cfg).parameters


def _kv_groups(blocks: tuple[_Block, ...], window: int) -> tuple[KvGroup, ...]:
    counts: dict[KvGroup, int] = {}
    for block in blocks:
        if block.shares_kv:
            continue  # reads the K/V an earlier block cached
        key = KvGroup(
            0, block.kv_heads, block.head_dim, window if block.kind != "full_attention" else None
        )
        counts[key] = counts.get(key, 0) + 1
    return tuple(
        KvGroup(n, key.num_kv_heads, key.head_dim, key.window) for key, n in counts.items()
    )


def gemma4_kv_groups(cfg: Config) -> tuple[KvGroup, ...]:
    """The blocks that cache K and V, grouped by shape and window (KV-shared blocks cache
    nothing and are in no group), in block order of first appearance."""
    text = _read(cfg).text
    return _kv_groups(text.blocks, text.window)


def _kv_shape(
    family: str, blocks: tuple[_Block, ...], window: int
) -> tuple[int, int, tuple[KvGroup, ...]]:
    """(KV heads, head_dim, kv_groups): the groups every caching block is in, and the shape of
    the group with the most blocks for the spec's single fields."""
    groups = _kv_groups(blocks, window)
    if not groups:
        raise InvalidConfigError(
            f"{family} config whose every block reuses another block's K/V: no block caches K/V",
            reference="unsupported-architecture",
            hint="check num_kv_shared_layers against num_hidden_layers",
        )
    main = max(groups, key=lambda g: g.layers)
    return main.num_kv_heads, main.head_dim, groups


def gemma4(name: str, cfg: Config, source: str) -> ModelSpec:
    """Gemma 4 (gemma4_text, gemma4, gemma4_unified_text, gemma4_unified); the towers of the
    multimodal wrappers count as weights, their activations are not planned (text batches)."""
    model = _read(cfg)
    text = model.text
    kv_heads, head_dim, groups = _kv_shape("Gemma 4", text.blocks, text.window)
    shape = replace(text.shape, kv_heads=kv_heads, head_dim=head_dim)
    sliding = sum(block.kind == "sliding_attention" for block in text.blocks)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        str(cfg.get("model_type")),
        shape,
        model.layers,
        other=model.parameters.other,
        max_position_embeddings=text.max_positions,
        sliding_window=text.window if sliding else None,
        sliding_window_layers=sliding,
        moe=text.moe,
        kv_groups=groups,
    )


# --- Gemma 3n (text) ------------------------------------------------------------------------------


def _gemma3n_intermediate(text: Config, n_layers: int) -> list[int]:
    """``intermediate_size``: one for all blocks or one per block (Gemma3nTextConfig)."""
    value = text.get("intermediate_size", 16_384)
    if isinstance(value, list):
        if len(value) != n_layers:
            raise invalid(
                f"field 'intermediate_size' has {len(value)} entries but "
                f"num_hidden_layers={n_layers}"
            )
        return [field_int({"intermediate_size": v}, "intermediate_size") for v in value]
    return [field_int(text, "intermediate_size", default=16_384)] * n_layers


def _gemma3n_sparsity_length(text: Config, n_layers: int) -> None:
    """Gemma3nTextConfig refuses an ``activation_sparsity_pattern`` list of another length (it
    changes no weight)."""
    value = text.get("activation_sparsity_pattern")
    if isinstance(value, list) and len(value) != n_layers:
        raise invalid(
            f"field 'activation_sparsity_pattern' has {len(value)} entries but "
            f"num_hidden_layers={n_layers}"
        )


def _gemma3n_block(
    text: Config, shape: Shape, block: _Block, inner: int, p: int
) -> LayerParameters:
    """Gemma3nTextDecoderLayer: attention (q/k norms, k/v only where not shared), a gated MLP
    of the block's width, four norms, AltUp (correct_output_scale, correction / prediction
    coefficients, modality router and its norm), Laurel (a rank-r bottleneck and its norm) and
    the per-layer-input gate / projection / norm."""
    h = shape.hidden
    bias = field_bool(text, "attention_bias", False)
    q_proj, k_proj, v_proj, o_proj = shape_attention(shape, bias=bias)
    attn = (q_proj, o_proj) if block.shares_kv else (q_proj, k_proj, v_proj, o_proj)
    qk_norms = shape.head_dim * (1 if block.shares_kv else 2)
    n = field_int(text, "altup_num_inputs", default=4)
    rank = field_int(text, "laurel_rank", default=64)
    extra = (
        LinearShape("linear_left", h, rank, part="laurel"),
        LinearShape("linear_right", rank, h, part="laurel"),
        LinearShape("per_layer_input_gate", h, p, part=PER_LAYER_INPUT),
        LinearShape("per_layer_projection", p, h, part=PER_LAYER_INPUT),
    )
    altup = h + n * n + n * n * n + h * n  # correct_output_scale, coefs, modality_router
    layer = dense_layer(attn, gated_mlp(h, inner), norms=4 * h + qk_norms)
    return LayerParameters(
        attention=layer.attention,
        mlp=layer.mlp,
        experts=0,
        router=0,
        # + altup router_norm, post_laurel_norm, post_per_layer_input_norm
        norms=layer.norms + 3 * h,
        linears=layer.linears + extra,
        other=altup + total(extra),
    )


def _gemma3n_model(text: Config) -> tuple[Shape, tuple[_Block, ...], ParameterBreakdown, int]:
    h, n_layers, heads = core_sizes(text)
    kv_heads = field_int(text, "num_key_value_heads", default=2)
    head_dim = field_int(text, "head_dim", default=256)
    divisible(("num_attention_heads", heads), ("num_key_value_heads", kv_heads))
    inner = _gemma3n_intermediate(text, n_layers)
    _gemma3n_sparsity_length(text, n_layers)
    kinds = layer_types(text, n_layers) or [
        "full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n_layers)
    ]
    first_shared = _shared_from(text, kinds, default=15, all_may_share=False)
    blocks = tuple(
        _Block(kind, head_dim, kv_heads, shares_kv=i >= first_shared)
        for i, kind in enumerate(kinds)
    )
    tied = field_bool(text, "tie_word_embeddings", True)
    vocab = field_int(text, "vocab_size", default=262_400)
    shape = Shape(h, n_layers, heads, kv_heads, head_dim, max(inner), vocab, tied)
    p = field_int(text, "hidden_size_per_layer_input", default=256)
    layers = tuple(
        _gemma3n_block(text, shape, block, width, p)
        for block, width in zip(blocks, inner, strict=True)
    )
    n = field_int(text, "altup_num_inputs", default=4)
    per_layer_vocab = field_int(text, "vocab_size_per_layer_input", default=262_144)
    # PLE table, its model projection and norm; AltUp's (n - 1) projections and unembeddings
    other = per_layer_vocab * n_layers * p + h * n_layers * p + p + 2 * (n - 1) * h * h
    embedding = vocab * h
    parameters = ParameterBreakdown(
        embedding=embedding,
        position_embedding=0,
        lm_head=0 if tied else embedding,
        final_norm=h,
        layers=layers,
        other=other,
    )
    window = field_int(text, "sliding_window", default=512)
    return shape, blocks, parameters, window


def gemma3n_parameters(cfg: Config) -> ParameterBreakdown:
    """The exact parameter breakdown of a gemma3n_text config."""
    return _gemma3n_model(cfg)[2]


def gemma3n_text(name: str, cfg: Config, source: str) -> ModelSpec:
    """Gemma 3n's language model (``gemma3n_text``; modeling_gemma3n.py Gemma3nForCausalLM).
    Its blocks share one head width; the last ``num_kv_shared_layers`` (default 15) reuse
    earlier K/V and cache none (in no KV group)."""
    shape, blocks, parameters, window = _gemma3n_model(cfg)
    _, _, groups = _kv_shape("Gemma 3n", blocks, window)
    if len({layer.mlp for layer in parameters.layers}) > 1:
        raise InvalidConfigError(
            "Gemma 3n blocks of different intermediate sizes: the formula planner models one "
            "MLP width for its activations",
            reference="unsupported-architecture",
            hint="`--exact` traces any HF model",
        )
    sliding = sum(block.kind == "sliding_attention" for block in blocks)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "gemma3n_text",
        shape,
        parameters.layers,
        other=parameters.other,
        max_position_embeddings=field_int(cfg, "max_position_embeddings", default=32_768),
        sliding_window=window if sliding else None,
        sliding_window_layers=sliding,
        kv_groups=groups,
    )
