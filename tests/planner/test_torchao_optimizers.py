"""``--optimizer adamw-4bit / adamw-fp8``: torchao.optim's AdamW4bit and AdamWFp8 states, against
the layout of their code (pytorch/ao @029bb60a, torchao/optim/adam.py, subclass_4bit.py,
subclass_fp8.py):

* ``OptimState4bit.zeros``: ``codes`` uint8 of n // 2 elements (two 4-bit codes a byte) and
  ``scale`` fp32 of n // block_size, block_size 128 (AdamW4bit's default);
* ``OptimStateFp8.zeros``: float8_e4m3fn ``codes`` of n elements, fp32 ``scale`` of n // 256;
* ``_AdamBase._new_buffer``: only tensors of at least 4,096 elements whose size the block divides
  are quantized; the others get ``torch.zeros_like(p)``, in the parameter's dtype.
"""

from __future__ import annotations

import json

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.cli.main import main
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import Checkpointing, Framework, Mode, Optimizer, PlanRequest, Precision

BF16 = 2
FP32 = 4
ADAM_STATES = 2


def _request(optimizer: Optimizer) -> PlanRequest:
    return PlanRequest(
        model=resolve_model("Llama-2-7b-hf"),
        mode=Mode.TRAIN,
        precision=Precision.BF16,
        optimizer=optimizer,
        micro_batch=2,
        seq_len=512,
        checkpointing=Checkpointing.FULL,
        framework=Framework.TORCHTUNE,
    )


def _unquantized_elements(name: str) -> tuple[int, int]:
    """(elements in tensors under 4,096 values, all elements): Llama's RMSNorm weights, two a
    block and the final one (no biases); every matrix is quantized."""
    spec = resolve_model(name)
    layers = len(spec.parameters.layers)
    small = (2 * layers + 1) * spec.hidden_size
    return small, plan_memory(_request(Optimizer.ADAMW)).total_parameters


@pytest.mark.parametrize(
    ("optimizer", "code_bytes", "block"),
    [(Optimizer.ADAMW_4BIT, 0.5, 128), (Optimizer.ADAMW_FP8, 1.0, 256)],
)
def test_quantized_states_per_parameter(
    optimizer: Optimizer, code_bytes: float, block: int
) -> None:
    small, total = _unquantized_elements("Llama-2-7b-hf")
    quantized = ADAM_STATES * (code_bytes + FP32 / block) * (total - small)
    own_dtype = ADAM_STATES * BF16 * small  # zeros_like(p) of a pure-bf16 parameter
    states = plan_memory(_request(optimizer)).component("optimizer_states")
    assert states == pytest.approx(quantized + own_dtype, rel=1e-9)


def test_four_bit_states_are_half_the_fp8_ones() -> None:
    four = plan_memory(_request(Optimizer.ADAMW_4BIT)).component("optimizer_states")
    fp8 = plan_memory(_request(Optimizer.ADAMW_FP8)).component("optimizer_states")
    assert four < 0.53 * fp8


def test_the_step_dequantizes_the_largest_parameter_twice_in_fp32() -> None:
    spec = resolve_model("Llama-2-7b-hf")
    largest = spec.vocab_size * spec.hidden_size  # the embedding / the untied head
    plan = plan_memory(_request(Optimizer.ADAMW_4BIT))
    (step,) = [p for p in plan.phases if p.name == "optimizer-step"]
    assert step.bytes_by_component["temporaries"] == 2 * largest * FP32


def test_the_cli_takes_the_torchao_choices(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "Llama-2-7b-hf", "--optimizer", "adamw-fp8", "--precision", "bf16", "--json"]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["request"]["optimizer"] == "adamw-fp8"
    assert "AdamWFp8" in document["sources"]["optimizer_states"]["source"]


# --- AdamW8bit (--optimizer adamw-8bit-torchao) ---------------------------------------------
# ``--optimizer adamw-8bit-torchao``: torchao.optim's AdamW8bit, against its code (pytorch/ao
# torchao/optim/subclass_8bit.py @01962500, adam.py @0372e5ff), apart from bitsandbytes' AdamW8bit:
#
# * ``OptimState8bit.zeros``: uint8 ``codes`` of the tensor's shape, fp32 ``scale`` of
#   n // block_size (AdamW8bit's block_size 256): bitsandbytes' blockwise bytes per element;
# * ``_AdamBase._new_buffer``: tensors under 4,096 elements get ``torch.zeros_like(p)``, states in
#   the parameter's dtype (bitsandbytes: fp32 states below min_8bit_size);
# * ``single_param_adam`` (torch.compile'd, one parameter at a time): ``exp_avg.float()`` and
#   ``exp_avg_sq.float()`` lerped in fp32 and copied back: two fp32 copies of the parameter it steps
#   (bitsandbytes: one fused kernel, no copies).

BLOCK_8BIT = 256


def _step(optimizer: Optimizer) -> dict[str, int]:
    (step,) = [p for p in plan_memory(_request(optimizer)).phases if p.name == "optimizer-step"]
    return step.bytes_by_component


def test_states_are_eight_bit_codes_and_small_tensors_keep_their_dtype() -> None:
    spec = resolve_model("Llama-2-7b-hf")
    small = (2 * len(spec.parameters.layers) + 1) * spec.hidden_size  # RMSNorm weights
    total = plan_memory(_request(Optimizer.ADAMW)).total_parameters
    quantized = ADAM_STATES * (1 + FP32 / BLOCK_8BIT) * (total - small)
    torchao = plan_memory(_request(Optimizer.ADAMW_8BIT_TORCHAO)).component("optimizer_states")
    bnb = plan_memory(_request(Optimizer.ADAMW_8BIT)).component("optimizer_states")
    assert torchao == pytest.approx(quantized + ADAM_STATES * BF16 * small, rel=1e-9)
    assert bnb == pytest.approx(quantized + ADAM_STATES * FP32 * small, rel=1e-9)


def test_the_compiled_step_holds_two_fp32_copies_of_the_largest_parameter() -> None:
    spec = resolve_model("Llama-2-7b-hf")
    largest = spec.vocab_size * spec.hidden_size  # the embedding / the untied head
    assert _step(Optimizer.ADAMW_8BIT_TORCHAO)["temporaries"] == 2 * largest * FP32
    assert _step(Optimizer.ADAMW_8BIT)["temporaries"] == 0


def test_the_cli_takes_torchaos_8bit(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "Llama-2-7b-hf", "--optimizer", "adamw-8bit-torchao", "--precision", "bf16"]
    assert main([*argv, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["request"]["optimizer"] == "adamw-8bit-torchao"
    assert "AdamW8bit" in document["sources"]["optimizer_states"]["source"]
    assert "torchao" in document["sources"]["optimizer_states"]["source"]
