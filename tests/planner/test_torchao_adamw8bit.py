"""``--optimizer adamw-8bit-torchao``: torchao.optim's AdamW8bit, against its code (pytorch/ao
torchao/optim/subclass_8bit.py @01962500, adam.py @0372e5ff), apart from bitsandbytes' AdamW8bit:

* ``OptimState8bit.zeros``: uint8 ``codes`` of the tensor's shape, fp32 ``scale`` of
  n // block_size (AdamW8bit's block_size 256): bitsandbytes' blockwise bytes per element;
* ``_AdamBase._new_buffer``: tensors under 4,096 elements get ``torch.zeros_like(p)``, states in
  the parameter's dtype (bitsandbytes: fp32 states below min_8bit_size);
* ``single_param_adam`` (torch.compile'd, one parameter at a time): ``exp_avg.float()`` and
  ``exp_avg_sq.float()`` lerped in fp32 and copied back: two fp32 copies of the parameter it steps
  (bitsandbytes: one fused kernel, no copies).
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
BLOCK = 256


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


def _step(optimizer: Optimizer) -> dict[str, int]:
    (step,) = [p for p in plan_memory(_request(optimizer)).phases if p.name == "optimizer-step"]
    return step.bytes_by_component


def test_states_are_eight_bit_codes_and_small_tensors_keep_their_dtype() -> None:
    spec = resolve_model("Llama-2-7b-hf")
    small = (2 * len(spec.parameters.layers) + 1) * spec.hidden_size  # RMSNorm weights
    total = plan_memory(_request(Optimizer.ADAMW)).total_parameters
    quantized = ADAM_STATES * (1 + FP32 / BLOCK) * (total - small)
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
