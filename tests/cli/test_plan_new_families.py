"""`gpuwarden plan` on the new families as a user types it: the hybrid engines' six knobs and
--lora-targets, any text in them — a plan (exit 0) or a named refusal with a hint (exit 2),
never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main

HELDOUT = Path(__file__).resolve().parents[1] / "data" / "model_configs_heldout"
# a gated-DeltaNet hybrid and a Mamba-2 hybrid, both small enough to plan in milliseconds
HYBRIDS = [str(HELDOUT / "Qwen3.5-0.8B-Base.json"), str(HELDOUT / "Nemotron-H-8B-Base-8K.json")]

WORDS = st.sampled_from(
    ["auto", "float32", "float16", "bfloat16", "fp8", "bf16", "none", "align", "all", "0", "1",
     "-1", "3", "0.9", "1e9", "nan", "inf", "-inf", "1e-300", "", " ", "2**63", "ß", "\x00"]
)  # fmt: skip
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_infinity=False).map(repr),
)
VALUES = st.one_of(WORDS, NUMBERS, st.text(max_size=12))
KNOBS = {
    "--mamba-cache-dtype": VALUES,
    "--mamba-ssm-cache-dtype": VALUES,
    "--mamba-cache-mode": VALUES,
    "--max-mamba-cache-size": VALUES,
    "--mamba-full-memory-ratio": VALUES,
}
SWITCHES = st.sampled_from([[], ["--mixer-kernels"], ["--no-mixer-kernels"]])
LINEARS = ["q_proj", "k_proj", "v_proj", "o_proj", "in_proj", "out_proj", "in_proj_qkvz",
           "in_proj_ba", "up_proj", "gate_proj", "down_proj", "lm_head", "all-linear"]  # fmt: skip


def _plan(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    code = main(["plan", *args, "--json"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _plan_or_refusal(code: int, out: str, err: str) -> None:
    """Exit 0 with a plan document, or exit 2 with an error document naming a reference and
    a hint; nothing on stderr but that document."""
    assert code in {0, 2}, err
    if code == 0:
        assert json.loads(out)["schema"] == "gpuwarden.plan/1"
        return
    error: dict[str, Any] = json.loads(err)
    assert error["reference"] and error["hint"] and "Traceback" not in err


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    model=st.sampled_from(HYBRIDS),
    engine=st.sampled_from(["hf", "vllm", "sglang"]),
    mode=st.sampled_from(["infer", "train", "lora"]),
    knobs=st.dictionaries(st.sampled_from(sorted(KNOBS)), VALUES, max_size=3),
    switch=SWITCHES,
)
def test_hybrid_knobs_plan_or_refuse(
    capsys: pytest.CaptureFixture[str],
    model: str,
    engine: str,
    mode: str,
    knobs: dict[str, str],
    switch: list[str],
) -> None:
    args = [model, "--mode", mode, "--gpu", "L4", *switch]
    if mode == "infer":
        args += ["--engine", engine]
    for option, value in knobs.items():
        args.append(f"{option}={value}")  # "=": a value may start with "-"
    _plan_or_refusal(*_plan(capsys, args))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    model=st.sampled_from(HYBRIDS),
    targets=st.lists(st.one_of(st.sampled_from(LINEARS), st.text(max_size=8)), max_size=4),
    mode=st.sampled_from(["lora", "qlora"]),
)
def test_lora_targets_plan_or_refuse(
    capsys: pytest.CaptureFixture[str], model: str, targets: list[str], mode: str
) -> None:
    args = [model, "--mode", mode, f"--lora-targets={','.join(targets)}"]
    _plan_or_refusal(*_plan(capsys, args))


def test_a_huge_state_memory_ratio_is_planned_or_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [HYBRIDS[0], "--mode", "infer", "--engine", "sglang", "--gpu", "H100-80GB"]
    _plan_or_refusal(*_plan(capsys, [*args, "--mamba-full-memory-ratio", "1e300"]))


@pytest.mark.parametrize("model", HYBRIDS)
def test_lora_on_a_hybrid_without_targets_plans_peft_defaults(
    capsys: pytest.CaptureFixture[str], model: str
) -> None:
    code, out, err = _plan(capsys, [model, "--mode", "lora", "--gpu", "L4"])
    assert code == 0, err
    assert "lora_targets" in json.loads(out)["notes"]
