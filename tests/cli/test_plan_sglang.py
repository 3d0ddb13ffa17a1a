"""`gpuwarden plan --mode infer` for SGLang: --mem-fraction-static, --engine, bad values."""

from __future__ import annotations

import json

import pytest

from gpuwarden.cli.main import main


def test_plan_with_mem_fraction_static(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "Qwen3-8B", "--mode", "infer", "--gpu", "H100", "--mem-fraction-static", "0.85"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "SGLang static share" in out and "mem_fraction_static 0.85 as passed" in out
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "fits"
    inference = doc["inference"]
    assert inference["kv_bytes_per_token"] == 147_456
    assert inference["kv_tokens"] > 300_000 and inference["remainder_bytes"] > 0
    assert doc["notes"]["engine"].startswith("SGLang")


def test_engine_sglang_uses_the_release_default(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "Qwen3-8B", "--mode", "infer", "--gpu", "H100", "--engine", "sglang", "--json"]
    assert main(base) == 0
    assert "0.835" in json.loads(capsys.readouterr().out)["notes"]["sglang"]
    assert main([*base, "--sglang-version", "0.4.6"]) == 0
    assert "0.88" in json.loads(capsys.readouterr().out)["notes"]["sglang"]


@pytest.mark.parametrize(
    ("extra", "reference"),
    [
        (["--mem-fraction-static", "1.5"], "value-out-of-range"),
        (["--mem-fraction-static", "-0.2"], "value-out-of-range"),
        (["--mem-fraction-static", "nan"], "value-out-of-range"),
        (["--engine", "vllm", "--mem-fraction-static", "0.8"], "engine-budget-conflict"),
        (["--engine", "sglang", "--sglang-version", "main"], "sglang-version-unreadable"),
    ],
)
def test_bad_values_exit_2_with_a_hint(
    extra: list[str], reference: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "Qwen3-8B", "--mode", "infer", "--gpu", "H100", *extra]) == 2
    err = capsys.readouterr().err
    assert f"error: {reference}" in err and "hint:" in err and "Traceback" not in err


def test_two_budgets_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--gpu-memory-utilization", "0.9", "--mem-fraction-static", "0.8"]
    assert main(["plan", "Qwen3-8B", "--mode", "infer", *args]) == 2
    assert "not allowed with" in capsys.readouterr().err


def test_training_with_a_fraction_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "Qwen3-8B", "--mem-fraction-static", "0.8"]) == 2
    assert "engine-needs-infer" in capsys.readouterr().err
