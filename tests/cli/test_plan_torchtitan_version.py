"""`gpuwarden plan --framework torchtitan --torchtitan-version`: the checkout's commit date."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main

BASE = [
    "plan",
    "Meta-Llama-3-8B",
    "--framework",
    "torchtitan",
    "--gpus",
    "8",
    "--fsdp",
    "full",
    "--seq-len",
    "8192",
    "--gpu",
    "H100",
    "--json",
]


def _plan(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    assert main([*BASE, *extra]) == 0
    doc: dict[str, object] = json.loads(capsys.readouterr().out)
    return doc


def test_the_version_picks_the_loss_the_checkout_compiled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # torchtitan 0.0.2 (2025-02) compiled the blocks only: its loss keeps the fp32 log-softmax
    eager = _plan(capsys, "--compile", "--torchtitan-version", "2025-02")
    compiled = _plan(capsys, "--compile", "--torchtitan-version", "2025-04-02")
    default = _plan(capsys, "--compile")
    assert eager["request"]["torchtitan_version"] == "2025-02"  # type: ignore[index]
    assert "(--torchtitan-version)" in eager["notes"]["framework"]  # type: ignore[index]
    vocab_tokens = 128_256 * 8192
    saved = {d["per_gpu_bytes"]["activations"] for d in (eager, compiled)}  # type: ignore[index]
    assert max(saved) - min(saved) == 2 * vocab_tokens  # fp32 vs bf16 kept per logit
    assert compiled["per_gpu_bytes"] == default["per_gpu_bytes"]
    # a month holding no change needs no day; one holding PR #1073 asks for it
    assert "torchtitan_release" not in eager["notes"]  # type: ignore[operator]
    april = _plan(capsys, "--torchtitan-version", "2025-04")
    assert "2025-04-08" in april["notes"]["torchtitan_release"]  # type: ignore[index]


def test_the_root_unit_is_held_until_the_summer_of_2025(capsys: pytest.CaptureFixture[str]) -> None:
    held = _plan(capsys, "--torchtitan-version", "2025-05")
    own = _plan(capsys, "--torchtitan-version", "2025-08")
    comm = [d["at_peak_bytes"]["communication"] for d in (held, own)]  # type: ignore[index]
    assert comm[0] - comm[1] == 2 * (128_256 * 4096 + 218_112_000)  # embedding + a block, bf16
    assert "2 blocks + root unsharded" in held["sources"]["communication"]["detail"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("extra", "reference"),
    [
        (["--torchtitan-version", "main"], "torchtitan-version-unreadable"),
        (["--torchtitan-version", "2025-13"], "torchtitan-version-unreadable"),
        (["--framework", "hf", "--torchtitan-version", "2025-06"], "torchtitan-version-without"),
    ],
)
def test_bad_versions_exit_2_with_a_hint(
    extra: list[str], reference: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*BASE, *extra]) == 2  # --json: the error as JSON on stderr
    err = json.loads(capsys.readouterr().err)
    assert err["reference"].startswith(reference) and err["hint"]


DATES = st.tuples(st.integers(0, 10_000), st.integers(-1, 14), st.integers(-1, 33)).map(
    lambda d: "{}-{:02d}-{:02d}".format(*d)
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    version=st.one_of(DATES, DATES.map(lambda d: d[: d.rindex("-")]), st.text(max_size=16)),
    framework=st.sampled_from(["torchtitan", "torchtitan-2024", "hf"]),
)
@example(version="2025-02", framework="hf")
@example(version="-1", framework="torchtitan")
def test_any_version_text_is_planned_or_refused_with_a_hint(
    version: str, framework: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*BASE, "--framework", framework, f"--torchtitan-version={version}"]
    code = main(args)
    captured = capsys.readouterr()
    assert code in {0, 2}, captured.err
    if code == 2:
        err = json.loads(captured.err)
        assert err["reference"] and err["hint"] and "Traceback" not in captured.err
