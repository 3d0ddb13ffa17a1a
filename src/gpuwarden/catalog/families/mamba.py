"""State-space models and their hybrids: Mamba-2 (Nemotron-H, Granite 4.0 hybrids, Bamba, Mamba-2)
and Mamba-1 (Mamba, Falcon-Mamba, Jamba).

A Mamba block keeps a fixed-size state per sequence instead of a KV cache (``StateSpec``): the last
columns of its causal depthwise ``conv1d`` (``conv_channels`` × kernel) and the selective scan's
state. Mamba-2 (``*Mamba2Mixer`` / ``*MambaLayer`` of transformers 5.24): heads × head_dim
× d_state; its conv runs over the x, B and C channels (inner + 2 · groups · d_state);
``in_proj`` emits z, x, B, C and one dt per head. Mamba-1 (``MambaMixer``): inner × d_state,
the conv over the inner channels; each channel is its own "head" (tensor parallelism splits the
channels), so ``num_heads`` of its StateSpec is the inner size.

Counts are what transformers 5.24 builds (the modeling file named at each family); defaults are
the config classes'. The mixers' ``in_proj`` / ``out_proj`` (and Mamba-1's ``x_proj`` /
``dt_proj``) are ``nn.Linear`` modules listed with part "attention"; the conv1d, ``A_log``, ``D``
and ``dt_bias`` are other parameters (no LoRA or quantization target). PEFT's default LoRA
targets reach only q/k/v/o of Nemotron-H's attention blocks; for the other types PEFT has no
default and the user names ``target_modules``.

Pure state models have no attention: their ``num_heads`` / ``head_dim`` are the mixer's (Mamba-2
heads, Mamba-1 one head per channel) and ``attention_layers`` is 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil

from gpuwarden.catalog.families.blocks import (
    ATTENTION,
    EXPERTS,
    MLP,
    SHARED_EXPERTS,
    Shape,
    breakdown,
    decoder_shape,
    dense_layer,
    gated_mlp,
    model_spec,
    moe_layer,
    plain_mlp,
    rms_gated_decoder,
    routed_experts,
    shape_attention,
)
from gpuwarden.catalog.families.fields import (
    MAX_CONFIG_INT,
    MAX_LAYERS,
    Config,
    field_bool,
    field_int,
    field_str,
    invalid,
    layer_count,
    optional_int,
    whole_numbers,
)
from gpuwarden.errors import InvalidConfigError
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    Mamba1Shape,
    Mamba2Shape,
    Mixer,
    MlpKind,
    ModelSpec,
    MoeSpec,
    NormKind,
    ScanNorms,
    StateKind,
    StateSpec,
)

FULL_ATTENTION = "full_attention"
LINEAR_ATTENTION = "linear_attention"  # transformers 5's name for a Mamba block
MOE = "moe"
MLP_ONLY = "mlp"
# transformers' _LEGACY_LAYER_TYPE_REMAP (configuration_utils.py): names older configs use
_LEGACY_KINDS = {"mamba": LINEAR_ATTENTION, "attention": FULL_ATTENTION}


def _first_set_bool(cfg: Config, names: tuple[str, ...], default: bool) -> bool:
    """The first of ``names`` the config sets (a legacy spelling wins, as the config class pops
    it over the current one)."""
    for name in names:
        if cfg.get(name) is not None:
            return field_bool(cfg, name, default)
    return default


def _with_defaults(cfg: Config, defaults: Config) -> Config:
    """``cfg`` with the config class's defaults for the keys it leaves out (null stays null)."""
    return {**defaults, **cfg}


# --- Mamba-2 -------------------------------------------------------------------------------------

# the config classes' chunk_size defaults (transformers 5.24 configuration_<type>.py: NemotronH
# 128; Mamba2, Bamba, GraniteMoeHybrid, FalconH1 256)
_CHUNK_TOKENS = 256
_NEMOTRON_CHUNK_TOKENS = 128


def _chunk_tokens(cfg: Config, default: int) -> int:
    """The SSD scan's chunk length: chunk_size, or mamba_chunk_size (the name Bamba / Granite /
    Falcon-H1 use and NemotronHConfig also pops), else the class default. It sizes no weight:
    a value that is not a positive integer falls back to the default, as the config class
    stores it without a check."""
    for key in ("chunk_size", "mamba_chunk_size"):
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


@dataclass(frozen=True, slots=True)
class _Mamba2:
    """One Mamba-2 mixer's sizes."""

    hidden: int
    heads: int
    head_dim: int
    groups: int
    d_state: int
    kernel: int
    proj_bias: bool
    conv_bias: bool
    chunk_tokens: int

    @property
    def inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        """x, B and C go through the depthwise conv: inner + 2 · groups · d_state channels."""
        return self.inner + 2 * self.groups * self.d_state


def _mamba2_linears(m: _Mamba2) -> tuple[LinearShape, ...]:
    """in_proj: z (inner), x·B·C (conv channels) and one dt per head; out_proj: inner → hidden."""
    return (
        LinearShape(
            "in_proj",
            m.hidden,
            m.inner + m.conv_channels + m.heads,
            bias=m.proj_bias,
            part=ATTENTION,
        ),
        LinearShape("out_proj", m.inner, m.hidden, bias=m.proj_bias, part=ATTENTION),
    )


