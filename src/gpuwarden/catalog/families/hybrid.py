"""Hybrids of delta-rule linear attention and full attention: Qwen3-Next, Qwen3.5 (gated
DeltaNet + gated attention), OLMo Hybrid (gated DeltaNet + OLMo-2 attention) and Kimi Linear (Kimi
delta attention + MLA). Only their attention blocks cache K and V; the others keep a fixed-size
state per sequence (``ModelSpec.state``). OLMo Hybrid and Kimi Linear are described at their
functions below.

Qwen3-Next / Qwen3.5 counts follow transformers 5.24 (modeling_qwen3_next.py,
modeling_qwen3_5.py, modeling_qwen3_5_moe.py and their configuration files):

* ``layer_types`` names each block's token mixer, "linear_attention" (a gated DeltaNet) or
  "full_attention"; absent, every ``full_attention_interval``-th block (default 4) attends and
  the others are DeltaNets. Only the attention blocks cache K and V; a DeltaNet keeps a
  fixed-size state per sequence (``StateSpec``): the last columns of its causal convolution
  over q, k and v (``2 · key_dim + value_dim`` channels, ``linear_conv_kernel_dim`` wide) and a
  ``d_k × d_v`` matrix per value head (the recurrent state is ``[batch, num_v_heads, head_k_dim,
  head_v_dim]``).
* The gated DeltaNet (``linear_attn``): Qwen3-Next fuses its input projections into
  ``in_proj_qkvz`` (hidden → 2 · key_dim + 2 · value_dim) and ``in_proj_ba`` (hidden → 2 ·
  num_v_heads); Qwen3.5 splits them into ``in_proj_qkv``, ``in_proj_z``, ``in_proj_b`` and
  ``in_proj_a``. Both add a depthwise ``conv1d`` (no bias), ``dt_bias`` and ``A_log`` (one per
  value head), a gated RMSNorm of ``head_v_dim`` and ``out_proj`` (value_dim → hidden), no bias
  anywhere.
* The gated attention (``self_attn``): ``q_proj`` is twice as wide (queries and the sigmoid
  output gate), q/k/v/o biased under ``attention_bias``, ``q_norm`` / ``k_norm`` of ``head_dim``.
* Qwen3-Next's MLP: block ``i`` is Qwen3-MoE-like (router, routed experts, a shared expert
  scaled by ``sigmoid(shared_expert_gate(x))``) unless ``i`` is in ``mlp_only_layers`` or
  ``(i + 1) % decoder_sparse_step != 0``, then a dense SwiGLU of ``intermediate_size``.
  Qwen3.5 dense blocks are all SwiGLU; Qwen3.5-MoE blocks all route (no dense option).
* The multi-token-prediction weights of the checkpoints (``mtp.*``) are not built: transformers
  ignores them on load, and so does this count.

The multimodal wrappers ``qwen3_5`` / ``qwen3_5_moe`` map to ``Qwen3_5(Moe)ForCausalLM``: the
causal LM builds the language model of ``text_config`` alone (the vision tower's weights are
skipped on load), so only it is counted in ``parameters``; its ``tie_word_embeddings`` is the
text config's. The vision tower (``model.visual`` of ``Qwen3_5(Moe)ForConditionalGeneration``,
``Qwen3_5VisionModel``) is counted apart, as ``ModelSpec.engine_tower_parameters``: vLLM and
SGLang load it with the language model. From ``vision_config``: a Conv3d patch embedding
(``in_channels × temporal_patch_size × patch_size²`` per output, biased), learned position
embeddings (``num_position_embeddings``), ``depth`` blocks of two LayerNorms, a biased fused
``qkv`` and ``proj`` and a biased two-Linear MLP (``intermediate_size``), and the patch merger:
a LayerNorm of ``hidden_size``, then biased Linears ``h·m² → h·m² → out_hidden_size`` (m =
``spatial_merge_size``); the rotary table is a buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gpuwarden.catalog.families.blocks import (
    ATTENTION,
    SHARED_EXPERTS,
    Shape,
    decoder_shape,
    dense_layer,
    gated_mlp,
    moe_layer,
    qkvo,
    rms_gated_decoder,
    routed_experts,
)

# Kimi Linear's MLA projections are DeepSeek-V3's; Qwen3-Next decides which blocks route exactly
# as Qwen3-MoE / Qwen2-MoE do (one piece of code each)
from gpuwarden.catalog.families.deepseek import mla_attention
from gpuwarden.catalog.families.fields import (
    Config,
    core_sizes,
    divisible,
    field_bool,
    field_int,
    invalid,
    layer_types,
    optional_int,
    routed_blocks,
    whole_numbers,
    within,
)
from gpuwarden.catalog.families.qwen import qwen_moe_routed_blocks
from gpuwarden.types.model import (
    DeltaNetShape,
    LayerParameters,
    LinearShape,
    Mixer,
    MlaSpec,
    ModelSpec,
    MoeSpec,
    StateKind,
    StateSpec,
)

LINEAR_ATTENTION = "linear_attention"
FULL_ATTENTION = "full_attention"
_MIXERS = frozenset({LINEAR_ATTENTION, FULL_ATTENTION})


@dataclass(frozen=True, slots=True)
class _Defaults:
    """A type's transformers 5.24 config defaults for the fields that change the count."""

    kv_heads: int
    intermediate: int | None  # None: no dense MLP (Qwen3.5-MoE)
    experts: int  # 0: dense blocks only (Qwen3.5)
    experts_per_token: int
    fused_projections: bool  # in_proj_qkvz / in_proj_ba (Qwen3-Next) or four in_proj_*


