"""--peft-version: PEFT before 0.12 keeps LoRA adapters in the base dtype, 0.12+ upcasts them
to fp32 (planner/precision.py ``peft_fp32_adapters``, planner/versions.py)."""

from __future__ import annotations

import argparse
import shlex

import pytest

from gpuwarden.cli.commands import plan as plan_command
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.planner.versions import PEFT_ADAPTER_UPCAST
from gpuwarden.types.plan import MemoryPlan, PlanRequest

# Llama-2-7B, LoRA r 8 on q_proj and v_proj (4096 x 4096 each), 32 layers, by hand:
# 8 * (4096 + 4096) per target * 2 targets * 32 layers
ADAPTER_PARAMS = 8 * (4096 + 4096) * 2 * 32  # 4,194,304
LORA = (
    "--mode lora --precision bf16 --framework hf-legacy --lora-rank 8 --lora-targets "
    "q_proj,v_proj --checkpointing full --gpus 1 --micro-batch 1 --seq-len 512 --save none"
)


def request(flags: str, model: str = "Llama-2-7b-hf") -> PlanRequest:
    parser = argparse.ArgumentParser(prog="gpuwarden plan")
    plan_command.register(parser)
    return plan_command.build_request(parser.parse_args([model, *shlex.split(flags)]))


def component(plan: MemoryPlan, key: str) -> int:
    return next(c.bytes for c in plan.components if c.key == key)


@pytest.mark.parametrize(
    ("value", "parts"),
    [("0.10.0", (0, 10, 0)), ("v0.11.1", (0, 11, 1)), ("0.12.0+local", (0, 12, 0)), (None, None)],
)
def test_flag_is_parsed_as_a_release(value: str | None, parts: tuple[int, int, int] | None) -> None:
    flag = "" if value is None else f" --peft-version {value}"
    assert request(LORA + flag).peft_version == parts


def test_unreadable_flag_names_itself() -> None:
    with pytest.raises(InvalidConfigError) as err:
        request(LORA + " --peft-version latest")
    assert err.value.reference == "peft-version-unreadable"


@pytest.mark.parametrize(
    ("flag", "adapter_bytes"),
    [
        ("", 4),
        ("--peft-version 0.12.0", 4),
        ("--peft-version 0.11.1", 2),
        ("--peft-version 0.9", 2),
    ],
)
def test_adapter_dtype_follows_the_release(flag: str, adapter_bytes: int) -> None:
    plan = plan_memory(request(f"{LORA} {flag}"))
    # gradient in the adapter dtype; AdamW m and v in it too (no master copy on a pure bf16 base)
    assert component(plan, "gradients") == ADAPTER_PARAMS * adapter_bytes
    assert component(plan, "optimizer_states") == 2 * ADAPTER_PARAMS * adapter_bytes
    assert ("fp32" in plan.notes["lora_adapters"]) is (adapter_bytes == 4)


def test_the_cut_is_0_12() -> None:
    assert PEFT_ADAPTER_UPCAST == (0, 12, 0)
    note = plan_memory(request(LORA)).notes["lora_adapters"]
    assert note.startswith("PEFT >= 0.12 assumed")


def test_own_lora_and_mixed_precision_ignore_it() -> None:
    # LitGPT's own LoRA builds adapters in the model dtype; under bf16-mixed they are fp32
    # whatever PEFT does: the release changes nothing there, nor for QLoRA's compute dtype
    cases = [
        LORA.replace("hf-legacy", "litgpt"),
        LORA.replace("--precision bf16 ", "--precision bf16-mixed "),
        LORA.replace("--mode lora --precision bf16", "--mode qlora --precision nf4"),
    ]
    for flags in cases:
        old = plan_memory(request(flags + " --peft-version 0.10.0"))
        new = plan_memory(request(flags + " --peft-version 0.13.2"))
        assert old.peak_bytes == new.peak_bytes, flags


@pytest.mark.parametrize(("flag", "caveat"), [("", True), ("--peft-version 0.11.1", False)])
def test_a_quantized_base_note_does_not_contradict_the_release(flag: str, caveat: bool) -> None:
    """QLoRA plans its adapters 16-bit; the note named "PEFT >= 0.12" beside "16-bit" as if that
    release kept them so (it upcasts them to fp32): it says so now, and why 16-bit is planned."""
    qlora = LORA.replace("--mode lora --precision bf16", "--mode qlora --precision nf4")
    note = plan_memory(request(f"{qlora} {flag}")).notes["lora_adapters"]
    assert "16-bit compute dtype" in note
    assert ("upcasts them to fp32 on a quantized base too" in note) is caveat