def _mamba2_other(m: _Mamba2) -> int:
    """conv1d (one kernel per channel, bias if conv_bias) and dt_bias, A_log, D (one per head)."""
    return m.conv_channels * (m.kernel + (1 if m.conv_bias else 0)) + 3 * m.heads


def _mamba2_shape(m: _Mamba2) -> Mamba2Shape:
    return Mamba2Shape(m.head_dim, m.groups, m.d_state, m.chunk_tokens)


def _mamba2_state(
    m: _Mamba2, layers: int, *, mixerless: int = 0, shape: Mamba2Shape | None = None
) -> StateSpec:
    # tensor parallelism splits the heads (with their conv channels and states): vLLM's
    # MambaMixer2 shards in_proj, conv1d and the SSM by heads (groups replicate when t > groups)
    return StateSpec(
        kind=StateKind.MAMBA2,
        num_layers=layers,
        conv_channels=m.conv_channels,
        conv_kernel=m.kernel,
        recurrent_state_elements=m.heads * m.head_dim * m.d_state,
        num_heads=m.heads,
        mixerless_layers=mixerless,
        mixer_shape=_mamba2_shape(m) if shape is None else shape,
    )


def _mamba2_block(m: _Mamba2, *, norms: int, mlp: tuple[LinearShape, ...] = ()) -> LayerParameters:
    """A Mamba-2 mixer (its gated RMSNorm over the inner width included), the block's ``norms``
    and its dense ``mlp`` if it has one."""
    return replace(
        dense_layer(_mamba2_linears(m), mlp, norms=norms + m.inner),
        other=_mamba2_other(m),
        mixer=Mixer.STATE,
    )


def _expanded_heads(cfg: Config, inner: int) -> tuple[int, int]:
    """(heads, head_dim) of the Granite / Bamba / Falcon-H1 mixer: its ``inner`` width split over
    mamba_n_heads; mamba_d_head "auto" (the default) is that quotient, a stated one must match
    it (the config class refuses it otherwise)."""
    heads = field_int(cfg, "mamba_n_heads", default=128)
    if inner % heads:
        raise invalid(f"mamba_n_heads={heads} does not divide the mixer width {inner}")
    stated = cfg.get("mamba_d_head")
    head_dim = inner // heads if stated in (None, "auto") else field_int(cfg, "mamba_d_head")
    if head_dim * heads != inner:
        raise invalid(
            f"mamba_d_head={head_dim} × mamba_n_heads={heads} is not the mixer width {inner}"
        )
    return heads, head_dim


def _granite_mixer(cfg: Config, h: int, inner: int | None = None) -> _Mamba2:
    """The mamba_* keys of GraniteMoeHybridConfig / BambaConfig / FalconH1Config; the mixer is
    ``inner`` wide (default mamba_expand · hidden)."""
    if inner is None:
        inner = field_int(cfg, "mamba_expand", default=2) * h
    heads, head_dim = _expanded_heads(cfg, inner)
    return _Mamba2(
        hidden=h,
        heads=heads,
        head_dim=head_dim,
        groups=field_int(cfg, "mamba_n_groups", default=1),
        d_state=field_int(cfg, "mamba_d_state", default=256),
        kernel=field_int(cfg, "mamba_d_conv", default=4),
        proj_bias=field_bool(cfg, "mamba_proj_bias", False),
        conv_bias=field_bool(cfg, "mamba_conv_bias", True),
        chunk_tokens=_chunk_tokens(cfg, _CHUNK_TOKENS),
    )


def _attention_shape(cfg: Config, defaults: Config) -> Shape:
    """The attention blocks' sizes: ``decoder_shape`` over the config class's ``defaults``
    (num_key_value_heads null or absent with no default: = heads; head_dim: hidden // heads
    unless stated, as the attention modules' getattr(config, "head_dim", ...) reads it)."""
    return decoder_shape(
        _with_defaults(cfg, defaults), kv_default=None, head_dim_default=None, tied_default=False
    )


def _state_if_any(state: StateSpec) -> StateSpec | None:
    """The spec's ``state``: None when no block keeps one."""
    return state if state.num_layers else None


@dataclass(frozen=True, slots=True)
class _Mixing:
    """A block's token mixer: its linears, the block's norms, its other parameters, its kind."""

    linears: tuple[LinearShape, ...]
    norms: int
    other: int
    kind: Mixer


def _mixer_blocks(
    h: int,
    mixers: dict[bool, _Mixing],
    kinds: list[tuple[bool, bool]],
    moe: MoeSpec | None,
    dense_mlp: tuple[LinearShape, ...],
) -> tuple[LayerParameters, ...]:
    """Per block, (attends?, routes?): the attention or state mixer of ``mixers`` and the routed
    experts (bare router weight, no shared expert) or ``dense_mlp``; one object per distinct
    pair (the planner groups blocks by identity)."""
    blocks: dict[tuple[bool, bool], LayerParameters] = {}
    for attends, routes in set(kinds):
        mixing = mixers[attends]
        if routes and moe is not None:
            experts = routed_experts(h, moe.expert_intermediate_size, moe.num_experts)
            router = h * moe.num_experts
            block = moe_layer(mixing.linears, (), experts, router=router, norms=mixing.norms)
        else:
            block = dense_layer(mixing.linears, dense_mlp, norms=mixing.norms)
        blocks[attends, routes] = replace(block, other=mixing.other, mixer=mixing.kind)
    return tuple(blocks[kind] for kind in kinds)