_DEFAULTS = {
    "qwen3_next": _Defaults(
        kv_heads=2,
        intermediate=5632,
        experts=512,
        experts_per_token=10,
        fused_projections=True,
    ),
    "qwen3_5_text": _Defaults(
        kv_heads=4, intermediate=12288, experts=0, experts_per_token=0, fused_projections=False
    ),
    "qwen3_5_moe_text": _Defaults(
        kv_heads=2, intermediate=None, experts=256, experts_per_token=8, fused_projections=False
    ),
}
# the multimodal configs and the language-model type of their text_config
_WRAPPERS = {"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}
# ... and of their vision_config (Qwen3_5VisionConfig / Qwen3_5MoeVisionConfig: same defaults)
_VISION_TYPES = {"qwen3_5": "qwen3_5_vision", "qwen3_5_moe": "qwen3_5_moe_vision"}
# every Qwen3-Next / Qwen3.5 config class: head_dim 256, linear_* as below, 32k positions
_HEAD_DIM = 256
_CONV_KERNEL = 4
_LINEAR_HEAD_DIM = 128
_LINEAR_KEY_HEADS = 16
_LINEAR_VALUE_HEADS = 32
_EXPERT_INTERMEDIATE = 512  # moe_intermediate_size and shared_expert_intermediate_size
_MAX_POSITIONS = 32768


@dataclass(frozen=True, slots=True)
class _DeltaNet:
    """Sizes of one gated-DeltaNet mixer (Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet)."""

    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    @property
    def key_dim(self) -> int:
        return self.key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.value_heads * self.value_head_dim

    @property
    def conv_channels(self) -> int:
        """q, k and v pass the depthwise convolution together."""
        return 2 * self.key_dim + self.value_dim


def _deltanet(cfg: Config) -> _DeltaNet:
    """Qwen3-Next / Qwen3.5: every linear_* size has a fixed default."""
    return _checked(
        _DeltaNet(
            key_heads=field_int(cfg, "linear_num_key_heads", default=_LINEAR_KEY_HEADS),
            value_heads=field_int(cfg, "linear_num_value_heads", default=_LINEAR_VALUE_HEADS),
            key_head_dim=field_int(cfg, "linear_key_head_dim", default=_LINEAR_HEAD_DIM),
            value_head_dim=field_int(cfg, "linear_value_head_dim", default=_LINEAR_HEAD_DIM),
            conv_kernel=field_int(cfg, "linear_conv_kernel_dim", default=_CONV_KERNEL),
        )
    )


def _checked(net: _DeltaNet) -> _DeltaNet:
    # each key head serves num_v_heads / num_k_heads value heads (the forward's reshape)
    divisible(("linear_num_value_heads", net.value_heads), ("linear_num_key_heads", net.key_heads))
    return net


def _deltanet_linears(h: int, net: _DeltaNet, *, fused: bool) -> tuple[LinearShape, ...]:
    """The mixer's projections, named as the module's attributes; out_proj last (the part's
    output Linear). PEFT has no default targets for these types (peft 0.21's
    TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING lists neither qwen3_next nor qwen3_5),
    so the default q_proj / v_proj adapt the attention blocks only and never reach these."""
    inputs: tuple[LinearShape, ...]
    if fused:
        inputs = (
            LinearShape("in_proj_qkvz", h, 2 * net.key_dim + 2 * net.value_dim, part=ATTENTION),
            LinearShape("in_proj_ba", h, 2 * net.value_heads, part=ATTENTION),
        )
    else:
        inputs = (
            LinearShape("in_proj_qkv", h, net.conv_channels, part=ATTENTION),
            LinearShape("in_proj_z", h, net.value_dim, part=ATTENTION),
            LinearShape("in_proj_b", h, net.value_heads, part=ATTENTION),
            LinearShape("in_proj_a", h, net.value_heads, part=ATTENTION),
        )
    return (*inputs, LinearShape("out_proj", net.value_dim, h, part=ATTENTION))


def _deltanet_other(net: _DeltaNet) -> int:
    """The mixer's weights that are not Linears or norms: the depthwise conv1d (one kernel per
    channel, no bias), dt_bias and A_log (one per value head)."""
    return net.conv_channels * net.conv_kernel + 2 * net.value_heads


def _state(net: _DeltaNet, layers: int, kind: StateKind = StateKind.GATED_DELTANET) -> StateSpec:
    # tensor parallelism splits the value heads (with their key heads, conv channels and
    # recurrent matrices): vLLM / SGLang shard the DeltaNet by heads
    return StateSpec(
        kind=kind,
        num_layers=layers,
        conv_channels=net.conv_channels,
        conv_kernel=net.conv_kernel,
        recurrent_state_elements=net.value_heads * net.key_head_dim * net.value_head_dim,
        num_heads=net.value_heads,
        mixer_shape=DeltaNetShape(net.key_heads, net.key_head_dim, net.value_head_dim),
    )


def _mixers(cfg: Config, n_layers: int) -> list[str]:
    """``layer_types`` as the config classes build it (explicit, or every
    ``full_attention_interval``-th block attends)."""
    kinds = layer_types(cfg, n_layers, _MIXERS)
    if kinds is not None:
        return kinds
    interval = field_int(cfg, "full_attention_interval", default=4)
    return [
        FULL_ATTENTION if (i + 1) % interval == 0 else LINEAR_ATTENTION for i in range(n_layers)
    ]


def _moe(model_type: str, cfg: Config, experts: int, sparse: tuple[bool, ...]) -> MoeSpec:
    moe = MoeSpec(
        num_experts=experts,
        experts_per_token=field_int(
            cfg, "num_experts_per_tok", default=_DEFAULTS[model_type].experts_per_token
        ),
        expert_intermediate_size=field_int(
            cfg, "moe_intermediate_size", default=_EXPERT_INTERMEDIATE
        ),
        num_shared_experts=1,
        shared_intermediate_size=field_int(
            cfg, "shared_expert_intermediate_size", default=_EXPERT_INTERMEDIATE
        ),
        first_dense_layers=sparse.index(True),
        layer_frequency=(
            field_int(cfg, "decoder_sparse_step", default=1) if model_type == "qwen3_next" else 1
        ),
    )
    if moe.experts_per_token > moe.num_experts:
        raise invalid(
            f"num_experts_per_tok={moe.experts_per_token} exceeds num_experts={moe.num_experts}"
        )
    return moe


def _routing(model_type: str, cfg: Config, n_layers: int) -> tuple[int, tuple[bool, ...]]:
    """(routed experts, which blocks route): Qwen3-Next as Qwen3-MoE (0 experts: all dense);
    Qwen3.5-MoE routes in every block."""
    default = _DEFAULTS[model_type].experts
    if model_type == "qwen3_5_text":
        return 0, (False,) * n_layers
    if model_type == "qwen3_5_moe_text":
        return field_int(cfg, "num_experts", default=default), (True,) * n_layers
    experts = field_int(cfg, "num_experts", default=default, minimum=0)
    return experts, qwen_moe_routed_blocks(cfg, n_layers, experts)


def _shared_expert(h: int, inner: int) -> tuple[LinearShape, ...]:
    """The shared expert and its one-output gate (listed first: the down projection stays the
    part's output Linear)."""
    return (
        LinearShape("shared_expert_gate", h, 1, part=SHARED_EXPERTS),
        *gated_mlp(h, inner, part=SHARED_EXPERTS),
    )


# a token mixer's Linears, its norm parameters (the block's two RMSNorms included) and its other
# weights (convolution, gates' biases and decays)
_Mixer = tuple[tuple[LinearShape, ...], int, int]


@dataclass(frozen=True, slots=True)
class _Routed:
    """The MLP of a routing block: shared expert(s), routed experts, router weight size."""

    shared: tuple[LinearShape, ...]
    experts: tuple[LinearShape, ...]
    router: int


def _assemble(
    kinds: list[str],
    sparse: Sequence[bool],
    mixers: dict[str, _Mixer],
    dense_mlp: tuple[LinearShape, ...],
    routed: _Routed | None,
) -> tuple[LayerParameters, ...]:
    """One block per (mixer, routes) pair, shared by identity (the planner groups blocks so)."""
    blocks: dict[tuple[str, bool], LayerParameters] = {}
    for kind, routes in set(zip(kinds, sparse, strict=True)):
        linears, norms, other = mixers[kind]
        if routes and routed is not None:
            block = moe_layer(
                linears, routed.shared, routed.experts, router=routed.router, norms=norms
            )
        else:
            block = dense_layer(linears, dense_mlp, norms=norms)
        mixer = Mixer.STATE if kind == LINEAR_ATTENTION else Mixer.ATTENTION
        blocks[kind, routes] = replace(block, other=other, mixer=mixer)
    return tuple(blocks[kind, routes] for kind, routes in zip(kinds, sparse, strict=True))


def _qwen_mixers(
    h: int, shape: tuple[int, int, int], net: _DeltaNet, *, bias: bool, fused: bool
) -> dict[str, _Mixer]:
    """The gated attention (q_proj twice as wide: the queries and the output gate of every
    head) and the gated DeltaNet, each with its norms: input and post-attention RMSNorms, and
    q_norm / k_norm of one head or the DeltaNet's gated head norm. ``shape``: (heads, KV heads,
    head_dim)."""
    heads, kv_heads, head_dim = shape
    q = heads * head_dim
    gated_attention = (
        LinearShape("q_proj", h, 2 * q, bias=bias, part=ATTENTION),
        *qkvo(h, q, kv_heads * head_dim, qkv_bias=bias, o_bias=bias)[1:],
    )
    deltanet = _deltanet_linears(h, net, fused=fused)
    return {
        FULL_ATTENTION: (gated_attention, 2 * h + 2 * head_dim, 0),
        LINEAR_ATTENTION: (deltanet, 2 * h + net.value_head_dim, _deltanet_other(net)),
    }


def _qwen_routed(h: int, moe: MoeSpec | None) -> _Routed | None:
    """A routing block's MLP: the gated shared expert, the routed experts, the router."""
    if moe is None:
        return None
    return _Routed(
        _shared_expert(h, moe.shared_intermediate_size),
        routed_experts(h, moe.expert_intermediate_size, moe.num_experts),
        h * moe.num_experts,
    )


def _dense_intermediate(cfg: Config, model_type: str) -> int:
    """The dense MLP's width: ``intermediate_size``, or the expert width for a type whose config
    class has none (Qwen3.5-MoE)."""
    default = _DEFAULTS[model_type].intermediate
    if default is None:
        return field_int(cfg, "moe_intermediate_size", default=_EXPERT_INTERMEDIATE)
    return field_int(cfg, "intermediate_size", default=default)


def _language_model(name: str, cfg: Config, source: str, model_type: str) -> ModelSpec:
    d = _DEFAULTS[model_type]
    h, n_layers, heads = core_sizes(cfg)
    kv_heads = field_int(cfg, "num_key_value_heads", default=d.kv_heads)
    head_dim = field_int(cfg, "head_dim", default=_HEAD_DIM)
    vocab = field_int(cfg, "vocab_size")
    tied = field_bool(cfg, "tie_word_embeddings", False)
    bias = field_bool(cfg, "attention_bias", False)
    divisible(("num_attention_heads", heads), ("num_key_value_heads", kv_heads))
    kinds = _mixers(cfg, n_layers)
    net = _deltanet(cfg)
    mixers = _qwen_mixers(h, (heads, kv_heads, head_dim), net, bias=bias, fused=d.fused_projections)
    experts, sparse = _routing(model_type, cfg, n_layers)
    moe = _moe(model_type, cfg, experts, sparse) if any(sparse) else None
    intermediate = _dense_intermediate(cfg, model_type)
    layers = _assemble(kinds, sparse, mixers, gated_mlp(h, intermediate), _qwen_routed(h, moe))
    linear_blocks = kinds.count(LINEAR_ATTENTION)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        model_type,
        Shape(h, n_layers, heads, kv_heads, head_dim, intermediate, vocab, tied),
        layers,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", _MAX_POSITIONS),
        moe=moe,
        state=_state(net, linear_blocks) if linear_blocks else None,
    )


