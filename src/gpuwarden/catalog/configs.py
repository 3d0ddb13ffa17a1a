"""HF ``config.json`` → ``ModelSpec``, dispatched on ``model_type`` to one normaliser per family.

Parameter counts are exact: they equal ``sum(p.numel() for p in model.parameters())`` of the
transformers 5.23 implementation (tied weights once), as checked for every bundled config in tests
(``tests/catalog/test_hf_parity.py``). The family modules live in ``catalog/families/``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuwarden.catalog.families.bert import bert
from gpuwarden.catalog.families.blocks import routable
from gpuwarden.catalog.families.classic import gpt_neo, gptj, mpt, opt
from gpuwarden.catalog.families.decoders2 import (
    afmoe,
    apertus,
    codegen,
    cohere2_moe,
    exaone_moe,
    flex_olmo,
    granitemoeshared,
    hy_v3,
    hyperclovax,
    jais2,
    laguna,
    persimmon,
    sarvam_moe,
    solar_open,
    youtu,
)
from gpuwarden.catalog.families.deepseek import deepseek_v3
from gpuwarden.catalog.families.falcon import falcon
from gpuwarden.catalog.families.fields import Config
from gpuwarden.catalog.families.gemma4 import gemma3n_text, gemma4
from gpuwarden.catalog.families.glm import ernie4_5, glm, glm4_moe, olmoe
from gpuwarden.catalog.families.gpt2 import gpt2_like
from gpuwarden.catalog.families.hybrid import kimi_linear, olmo_hybrid, qwen3_hybrid
from gpuwarden.catalog.families.llama import llama_like
from gpuwarden.catalog.families.mamba import (
    bamba,
    falcon_h1,
    granitemoehybrid,
    jamba,
    lfm2,
    mamba,
    mamba2,
    nemotron_h,
)
from gpuwarden.catalog.families.mimo import mimo_v2_flash
from gpuwarden.catalog.families.modern import gemma3, granite, olmo2, starcoder2
from gpuwarden.catalog.families.moe2 import gpt_oss, llama4
from gpuwarden.catalog.families.neox import bloom, gpt_neox
from gpuwarden.catalog.families.phi import phi
from gpuwarden.catalog.families.qwen import qwen
from gpuwarden.catalog.families.t5 import t5
from gpuwarden.catalog.families.variants import (
    arcee,
    cohere,
    helium,
    minimax_m2,
    olmo,
    phimoe,
    seed_oss,
    stablelm,
)
from gpuwarden.catalog.traits import with_traits
from gpuwarden.errors import InputError, InvalidConfigError
from gpuwarden.files import CaptureTooLargeError, read_capped
from gpuwarden.types.model import ModelSpec

__all__ = [
    "ALIASES",
    "MAX_CONFIG_FILE_BYTES",
    "NORMALISERS",
    "UNMODELLED",
    "Alias",
    "Config",
    "Normaliser",
    "Unmodelled",
    "llama_like",
    "normalise",
    "read_config_text",
]

# As the hub client's limit for a fetched config.json: the largest real one is a few hundred KiB.
MAX_CONFIG_FILE_BYTES = 16 << 20


def read_config_text(path: Path) -> str:
    """A local config.json as text, read no further than MAX_CONFIG_FILE_BYTES (``/dev/zero`` or a
    pipe that never ends is cut there). Raises OSError and UnicodeDecodeError as reading does,
    InputError ``config-too-large`` past the limit."""
    try:
        raw, _ = read_capped(str(path), MAX_CONFIG_FILE_BYTES)
    except CaptureTooLargeError:
        raise InputError(
            f"{path}: larger than {MAX_CONFIG_FILE_BYTES >> 20} MiB, too large for a config.json",
            reference="config-too-large",
            hint="pass the model's config.json (a few KiB), not its weights or an archive",
        ) from None
    return raw.decode("utf-8")


Normaliser = Callable[[str, Config, str], ModelSpec]

NORMALISERS: dict[str, Normaliser] = {
    "afmoe": afmoe,
    "apertus": apertus,
    "apertus1p5_text": apertus,
    "arcee": arcee,
    "bamba": bamba,
    "bert": bert,
    "bloom": bloom,
    "codegen": codegen,
    "cohere": cohere,
    "cohere2": cohere,
    "cohere2_moe": cohere2_moe,
    "deepseek_v2": deepseek_v3,
    "deepseek_v3": deepseek_v3,
    "deepseek_v32": deepseek_v3,
    "ernie4_5": ernie4_5,
    "ernie4_5_moe": ernie4_5,
    "exaone_moe": exaone_moe,
    "falcon": falcon,
    "falcon_h1": falcon_h1,
    "falcon_mamba": mamba,
    "flex_olmo": flex_olmo,
    "gemma": llama_like,
    "gemma2": llama_like,
    "gemma3": gemma3,
    "gemma3_text": gemma3,
    "gemma3n_text": gemma3n_text,
    "gemma4": gemma4,
    "gemma4_text": gemma4,
    "gemma4_unified": gemma4,
    "gemma4_unified_text": gemma4,
    "glm": glm,
    "glm4": glm,
    "glm4_moe": glm4_moe,
    "glm4_moe_lite": deepseek_v3,
    "glm_moe_dsa": deepseek_v3,
    "gpt2": gpt2_like,
    "gpt_bigcode": gpt2_like,
    "gpt_neo": gpt_neo,
    "gpt_oss": gpt_oss,
    "gpt_neox": gpt_neox,
    "gptj": gptj,
    "granite": granite,
    "granitemoehybrid": granitemoehybrid,
    "granitemoeshared": granitemoeshared,
    "helium": helium,
    "hy_v3": hy_v3,
    "hyperclovax": hyperclovax,
    "jais2": jais2,
    "jamba": jamba,
    "kimi_linear": kimi_linear,
    "laguna": laguna,
    "lfm2": lfm2,
    "lfm2_moe": lfm2,
    "llama": llama_like,
    "llama4": llama4,
    "llama4_text": llama4,
    "mamba": mamba,
    "mamba2": mamba2,
    "mimo_v2_flash": mimo_v2_flash,
    "minimax_m2": minimax_m2,
    "mistral": llama_like,
    "mixtral": llama_like,
    "mpt": mpt,
    "mt5": t5,
    "nemotron_h": nemotron_h,
    "olmo": olmo,
    "olmo2": olmo2,
    "olmo_hybrid": olmo_hybrid,
    "olmoe": olmoe,
    "opt": opt,
    "persimmon": persimmon,
    "phi": phi,
    "phi3": llama_like,
    "phimoe": phimoe,
    "qwen2": llama_like,
    "qwen2_moe": qwen,
    "qwen3": qwen,
    "qwen3_moe": qwen,
    "qwen3_5": qwen3_hybrid,
    "qwen3_5_moe": qwen3_hybrid,
    "qwen3_5_moe_text": qwen3_hybrid,
    "qwen3_5_text": qwen3_hybrid,
    "qwen3_next": qwen3_hybrid,
    "sarvam_moe": sarvam_moe,
    "seed_oss": seed_oss,
    "solar_open": solar_open,
    "stablelm": stablelm,
    "starcoder2": starcoder2,
    "t5": t5,
    "youtu": youtu,
}


@dataclass(frozen=True, slots=True)
class Alias:
    """A model_type whose causal LM transformers builds from the same modules as ``family``
    (its modular_<type>.py subclasses that family's classes) and sizes from the same keys."""

    family: str
    # keys whose class default differs from the family's: read only when the config sets them
    required: tuple[str, ...] = ()
    # keys that, when set truthy, add weights the family has not: refused, not guessed
    unmodelled: tuple[str, ...] = ()
    # keys the family reads but the type's modeling does not (dropped before reading)
    ignored: tuple[str, ...] = ()


# Each is checked against transformers 5.24 on its default config and on every boolean key
# flipped, every key dropped and every bias/tying key added (tests/data/model_configs_heldout/
# make_arch_set.py --probe TYPE=FAMILY); what those variants showed is ``required`` /
# ``unmodelled``. A type whose modeling adds a weight the family lacks is not here.
ALIASES: dict[str, Alias] = {
    # modeling_cwm.py: Llama decoder layers, some of them sliding (the KV cache is over-counted);
    # CwmAttention builds q/k/v/o without bias whatever attention_bias says
    "cwm": Alias("llama", required=("num_key_value_heads",), ignored=("attention_bias",)),
    # modeling_exaone.py / _internlm3 / _iquestcoder: Llama blocks; num_key_value_heads defaults
    # to a fixed number in their configs, not to num_attention_heads
    "exaone": Alias("llama", required=("num_key_value_heads",)),
    "internlm3": Alias("llama", required=("num_key_value_heads",)),
    "iquestcoder": Alias("llama", required=("num_key_value_heads",)),
    # modeling_smollm3.py: Llama blocks, RoPE dropped on some layers (no weights)
    "smollm3": Alias("llama", required=("num_key_value_heads", "tie_word_embeddings")),
    # modeling_ministral3.py: Mistral blocks
    "ministral3": Alias("mistral", required=("num_key_value_heads",)),
    # modeling_vaultgemma.py: Gemma blocks (two RMSNorms each), tied head
    "vaultgemma": Alias("gemma", required=("num_key_value_heads",)),
    # modeling_olmo3.py: OLMo-2 blocks (post-norms, q/k norms over all heads)
    "olmo3": Alias("olmo2"),
    # modeling_exaone4.py: Qwen3-style q/k head norms, OLMo-style post-norms, same count;
    # Exaone4Attention builds q/k/v/o without bias whatever attention_bias says
    "exaone4": Alias("qwen3", ignored=("attention_bias",)),
    # modeling_granitemoe.py: Mixtral-style routed experts; its attention_bias also puts a bias
    # on o_proj, which Mixtral never has (granitemoeshared adds a shared MLP: not here)
    "granitemoe": Alias(
        "mixtral", required=("num_key_value_heads",), unmodelled=("attention_bias",)
    ),
    # modeling_sarvam_mla.py: DeepSeek-V3 MLA + MoE; its defaults differ for these
    "sarvam_mla": Alias(
        "deepseek_v3", required=("first_k_dense_replace", "n_routed_experts", "q_lora_rank")
    ),
    # GPT-SW3 checkpoints are GPT-2 models (GPT2LMHeadModel) with their own tokenizer
    "gpt-sw3": Alias("gpt2"),
}


@dataclass(frozen=True, slots=True)
class Unmodelled:
    """What a model_type has that ``ModelSpec`` cannot state (its transformers 5.24
    modeling_<type>.py classes), so the formula planner refuses it by name."""

    feature: str
    # its layers keep a fixed-size state (of a kind ``StateSpec`` does not model) instead of a
    # KV cache that grows per token
    state_layers: bool = False


def _state_layers(kind: str) -> Unmodelled:
    """Layers of ``kind`` that keep a fixed-size state instead of a KV cache."""
    return Unmodelled(kind, state_layers=True)


# model_type → what the formula planner cannot model in it, each read from its transformers 5.24
# modeling file: LongCat-Flash's LongcatFlashMoE routes each token's top-k over real experts plus
# zero_expert_num identity experts (the active parameters vary per token; MoeSpec has a fixed
# top-k), each LongcatFlashDecoderLayer holding two MLA sublayers and two dense MLPs with the MoE
# on a shortcut; JetMoE routes each block's attention output through self_attention.experts
# (input_linear / output_linear, top-k) beside a shared kv_proj (ModelSpec: one dense attention)
UNMODELLED: dict[str, Unmodelled] = {
    "bailing_hybrid": _state_layers("linear-attention"),
    # LFM3 is not LFM2's blocks: sandwich norms, an attention output gate, sliding-window layers
    "lfm3": _state_layers("short-convolution"),
    "minimax": _state_layers("lightning-attention (linear)"),
    "recurrent_gemma": _state_layers("RG-LRU recurrent"),
    "rwkv": _state_layers("RWKV time-mixing (recurrent)"),
    "xlstm": _state_layers("mLSTM (recurrent)"),
    "zamba": _state_layers("Mamba"),
    "zamba2": _state_layers("Mamba-2"),
    "longcat_flash": Unmodelled(
        "zero-computation (identity) experts in the top-k, so the active parameters vary per "
        "token, and shortcut-connected MoE blocks of two MLA sublayers each"
    ),
    "jetmoe": Unmodelled(
        "a mixture of attention heads (each block routes its attention through top-k "
        "attention experts beside a shared kv_proj), where the planner models one dense "
        "attention per block"
    ),
}


def _unmodelled_refusal(
    model_type: str, what: Unmodelled, source: str, supported: str
) -> InvalidConfigError:
    """The ``unsupported-architecture`` refusal naming what the planner would get wrong."""
    if what.state_layers:
        feature = f"{what.feature} layers keeping a fixed-size state instead of a KV cache"
        guessed = "their state and activations"
    else:
        feature, guessed = what.feature, "its KV cache, attention or active parameters"
    return InvalidConfigError(
        f"{source}: model_type {model_type!r} has {feature}, which the formula planner does not "
        "model",
        reference="unsupported-architecture",
        hint=f"not modelled, as {guessed} would be guessed; `--exact` traces any HF model; "
        f"{supported}",
    )


def _unsupported(model_type: str, source: str) -> InvalidConfigError:
    """The refusal of a model_type no normaliser reads; one in ``UNMODELLED`` says why."""
    supported = f"supported: {', '.join(sorted([*NORMALISERS, *ALIASES]))}"
    what = UNMODELLED.get(model_type)
    if what is not None:
        return _unmodelled_refusal(model_type, what, source, supported)
    return InvalidConfigError(
        f"{source}: model_type {model_type!r} is not supported by the formula planner",
        reference="unsupported-architecture",
        hint=f"{supported}; `--exact` traces any HF model",
    )


def _as_family(model_type: str, alias: Alias, cfg: Config, source: str) -> Config:
    """``cfg`` under its family's model_type, or a refusal where the family would guess."""
    for key in alias.required:
        if key not in cfg:
            raise InvalidConfigError(
                f"{source}: model_type {model_type!r} is read as {alias.family!r}, but field "
                f"{key!r} is missing and its default differs between the two",
                reference="config-field-missing",
                hint=f"set {key!r} as the model's published config.json does",
            )
    for key in alias.unmodelled:
        if cfg.get(key):
            raise InvalidConfigError(
                f"{source}: model_type {model_type!r} with {key}={cfg[key]!r} adds weights the "
                "formula planner does not model",
                reference="unsupported-architecture",
                hint=f"`--exact` traces any HF model; {model_type!r} is modelled only "
                f"without {key!r}",
            )
    kept = {key: value for key, value in cfg.items() if key not in alias.ignored}
    return {**kept, "model_type": alias.family}


def normalise(name: str, cfg: Config, source: str) -> ModelSpec:
    """Turn one HF config into a ``ModelSpec``; unknown families get a clear error."""
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        raise InvalidConfigError(
            f"{source}: no 'model_type' field, so the architecture is unknown"
            if model_type is None
            else f"{source}: field 'model_type' must be a string, got {model_type!r}",
            reference="config-field-missing" if model_type is None else "config-field-invalid",
            hint="an HF config.json names its architecture in 'model_type' (e.g. \"llama\")",
        )
    alias = ALIASES.get(model_type)
    if alias is not None:
        cfg = _as_family(model_type, alias, cfg, source)
    normaliser = NORMALISERS.get(alias.family if alias else model_type)
    if normaliser is None:
        raise _unsupported(model_type, source)
    try:
        spec = normaliser(name, cfg, source)
        if spec.moe is not None:
            routable(spec.moe)  # one check for every family, however it builds its MoeSpec
        return with_traits(spec)
    except InvalidConfigError as exc:
        # the field helpers name the field; the config is named here, once
        raise exc.about(source) from None