# --- Nemotron-H ----------------------------------------------------------------------------------

# NemotronHConfig defaults the shared sizes are read against
_NEMOTRON_DEFAULTS: Config = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 21504,
    "vocab_size": 131072,
    "num_hidden_layers": 1,  # ignored: the block list sets the depth
}
_NEMOTRON_PATTERN = {"M": LINEAR_ATTENTION, "E": MOE, "*": FULL_ATTENTION, "-": MLP_ONLY}
_NEMOTRON_KINDS = frozenset(_NEMOTRON_PATTERN.values())


def _block_kinds(
    cfg: Config, names: tuple[str, str], known: frozenset[str]
) -> tuple[str, list[str]] | None:
    """The per-block kinds under the first of ``names`` the config sets (a config class's field
    and its attribute_map alias: transformers sets the alias last, so it is named first), legacy
    names remapped, each one ``known``; None when the config sets neither."""
    for name in names:
        value: object = cfg.get(name)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise invalid(f"field {name!r} must be a list of strings, got {value!r}")
        kinds = [_LEGACY_KINDS.get(str(t), str(t)) for t in value]
        unknown = sorted(set(kinds) - known)
        if unknown:
            raise invalid(
                f"field {name!r} has unknown block kinds {unknown}",
                hint=f"this model type knows {', '.join(sorted(known))}",
            )
        return name, kinds
    return None


def _nemotron_kinds(cfg: Config) -> list[str]:
    """NemotronHConfig: ``layers_block_type`` or its alias ``layer_types``, else
    ``hybrid_override_pattern`` (M Mamba-2, E MoE, * attention, - MLP), else its default
    [Mamba-2, MoE, attention, MLP]. The list sets the depth; num_hidden_layers is ignored."""
    listed = _block_kinds(cfg, ("layer_types", "layers_block_type"), _NEMOTRON_KINDS)
    if listed is not None:
        return _bounded(listed[1], listed[0])
    pattern: object = cfg.get("hybrid_override_pattern")
    if pattern is None:
        return [LINEAR_ATTENTION, MOE, FULL_ATTENTION, MLP_ONLY]
    if not isinstance(pattern, str) or not set(pattern) <= set(_NEMOTRON_PATTERN):
        raise invalid(
            f"field 'hybrid_override_pattern' must be a string of M, E, * and -, got {pattern!r}"
        )
    return _bounded([_NEMOTRON_PATTERN[c] for c in pattern], "hybrid_override_pattern")


def _bounded(kinds: list[str], name: str) -> list[str]:
    if not 0 < len(kinds) <= MAX_LAYERS:
        raise invalid(f"field {name!r} must list between 1 and {MAX_LAYERS} blocks")
    return kinds


def _nemotron_moe(cfg: Config, h: int) -> tuple[MoeSpec, LayerParameters]:
    """NemotronHMoE: ``n_routed_experts`` non-gated experts (up_proj, down_proj; over
    ``moe_latent_size`` when set, between two latent projections), a float32 router weight,
    and one shared MLP of ``moe_shared_expert_intermediate_size`` that always runs."""
    bias = field_bool(cfg, "mlp_bias", False)
    expert_i = field_int(cfg, "moe_intermediate_size", default=7688)
    shared_i = field_int(cfg, "moe_shared_expert_intermediate_size", default=7688)
    moe = MoeSpec(
        num_experts=field_int(cfg, "num_local_experts", "n_routed_experts", default=8),
        experts_per_token=field_int(cfg, "num_experts_per_tok", default=2),
        expert_intermediate_size=expert_i,
        num_shared_experts=1,
        shared_intermediate_size=shared_i,
    )
    latent = optional_int(cfg, "moe_latent_size")
    width = latent or h
    n = moe.num_experts
    experts = (
        LinearShape("experts.up_proj", width, expert_i, count=n, expert=True, part=EXPERTS),
        LinearShape("experts.down_proj", expert_i, width, count=n, expert=True, part=EXPERTS),
    )
    shared = plain_mlp(h, shared_i, bias=bias, names=("up_proj", "down_proj"), part=SHARED_EXPERTS)
    if latent is not None:
        shared += plain_mlp(
            h, latent, bias=bias, names=("fc1_latent_proj", "fc2_latent_proj"), part=MLP
        )
    return moe, moe_layer((), shared, experts, router=n * h, norms=h)