def _text_config(cfg: Config, text_type: str) -> Config:
    """The language model's config of a multimodal wrapper, with the wrapper's checkpoint dtype
    when the text config has none."""
    text: object = cfg.get("text_config")
    if not isinstance(text, dict):
        raise invalid(
            "field 'text_config' must be an object holding the language model's config, "
            f"got {text!r}",
            hint=f"a {cfg.get('model_type')} config.json nests the language model under "
            "'text_config'",
        )
    inner_type = text.get("model_type", text_type)
    if inner_type != text_type:
        raise invalid(f"field 'text_config.model_type' must be {text_type!r}, got {inner_type!r}")
    inner: dict[str, object] = {**text, "model_type": text_type}
    if "torch_dtype" not in text and "dtype" not in text:
        for key in ("torch_dtype", "dtype"):
            if key in cfg:
                inner[key] = cfg[key]
    return inner


def _vision_config(cfg: Config, expected: str) -> Config:
    vision: object = cfg.get("vision_config", {})  # absent: the vision config's defaults
    if not isinstance(vision, dict):
        raise invalid(f"field 'vision_config' must be an object, got {vision!r}")
    kind = vision.get("model_type", expected)
    if kind != expected:
        raise invalid(
            f"field 'vision_config.model_type' is {kind!r}: the Qwen3.5 vision tower is counted "
            f"as {expected!r}"
        )
    return vision


