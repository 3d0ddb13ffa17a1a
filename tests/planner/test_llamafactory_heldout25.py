"""Held-out batch 25 (benchmarks/data/validation.csv V490-V495): LLaMA-Factory runs as their
issues state them.

Every kept source is an OOM, scored by `benchmarks/planner_accuracy.py` as a classification. The
one printed number that checks the planner directly is the HF Trainer's "Number of trainable
parameters" line of hiyouga/LlamaFactory issue #4026 (V494): LLaMA-Factory's `lora_target: all`
is `find_all_linear_modules` (every Linear but the LM head; model/adapter.py @895ea4f5), at its
default `lora_rank` 8 (hparams/finetuning_args.py @105d781f)."""

from __future__ import annotations

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import Framework, Mode, PlanRequest, Precision

ISSUE4026_TRAINABLE = 20_971_520  # "Number of trainable parameters = 20,971,520"
LLAMAFACTORY_DEFAULT_LORA_RANK = 8


def test_issue4026_trainable_count_is_llamafactory_all_linear_at_rank_8() -> None:
    plan = plan_memory(
        PlanRequest(
            model=resolve_model("Meta-Llama-3-8B"),
            mode=Mode.LORA,
            precision=Precision.FP16,
            load_dtype="fp16",
            micro_batch=2,
            seq_len=8192,
            framework=Framework.HF_LEGACY,
            lora_rank=LLAMAFACTORY_DEFAULT_LORA_RANK,
            lora_targets=("all-linear",),
        )
    )
    assert plan.trainable_parameters == ISSUE4026_TRAINABLE