def nemotron_h(name: str, cfg: Config, source: str) -> ModelSpec:
    """NVIDIA Nemotron-H / Nemotron Nano 2 / Nemotron 3 (modeling_nemotron_h.py): one RMSNorm and
    one mixer per block, the mixer a Mamba-2 (intermediate = mamba_num_heads · mamba_head_dim),
    an attention (q/k/v/o, never a bias), a squared-ReLU MLP (up, down) or an MoE; the MLP and MoE
    blocks cache nothing (``mixerless_layers``). The MTP layers are not built by
    NemotronHForCausalLM."""
    kinds = _nemotron_kinds(cfg)
    # NemotronHForCausalLM ties nothing (_tied_weights_keys is empty), whatever the config says
    shape = replace(_attention_shape(cfg, _NEMOTRON_DEFAULTS), layers=len(kinds), tied=False)
    h = shape.hidden
    mixer = _Mamba2(
        hidden=h,
        heads=field_int(cfg, "mamba_num_heads", default=128),
        head_dim=field_int(cfg, "mamba_head_dim", default=64),
        groups=field_int(cfg, "mamba_n_groups", "n_groups", default=8),
        d_state=field_int(cfg, "ssm_state_size", default=128),
        kernel=field_int(cfg, "mamba_d_conv", "conv_kernel", default=4),
        proj_bias=field_bool(cfg, "use_bias", False),
        conv_bias=_first_set_bool(cfg, ("mamba_conv_bias", "use_conv_bias"), True),
        chunk_tokens=_chunk_tokens(cfg, _NEMOTRON_CHUNK_TOKENS),
    )
    attn = shape_attention(shape, bias=False)
    mlp = plain_mlp(
        h,
        shape.intermediate,
        bias=field_bool(cfg, "mlp_bias", False),
        names=("up_proj", "down_proj"),
    )
    moe, sparse = _nemotron_moe(cfg, h) if MOE in kinds else (None, None)
    # one object per distinct block: the planner groups blocks by identity
    blocks = {
        LINEAR_ATTENTION: _mamba2_block(mixer, norms=h),
        FULL_ATTENTION: dense_layer(attn, (), norms=h),
        MLP_ONLY: replace(dense_layer((), mlp, norms=h), mixer=Mixer.NONE),
    }
    if sparse is not None:
        blocks[MOE] = replace(sparse, mixer=Mixer.NONE)
    layers = tuple(blocks[kind] for kind in kinds)
    mixerless = kinds.count(MLP_ONLY) + kinds.count(MOE)
    state = _mamba2_state(mixer, kinds.count(LINEAR_ATTENTION), mixerless=mixerless)
    return model_spec(
        name,
        cfg,
        source,
        "nemotron_h",
        shape,
        breakdown(shape, layers, final_norm=h),
        norm=NormKind.RMS,
        mlp=MlpKind.PLAIN,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", 4096),
        moe=moe,
        # MLP-only and MoE blocks cache nothing either: a state spec says so even without Mamba
        state=state if state.num_layers or mixerless else None,
    )


# --- Granite 4.0 hybrids and Bamba ---------------------------------------------------------------

_GRANITE_DEFAULTS: Config = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "intermediate_size": 11008,
    "vocab_size": 32000,
}
_BAMBA_DEFAULTS: Config = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128000,
}


def _granite_kinds(cfg: Config, n_layers: int) -> list[str]:
    """GraniteMoeHybridConfig.layer_types or its alias layers_block_type; all Mamba-2 by
    default."""
    known = frozenset({LINEAR_ATTENTION, FULL_ATTENTION})
    listed = _block_kinds(cfg, ("layers_block_type", "layer_types"), known)
    if listed is None:
        return [LINEAR_ATTENTION] * n_layers
    name, kinds = listed
    if len(kinds) != n_layers:
        raise invalid(f"field {name!r} has {len(kinds)} entries but num_hidden_layers={n_layers}")
    return kinds


def granitemoehybrid(name: str, cfg: Config, source: str) -> ModelSpec:
    """IBM Granite 4.0 hybrids (modeling_granitemoehybrid.py): every block has two RMSNorms, a
    Mamba-2 or an attention (q/k/v/o biased by ``attention_bias``), a shared SwiGLU MLP
    (``shared_mlp``: input_linear hidden → 2 · shared_intermediate_size, output_linear) and, when
    ``num_local_experts`` > 0, ``num_local_experts`` routed experts of ``intermediate_size`` behind
    a router weight. The multipliers and position_embedding_type (rope / nope) add no weights."""
    shape = _attention_shape(cfg, _GRANITE_DEFAULTS)
    kinds = _granite_kinds(cfg, shape.layers)
    h = shape.hidden
    mixer = _granite_mixer(cfg, h)
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    shared_i = field_int(cfg, "shared_intermediate_size", default=1024)
    n_experts = field_int(cfg, "num_local_experts", default=8, minimum=0)
    moe = None
    if n_experts:
        moe = MoeSpec(
            num_experts=n_experts,
            experts_per_token=field_int(cfg, "num_experts_per_tok", default=2),
            expert_intermediate_size=shape.intermediate,
            num_shared_experts=1,
            shared_intermediate_size=shared_i,
        )
    # GraniteMoeHybridMLP: input_linear emits the gate and the up halves at once
    part = SHARED_EXPERTS if moe else MLP
    shared = (
        LinearShape("input_linear", h, 2 * shared_i, part=part),
        LinearShape("output_linear", shared_i, h, part=part),
    )

    def block(
        mixer_linears: tuple[LinearShape, ...], norms: int, other: int, kind: Mixer
    ) -> LayerParameters:
        if moe is None:
            layer = dense_layer(mixer_linears, shared, norms=norms)
        else:
            routed = routed_experts(h, moe.expert_intermediate_size, moe.num_experts)
            layer = moe_layer(mixer_linears, shared, routed, router=h * n_experts, norms=norms)
        return replace(layer, other=other, mixer=kind)

    mamba_norms = 2 * h + mixer.inner
    blocks = {
        LINEAR_ATTENTION: block(
            _mamba2_linears(mixer), mamba_norms, _mamba2_other(mixer), Mixer.STATE
        ),
        FULL_ATTENTION: block(attn, 2 * h, 0, Mixer.ATTENTION),
    }
    shape = replace(shape, intermediate=shared_i)
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "granitemoehybrid",
        shape,
        tuple(blocks[kind] for kind in kinds),
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", 2048),
        moe=moe,
        state=_state_if_any(_mamba2_state(mixer, kinds.count(LINEAR_ATTENTION))),
    )


