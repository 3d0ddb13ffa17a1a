"""The LayerNorm + plain-MLP decoders of 2021–2023: GPT-J, GPT-Neo, OPT and MPT.

Each count is what transformers 5.24 builds (the modeling file named at each family); defaults
are its config class defaults, and each family accepts both spellings transformers' attribute_map
does (n_embd / hidden_size ...), so a field left out counts as ``AutoConfig.for_model`` would.
"""

from __future__ import annotations

from gpuwarden.catalog.families.blocks import (
    ATTENTION,
    Shape,
    breakdown,
    dense_layer,
    model_spec,
    plain_mlp,
)
from gpuwarden.catalog.families.fields import (
    Config,
    core_sizes,
    divisible,
    field_bool,
    field_int,
    invalid,
)
from gpuwarden.types.model import (
    LinearShape,
    MlpKind,
    ModelSpec,
    NormKind,
    ParameterBreakdown,
    PositionKind,
)


def _decoder(
    name: str,
    cfg: Config,
    source: str,
    model_type: str,
    shape: Shape,
    parameters: ParameterBreakdown,
    *,
    positions: int,
    position_encoding: PositionKind,
    parallel: bool = False,
    window: int | None = None,
    window_layers: int = 0,
) -> ModelSpec:
    return model_spec(
        name,
        cfg,
        source,
        model_type,
        shape,
        parameters,
        norm=NormKind.LAYER,
        mlp=MlpKind.PLAIN,
        max_position_embeddings=positions,
        position_encoding=position_encoding,
        parallel_attention_mlp=parallel,
        sliding_window=window if window_layers else None,
        sliding_window_layers=window_layers,
    )


def _mha(h: int, heads: int, layers: int, inner: int, vocab: int, tied: bool) -> Shape:
    """Multi-head attention of hidden // heads wide heads, K/V as wide as Q."""
    divisible(("hidden_size", h), ("num_attention_heads", heads))
    return Shape(h, layers, heads, heads, h // heads, inner, vocab, tied)


def gptj(name: str, cfg: Config, source: str) -> ModelSpec:
    """GPT-J (modeling_gptj.py): one LayerNorm feeds attention and MLP in parallel; q/k/v and
    out_proj without bias, fc_in / fc_out (n_inner, default 4·hidden) with bias; rotary
    positions; the LM head has a bias of vocab values, tied or not."""
    h, n_layers, heads = core_sizes(
        cfg,
        hidden=("n_embd", "hidden_size"),
        layers=("n_layer", "num_hidden_layers"),
        heads=("n_head", "num_attention_heads"),
    )
    vocab = field_int(cfg, "vocab_size", default=50400)
    shape = _mha(
        h,
        heads,
        n_layers,
        field_int(cfg, "n_inner", default=4 * h),
        vocab,
        field_bool(cfg, "tie_word_embeddings", False),
    )
    names = ("q_proj", "k_proj", "v_proj", "out_proj")
    attn = tuple(LinearShape(n, h, h, part=ATTENTION) for n in names)
    mlp = plain_mlp(h, shape.intermediate, bias=True, names=("fc_in", "fc_out"))
    layer = dense_layer(attn, mlp, norms=2 * h)
    parameters = breakdown(shape, (layer,) * n_layers, final_norm=2 * h, head_bias=vocab)
    return _decoder(
        name,
        cfg,
        source,
        "gptj",
        shape,
        parameters,
        positions=field_int(cfg, "n_positions", "max_position_embeddings", default=2048),
        position_encoding=PositionKind.ROPE,
        parallel=True,
    )


def _expand_attention_types(spec: object, n_layers: int) -> list[object]:
    """GPTNeoConfig.expand_attention_types_params: [[kind, ...], repeat] pairs → one kind per
    block (the default [[["global", "local"], 12]])."""
    if not isinstance(spec, list):
        raise invalid(f"field 'attention_types' must be a list, got {spec!r}")
    kinds: list[object] = []
    for item in spec:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)):
            raise invalid(f"field 'attention_types' entries are [[kinds], repeat], got {item!r}")
        repeat = item[1]
        if isinstance(repeat, bool) or not isinstance(repeat, int) or not 0 <= repeat <= n_layers:
            raise invalid(f"field 'attention_types' repeat must be a block count, got {repeat!r}")
        kinds.extend(item[0] * repeat)
    return kinds


def _gpt_neo_local_layers(cfg: Config, n_layers: int) -> int:
    """The "local" blocks: a config's own ``attention_layers`` (what a checkpoint saves, applied
    after the expansion), else ``attention_types`` expanded; transformers refuses a list whose
    length is not num_layers, and so does this."""
    kinds = cfg.get("attention_layers")
    if kinds is None:
        spec = cfg.get("attention_types")
        kinds = _expand_attention_types(
            [[["global", "local"], 12]] if spec is None else spec, n_layers
        )
    if not (isinstance(kinds, list) and len(kinds) == n_layers) or not set(kinds) <= {
        "global",
        "local",
    }:
        raise invalid(
            f"field 'attention_layers' must name 'global' or 'local' for each of {n_layers} blocks"
        )
    return kinds.count("local")


