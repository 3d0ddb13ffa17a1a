"""How each family's blocks compute: the ``BlockTraits`` the planner's recipes read.

One row per model_type whose blocks differ from Llama's in a way that changes what they keep for
backward, cache or allocate, each with the modeling file the facts come from (transformers 5.24
unless a row says otherwise). A type with no row is planned with Llama's traits (``BlockTraits()``);
an alias is normalised under its family's model_type, so it gets its family's row. Facts that a
config switches per checkpoint are read from it in ``_CONFIG_SWITCHES``.

PEFT's default target modules are PEFT 0.21's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
(peft/utils/constants.py), where they differ from ("q_proj", "v_proj"): PEFT uses the mapping
whenever ``target_modules`` is None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from gpuwarden.types.model import (
    Activation,
    BlockTraits,
    Dropout,
    EagerSoftmax,
    ExpertMlp,
    ModelSpec,
    OutputGate,
    PostNorms,
    QkNorm,
    RopeTables,
    Router,
)


@dataclass(frozen=True, slots=True)
class TraitRow:
    traits: BlockTraits
    source: str  # the modeling file (and class) the facts are read from


_QKV = ("query_key_value",)
_GEMMA3 = BlockTraits(
    qk_norm=QkNorm.PER_HEAD,
    f32_norm_scale=True,
    post_norms=PostNorms.BOTH,
    rope_tables=RopeTables.PER_LAYER_TYPE,
)
_OLMO2 = BlockTraits(qk_norm=QkNorm.WHOLE, f32_norm_scale=True, post_norms=PostNorms.AFTER)
_T5 = BlockTraits(
    t5_stack=True,
    loss_on_logits=True,
    eager_softmax=EagerSoftmax.COMPUTE_ONLY,
    dropout=Dropout(("dropout_rate",), ("dropout_rate",), 0.1),
    peft_targets=("q", "v"),
)
_DEEPSEEK_V3 = BlockTraits(router=Router.DEEPSEEK_V3)
# Qwen3-Next / Qwen3.5: gated attention (q_proj twice as wide, sigmoid gate per element), q/k
# RMSNorm per head, zero-centred RMSNorm scaled in fp32 ((1 + w) · x̂, then cast), Qwen routing
# with the shared expert first and its sigmoid gate
_QWEN3_NEXT = BlockTraits(
    qk_norm=QkNorm.PER_HEAD,
    f32_norm_scale=True,
    output_gate=OutputGate.PER_ELEMENT,
    router=Router.QWEN,
    shared_expert_first=True,
    shared_expert_gate=True,
)
_GEMMA4 = TraitRow(
    replace(
        _GEMMA3, norm_pow_rstd=True, v_norm=True, per_layer_inputs=True, experts_beside_mlp=True
    ),
    "modeling_gemma4.py Gemma4TextAttention q_norm/k_norm/v_norm, Gemma4RMSNorm._norm (torch.pow),"
    " Gemma4TextDecoderLayer per_layer_input_gate / enable_moe_block, Gemma4TextRouter,"
    " Gemma4TextModel.project_per_layer_inputs",
)
_APERTUS = TraitRow(
    BlockTraits(qk_norm=QkNorm.PER_HEAD, activation=Activation.XIELU),
    "modeling_apertus.py ApertusAttention q_norm/k_norm, ApertusMLP XIELUActivation",
)

ROWS: dict[str, TraitRow] = {
    # --- families the planner modelled before the rows moved here ---------------------------
    "bloom": TraitRow(
        BlockTraits(eager_only=True, sdpa_out_copy=True, embedding_norm=True, peft_targets=_QKV),
        "modeling_bloom.py: ALiBi through baddbmm (no SDPA), word_embeddings_layernorm",
    ),
    "gemma": TraitRow(BlockTraits(f32_norm_scale=True), "modeling_gemma.py GemmaRMSNorm (1 + w)"),
    "gemma2": TraitRow(
        BlockTraits(
            eager_only=True, f32_norm_scale=True, post_norms=PostNorms.BOTH, soft_caps=True
        ),
        "modeling_gemma2.py: _supports_sdpa False, attn/final logit soft-capping, 4 norms",
    ),
    "gemma3": TraitRow(_GEMMA3, "modeling_gemma3.py Gemma3Attention q_norm/k_norm, 4 norms"),
    "gemma3_text": TraitRow(_GEMMA3, "modeling_gemma3.py (text model)"),
    "gpt_oss": TraitRow(
        BlockTraits(
            eager_only=True,
            f32_norm_scale=True,
            expert_mlp=ExpertMlp.CLAMPED_SWIGLU,
            eager_softmax=EagerSoftmax.SINK,
            vllm_rope_fp32=True,
        ),
        "modeling_gpt_oss.py: sinks (no SDPA), GptOssExperts clamped SwiGLU; vLLM gpt_oss.py "
        "OAIAttention get_rope(dtype=torch.float32)",
    ),
    "phi": TraitRow(
        BlockTraits(
            sdpa_out_copy=True,
            activation=Activation.PY_GELU,
            dropout=Dropout(("resid_pdrop",), ("attention_dropout",), 0.0),
            peft_targets=("q_proj", "v_proj", "fc1", "fc2"),
        ),
        "modeling_phi.py: partial RoPE by torch.cat, NewGELUActivation",
    ),
    "phi3": TraitRow(
        BlockTraits(sdpa_out_copy=True, peft_targets=("qkv_proj",)),
        "modeling_phi3.py: partial RoPE by torch.cat; PEFT 0.21 has no phi3 entry (it refuses "
        "target_modules=None): qkv_proj, the fused projection, is the planner's default",
    ),
    "gpt_neox": TraitRow(
        BlockTraits(sdpa_out_copy=True, peft_targets=_QKV),
        "modeling_gpt_neox.py: rotary_pct by torch.cat",
    ),
    "gpt2": TraitRow(
        BlockTraits(
            activation=Activation.PY_GELU,
            eager_softmax=EagerSoftmax.COMPUTE,
            dropout=Dropout(("resid_pdrop",), ("attn_pdrop",), 0.1),
            peft_targets=("c_attn",),
        ),
        "modeling_gpt2.py: gelu_new in Python, softmax in the compute dtype",
    ),
    "gpt_bigcode": TraitRow(
        BlockTraits(
            dropout=Dropout(("resid_pdrop",), ("attn_pdrop",), 0.1), peft_targets=("c_attn",)
        ),
        "configuration_gpt_bigcode.py dropout defaults",
    ),
    "starcoder2": TraitRow(
        BlockTraits(dropout=Dropout(("residual_dropout",), ("attention_dropout",), 0.0)),
        "configuration_starcoder2.py residual_dropout (embeddings, blocks' outputs)",
    ),
    "t5": TraitRow(_T5, "modeling_t5.py: T5LayerNorm, softmax in the compute dtype, loss"),
    "mt5": TraitRow(
        replace(_T5, activation=Activation.PY_GELU), "modeling_mt5.py: as T5, gated-gelu (gelu_new)"
    ),
    "bert": TraitRow(
        BlockTraits(
            post_ln=True,
            loss_on_logits=True,
            eager_softmax=EagerSoftmax.COMPUTE,
            dropout=Dropout(("hidden_dropout_prob",), ("attention_probs_dropout_prob",), 0.1),
            peft_targets=("query", "value"),
        ),
        "modeling_bert.py: post-LN BertSelfOutput / BertOutput, MLM loss on the logits",
    ),
    "falcon": TraitRow(
        BlockTraits(
            falcon_attention=True,
            sdpa_out_copy=True,
            eager_softmax=EagerSoftmax.COMPUTE,
            peft_targets=_QKV,
        ),
        "modeling_falcon.py FalconAttention: K/V broadcast (new_decoder_architecture), MQA",
    ),
    "llama4_text": TraitRow(
        BlockTraits(
            qk_norm=QkNorm.L2_ROPE_LAYERS,
            expert_mlp=ExpertMlp.EVERY_EXPERT,
            eager_softmax=EagerSoftmax.COMPUTE,
            rope_tables=RopeTables.COMPLEX,
        ),
        "modeling_llama4.py: Llama4TextL2Norm, Llama4TextMoe bmm over all experts, freqs_cis",
    ),
    "qwen3": TraitRow(BlockTraits(qk_norm=QkNorm.PER_HEAD), "modeling_qwen3.py q_norm/k_norm"),
    "lfm2": TraitRow(
        BlockTraits(qk_norm=QkNorm.PER_HEAD),
        "modeling_lfm2.py Lfm2Attention q_layernorm/k_layernorm",
    ),
    "lfm2_moe": TraitRow(
        BlockTraits(qk_norm=QkNorm.PER_HEAD),
        "modeling_lfm2_moe.py Lfm2MoeAttention q_layernorm/k_layernorm",
    ),
    "qwen3_moe": TraitRow(
        BlockTraits(qk_norm=QkNorm.PER_HEAD, router=Router.QWEN),
        "modeling_qwen3_moe.py q_norm/k_norm, Qwen3MoeTopKRouter",
    ),
    "qwen2_moe": TraitRow(
        BlockTraits(router=Router.QWEN, shared_expert_first=True, shared_expert_gate=True),
        "modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock: shared expert first, sigmoid gate",
    ),
    "olmo2": TraitRow(
        replace(_OLMO2, rope_tables=RopeTables.FP32),
        "modeling_olmo2.py: q/k norms over the projections, norms after the branches, "
        "Olmo2RotaryEmbedding returns fp32",
    ),
    "deepseek_v2": TraitRow(
        BlockTraits(router=Router.DEEPSEEK_V2), "modeling_deepseek_v2.py DeepseekV2TopkRouter"
    ),
    "deepseek_v3": TraitRow(_DEEPSEEK_V3, "modeling_deepseek_v3.py DeepseekV3TopkRouter"),
    "mpt": TraitRow(BlockTraits(peft_targets=("Wqkv",)), "PEFT mapping"),
    # --- families read since round 45 ---------------------------------------------------------
    "apertus": _APERTUS,
    "apertus1p5_text": _APERTUS,
    "exaone_moe": TraitRow(
        BlockTraits(qk_norm=QkNorm.PER_HEAD, router=Router.DEEPSEEK_V3),
        "modeling_exaone_moe.py q_norm/k_norm, ExaoneMoeTopkRouter (sigmoid + correction bias)",
    ),
    "hy_v3": TraitRow(
        BlockTraits(qk_norm=QkNorm.PER_HEAD, router=Router.DEEPSEEK_V3),
        "modeling_hy_v3.py query/key layernorm per head, HYV3TopKRouter (sigmoid + bias)",
    ),
    "afmoe": TraitRow(
        BlockTraits(
            qk_norm=QkNorm.PER_HEAD,
            post_norms=PostNorms.BOTH,
            f32_norm_scale=True,
            output_gate=OutputGate.PER_ELEMENT,
            router=Router.DEEPSEEK_V3,
        ),
        "modeling_afmoe.py AfmoeAttention gate_proj (heads × head_dim), 4 norms, "
        "AfmoeTokenChoiceRouter (sigmoid + expert_bias)",
    ),
    "laguna": TraitRow(
        BlockTraits(
            qk_norm=QkNorm.PER_HEAD,
            output_gate=OutputGate.PER_HEAD,
            output_gate_softplus=True,
            router=Router.DEEPSEEK_V3,
        ),
        "modeling_laguna.py LagunaAttention g_proj (softplus of its fp32 output), "
        "LagunaTopKRouter (sigmoid + bias)",
    ),
    "sarvam_moe": TraitRow(
        BlockTraits(qk_norm=QkNorm.PER_HEAD, router=Router.DEEPSEEK_V3),
        "modeling_sarvam_moe.py (Glm4Moe blocks: use_qk_norm, sigmoid router + bias)",
    ),
    "glm4_moe": TraitRow(_DEEPSEEK_V3, "modeling_glm4_moe.py Glm4MoeTopkRouter (DeepSeek-V3's)"),
    "solar_open": TraitRow(_DEEPSEEK_V3, "modeling_solar_open.py SolarOpenTopkRouter"),
    "deepseek_v32": TraitRow(_DEEPSEEK_V3, "modeling_deepseek_v32.py DeepseekV32TopkRouter"),
    "glm_moe_dsa": TraitRow(_DEEPSEEK_V3, "modeling_glm_moe_dsa.py GlmMoeDsaTopkRouter"),
    "youtu": TraitRow(_DEEPSEEK_V3, "modeling_youtu.py (DeepSeek-V3 blocks)"),
    "kimi_linear": TraitRow(_DEEPSEEK_V3, "modeling_kimi_linear.py KimiLinearTopkRouter"),
    "flex_olmo": TraitRow(
        _OLMO2, "modeling_flex_olmo.py: OLMo 2 blocks (norms after, q/k norms, fp32 scale)"
    ),
    "olmo_hybrid": TraitRow(_OLMO2, "modeling_olmo_hybrid.py: OLMo 2 attention blocks"),
    "persimmon": TraitRow(
        BlockTraits(
            qk_norm=QkNorm.LAYER_PER_HEAD,
            activation=Activation.RELU2,
            sdpa_out_copy=True,
        ),
        "modeling_persimmon.py q_layernorm/k_layernorm (LayerNorm per head), partial RoPE by "
        "torch.cat, relu2",
    ),
    "jais2": TraitRow(BlockTraits(activation=Activation.RELU2), "modeling_jais2.py relu2 MLP"),
    "nemotron_h": TraitRow(
        BlockTraits(
            activation=Activation.RELU2,
            expert_mlp=ExpertMlp.PLAIN,
            peft_targets=("q_proj", "k_proj", "v_proj", "o_proj"),
        ),
        "modeling_nemotron_h.py NemotronHMLP / NemotronHExperts (up, relu2, down)",
    ),
    "codegen": TraitRow(
        BlockTraits(peft_targets=("qkv_proj",)), "PEFT mapping (CodeGen's fused qkv_proj)"
    ),
    "hyperclovax": TraitRow(
        BlockTraits(post_norms=PostNorms.BOTH),
        "modeling_hyperclovax.py: Peri-LN norms after each branch (use_post_norm)",
    ),
    "qwen3_next": TraitRow(_QWEN3_NEXT, "modeling_qwen3_next.py"),
    "qwen3_5_text": TraitRow(_QWEN3_NEXT, "modeling_qwen3_5.py"),
    "qwen3_5_moe_text": TraitRow(_QWEN3_NEXT, "modeling_qwen3_5_moe.py"),
    "gemma3n_text": TraitRow(_GEMMA3, "modeling_gemma3n.py Gemma3nTextAttention, Gemma3nRMSNorm"),
    "gemma4": _GEMMA4,
    "gemma4_text": _GEMMA4,
    "gemma4_unified": _GEMMA4,
    "gemma4_unified_text": _GEMMA4,
}


def _laguna_gate(traits: BlockTraits, cfg: Mapping[str, object]) -> BlockTraits:
    """LagunaAttention.g_proj: one value per head (``gating`` true / "per-head"), else per
    element (as catalog/families/decoders2.py counts it)."""
    gating = cfg.get("gating", True)
    per_head = gating is True or gating == "per-head"
    return replace(traits, output_gate=OutputGate.PER_HEAD if per_head else OutputGate.PER_ELEMENT)


def _hyperclovax_post_norms(traits: BlockTraits, cfg: Mapping[str, object]) -> BlockTraits:
    return (
        traits
        if cfg.get("use_post_norm", True) is not False
        else replace(traits, post_norms=PostNorms.NONE)
    )


def _sarvam_qk_norm(traits: BlockTraits, cfg: Mapping[str, object]) -> BlockTraits:
    return (
        traits
        if cfg.get("use_qk_norm", True) is not False
        else replace(traits, qk_norm=QkNorm.NONE)
    )


_CONFIG_SWITCHES: dict[str, Callable[[BlockTraits, Mapping[str, object]], BlockTraits]] = {
    "laguna": _laguna_gate,
    "hyperclovax": _hyperclovax_post_norms,
    "sarvam_moe": _sarvam_qk_norm,
}


# Every model_type PEFT 0.21.2's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
# (peft/utils/constants.py) has an entry for: with target_modules None, LoraModel.
# _prepare_adapter_config takes that entry, and raises "Please specify `target_modules`" for any
# other type (tests/catalog/test_traits.py checks the set against the installed PEFT)
PEFT_DEFAULT_TYPES = frozenset(
    {
        "RefinedWeb",
        "RefinedWebModel",
        "bart",
        "bert",
        "blip-2",
        "bloom",
        "btlm",
        "chatglm",
        "codegen",
        "deberta",
        "deberta-v2",
        "electra",
        "falcon",
        "gemma",
        "gemma2",
        "gemma3_text",
        "gemma4",
        "gpt2",
        "gpt_bigcode",
        "gpt_neo",
        "gpt_neox",
        "gptj",
        "layoutlm",
        "llama",
        "llama4",
        "mistral",
        "mixtral",
        "mpt",
        "mt5",
        "nemotron_h",
        "opt",
        "phi",
        "qwen2",
        "qwen3",
        "roberta",
        "rwkv",
        "rwkv7",
        "stablelm",
        "t5",
        "xlm-roberta",
    }
)


def peft_has_default(model_type: str) -> bool:
    """Whether PEFT has default LoRA targets for ``model_type`` (``PEFT_DEFAULT_TYPES``). PEFT
    looks up the built causal LM's ``config.model_type``: a spec's own for every type read
    directly (Qwen3.5 and Llama 4 wrappers: their ``_text`` type, as the causal LM is built from
    ``text_config``); an alias (exaone, smollm3 ...) is read as its family, whose name this is."""
    return model_type in PEFT_DEFAULT_TYPES


def traits_for(model_type: str, cfg: Mapping[str, object]) -> BlockTraits:
    """The traits of ``model_type``'s blocks under config ``cfg`` (Llama's when it has no row)."""
    row = ROWS.get(model_type)
    traits = row.traits if row is not None else BlockTraits()
    switch = _CONFIG_SWITCHES.get(model_type)
    return switch(traits, cfg) if switch is not None else traits


def with_traits(spec: ModelSpec) -> ModelSpec:
    """``spec`` with its family's traits (catalog/configs.normalise applies it once)."""
    return replace(spec, traits=traits_for(spec.model_type, spec.raw_config))