def _qwen3_5_vision(cfg: Config, model_type: str) -> int:
    """Parameters of Qwen3_5(Moe)VisionModel (the module docstring; Qwen3_5VisionConfig
    defaults for absent keys)."""
    vision = _vision_config(cfg, _VISION_TYPES[model_type])
    with within("vision_config"):
        h = field_int(vision, "hidden_size", default=1152)
        inner = field_int(vision, "intermediate_size", default=4304)
        depth = field_int(vision, "depth", default=27)
        channels = field_int(vision, "in_channels", default=3)
        patch = field_int(vision, "patch_size", default=16)
        frames = field_int(vision, "temporal_patch_size", default=2)
        merge = field_int(vision, "spatial_merge_size", default=2)
        out = field_int(vision, "out_hidden_size", default=3584)
        positions = field_int(vision, "num_position_embeddings", default=2304)
    patch_embed = channels * frames * patch * patch * h + h
    block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * inner + inner) + (inner * h + h)
    merged = h * merge * merge
    merger = 2 * h + (merged * merged + merged) + (merged * out + out)
    return patch_embed + positions * h + depth * block + merger


def qwen3_hybrid(name: str, cfg: Config, source: str) -> ModelSpec:
    """Qwen3-Next, Qwen3.5 and Qwen3.5-MoE (``model_type`` picks the type); the multimodal
    ``qwen3_5`` / ``qwen3_5_moe`` configs plan their ``text_config`` and count their vision tower
    apart (``engine_tower_parameters``)."""
    model_type = cfg.get("model_type")
    text_type = _WRAPPERS.get(str(model_type))
    if text_type is None:
        return _language_model(name, cfg, source, str(model_type))
    text = _text_config(cfg, text_type)
    with within("text_config"):
        spec = _language_model(name, text, source, text_type)
    return replace(spec, engine_tower_parameters=_qwen3_5_vision(cfg, str(model_type)))