def bamba(name: str, cfg: Config, source: str) -> ModelSpec:
    """IBM Bamba (modeling_bamba.py): two RMSNorms, a Mamba-2 or (the blocks in
    ``attn_layer_indices``) an attention with q/k/v/o biased by ``attention_bias``, and a SwiGLU
    MLP biased by ``mlp_bias``."""
    shape = _attention_shape(cfg, _BAMBA_DEFAULTS)
    h = shape.hidden
    mixer = _granite_mixer(cfg, h)
    attention_at = set(whole_numbers(cfg, "attn_layer_indices") or ())
    kinds = [FULL_ATTENTION if i in attention_at else LINEAR_ATTENTION for i in range(shape.layers)]
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    mlp = gated_mlp(h, shape.intermediate, bias=field_bool(cfg, "mlp_bias", False))
    blocks = {
        LINEAR_ATTENTION: _mamba2_block(mixer, norms=2 * h, mlp=mlp),
        FULL_ATTENTION: dense_layer(attn, mlp, norms=2 * h),
    }
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "bamba",
        shape,
        tuple(blocks[kind] for kind in kinds),
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", 262144),
        state=_state_if_any(_mamba2_state(mixer, kinds.count(LINEAR_ATTENTION))),
    )


# --- Falcon-H1: attention and Mamba-2 side by side ----------------------------------------------

_FALCON_H1_DEFAULTS: Config = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128000,
}


def falcon_h1(name: str, cfg: Config, source: str) -> ModelSpec:
    """TII Falcon-H1 (modeling_falcon_h1.py): every block runs an attention (q/k/v/o biased by
    ``attention_bias``) and a Mamba-2 mixer side by side on the same normed input, then a SwiGLU
    MLP (``mlp_bias``); two RMSNorms per block. The mixer is ``mamba_d_ssm`` wide (null:
    mamba_expand · hidden), its in_proj biased by ``mamba_proj_bias``, its out_proj by
    ``projectors_bias``, its gated RMSNorm only with ``mamba_rms_norm``. The µP multipliers and
    ``mup_vector`` (a non-persistent buffer) add no parameters. Every block is "hybrid": the cache
    keeps its K/V per token and its Mamba-2 state (cache_utils.py
    LinearAttentionAndFullAttentionLayer)."""
    shape = _attention_shape(cfg, _FALCON_H1_DEFAULTS)
    h = shape.hidden
    width = optional_int(cfg, "mamba_d_ssm", 1024)
    mixer = _granite_mixer(cfg, h, width)
    bias = field_bool(cfg, "attention_bias", False)
    attn = shape_attention(shape, bias=bias)
    in_proj, out_proj = _mamba2_linears(mixer)
    out_proj = replace(out_proj, bias=field_bool(cfg, "projectors_bias", False))
    gated_norm = field_bool(cfg, "mamba_rms_norm", False)
    block = replace(
        dense_layer(
            (*attn, in_proj, out_proj),
            gated_mlp(h, shape.intermediate, bias=field_bool(cfg, "mlp_bias", False)),
            norms=2 * h + (mixer.inner if gated_norm else 0),
        ),
        other=_mamba2_other(mixer),
        mixer=Mixer.HYBRID,
    )
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "falcon_h1",
        shape,
        (block,) * shape.layers,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", 8192),
        state=_state_if_any(_falcon_h1_state(mixer, shape.layers, gated_norm=gated_norm)),
    )


def _falcon_h1_state(mixer: _Mamba2, layers: int, *, gated_norm: bool) -> StateSpec:
    """Every block keeps K/V and a Mamba-2 state; FalconH1Mixer's in_proj reads hidden ·
    ssm_in_multiplier (a copy) and its gated RMSNorm runs only under mamba_rms_norm (else
    y · SiLU(z))."""
    shape = replace(_mamba2_shape(mixer), gated_norm=gated_norm, scaled_input=True)
    return replace(_mamba2_state(mixer, layers, shape=shape), beside_attention=True)


# --- pure state models ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _PureDefaults:
    """The config class's defaults of a state model without attention."""

    layers: int
    vocab: int
    tied: bool


def _pure_shape(
    cfg: Config, h: int, *, heads: int, head_dim: int, inner: int, defaults: _PureDefaults
) -> Shape:
    """A stack with no attention: the mixer's heads stand for the attention's (no KV cache)."""
    return Shape(
        h,
        layer_count(cfg, "num_hidden_layers", default=defaults.layers),
        heads,
        heads,
        head_dim,
        inner,
        field_int(cfg, "vocab_size", default=defaults.vocab),
        field_bool(cfg, "tie_word_embeddings", defaults.tied),
    )


def _pure_state_model(
    name: str,
    cfg: Config,
    source: str,
    model_type: str,
    shape: Shape,
    block: LayerParameters,
    state: StateSpec,
) -> ModelSpec:
    """Embeddings, ``shape.layers`` identical blocks, a final RMSNorm (norm_f), the LM head; no
    position limit (the state has none)."""
    return rms_gated_decoder(
        name,
        cfg,
        source,
        model_type,
        shape,
        (block,) * shape.layers,
        max_position_embeddings=None,
        state=state,
    )


