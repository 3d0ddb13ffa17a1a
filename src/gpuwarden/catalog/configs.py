"""HF ``config.json`` → ``ModelSpec``, one normaliser per architecture family.

Parameter counts are exact: they equal ``sum(p.numel() for p in model.parameters())`` of the HF
implementation (tied weights once), as checked for every bundled config in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpuwarden.errors import InvalidConfigError
from gpuwarden.types.model import (
    LayerParameters,
    LinearShape,
    MlpKind,
    ModelSpec,
    MoeSpec,
    NormKind,
    ParameterBreakdown,
    Structure,
)

Config = Mapping[str, Any]
Normaliser = Callable[[str, Config, str], ModelSpec]


def field_int(cfg: Config, source: str, *names: str, default: int | None = None) -> int:
    """The first of ``names`` present in ``cfg`` as a positive int; a clear error otherwise."""
    for name in names:
        value = cfg.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            raise InvalidConfigError(
                f"{source}: field {name!r} must be an integer, got {value!r}",
                reference="config-field-invalid",
                hint="check the config.json against the model's published config",
            )
        if value <= 0:
            raise InvalidConfigError(
                f"{source}: field {name!r} must be positive, got {value!r}",
                reference="config-field-invalid",
                hint="check the config.json against the model's published config",
            )
        return int(value)
    if default is not None:
        return default
    raise InvalidConfigError(
        f"{source}: required field {' or '.join(repr(n) for n in names)} is missing",
        reference="config-field-missing",
        hint="a config.json needs the architecture fields (hidden size, layers, heads, vocab)",
    )


def _gated_mlp_linears(h: int, i: int, bias: bool = False) -> tuple[LinearShape, ...]:
    return (
        LinearShape("gate_proj", h, i, bias=bias),
        LinearShape("up_proj", h, i, bias=bias),
        LinearShape("down_proj", i, h, bias=bias),
    )


def _attention_linears(
    h: int, heads: int, kv_heads: int, head_dim: int, qkv_bias: bool, o_bias: bool
) -> tuple[LinearShape, ...]:
    q = heads * head_dim
    kv = kv_heads * head_dim
    return (
        LinearShape("q_proj", h, q, bias=qkv_bias),
        LinearShape("k_proj", h, kv, bias=qkv_bias),
        LinearShape("v_proj", h, kv, bias=qkv_bias),
        LinearShape("o_proj", q, h, bias=o_bias),
    )


def llama_like(name: str, cfg: Config, source: str) -> ModelSpec:
    """Llama, Mistral, Mixtral, Qwen2, Phi-3 and friends: RMSNorm, RoPE, gated MLP, GQA."""
    model_type = str(cfg.get("model_type", "llama"))
    h = field_int(cfg, source, "hidden_size")
    n_layers = field_int(cfg, source, "num_hidden_layers")
    heads = field_int(cfg, source, "num_attention_heads")
    kv_heads = field_int(cfg, source, "num_key_value_heads", default=heads)
    head_dim = field_int(cfg, source, "head_dim", default=h // heads)
    vocab = field_int(cfg, source, "vocab_size")
    tied = bool(cfg.get("tie_word_embeddings", False))
    qkv_bias = bool(cfg.get("attention_bias", False)) or model_type in {"qwen2", "qwen2_moe"}
    o_bias = bool(cfg.get("attention_bias", False))
    mlp_bias = bool(cfg.get("mlp_bias", False))
    if heads % kv_heads:
        raise InvalidConfigError(
            f"{source}: num_attention_heads={heads} is not a multiple of "
            f"num_key_value_heads={kv_heads}",
            reference="config-field-invalid",
            hint="grouped-query attention needs heads divisible by KV heads",
        )

    moe: MoeSpec | None = None
    n_experts = cfg.get("num_local_experts") or cfg.get("num_experts") or 0
    if n_experts:
        moe = MoeSpec(
            num_experts=int(n_experts),
            experts_per_token=field_int(cfg, source, "num_experts_per_tok"),
            expert_intermediate_size=field_int(
                cfg, source, "moe_intermediate_size", "intermediate_size"
            ),
        )
        i = moe.expert_intermediate_size
    else:
        i = field_int(cfg, source, "intermediate_size")

    attn_linears = _attention_linears(h, heads, kv_heads, head_dim, qkv_bias, o_bias)
    attention = sum(lin.parameters for lin in attn_linears)
    if moe is None:
        mlp_linears = _gated_mlp_linears(h, i, mlp_bias)
        layer = LayerParameters(
            attention=attention,
            mlp=sum(lin.parameters for lin in mlp_linears),
            experts=0,
            router=0,
            norms=2 * h,
            linears=attn_linears + mlp_linears,
        )
    else:
        expert_linears = (
            LinearShape("experts.w1", h, i, count=moe.num_experts, expert=True),
            LinearShape("experts.w3", h, i, count=moe.num_experts, expert=True),
            LinearShape("experts.w2", i, h, count=moe.num_experts, expert=True),
        )
        layer = LayerParameters(
            attention=attention,
            mlp=0,
            experts=sum(lin.parameters for lin in expert_linears),
            router=h * moe.num_experts,
            norms=2 * h,
            linears=attn_linears + expert_linears,
        )

    window = cfg.get("sliding_window")
    use_window = cfg.get("use_sliding_window", True) and isinstance(window, int) and window > 0
    params = ParameterBreakdown(
        embedding=vocab * h,
        position_embedding=0,
        lm_head=0 if tied else vocab * h,
        final_norm=h,
        layers=(layer,) * n_layers,
    )
    return ModelSpec(
        name=name,
        model_type=model_type,
        structure=Structure.DECODER,
        hidden_size=h,
        num_layers=n_layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=i,
        vocab_size=vocab,
        tied_embeddings=tied,
        norm=NormKind.RMS,
        mlp=MlpKind.GATED,
        parameters=params,
        max_position_embeddings=cfg.get("max_position_embeddings"),
        sliding_window=window if use_window and isinstance(window, int) else None,
        sliding_window_layers=n_layers if use_window else 0,
        moe=moe,
        checkpoint_dtype=cfg.get("torch_dtype") or cfg.get("dtype"),
        source=source,
        raw_config=dict(cfg),
    )


NORMALISERS: dict[str, Normaliser] = {
    "llama": llama_like,
    "mistral": llama_like,
    "mixtral": llama_like,
    "qwen2": llama_like,
    "phi3": llama_like,
}


def normalise(name: str, cfg: Config, source: str) -> ModelSpec:
    """Turn one HF config into a ``ModelSpec``; unknown families get a clear error."""
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        raise InvalidConfigError(
            f"{source}: no 'model_type' field, so the architecture is unknown",
            reference="config-field-missing",
            hint="an HF config.json names its architecture in 'model_type' (e.g. \"llama\")",
        )
    normaliser = NORMALISERS.get(model_type)
    if normaliser is None:
        raise InvalidConfigError(
            f"{source}: model_type {model_type!r} is not supported by the formula planner",
            reference="unsupported-architecture",
            hint=f"supported: {', '.join(sorted(NORMALISERS))}; `--exact` traces any HF model",
        )
    return normaliser(name, cfg, source)
