"""--transformers-version: before 4.45 HF generate's prefill computes every prompt position's
logits, and Llama-style forwards copy them to fp32 (``logits = logits.float()``); from 4.45
generate passes ``num_logits_to_keep=1`` (planner/inference.py, planner/versions.py)."""

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
from gpuwarden.planner.exact._recipe import resolve
from gpuwarden.types.plan import MemoryPlan, PlanRequest

QWEN2_VOCAB = 151_936  # Qwen2 / Qwen2.5 config.json vocab_size
GPT2_VOCAB = 50_257
BATCH, PROMPT = 2, 4096
# the Qwen speed benchmark's settings (V546-V557), at a smaller batch × prompt
GENERATE = (
    f"--mode infer --framework hf-legacy --attention flash --precision bf16 --load-dtype bf16 "
    f"--batch {BATCH} --prompt-tokens {PROMPT} --new-tokens 256 --gpu a100-sxm4-80gb"
)
BF16, FP32 = 2, 4
# the last position of each sequence: bf16 logits, fp32 upcast and sampling's probabilities
LAST_POSITION = BATCH * QWEN2_VOCAB * (BF16 + 8)


def request(flags: str, model: str = "Qwen2.5-0.5B") -> PlanRequest:
    parser = argparse.ArgumentParser(prog="gpuwarden plan")
    plan_command.register(parser)
    return plan_command.build_request(parser.parse_args([model, *shlex.split(flags)]))


def prefill_logits(plan: MemoryPlan) -> int:
    return next(p.bytes_by_component["logits"] for p in plan.phases if p.name == "prefill")


def test_release_before_4_45_keeps_every_prompt_position_and_its_fp32_copy() -> None:
    plan = plan_memory(request(GENERATE + " --transformers-version 4.38.2"))
    # the head's bf16 output and its .float() copy, for every prompt position
    assert prefill_logits(plan) == BATCH * PROMPT * QWEN2_VOCAB * (BF16 + FP32)
    decode = next(p.bytes_by_component["logits"] for p in plan.phases if p.name == "decode")
    assert decode == LAST_POSITION


@pytest.mark.parametrize(
    "flag", ["", "--transformers-version 4.45.0", "--transformers-version 4.51.3"]
)
def test_from_4_45_the_prefill_keeps_the_last_position(flag: str) -> None:
    assert prefill_logits(plan_memory(request(GENERATE + " " + flag))) == LAST_POSITION


def test_framework_hf_is_unchanged() -> None:
    flags = GENERATE.replace("hf-legacy", "hf")
    named = plan_memory(request(flags + " --transformers-version 5.0.0"))
    assert prefill_logits(named) == LAST_POSITION
    assert named.peak_bytes == plan_memory(request(flags)).peak_bytes


def test_a_forward_without_upcast_keeps_the_compute_dtype_and_says_so() -> None:
    plan = plan_memory(request(GENERATE + " --transformers-version 4.38.2", model="gpt2-medium"))
    # GPT-2's head output stays bf16; sampling adds the last position's copies beside it
    assert prefill_logits(plan) == BATCH * PROMPT * GPT2_VOCAB * BF16 + BATCH * GPT2_VOCAB * 8
    assert "gpt2" in plan.notes["prompt_logits"]


@pytest.mark.parametrize("value", ["latest", "main", "x4.38"])
def test_unreadable_release_is_refused(value: str) -> None:
    with pytest.raises(InvalidConfigError) as err:
        plan_memory(request(GENERATE + f" --transformers-version {value}"))
    assert err.value.reference == "transformers-version-unreadable"


@pytest.mark.parametrize(
    ("framework", "version", "reference"),
    [
        ("hf", "4.38.2", "transformers-version-framework"),
        ("hf-legacy", "5.0.0", "transformers-version-framework"),
        ("torchtune", "4.38.2", "transformers-version-without-transformers"),
    ],
)
def test_release_of_another_stack_is_refused(framework: str, version: str, reference: str) -> None:
    flags = GENERATE.replace("hf-legacy", framework) + f" --transformers-version {version}"
    with pytest.raises(InvalidConfigError) as err:
        plan_memory(request(flags))
    assert err.value.reference == reference


def _cli_json(capsys: pytest.CaptureFixture[str], flags: str) -> dict[str, Any]:
    assert main(["plan", "Qwen2.5-0.5B", *shlex.split(flags), "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_echo_shows_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    named = _cli_json(capsys, GENERATE + " --transformers-version 4.38.2")
    assert named["request"]["transformers_version"] == "4.38.2"
    assert _cli_json(capsys, GENERATE)["request"]["transformers_version"] is None


def test_cli_refuses_a_malformed_release_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", "Qwen2.5-0.5B", *shlex.split(GENERATE), "--transformers-version", "latest"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--transformers-version 'latest' is not a version number" in err
    assert "Traceback" not in err


def test_exact_mode_says_it_traces_the_last_position_only() -> None:
    old = resolve(request(GENERATE + " --transformers-version 4.38.2"))
    assert any("every prompt position's logits" in note for note in old.notes)
    assert not any("every prompt position" in note for note in resolve(request(GENERATE)).notes)
