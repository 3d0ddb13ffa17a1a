"""--lora-variant dora: PEFT's DoRA sized from its code (planner/dora.py), against figures worked
out by hand for Llama-3.2-3B (28 blocks, hidden 3072, 8 KV heads × 128: q_proj 3072 → 3072,
v_proj 3072 → 1024) at V531's settings (benchmarks/data/validation.csv)."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

import pytest

from gpuwarden.cli.commands import plan as plan_command
from gpuwarden.cli.main import main
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.planner.dora import weight_norm_peak
from gpuwarden.planner.exact._recipe import resolve
from gpuwarden.planner.precision import recipe
from gpuwarden.types.plan import LoraVariant, MemoryPlan, PlanRequest

V531 = (
    "--mode lora --framework hf-legacy --load-dtype bf16 --precision bf16 --optimizer adamw "
    "--optimizer-impl foreach --lora-rank 32 --lora-targets q_proj,v_proj --lora-dropout 0 "
    "--micro-batch 4 --seq-len 768 --loop script --use-cache --gpu L40S"
)
BLOCKS, TOKENS, HIDDEN, V_OUT = 28, 4 * 768, 3072, 1024
OUT_FEATURES = HIDDEN + V_OUT  # q_proj's and v_proj's, per block
MAGNITUDES = BLOCKS * OUT_FEATURES  # 114,688: one per output feature
# pure bf16 base, PEFT's fp32 adapters, no autocast: base_result bf16 (2 B), lora_result fp32 (4 B)
SAVED = BLOCKS * TOKENS * OUT_FEATURES * (2 + 4)  # 2,113,929,216
# recomputed base_result (dropout, or PEFT < 0.14): F.linear on the fp32 input, fp32 output
SAVED_RECOMPUTED = BLOCKS * TOKENS * OUT_FEATURES * (4 + 4)
# ... and its fp32 copy of each bf16 weight, kept where the input requires grad (not block 0)
WEIGHT_COPIES = (BLOCKS - 1) * HIDDEN * OUT_FEATURES * 4


def request(flags: str, model: str = "Llama-3.2-3B") -> PlanRequest:
    parser = argparse.ArgumentParser(prog="gpuwarden plan")
    plan_command.register(parser)
    return plan_command.build_request(parser.parse_args([model, *shlex.split(flags)]))


def activations(plan: MemoryPlan) -> int:
    return next(c.bytes for c in plan.components if c.key == "activations")


def test_trainable_count_adds_one_magnitude_per_output_feature() -> None:
    lora = plan_memory(request(V531))
    dora = plan_memory(request(V531 + " --lora-variant dora"))
    assert dora.trainable_parameters - lora.trainable_parameters == MAGNITUDES
    # V531's run logs 9,289,728 trainable parameters (PEFT's print_trainable_parameters)
    assert dora.trainable_parameters == 9_289_728


def test_saved_outputs_and_peak_match_the_hand_figures() -> None:
    lora = plan_memory(request(V531))
    dora = plan_memory(request(V531 + " --lora-variant dora"))
    assert activations(dora) - activations(lora) == SAVED
    # the forward peak: the saved outputs, the fp32 magnitudes and their two AdamW states
    # (gradients are not alive yet)
    allocated = dora.predicted.max_allocated_bytes - lora.predicted.max_allocated_bytes
    assert allocated == SAVED + MAGNITUDES * (4 + 2 * 4)


@pytest.mark.parametrize("flag", ["--lora-dropout 0.05", "--peft-version 0.13.2"])
def test_a_recomputed_base_output_keeps_a_weight_copy(flag: str) -> None:
    lora = plan_memory(request(f"{V531} {flag}"))
    dora = plan_memory(request(f"{V531} {flag} --lora-variant dora"))
    assert activations(dora) - activations(lora) == SAVED_RECOMPUTED + WEIGHT_COPIES


def test_peft_014_reuses_the_base_output() -> None:
    old = plan_memory(request(V531 + " --lora-variant dora --peft-version 0.13.2"))
    new = plan_memory(request(V531 + " --lora-variant dora --peft-version 0.14.0"))
    assert activations(old) - activations(new) == SAVED_RECOMPUTED - SAVED + WEIGHT_COPIES


def test_weight_norm_transient_of_the_widest_linear() -> None:
    r = request(V531 + " --lora-variant dora")
    # q_proj: eye(3072) fp32, the B·A product, s·(B·A), W + s·(B·A) and W's fp32 copy
    assert weight_norm_peak(r, recipe(r)) == 5 * HIDDEN * HIDDEN * 4


def test_plain_lora_is_unchanged_by_the_knob() -> None:
    assert request(V531).lora_variant is LoraVariant.LORA
    assert plan_memory(request(V531)) == plan_memory(request(V531 + " --lora-variant lora"))


def _cli_plan(capsys: pytest.CaptureFixture[str], flags: str) -> dict[str, Any]:
    assert main(["plan", "Llama-3.2-3B", *shlex.split(flags), "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_cli_json_round_trip(capsys: pytest.CaptureFixture[str]) -> None:
    document = _cli_plan(capsys, V531 + " --lora-variant dora")
    assert document["request"]["lora_variant"] == "dora"
    assert "magnitude" in document["notes"]["dora"]
    plain = _cli_plan(capsys, V531)
    assert plain["request"]["lora_variant"] == "lora"
    assert "dora" not in plain["notes"]
    # a knob of LoRA jobs only: null for full training, with a no-op warning
    full = _cli_plan(capsys, "--mode train --lora-variant dora --gpu L40S")
    assert full["request"]["lora_variant"] is None
    assert any("--lora-variant" in w for w in full["warnings"])


def test_the_title_names_the_variant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "Llama-3.2-3B", *shlex.split(V531), "--lora-variant", "dora"]) == 0
    assert "DoRA r32 q_proj,v_proj" in capsys.readouterr().out


def test_fixes_offer_plain_lora_and_no_dropout(capsys: pytest.CaptureFixture[str]) -> None:
    flags = V531.replace("--gpu L40S", "--gpu rtx-4090").replace("--lora-dropout 0", "")
    document = _cli_plan(capsys, flags + " --lora-dropout 0.05 --lora-variant dora")
    changes = {f["key"]: f["changes"] for f in document["fixes"]}
    assert changes["plain-lora"] == {"lora_variant": "lora"}
    assert changes["dora-without-dropout"] == {"lora_dropout": "0.0"}


def test_stacks_without_peft_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InvalidConfigError) as err:
        plan_memory(request("--mode lora --framework torchtune --lora-variant dora"))
    assert err.value.reference == "dora-framework"
    assert main(["plan", "Llama-3.2-3B", "--mode", "lora", "--framework", "litgpt",
                 "--lora-variant", "dora"]) == 2  # fmt: skip
    assert "dora-framework" in capsys.readouterr().err


def test_gptq_and_awq_bases_are_refused() -> None:
    with pytest.raises(InvalidConfigError) as err:
        plan_memory(request("--mode qlora --precision int4 --lora-variant dora"))
    assert err.value.reference == "dora-int4"
    # bitsandbytes' NF4 Linears take DoRA (QDoRA): planned
    assert plan_memory(request("--mode qlora --precision nf4 --lora-variant dora")).peak_bytes


def test_dora_on_the_head_warns_what_is_not_counted() -> None:
    plan = plan_memory(request("--mode lora --lora-targets q_proj,lm_head --lora-variant dora"))
    assert any("lm_head" in w for w in plan.warnings)


def test_exact_mode_builds_dora_adapters() -> None:
    recipe_ = resolve(request(V531.replace("hf-legacy", "hf") + " --lora-variant dora"))
    assert recipe_.dora
    assert any(note.startswith("DoRA (PEFT)") for note in recipe_.notes)
    assert not resolve(request(V531.replace("hf-legacy", "hf"))).dora