def mamba2(name: str, cfg: Config, source: str) -> ModelSpec:
    """Mamba-2 (modeling_mamba2.py): RMSNorm + Mamba2Mixer blocks, no MLP; the mixer's inner
    width is expand · hidden and must equal num_heads · head_dim (the config class checks it)."""
    h = field_int(cfg, "hidden_size", default=4096)
    mixer = _Mamba2(
        hidden=h,
        heads=field_int(cfg, "num_heads", default=128),
        head_dim=field_int(cfg, "head_dim", default=64),
        groups=field_int(cfg, "n_groups", default=8),
        d_state=field_int(cfg, "state_size", default=128),
        kernel=field_int(cfg, "conv_kernel", default=4),
        proj_bias=field_bool(cfg, "use_bias", False),
        conv_bias=field_bool(cfg, "use_conv_bias", True),
        chunk_tokens=_chunk_tokens(cfg, _CHUNK_TOKENS),
    )
    expand = field_int(cfg, "expand", default=2)
    if expand * h != mixer.inner:
        raise invalid(
            f"hidden_size · expand = {expand * h} is not num_heads · head_dim = {mixer.inner}"
        )
    shape = _pure_shape(
        cfg,
        h,
        heads=mixer.heads,
        head_dim=mixer.head_dim,
        inner=mixer.inner,
        defaults=_PureDefaults(layers=64, vocab=32768, tied=False),
    )
    block = _mamba2_block(mixer, norms=h)
    state = _mamba2_state(mixer, shape.layers)
    return _pure_state_model(name, cfg, source, "mamba2", shape, block, state)


# --- Mamba-1 -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Mamba1:
    """One Mamba-1 mixer's sizes."""

    hidden: int
    inner: int
    d_state: int
    dt_rank: int
    kernel: int
    proj_bias: bool
    conv_bias: bool
    norms: ScanNorms


def _mamba1_linears(m: _Mamba1) -> tuple[LinearShape, ...]:
    """in_proj (x and z), x_proj (dt, B, C; no bias), dt_proj (always biased), out_proj."""
    return (
        LinearShape("in_proj", m.hidden, 2 * m.inner, bias=m.proj_bias, part=ATTENTION),
        LinearShape("x_proj", m.inner, m.dt_rank + 2 * m.d_state, part=ATTENTION),
        LinearShape("dt_proj", m.dt_rank, m.inner, bias=True, part=ATTENTION),
        LinearShape("out_proj", m.inner, m.hidden, bias=m.proj_bias, part=ATTENTION),
    )


def _mamba1_other(m: _Mamba1) -> int:
    """conv1d over the inner channels, A_log (inner × d_state) and D (inner)."""
    return m.inner * (m.kernel + (1 if m.conv_bias else 0)) + m.inner * m.d_state + m.inner


def _mamba1_state(m: _Mamba1, layers: int) -> StateSpec:
    # every channel has its own scan: tensor parallelism splits the inner channels
    return StateSpec(
        kind=StateKind.MAMBA,
        num_layers=layers,
        conv_channels=m.inner,
        conv_kernel=m.kernel,
        recurrent_state_elements=m.inner * m.d_state,
        num_heads=m.inner,
        mixer_shape=Mamba1Shape(m.d_state, m.dt_rank, m.norms),
    )


def _dt_rank(cfg: Config, key: str, h: int) -> int:
    """The dt projection's rank: "auto" (the default) is ceil(hidden / 16)."""
    return ceil(h / 16) if cfg.get(key) in (None, "auto") else field_int(cfg, key)


# Falcon-Mamba's mixer norms B, C and dt with weightless RMSNorms (rms_forward); Mamba's does not
_MAMBA1_NORMS = {"mamba": ScanNorms.NONE, "falcon_mamba": ScanNorms.WEIGHTLESS}


def _mamba_mixer(cfg: Config, h: int, model_type: str) -> _Mamba1:
    """MambaConfig / FalconMambaConfig. The config class derives intermediate_size = expand ·
    hidden, but an intermediate_size the config states is set over it (and the mixer uses it)."""
    expanded = field_int(cfg, "expand", default=2) * h
    return _Mamba1(
        hidden=h,
        inner=field_int(cfg, "intermediate_size", default=expanded),
        d_state=field_int(cfg, "state_size", default=16),
        dt_rank=_dt_rank(cfg, "time_step_rank", h),
        kernel=field_int(cfg, "conv_kernel", default=4),
        proj_bias=field_bool(cfg, "use_bias", False),
        conv_bias=field_bool(cfg, "use_conv_bias", True),
        norms=_MAMBA1_NORMS.get(model_type, ScanNorms.NONE),
    )


def _jamba_mixer(cfg: Config, h: int) -> _Mamba1:
    """JambaMambaMixer: the mamba_* keys; inner = mamba_expand · hidden."""
    return _Mamba1(
        hidden=h,
        inner=field_int(cfg, "mamba_expand", default=2) * h,
        d_state=field_int(cfg, "mamba_d_state", default=16),
        dt_rank=_dt_rank(cfg, "mamba_dt_rank", h),
        kernel=field_int(cfg, "mamba_d_conv", default=4),
        proj_bias=field_bool(cfg, "mamba_proj_bias", False),
        conv_bias=field_bool(cfg, "mamba_conv_bias", True),
        norms=ScanNorms.WEIGHTED,
    )


