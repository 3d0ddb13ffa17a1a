"""torchtune's model initialisation as the plan's load phase (planner/torchtune_load.py).

Each expected figure is the arithmetic of the code the module docstring cites, on the catalog's
shapes: torchtune's ``load_from_full_model_state_dict`` (one full tensor on the GPU next to the
shards), torchao's ``NF4Tensor.from_tensor`` (input, scaled blocks, uint8 indices, one chunk's
comparison with the 16-entry table, the two packing halves) and torchtune's float32 RoPE table.
"""

from __future__ import annotations

import argparse

from gpuwarden.cli.commands.plan import build_request, register
from gpuwarden.planner import plan_memory
from gpuwarden.planner.torchtune_load import nf4_quantize_bytes, rope_table_bytes
from gpuwarden.types.plan import MemoryPlan, PlanRequest

BF16 = 2
CHUNK = 1024**2  # torchao nf4tensor.CHUNK_SIZE
LUT = 16  # NF4 lookup-table entries
FP32 = 4
QLORA_ALL = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


def _request(model: str, *flags: str) -> PlanRequest:
    parser = argparse.ArgumentParser()
    register(parser)
    return build_request(parser.parse_args([model, "--gpu", "a100-sxm4-80gb", *flags]))


def _load(plan: MemoryPlan) -> dict[str, int]:
    (load,) = [phase.bytes_by_component for phase in plan.phases if phase.name == "load"]
    return load


def test_nf4_quantize_of_a_chunked_weight_is_five_bytes_an_element_and_two_chunk_tables() -> None:
    mlp = 14336 * 4096  # Llama-3.1-8B gate / up / down
    input_and_scaled = 2 * mlp * BF16
    indices = mlp  # quantized_blocks, uint8
    comparison = 2 * CHUNK * LUT * BF16  # (value - nf4) and its .abs(), (CHUNK, 16) bf16
    assert nf4_quantize_bytes(mlp, BF16) == input_and_scaled + indices + comparison


def test_nf4_quantize_of_a_huge_weight_is_bounded_by_its_packing_halves() -> None:
    mlp = 53248 * 16384  # Llama-3.1-405B: numel/2 + numel/2 uint8 outgrow the 64 MiB chunk
    assert nf4_quantize_bytes(mlp, BF16) == 2 * mlp * BF16 + mlp + mlp


def test_nf4_quantize_of_a_weight_smaller_than_a_chunk_compares_it_whole() -> None:
    small = 512 * 512
    assert nf4_quantize_bytes(small, BF16) == 2 * small * BF16 + small + 2 * small * LUT * BF16


def test_single_device_qlora_load_holds_torchaos_quantize_of_the_largest_linear() -> None:
    # issue #1398's default llama3_1/8B_qlora_single_device (q, k, v, output_proj + MLP, r8)
    plan = plan_memory(
        _request(
            "Llama-3.1-8B",
            *("--framework", "torchtune", "--mode", "qlora", "--precision", "nf4"),
            *("--quant-kernel", "torchao", "--lora-rank", "8", "--lora-targets", QLORA_ALL),
        )
    )
    load = _load(plan)
    mlp = 14336 * 4096
    assert load["temporaries"] == 5 * mlp + 2 * CHUNK * LUT * BF16
    assert load["buffers"] == 131072 * 128 * FP32  # Llama3ScaledRoPE, max_seq_len 131072


def test_fsdp_load_holds_the_largest_full_tensor_next_to_the_shards() -> None:
    request = _request(
        "Meta-Llama-3-8B",
        *("--framework", "torchtune", "--mode", "lora", "--precision", "bf16"),
        *("--fsdp", "full", "--gpus", "4", "--lora-rank", "8"),
    )
    load = _load(plan_memory(request))
    embedding = 128256 * 4096  # tok_embeddings / output: the largest tensors of Llama-3-8B
    assert load["temporaries"] == embedding * BF16
    (forward,) = [p for p in plan_memory(request).phases if p.name == "forward"]
    assert load["parameters"] == forward.bytes_by_component["parameters"]  # the shards


def test_fsdp_qlora_load_quantizes_the_full_weight_when_it_outweighs_the_embedding() -> None:
    plan = plan_memory(
        _request(
            "Llama-3.1-405B",
            *("--framework", "torchtune", "--mode", "qlora", "--precision", "nf4"),
            *("--quant-kernel", "torchao", "--fsdp", "full", "--gpus", "8"),
            *("--lora-targets", QLORA_ALL),
        )
    )
    mlp = 53248 * 16384
    assert 6 * mlp > 128256 * 16384 * BF16  # to_nf4 of the MLP weight beats the embedding
    assert _load(plan)["temporaries"] == 6 * mlp


def test_torchtunes_rope_table_is_one_fp32_cos_sin_buffer_in_every_phase() -> None:
    request = _request(
        "Llama-3.2-3B", "--framework", "torchtune", "--mode", "lora", "--precision", "bf16"
    )
    assert rope_table_bytes(request) == 131072 * (128 // 2) * 2 * FP32
    plan = plan_memory(request)
    assert {phase.bytes_by_component["buffers"] for phase in plan.phases} == {
        rope_table_bytes(request)
    }


def test_other_stacks_keep_their_fsdp_load_and_no_rope_buffer() -> None:
    plan = plan_memory(
        _request(
            "Meta-Llama-3-8B",
            *("--framework", "hf", "--mode", "lora", "--precision", "bf16"),
            *("--fsdp", "full", "--gpus", "4"),
        )
    )
    assert "load" not in {phase.name for phase in plan.phases}
    assert plan.component("buffers") == 0


def test_torchtunes_qlora_quantizes_with_torchao_unless_told_otherwise() -> None:
    """torchtune's QLoRA builders quantize with torchao's NF4Tensor (to_nf4 / linear_nf4), so
    `--framework torchtune --mode qlora` plans torchao's kernel; bitsandbytes only when asked."""
    import argparse

    from gpuwarden.cli.commands.plan import build_request, register
    from gpuwarden.types.plan import QuantKernel

    parser = argparse.ArgumentParser()
    register(parser)

    def kernel(*flags: str) -> QuantKernel:
        args = parser.parse_args(["Meta-Llama-3-8B", "--framework", "torchtune", *flags])
        return build_request(args).quant_kernel

    assert kernel("--mode", "qlora") is QuantKernel.TORCHAO
    assert kernel("--mode", "qlora", "--quant-kernel", "bnb") is QuantKernel.BNB
    assert kernel("--mode", "lora") is QuantKernel.BNB  # no 4-bit weights: no kernel to say
