"""Held-out batch 22 (benchmarks/data/validation.csv V460-V467): Unsloth notebooks' printed
figures read against the planner's parameter counts. Unsloth prints "Number of trainable
parameters = N" (and, since 2025, "Trainable parameters = N of TOTAL"); its memory cell prints
round(torch.cuda.max_memory_reserved() / 1024**3, 3) as "GB" and the share of the card's
round(total_memory / 1024**3, 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.planner import plan_memory
from tests.planner.test_unsloth_profile import qlora

CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "unsloth_configs"


def _qlora_r16_all_linear(model: str) -> tuple[int, int]:
    """(trainable, total) parameters of Unsloth's get_peft_model(r=16) on the seven projections."""
    plan = plan_memory(qlora(model, micro_batch=1, seq_len=16))
    return plan.trainable_parameters, plan.total_parameters


@pytest.mark.parametrize(
    ("model", "logged_trainable"),
    [
        ("gemma-7b", 50_003_968),  # V460: Unsloth 2024.3 Gemma-7b Alpaca notebook banner
        ("gemma-2b", 19_611_648),  # V463: Gemma-2B-Hinglish-LORA model card
        ("Meta-Llama-3-8B", 41_943_040),  # V464
        ("Llama-3.1-8B", 41_943_040),  # V465, V466 (same shapes)
        (str(CONFIGS / "phi-4.json"), 65_536_000),  # V461, V462: llamafied Phi-4
    ],
)
def test_adapter_count_is_the_banners(model: str, logged_trainable: int) -> None:
    trainable, _ = _qlora_r16_all_linear(model)
    assert trainable == logged_trainable


def test_qwen3_4b_config_gives_the_banners_total() -> None:
    # V467: "Trainable parameters = 33,030,144 of 4,055,498,240 (0.81% trained)"
    trainable, total = _qlora_r16_all_linear(str(CONFIGS / "Qwen3-4B.json"))
    assert trainable == 33_030_144
    assert trainable + total == 4_055_498_240


@pytest.mark.parametrize(
    ("peak", "start", "card", "logged_for_training", "logged_percent"),
    [
        (11.002, 5.938, 14.748, 5.064, 74.6),  # V460
        (12.361, 10.043, 14.748, 2.318, 83.815),  # V461
        (10.959, 10.0, 39.557, 0.959, 27.704),  # V462
        (9.066, 5.613, 14.748, 3.453, 61.473),  # V464 (start derived: not printed)
        (7.258, 5.984, 22.168, 1.274, 32.741),  # V465
    ],
)
def test_printed_lines_agree_with_each_other(
    peak: float, start: float, card: float, logged_for_training: float, logged_percent: float
) -> None:
    # the notebook cell: used_memory_for_lora = round(used_memory - start_gpu_memory, 3),
    # used_percentage = round(used_memory / max_memory * 100, 3)
    assert round(peak - start, 3) == pytest.approx(logged_for_training, abs=0.0015)
    assert round(peak / card * 100, 3) == pytest.approx(logged_percent, abs=0.0015)


def test_v467_cells_are_not_one_run() -> None:
    # V467 (SUSPECT): "3.826 GB of memory reserved." before train(), then "Peak reserved memory
    # = 6.438 GB." with "for training = 0.049 GB": the difference of the printed pair is not the
    # printed difference; nor is 6.438 GB 27.222 % of the printed 23.527 GB card (it is of a
    # 23.65 GB one): the cells' outputs come from more than one execution.
    assert round(6.438 - 3.826, 3) != pytest.approx(0.049, abs=0.0015)
    assert round(6.438 / 23.527 * 100, 3) != pytest.approx(27.222, abs=0.0015)
    assert pytest.approx(23.65, abs=0.005) == 6.438 / 0.27222