# --- OLMo Hybrid ---------------------------------------------------------------------------------

_OLMO_MAX_POSITIONS = 65536


def _olmo_deltanet(cfg: Config, h: int, heads: int) -> _DeltaNet:
    """OlmoHybridConfig's defaults: as many DeltaNet key and value heads as attention heads,
    key heads of int(0.75 · hidden / key heads), value heads twice as wide."""
    key_heads = field_int(cfg, "linear_num_key_heads", default=heads)
    key_head_dim = field_int(cfg, "linear_key_head_dim", default=int(0.75 * h / key_heads))
    return _checked(
        _DeltaNet(
            key_heads=key_heads,
            value_heads=field_int(cfg, "linear_num_value_heads", default=heads),
            key_head_dim=key_head_dim,
            value_head_dim=field_int(cfg, "linear_value_head_dim", default=2 * key_head_dim),
            conv_kernel=field_int(cfg, "linear_conv_kernel_dim", default=_CONV_KERNEL),
        )
    )


def _olmo_mixers(cfg: Config, n_layers: int) -> list[str]:
    """OlmoHybridConfig's layer_types: explicit, or every 4th block attends (the last one when
    no block would); a model needs both kinds (its validate_architecture)."""
    kinds = layer_types(cfg, n_layers, _MIXERS)
    if kinds is None:
        kinds = [FULL_ATTENTION if i % 4 == 3 else LINEAR_ATTENTION for i in range(n_layers)]
        if FULL_ATTENTION not in kinds:
            kinds[-1] = FULL_ATTENTION
    if len(set(kinds)) < len(_MIXERS):
        raise invalid(
            "field 'layer_types' must hold both 'linear_attention' and 'full_attention' blocks",
            hint="OLMo Hybrid interleaves gated-DeltaNet and attention blocks",
        )
    return kinds


