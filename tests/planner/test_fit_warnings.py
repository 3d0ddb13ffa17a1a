"""`plan --fit` warns as `plan` does: a knob that changes nothing, a checkpoint format the plan
does not model. Before, `--fit` validated the request and dropped its warnings — `--fit
--transformers-version 4.38.2 --mode lora` printed none, `plan` without `--fit` one.

A warning that holds for some of the configurations only (ZeRO over one data-parallel rank,
which `--fit` tries beside eight) is not the request's: the options shown must all give it.
"""

from __future__ import annotations

import json

import pytest

from gpuwarden.catalog import instance_catalog, resolve_gpu, resolve_model
from gpuwarden.cli.main import main
from gpuwarden.planner import fit
from gpuwarden.types.plan import Framework, Mode, PlanRequest

UNREAD_VERSION = (
    "--transformers-version is read by HF generate only (--mode infer --engine hf): with --mode "
    "lora it has no effect"
)
LORA_OLD_TRANSFORMERS = [
    "plan",
    "Llama-3.1-8B",
    "--mode",
    "lora",
    "--framework",
    "hf-legacy",
    "--transformers-version",
    "4.38.2",
    "--gpu",
    "a100-80gb",
]


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main([*argv, "--json"]) == 0
    document: dict[str, object] = json.loads(capsys.readouterr().out)
    return document


def test_fit_gives_the_warning_plan_gives(capsys: pytest.CaptureFixture[str]) -> None:
    planned = _json(LORA_OLD_TRANSFORMERS, capsys)
    fitted = _json([*LORA_OLD_TRANSFORMERS, "--fit"], capsys)
    assert UNREAD_VERSION in planned["warnings"]  # type: ignore[operator]
    assert fitted["options"]
    assert fitted["warnings"] == [UNREAD_VERSION]


def test_fit_prints_the_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*LORA_OLD_TRANSFORMERS, "--fit"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"warning: {UNREAD_VERSION}" in printed


def test_a_warning_of_some_layouts_only_is_not_the_request_s() -> None:
    # sequence parallelism is a no-op without tensor parallelism (a warning): --fit tries tp 2
    # beside layouts without it
    request = PlanRequest(
        model=resolve_model("Qwen2.5-0.5B"), mode=Mode.LORA, sequence_parallel=True
    )
    result = fit(request, [resolve_gpu("A100 80GB")], instance_catalog(), max_gpus=2, top=20)
    per_option = {o.plan.request.tp: set(o.plan.warnings) for o in result.options}
    assert per_option[1] == {"sequence parallelism needs tp > 1; it has no effect here"}
    assert per_option[2] == set()
    assert result.warnings == ()


def test_with_nothing_that_fits_the_request_s_own_warnings_are_given() -> None:
    request = PlanRequest(
        model=resolve_model("Llama-3.1-70B"),
        mode=Mode.LORA,
        framework=Framework.HF_LEGACY,
        transformers_version="4.38.2",
        seq_len=4096,
    )
    result = fit(request, [resolve_gpu("L4")], (), max_gpus=1, top=5)
    assert not result.options
    assert result.warnings == (UNREAD_VERSION,)
