"""Architecture facts beyond the total: structure, windows, MoE, MLA, linears the planner targets.

Expected values are the configs' own fields (fixtures/models/*.json) or published facts named where
they are used.
"""

from __future__ import annotations

import pytest

from gpuwarden.catalog import model_names, resolve_model
from gpuwarden.types.model import (
    MlpKind,
    NormKind,
    PositionKind,
    Structure,
)


def _names(model: str, layer: int = 0) -> list[tuple[str, str]]:
    spec = resolve_model(model)
    return [(lin.name, lin.part) for lin in spec.parameters.layers[layer].linears]


@pytest.mark.parametrize("name", model_names())
def test_linears_hold_every_projection_parameter(name: str) -> None:
    # Attention, MLP and expert parameters all live in linears; norms and routers do not.
    for layer in resolve_model(name).parameters.layers:
        assert layer.linear_parameters == layer.attention + layer.mlp + layer.experts


@pytest.mark.parametrize("name", model_names())
def test_layer_split_matches_num_layers(name: str) -> None:
    spec = resolve_model(name)
    assert len(spec.layer_parameters) == spec.num_layers
    assert len(spec.encoder_layer_parameters) == spec.num_encoder_layers
    assert spec.kv_width == spec.num_kv_heads * spec.head_dim


def test_sliding_windows_follow_transformers() -> None:
    v01 = resolve_model("Mistral-7B-v0.1")  # "sliding_window": 4096 → every layer
    assert (v01.sliding_window, v01.sliding_window_layers) == (4096, v01.num_layers)
    v02 = resolve_model("Mistral-7B-v0.2")  # "sliding_window": null → full attention
    assert (v02.sliding_window, v02.sliding_window_layers) == (None, 0)
    # Gemma-2 alternates local (4096) and global attention, starting with local.
    for name, layers in (("gemma-2-2b", 26), ("gemma-2-9b", 42), ("gemma-2-27b", 46)):
        spec = resolve_model(name)
        assert spec.num_layers == layers
        assert (spec.sliding_window, spec.sliding_window_layers) == (4096, (layers + 1) // 2)
    # Phi-3's 2047 is applied by transformers to the mask and the KV cache of every layer.
    phi3 = resolve_model("Phi-3-mini-4k-instruct")
    assert (phi3.sliding_window, phi3.sliding_window_layers) == (2047, 32)
    for name in ("Qwen2.5-7B", "Llama-3.1-8B", "Mixtral-8x7B-v0.1", "gemma-7b"):
        assert resolve_model(name).sliding_window is None


def test_mixtral_moe_and_active_parameters() -> None:
    spec = resolve_model("Mixtral-8x7B-v0.1")
    assert spec.moe is not None
    assert (spec.moe.num_experts, spec.moe.experts_per_token) == (8, 2)
    assert spec.moe.expert_intermediate_size == 14336
    layer = spec.parameters.layers[0]
    assert layer.mlp == 0 and layer.router == 8 * 4096
    assert ("experts.gate_up_proj", "experts") in _names("Mixtral-8x7B-v0.1")
    # Mistral AI's announcement: 46.7B total, 12.9B used per token.
    assert round(spec.total_parameters / 1e9, 1) == 46.7
    assert round(spec.active_parameters / 1e9, 1) == 12.9


def test_deepseek_v3_mla_and_moe_layout() -> None:
    spec = resolve_model("DeepSeek-V3")
    assert spec.mla is not None and spec.moe is not None
    assert (spec.mla.q_lora_rank, spec.mla.kv_lora_rank) == (1536, 512)
    assert spec.head_dim == 128 + 64  # qk_nope_head_dim + qk_rope_head_dim
    assert spec.moe.first_dense_layers == 3
    assert (spec.moe.num_experts, spec.moe.num_shared_experts, spec.moe.experts_per_token) == (
        256,
        1,
        8,
    )
    dense, sparse = spec.parameters.layers[2], spec.parameters.layers[3]
    assert dense.experts == 0 and dense.router == 0
    assert sparse.experts > 0 and sparse.router == 256 * 7168
    assert sum(1 for layer in spec.parameters.layers if layer.experts) == 61 - 3
    names = {name for name, _ in _names("DeepSeek-V3", 3)}
    assert {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"} <= names
    assert {"experts.gate_up_proj", "experts.down_proj"} <= names
    assert ("gate_proj", "shared_experts") in _names("DeepSeek-V3", 3)
    experts = [lin for lin in spec.parameters.layers[3].linears if lin.expert]
    assert {lin.count for lin in experts} == {256}
    # DeepSeek-V3 README: 671B total, 37B activated per token (router biases are buffers).
    assert spec.total_parameters // 10**9 == 671
    assert spec.active_parameters // 10**9 == 37


def test_t5_is_encoder_decoder_with_cross_attention() -> None:
    spec = resolve_model("T0_3B")
    assert spec.structure is Structure.ENCODER_DECODER
    assert (spec.num_layers, spec.num_encoder_layers) == (24, 24)
    assert spec.head_dim == 128  # d_kv, not d_model / num_heads = 32
    assert spec.position_encoding is PositionKind.RELATIVE
    assert spec.mlp is MlpKind.PLAIN  # feed_forward_proj "relu"
    encoder, decoder = spec.encoder_layer_parameters, spec.layer_parameters
    assert encoder[0].other == decoder[0].other == 32 * 32  # buckets × heads, block 0 only
    assert encoder[1].other == decoder[1].other == 0
    assert "cross_attention" in {lin.part for lin in decoder[0].linears}
    assert "cross_attention" not in {lin.part for lin in encoder[0].linears}
    assert resolve_model("mt0-xxl").mlp is MlpKind.GATED  # "gated-gelu": wi_0, wi_1, wo


def test_heads_and_kv_heads_by_family() -> None:
    assert resolve_model("gemma-7b").head_dim == 256  # config head_dim, not 3072 / 16
    assert resolve_model("falcon-7b").num_kv_heads == 1  # multi_query
    assert resolve_model("falcon-40b").num_kv_heads == 8  # new_decoder_architecture
    assert resolve_model("octocoder").num_kv_heads == 1  # gpt_bigcode multi-query
    assert resolve_model("Llama-2-70b-hf").num_kv_heads == 8


def test_falcon_norms_depend_on_the_block_layout() -> None:
    seven, forty = resolve_model("falcon-7b"), resolve_model("falcon-40b")
    assert seven.parallel_attention_mlp and forty.parallel_attention_mlp
    assert seven.parameters.layers[0].norms == 2 * 4544  # one shared input LayerNorm
    assert forty.parameters.layers[0].norms == 2 * 2 * 8192  # ln_attn + ln_mlp
    assert {name for name, _ in _names("falcon-7b")} == {
        "query_key_value",
        "dense",
        "dense_h_to_4h",
        "dense_4h_to_h",
    }


def test_gpt2_learned_positions_and_conv1d_names() -> None:
    spec = resolve_model("gpt2")
    assert spec.position_encoding is PositionKind.LEARNED
    assert spec.parameters.position_embedding == 1024 * 768  # n_positions × n_embd
    assert spec.tied_embeddings and spec.parameters.lm_head == 0
    assert spec.norm is NormKind.LAYER
    assert _names("gpt2") == [
        ("c_attn", "attention"),
        ("c_proj", "attention"),
        ("c_fc", "mlp"),
        ("c_proj", "mlp"),
    ]


def test_phi3_fused_projections() -> None:
    assert {name for name, _ in _names("Phi-3-mini-4k-instruct")} == {
        "qkv_proj",
        "o_proj",
        "gate_up_proj",
        "down_proj",
    }


def test_other_families() -> None:
    assert resolve_model("stablelm-base-alpha-3b").parallel_attention_mlp  # use_parallel_residual
    assert resolve_model("phi-2").parallel_attention_mlp
    assert resolve_model("bloomz-7b1").position_encoding is PositionKind.ALIBI
    bert = resolve_model("bert-large-uncased")
    assert bert.structure is Structure.ENCODER and bert.num_encoder_layers == 0
    assert bert.parameters.position_embedding == 512 * 1024
    qwen = resolve_model("Qwen2.5-0.5B")
    assert [lin.bias for lin in qwen.parameters.layers[0].linears[:4]] == [True, True, True, False]
    assert resolve_model("Llama-3.2-1B").tied_embeddings
    assert resolve_model("Llama-2-7b-hf").checkpoint_dtype == "float16"