def olmo_hybrid(name: str, cfg: Config, source: str) -> ModelSpec:
    """OLMo Hybrid (transformers 5.24 ``OlmoHybridForCausalLM``): OLMo-2 attention blocks (no
    input norm; post-attention and post-feedforward RMSNorms; q_norm / k_norm over the whole
    projections) between gated-DeltaNet blocks (input and post-attention RMSNorms; separate
    q/k/v/a/b/g projections and o_proj, a depthwise conv1d, A_log and dt_bias per value head, a
    gated RMSNorm of head_v_dim), SwiGLU MLPs everywhere. The DeltaNet's projections carry the
    attention's names (q_proj, k_proj, v_proj, o_proj): PEFT's q_proj / v_proj reach both."""
    shape = decoder_shape(cfg, kv_default=None, head_dim_default=None, tied_default=False)
    h = shape.hidden
    kinds = _olmo_mixers(cfg, shape.layers)
    net = _olmo_deltanet(cfg, h, shape.heads)
    bias = field_bool(cfg, "attention_bias", False)
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    mlp = gated_mlp(h, shape.intermediate)
    attention = dense_layer(qkvo(h, q, kv, qkv_bias=bias, o_bias=bias), mlp, norms=2 * h + q + kv)
    deltanet_linears = (
        LinearShape("q_proj", h, net.key_dim, part=ATTENTION),
        LinearShape("k_proj", h, net.key_dim, part=ATTENTION),
        LinearShape("v_proj", h, net.value_dim, part=ATTENTION),
        LinearShape("a_proj", h, net.value_heads, part=ATTENTION),
        LinearShape("b_proj", h, net.value_heads, part=ATTENTION),
        LinearShape("g_proj", h, net.value_dim, part=ATTENTION),
        LinearShape("o_proj", net.value_dim, h, part=ATTENTION),
    )
    deltanet = replace(
        dense_layer(deltanet_linears, mlp, norms=2 * h + net.value_head_dim),
        other=_deltanet_other(net),
        mixer=Mixer.STATE,
    )
    layers = tuple(deltanet if kind == LINEAR_ATTENTION else attention for kind in kinds)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "olmo_hybrid",
        shape,
        layers,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", _OLMO_MAX_POSITIONS),
        state=_state(net, kinds.count(LINEAR_ATTENTION)),
    )


# --- Kimi Linear ---------------------------------------------------------------------------------

_KIMI_HEAD_DIM = 128  # linear_head_dim
_KIMI_HEADS = 32  # linear_num_heads
_KIMI_MAX_POSITIONS = 1_048_576


def _kimi_linear_config(cfg: Config) -> Config:
    """``linear_attn_config`` as KimiLinearConfig reads it: its head_dim / num_heads /
    short_conv_kernel_size override the flat keys; {} when absent."""
    nested: object = cfg.get("linear_attn_config")
    if nested is None:
        return {}
    if not isinstance(nested, dict):
        raise invalid(f"field 'linear_attn_config' must be an object, got {nested!r}")
    return nested