def mamba(name: str, cfg: Config, source: str) -> ModelSpec:
    """Mamba (modeling_mamba.py) and Falcon-Mamba (modeling_falcon_mamba.py, whose extra
    RMSNorms over B, C and dt have no weights): RMSNorm + MambaMixer blocks, no MLP; inner =
    intermediate_size (expand · hidden unless stated), dt rank time_step_rank ("auto": ceil(hidden
    / 16)); tied head by default."""
    model_type = field_str(cfg, "model_type", "mamba")
    h = field_int(cfg, "hidden_size", default=768)
    mixer = _mamba_mixer(cfg, h, model_type)
    shape = _pure_shape(
        cfg,
        h,
        heads=mixer.inner,
        head_dim=1,
        inner=mixer.inner,
        defaults=_PureDefaults(layers=32, vocab=50280, tied=True),
    )
    block = replace(
        dense_layer(_mamba1_linears(mixer), (), norms=h),
        other=_mamba1_other(mixer),
        mixer=Mixer.STATE,
    )
    state = _mamba1_state(mixer, shape.layers)
    return _pure_state_model(name, cfg, source, model_type, shape, block, state)


_JAMBA_DEFAULTS: Config = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 65536,
}


def _periodic(
    cfg: Config, n_layers: int, period: str, offset: str, defaults: tuple[int, int]
) -> list[bool]:
    """Blocks i with i % period == offset (JambaConfig's layers_block_type / layers_num_experts);
    the config class refuses an offset not below its period."""
    every = field_int(cfg, period, default=defaults[0])
    at = field_int(cfg, offset, default=defaults[1], minimum=0)
    if at >= every:
        raise invalid(f"{offset}={at} must be smaller than {period}={every}")
    return [i % every == at for i in range(n_layers)]


def jamba(name: str, cfg: Config, source: str) -> ModelSpec:
    """AI21 Jamba (modeling_jamba.py): two RMSNorms, an attention (every ``attn_layer_period``-th
    block from ``attn_layer_offset``; q/k/v/o, no bias) or a Mamba-1 mixer (the mamba_* keys,
    with RMSNorms over dt, B and C), and a SwiGLU MLP or, every ``expert_layer_period``-th block
    from ``expert_layer_offset`` when ``num_experts`` > 1, routed experts behind a router
    weight."""
    shape = _attention_shape(cfg, _JAMBA_DEFAULTS)
    h = shape.hidden
    mixer = _jamba_mixer(cfg, h)
    attention = _periodic(cfg, shape.layers, "attn_layer_period", "attn_layer_offset", (8, 4))
    routed = _periodic(cfg, shape.layers, "expert_layer_period", "expert_layer_offset", (2, 1))
    n_experts = field_int(cfg, "num_local_experts", "num_experts", default=16)
    moe = None
    if n_experts > 1 and any(routed):
        moe = MoeSpec(
            num_experts=n_experts,
            experts_per_token=field_int(cfg, "num_experts_per_tok", default=2),
            expert_intermediate_size=shape.intermediate,
            first_dense_layers=routed.index(True),
            layer_frequency=field_int(cfg, "expert_layer_period", default=2),
        )
    attn = shape_attention(shape, bias=False)
    mixers = {
        True: _Mixing(attn, 2 * h, 0, Mixer.ATTENTION),
        # the RMSNorms over dt, B and C
        False: _Mixing(
            _mamba1_linears(mixer),
            2 * h + mixer.dt_rank + 2 * mixer.d_state,
            _mamba1_other(mixer),
            Mixer.STATE,
        ),
    }
    kinds = list(zip(attention, routed, strict=True))
    return rms_gated_decoder(
        name,
        cfg,
        source,
        "jamba",
        shape,
        _mixer_blocks(h, mixers, kinds, moe, gated_mlp(h, shape.intermediate)),
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", 262144),
        moe=moe,
        state=_state_if_any(_mamba1_state(mixer, attention.count(False))),
    )


# --- LFM2: short convolutions --------------------------------------------------------------------

_LFM2_DEFAULTS: Config = {
    "hidden_size": 2560,
    "intermediate_size": 12288,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 65536,
}
_LFM2_MOE_DEFAULTS: Config = {**_LFM2_DEFAULTS, "hidden_size": 2048, "intermediate_size": 7168}


def _lfm2_kinds(cfg: Config, n_layers: int, *, moe: bool) -> list[bool]:
    """Which blocks attend: ``layer_types`` ("conv" is a short convolution, any other kind an
    attention), else (LFM2 only) the blocks in ``full_attn_idxs``, all of them by default;
    Lfm2MoeConfig has no default and transformers cannot build it without layer_types."""
    value: object = cfg.get("layer_types")
    if value is None:
        if moe:
            raise InvalidConfigError(
                "required field 'layer_types' is missing",
                reference="config-field-missing",
                hint="LFM2-MoE configs list each block's kind (conv / full_attention)",
            )
        attending = whole_numbers(cfg, "full_attn_idxs")
        if attending is None:
            return [True] * n_layers
        return [i in set(attending) for i in range(n_layers)]
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise invalid(f"field 'layer_types' must be a list of strings, got {value!r}")
    if len(value) != n_layers:
        raise invalid(
            f"field 'layer_types' has {len(value)} entries but num_hidden_layers={n_layers}"
        )
    return [t != "conv" for t in value]


