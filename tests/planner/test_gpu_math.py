"""Which compute dtypes a GPU has the math for: a catalog row's published rates, and where NVIDIA
published no tensor figure for a card (the GeForce refreshes), its compute capability. A
missing figure is not a missing unit: Turing multiplies fp16 on tensor cores, Ada bf16 and fp8."""

from __future__ import annotations

import pytest

from gpuwarden.catalog import instance_catalog, resolve_gpu, resolve_model
from gpuwarden.catalog.gpus import computes, gpu_catalog
from gpuwarden.planner import compute_plan, fit
from gpuwarden.types.plan import Mode, PlanRequest, Precision
from tests.cli.test_main import run_cli


@pytest.mark.parametrize(
    ("gpu", "dtype", "answer"),
    [
        # published rates decide, including what a row leaves out beside rates it lists
        ("V100 32GB", "fp16", True),
        ("V100 32GB", "bf16", False),
        ("T4", "bf16", False),
        ("T4", "int8", True),
        ("A100 80GB", "fp8", False),
        ("H100 SXM", "fp8", True),
        # rows with an FP32 figure only: Turing has fp16 and int8 tensor cores, not bf16;
        # Ada has bf16, tf32 and fp8
        ("RTX 2080 SUPER", "fp16", True),
        ("RTX 2080 SUPER", "int8", True),
        ("RTX 2080 SUPER", "bf16", False),
        ("RTX 2080 SUPER", "fp8", False),
        ("RTX 4080 SUPER", "bf16", True),
        ("RTX 4080 SUPER", "fp8", True),
        ("RTX 4080 SUPER", "fp32", True),
        # rows with no figure at all: the capability (A10G 8.6: bf16 yes, fp8 no)
        ("A10G", "bf16", True),
        ("A10G", "fp8", False),
    ],
)
def test_what_a_gpu_computes(gpu: str, dtype: str, answer: bool) -> None:
    assert computes(resolve_gpu(gpu), dtype) is answer


def test_every_row_answers_fp32_and_fp16_from_ampere_on() -> None:
    for gpu in gpu_catalog():
        assert computes(gpu, "fp32") is True, gpu.key
        capability = tuple(int(x) for x in (gpu.compute_capability or "0.0").split("."))
        if capability >= (8, 0):
            assert computes(gpu, "bf16") is True and computes(gpu, "fp16") is True, gpu.key


def _lora(gpu: str, precision: Precision) -> PlanRequest:
    return PlanRequest(
        model=resolve_model("Llama-3.2-1B"),
        mode=Mode.LORA,
        gpu=resolve_gpu(gpu),
        precision=precision,
    )


def test_no_false_tensor_core_warning_on_a_card_without_published_rates() -> None:
    """fp16 on a Turing GeForce and bf16 on an Ada GeForce SUPER run on tensor cores; bf16 on
    Turing does not, and the warning says so (fp16 is the way out there)."""
    for gpu, precision in [
        ("RTX 2080 SUPER", Precision.FP16_MIXED),
        ("RTX 4080 SUPER", Precision.BF16_MIXED),
    ]:
        plan = compute_plan(_lora(gpu, precision))
        assert not [w for w in plan.warnings if "tensor-core" in w], (gpu, plan.warnings)
    turing_bf16 = compute_plan(_lora("RTX 2080 SUPER", Precision.BF16_MIXED))
    [warning] = [w for w in turing_bf16.warnings if "tensor-core" in w]
    assert "no bf16 tensor-core math (Turing)" in warning and "pick fp16" in warning


def test_fit_plans_a_card_without_published_tensor_rates() -> None:
    """`--fit --gpu "RTX 4080 SUPER"` skipped every variant (0 planned) before."""
    request = _lora("RTX 4080 SUPER", Precision.BF16_MIXED)
    result = fit(request, [resolve_gpu("RTX 4080 SUPER")], instance_catalog(), max_gpus=1)
    assert result.considered > 0 and result.options
    assert all(o.gpu.key == "rtx-4080-super-16gb" for o in result.options)


def test_a_fit_with_nothing_fitting_suggests_a_lighter_mode_than_the_one_asked() -> None:
    """`--mode lora` was given: the hint says qlora, not "lora/qlora" again; qlora has none."""
    tries = {}
    for mode in ("lora", "qlora"):
        out = run_cli(
            "plan", "Llama-3.1-70B", "--mode", mode, "--fit", "--gpu", "RTX 2080 SUPER",
            "--max-gpus", "1",
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        [line] = [x for x in out.stdout.splitlines() if "no configuration" in x]
        tries[mode] = line.split("try ", 1)[1]
    assert tries == {
        "lora": "--max-gpus, --mode qlora or another GPU",
        "qlora": "--max-gpus or another GPU",
    }