def _kimi_delta(cfg: Config) -> _DeltaNet:
    """Kimi delta attention: q, k and v all ``num_heads · head_dim`` wide (one head count)."""
    nested = _kimi_linear_config(cfg)
    with within("linear_attn_config"):
        head_dim = field_int(nested, "head_dim", default=0, minimum=0)
        heads = field_int(nested, "num_heads", default=0, minimum=0)
        kernel = field_int(nested, "short_conv_kernel_size", default=0, minimum=0)
    heads = heads or field_int(cfg, "linear_num_heads", default=_KIMI_HEADS)
    head_dim = head_dim or field_int(cfg, "linear_head_dim", default=_KIMI_HEAD_DIM)
    return _DeltaNet(
        key_heads=heads,
        value_heads=heads,
        key_head_dim=head_dim,
        value_head_dim=head_dim,
        conv_kernel=kernel or field_int(cfg, "linear_conv_kernel_dim", default=_CONV_KERNEL),
    )


def _kimi_mixers(cfg: Config, n_layers: int) -> list[str]:
    """KimiLinearConfig's layer_types: explicit; else the checkpoint's 1-indexed
    ``linear_attn_config`` full_attn_layers / kda_layers; else every 4th block after the first
    attends. A block named in neither list has no mixer transformers would build: refused."""
    kinds = layer_types(cfg, n_layers, _MIXERS)
    if kinds is not None:
        return kinds
    nested = _kimi_linear_config(cfg)
    if "full_attn_layers" not in nested or "kda_layers" not in nested:
        return [FULL_ATTENTION if i and i % 4 == 0 else LINEAR_ATTENTION for i in range(n_layers)]
    named: list[str | None] = [None] * n_layers
    with within("linear_attn_config"):
        for key, kind in (("full_attn_layers", FULL_ATTENTION), ("kda_layers", LINEAR_ATTENTION)):
            for number in whole_numbers(nested, key) or ():
                if not 1 <= number <= n_layers:
                    raise invalid(f"field {key!r} names layer {number} (1-indexed) of {n_layers}")
                named[number - 1] = kind
    if None in named:
        raise invalid(
            "fields 'linear_attn_config.full_attn_layers' and 'kda_layers' leave layer "
            f"{named.index(None) + 1} without a mixer"
        )
    return [kind for kind in named if kind is not None]


def _kimi_sparse(cfg: Config, n_layers: int) -> list[bool]:
    """Which blocks route: ``mlp_layer_types``, else every block from ``first_k_dense_replace``
    on (read only when the list is absent, as KimiLinearConfig does)."""
    if cfg.get("mlp_layer_types") is not None:
        return routed_blocks(cfg, n_layers, first_dense=0)
    dense = field_int(cfg, "first_k_dense_replace", default=1, minimum=0)
    return routed_blocks(cfg, n_layers, dense)


def _kimi_delta_linears(h: int, net: _DeltaNet) -> tuple[LinearShape, ...]:
    """KimiLinearDeltaAttention's Linears (the forget gate's f_a / f_b included); o_proj last."""
    width, rank = net.value_dim, net.value_head_dim
    return (
        LinearShape("q_proj", h, width, part=ATTENTION),
        LinearShape("k_proj", h, width, part=ATTENTION),
        LinearShape("v_proj", h, width, part=ATTENTION),
        LinearShape("f_a_proj", h, rank, part=ATTENTION),
        LinearShape("f_b_proj", rank, width, part=ATTENTION),
        LinearShape("b_proj", h, net.value_heads, part=ATTENTION),
        LinearShape("g_a_proj", h, rank, part=ATTENTION),
        LinearShape("g_b_proj", rank, width, part=ATTENTION),
        LinearShape("o_proj", width, h, part=ATTENTION),
    )


def _kimi_moe(cfg: Config, sparse: list[bool]) -> MoeSpec:
    """The MoE keys under KimiLinearConfig's attribute_map names or the DeepSeek-style ones."""
    inner = field_int(cfg, "moe_intermediate_size", default=1024)
    moe = MoeSpec(
        num_experts=field_int(cfg, "num_experts", "num_local_experts", default=256),
        experts_per_token=field_int(cfg, "num_experts_per_token", "num_experts_per_tok", default=8),
        expert_intermediate_size=inner,
        num_shared_experts=field_int(
            cfg, "num_shared_experts", "n_shared_experts", default=1, minimum=0
        ),
        shared_intermediate_size=inner,
        first_dense_layers=sparse.index(True),
    )
    if moe.experts_per_token > moe.num_experts:
        raise invalid(
            f"num_experts_per_token={moe.experts_per_token} exceeds num_experts={moe.num_experts}"
        )
    return moe