def gpt_neo(name: str, cfg: Config, source: str) -> ModelSpec:
    """GPT-Neo (modeling_gpt_neo.py): GPT-2-like blocks with learned positions; q/k/v without
    bias, out_proj with; c_fc / c_proj (intermediate_size, default 4·hidden) with bias; the
    "local" blocks of ``attention_types`` attend within ``window_size`` tokens; tied head."""
    h, n_layers, heads = core_sizes(
        cfg,
        layers=("num_layers", "num_hidden_layers"),
        heads=("num_heads", "num_attention_heads"),
    )
    vocab = field_int(cfg, "vocab_size")
    inner = field_int(cfg, "intermediate_size", default=4 * h)
    shape = _mha(h, heads, n_layers, inner, vocab, field_bool(cfg, "tie_word_embeddings", True))
    attn = (
        *(LinearShape(n, h, h, part=ATTENTION) for n in ("q_proj", "k_proj", "v_proj")),
        LinearShape("out_proj", h, h, bias=True, part=ATTENTION),
    )
    mlp = plain_mlp(h, inner, bias=True, names=("c_fc", "c_proj"))
    layer = dense_layer(attn, mlp, norms=2 * 2 * h)
    positions = field_int(cfg, "max_position_embeddings", default=2048)
    parameters = breakdown(
        shape, (layer,) * n_layers, final_norm=2 * h, position_embedding=positions * h
    )
    return _decoder(
        name,
        cfg,
        source,
        "gpt_neo",
        shape,
        parameters,
        positions=positions,
        position_encoding=PositionKind.LEARNED,
        window=field_int(cfg, "window_size", default=256),
        window_layers=_gpt_neo_local_layers(cfg, n_layers),
    )


def opt(name: str, cfg: Config, source: str) -> ModelSpec:
    """OPT (modeling_opt.py): learned positions (max_position_embeddings + 2 rows); q/k/v/out_proj
    and fc1 / fc2 (ffn_dim) take ``enable_bias``; two LayerNorms per block and a final one (only
    under ``do_layer_norm_before``), with no weights when ``layer_norm_elementwise_affine`` is
    false; token embeddings of ``word_embed_proj_dim`` with project_in / project_out when that
    differs from hidden_size; tied head by default."""
    h, n_layers, heads = core_sizes(cfg)
    vocab = field_int(cfg, "vocab_size")
    inner = field_int(cfg, "ffn_dim", default=3072)
    shape = _mha(h, heads, n_layers, inner, vocab, field_bool(cfg, "tie_word_embeddings", True))
    bias = field_bool(cfg, "enable_bias", True)
    attn = tuple(
        LinearShape(n, h, h, bias=bias, part=ATTENTION)
        for n in ("q_proj", "k_proj", "v_proj", "out_proj")
    )
    mlp = plain_mlp(h, inner, bias=bias, names=("fc1", "fc2"))
    norm = 2 * h if field_bool(cfg, "layer_norm_elementwise_affine", True) else 0
    layer = dense_layer(attn, mlp, norms=2 * norm)
    final = field_bool(cfg, "do_layer_norm_before", True) and not field_bool(
        cfg, "_remove_final_layer_norm", False
    )
    embed = field_int(cfg, "word_embed_proj_dim", default=h)
    positions = field_int(cfg, "max_position_embeddings", default=2048)
    # token embedding and head are vocab × word_embed_proj_dim; project_in/out map it to hidden
    projections = 2 * embed * h if embed != h else 0
    parameters = ParameterBreakdown(
        embedding=vocab * embed,
        position_embedding=(positions + 2) * h,
        lm_head=0 if shape.tied else vocab * embed,
        final_norm=norm if final else 0,
        layers=(layer,) * n_layers,
        other=projections,
    )
    return _decoder(
        name,
        cfg,
        source,
        "opt",
        shape,
        parameters,
        positions=positions,
        position_encoding=PositionKind.LEARNED,
    )


def mpt(name: str, cfg: Config, source: str) -> ModelSpec:
    """MPT (modeling_mpt.py): ALiBi; a fused bias-free Wqkv (3·hidden: K/V as wide as Q whatever
    attn_config says) and out_proj; up_proj / down_proj of 4·hidden (expansion_ratio is not
    read); bias-free LayerNorms (norm_1, norm_2, norm_f); tied head by default."""
    h, n_layers, heads = core_sizes(
        cfg,
        hidden=("d_model", "hidden_size"),
        layers=("n_layers", "num_hidden_layers"),
        heads=("n_heads", "num_attention_heads"),
    )
    vocab = field_int(cfg, "vocab_size", default=50368)
    shape = _mha(h, heads, n_layers, 4 * h, vocab, field_bool(cfg, "tie_word_embeddings", True))
    attn = (
        LinearShape("Wqkv", h, 3 * h, part=ATTENTION),
        LinearShape("out_proj", h, h, part=ATTENTION),
    )
    mlp = plain_mlp(h, 4 * h, bias=False, names=("up_proj", "down_proj"))
    layer = dense_layer(attn, mlp, norms=2 * h)
    parameters = breakdown(shape, (layer,) * n_layers, final_norm=h)
    return _decoder(
        name,
        cfg,
        source,
        "mpt",
        shape,
        parameters,
        positions=field_int(cfg, "max_seq_len", "max_position_embeddings", default=2048),
        position_encoding=PositionKind.ALIBI,
    )