def _lfm2_mlp_width(cfg: Config, inner: int) -> int:
    """Lfm2MLP: with block_auto_adjust_ff_dim (default) 2/3 of intermediate_size, scaled by
    block_ffn_dim_multiplier and rounded up to block_multiple_of when a multiplier is set."""
    if not field_bool(cfg, "block_auto_adjust_ff_dim", True):
        return inner
    inner = int(2 * inner / 3)
    multiplier: object = cfg.get("block_ffn_dim_multiplier", 1.0)
    if multiplier is None:
        return inner
    if isinstance(multiplier, bool) or not isinstance(multiplier, int | float):
        raise invalid(f"field 'block_ffn_dim_multiplier' must be a number, got {multiplier!r}")
    if not 0 < multiplier < 1e6:
        raise invalid(f"field 'block_ffn_dim_multiplier' must be positive, got {multiplier!r}")
    multiple = field_int(cfg, "block_multiple_of", default=256)
    width = multiple * -(-int(multiplier * inner) // multiple)
    if width > MAX_CONFIG_INT:
        raise invalid(f"the MLP width {width} from block_ffn_dim_multiplier is not a model's")
    return width


def _lfm2_moe(cfg: Config, n_layers: int) -> tuple[MoeSpec | None, int]:
    """LFM2-MoE's experts and the first block that routes (``num_dense_layers``); no MoE when
    every block is dense."""
    first_sparse = field_int(cfg, "num_dense_layers", default=2, minimum=0)
    if first_sparse >= n_layers:
        return None, first_sparse
    moe = MoeSpec(
        num_experts=field_int(cfg, "num_experts", default=32),
        experts_per_token=field_int(cfg, "num_experts_per_tok", default=4),
        expert_intermediate_size=field_int(cfg, "moe_intermediate_size", default=1792),
        first_dense_layers=first_sparse,
    )
    return moe, first_sparse


def _short_conv(h: int, kernel: int, bias: bool) -> tuple[tuple[LinearShape, ...], int]:
    """Lfm2ShortConv: in_proj (B, C, x: 3 · hidden), a depthwise conv over hidden channels,
    out_proj; ``conv_bias`` biases all three."""
    linears = (
        LinearShape("in_proj", h, 3 * h, bias=bias, part=ATTENTION),
        LinearShape("out_proj", h, h, bias=bias, part=ATTENTION),
    )
    return linears, h * (kernel + (1 if bias else 0))


def lfm2(name: str, cfg: Config, source: str) -> ModelSpec:
    """Liquid LFM2 (modeling_lfm2.py) and LFM2-MoE (modeling_lfm2_moe.py): two RMSNorms, a short
    convolution or an attention (q/k/v/out_proj, no bias, RMSNorms over one q and one k head),
    and a SwiGLU (w1, w3, w2); LFM2-MoE's blocks from ``num_dense_layers`` on route to
    ``num_experts_per_tok`` of ``num_experts`` experts instead (router weight; its expert_bias is
    a buffer). The final RMSNorm is ``embedding_norm``. A short convolution keeps only its
    conv's last columns (no recurrent state); tensor parallelism splits its channels."""
    model_type = field_str(cfg, "model_type", "lfm2")
    is_moe = model_type == "lfm2_moe"
    legacy = {"tie_word_embeddings": cfg.get("tie_embedding"), "intermediate_size": None}
    if not is_moe:
        legacy["intermediate_size"] = cfg.get("block_ff_dim")
    # the legacy spellings the config classes pop win over the current ones
    read = {**cfg, **{k: v for k, v in legacy.items() if v is not None}}
    shape = decoder_shape(
        _with_defaults(read, _LFM2_MOE_DEFAULTS if is_moe else _LFM2_DEFAULTS),
        kv_default=None,
        head_dim_default=None,
        tied_default=True,
    )
    h, hd = shape.hidden, shape.head_dim
    attending = _lfm2_kinds(cfg, shape.layers, moe=is_moe)
    kernel = field_int(cfg, "conv_L_cache", default=3)
    conv, conv_other = _short_conv(h, kernel, field_bool(cfg, "conv_bias", False))
    attn = shape_attention(shape, bias=False)
    attn = (*attn[:3], replace(attn[3], name="out_proj"))
    mixers = {
        True: _Mixing(attn, 2 * h + 2 * hd, 0, Mixer.ATTENTION),
        False: _Mixing(conv, 2 * h, conv_other, Mixer.STATE),
    }
    if is_moe:
        moe, first_sparse = _lfm2_moe(cfg, shape.layers)
        dense_width = shape.intermediate
    else:
        moe, first_sparse = None, shape.layers
        dense_width = _lfm2_mlp_width(read, shape.intermediate)
    sparse = [i >= first_sparse for i in range(shape.layers)]
    dense_mlp = gated_mlp(h, dense_width, names=("w1", "w3", "w2"))
    layers = _mixer_blocks(h, mixers, list(zip(attending, sparse, strict=True)), moe, dense_mlp)
    state = StateSpec(
        kind=StateKind.SHORT_CONV,
        num_layers=attending.count(False),
        conv_channels=h,
        conv_kernel=kernel,
        recurrent_state_elements=0,
        num_heads=h,
    )
    return rms_gated_decoder(
        name,
        cfg,
        source,
        model_type,
        replace(shape, intermediate=dense_width),
        layers,
        max_position_embeddings=optional_int(cfg, "max_position_embeddings", 128_000),
        moe=moe,
        state=_state_if_any(state),
    )