def _kimi_mla(cfg: Config) -> MlaSpec:
    """KimiLinearConfig's MLA sizes (no q LoRA by default: q_proj straight from the hidden)."""
    return MlaSpec(
        q_lora_rank=optional_int(cfg, "q_lora_rank"),
        kv_lora_rank=field_int(cfg, "kv_lora_rank", default=512),
        qk_nope_head_dim=field_int(cfg, "qk_nope_head_dim", default=128),
        qk_rope_head_dim=field_int(cfg, "qk_rope_head_dim", default=64),
        v_head_dim=field_int(cfg, "v_head_dim", default=128),
    )


def _kimi_mixing(
    h: int, heads: int, mla: MlaSpec, net: _DeltaNet, *, bias: bool
) -> dict[str, _Mixer]:
    """MLA attention (its latent norms) and Kimi delta attention (the depthwise conv1d, dt_bias
    per channel and A_log per head: KimiLinearForgetGate), each with the block's two RMSNorms."""
    latent_norms = mla.kv_lora_rank + (mla.q_lora_rank or 0)
    return {
        FULL_ATTENTION: (mla_attention(h, heads, mla, bias), 2 * h + latent_norms, 0),
        LINEAR_ATTENTION: (
            _kimi_delta_linears(h, net),
            2 * h + net.value_head_dim,
            net.conv_channels * net.conv_kernel + net.value_dim + net.value_heads,
        ),
    }


def _kimi_routed(h: int, moe: MoeSpec | None) -> _Routed | None:
    """KimiLinearMoE: one shared MLP of num_shared_experts × moe_intermediate_size, the routed
    experts, the router."""
    if moe is None:
        return None
    return _Routed(
        gated_mlp(h, moe.num_shared_experts * moe.shared_intermediate_size, part=SHARED_EXPERTS),
        routed_experts(h, moe.expert_intermediate_size, moe.num_experts),
        h * moe.num_experts,
    )


def kimi_linear(name: str, cfg: Config, source: str) -> ModelSpec:
    """Kimi Linear (transformers 5.24 ``KimiLinearForCausalLM``): DeepSeek-V3-style MLA blocks
    (q_proj or q_a/q_b with q_a_layernorm, kv_a_proj_with_mqa + kv_a_layernorm, kv_b_proj,
    o_proj; biases on q_a / kv_a / o under attention_bias) between Kimi delta attention blocks
    (a gated DeltaNet with a per-channel forget gate: q/k/v of ``num_heads · head_dim``, a
    depthwise conv1d over the three, f_a/f_b and g_a/g_b low-rank gates, b_proj, dt_bias of
    the width, A_log per head, a gated RMSNorm of head_dim, o_proj); dense SwiGLU blocks first,
    then DeepSeek-V3's MoE (a router weight, routed experts, a shared MLP of num_shared_experts ×
    moe_intermediate_size; the correction bias is a buffer)."""
    h, n_layers, heads = core_sizes(cfg)
    kv_heads = field_int(cfg, "num_key_value_heads", default=heads)
    mla = _kimi_mla(cfg)
    kinds = _kimi_mixers(cfg, n_layers)
    sparse = _kimi_sparse(cfg, n_layers)
    net = _kimi_delta(cfg)
    moe = _kimi_moe(cfg, sparse) if any(sparse) else None
    mixers = _kimi_mixing(h, heads, mla, net, bias=field_bool(cfg, "attention_bias", False))
    intermediate = field_int(cfg, "intermediate_size", default=9216)
    layers = _assemble(kinds, sparse, mixers, gated_mlp(h, intermediate), _kimi_routed(h, moe))
    shape = Shape(
        h,
        n_layers,
        heads,
        kv_heads,
        mla.qk_nope_head_dim + mla.qk_rope_head_dim,
        intermediate,
        field_int(cfg, "vocab_size"),
        False,  # KimiLinearForCausalLM ties nothing (_tied_weights_keys = {}), whatever the config
    )
    linear_blocks = kinds.count(LINEAR_ATTENTION)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "kimi_linear",
        shape,
        layers,
        max_position_embeddings=optional_int(
            cfg,
            "model_max_length",
            optional_int(cfg, "max_position_embeddings", _KIMI_MAX_POSITIONS),
        ),
        moe=moe,
        mla=mla,
        state=_state(net, linear_blocks, StateKind.KIMI_DELTA) if linear_blocks else None,
    )
