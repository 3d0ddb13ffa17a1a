"""Review r25b: --transformers-version is read by HF generate's prefill only; where the plan
does not read it (training, another serving engine) it says so, as for every other no-op knob."""

from __future__ import annotations

import argparse
import shlex

import pytest

from gpuwarden.cli.commands import plan as plan_command
from gpuwarden.planner.validate import validate
from gpuwarden.types.plan import PlanRequest


def request(flags: str) -> PlanRequest:
    parser = argparse.ArgumentParser(prog="gpuwarden plan")
    plan_command.register(parser)
    return plan_command.build_request(parser.parse_args(["Qwen2.5-0.5B", *shlex.split(flags)]))


def version_warnings(flags: str) -> list[str]:
    return [w for w in validate(request(flags)) if "--transformers-version" in w]


@pytest.mark.parametrize(
    "flags",
    [
        "--mode lora --framework hf-legacy",
        "--mode train --framework hf-legacy",
        "--mode infer --engine vllm --framework hf-legacy",
        "--mode infer --engine sglang --framework hf-legacy",
    ],
)
def test_a_version_the_plan_does_not_read_is_said_to_have_no_effect(flags: str) -> None:
    (warning,) = version_warnings(flags + " --transformers-version 4.38.2")
    assert "no effect" in warning


@pytest.mark.parametrize(
    "flags",
    [
        "--mode infer --framework hf-legacy --transformers-version 4.38.2",
        "--mode infer --framework hf-legacy --transformers-version 4.46.0",
        "--mode lora --framework hf-legacy",
    ],
)
def test_generate_reads_it_and_no_version_warns_nothing(flags: str) -> None:
    assert version_warnings(flags) == []
