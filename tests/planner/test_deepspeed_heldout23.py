"""Held-out batch 23 (benchmarks/data/validation.csv V470-V477): DeepSpeed's own printed memory
read against the planner's model states.

DeepSpeed's ``see_memory_usage`` prints ``MA`` as round(torch.cuda.memory_allocated() / 2**30, 2)
"GB" (deepspeed/runtime/utils.py). During ``deepspeed.initialize`` it prints one line per stage of
building the ZeRO optimizer; those lines hold the model states only (no batch has run), so they
check the planner's per-rank partition sizes directly: the 16-bit parameters (the ``parameters``
component at the step), the fp32 master copy (a third of ``optimizer_states`` for Adam under
mixed precision: 4 of its 12 bytes per parameter), ZeRO-3's 16-bit gradient partition and its
reduce bucket of ``reduce_bucket_size`` elements. The Adam moments are in those lines only before
DeepSpeed PR #5104 ("Remove optimizer step on initialization", 2024-02-08: ZeRO 1/2/3 stop calling
``step()`` at init, so the first real step creates the states): the 2021 0.5.4 log shows both
moments appear at "After initializing optimizer states", the 0.15.1 and 0.16.9 logs show none."""

from __future__ import annotations

import pytest
from benchmarks.measured_rows import MappedRow, map_validation

from gpuwarden.catalog import resolve_model
from gpuwarden.planner import plan_memory
from gpuwarden.types.plan import Framework, MemoryPlan, Mode, PlanRequest, Precision

GIB = 2**30
# master weights are 4 of the 12 bytes per parameter Adam keeps under DeepSpeed mixed precision
MASTER_SHARE_OF_ADAM_STATES = 4 / 12
# GPT-2's registered causal-mask buffer: one 1024 x 1024 one-byte tensor per layer
GPT2_MASK_BUFFERS = 12 * 1024 * 1024


def _printed(nbytes: float) -> float:
    """What see_memory_usage prints for ``nbytes`` allocated."""
    return round(nbytes / GIB, 2)


def _matches_line(nbytes: float, printed_gib: float) -> bool:
    """``nbytes`` is the printed figure to its precision: within one printed unit (0.01 GiB),
    which leaves room for what the sums leave out (ZeRO-3's whole copies of the "persistent"
    parameters under stage3_param_persistence_threshold, partition padding)."""
    return abs(nbytes / GIB - printed_gib) <= 0.01


def _request(model: str, precision: Precision, stage: int, gpus: int) -> PlanRequest:
    return PlanRequest(
        model=resolve_model(model),
        mode=Mode.TRAIN,
        precision=precision,
        zero_stage=stage,
        num_gpus=gpus,
        micro_batch=1,
        seq_len=128,
        framework=Framework.HF_LEGACY,
    )


def _step_states(request: PlanRequest) -> tuple[int, int]:
    """(16-bit parameters on this rank at the step, fp32 master partition) of ``request``."""
    plan = plan_memory(request)
    step = next(p for p in plan.phases if p.name == "optimizer-step")
    master = plan.component("optimizer_states") * MASTER_SHARE_OF_ADAM_STATES
    return step.bytes_by_component["parameters"], round(master)


def test_gpt2_zero1_init_lines() -> None:
    # large-scale-lm-tutorials, GPT-2 ZeRO-1 fp16 on 4 GPUs: "Before initializing optimizer
    # states MA 0.36 GB" under DeepSpeed 0.5.4 (2021, find_string id 25171618104) and 0.15.1
    # (2024, id 25285156411); "After initializing optimizer states MA 0.59 GB" under 0.5.4 and
    # "MA 0.36 GB" under 0.15.1
    params, master = _step_states(_request("gpt2", Precision.FP16_MIXED, 1, 4))
    before_states = params + master + GPT2_MASK_BUFFERS
    assert _matches_line(before_states, 0.36)
    adam_moments = 2 * master
    after_states_054 = before_states + adam_moments  # made at init, by a step on zero grads
    after_states_0151 = before_states  # made by the first real step (PR #5104)
    assert _matches_line(after_states_054, 0.59)
    assert _matches_line(after_states_0151, 0.36)


def test_gpt2_zero3_init_lines() -> None:
    # the same tutorial, ZeRO-3 fp16 on 4 GPUs, DeepSpeed 0.15.1 (id 25232498682): "After
    # creating fp16 partitions: 1 MA 0.07 GB", "After creating fp32 partitions MA 0.19 GB",
    # "After initializing ZeRO optimizer MA 1.18 GB" with "Reduce bucket size 500000000"
    params, master = _step_states(_request("gpt2", Precision.FP16_MIXED, 3, 4))
    fp16_partitions = params + GPT2_MASK_BUFFERS
    assert _matches_line(fp16_partitions, 0.07)
    assert _matches_line(fp16_partitions + master, 0.19)
    grad_partition = params  # 16-bit, the size of the parameter partition
    reduce_bucket = 500_000_000 * 2
    assert _matches_line(fp16_partitions + master + grad_partition + reduce_bucket, 1.18)


def test_qwen25_zero3_init_lines() -> None:
    # LlamaFactory full SFT of Qwen2.5-1.5B, ZeRO-3 bf16 on 4 GPUs, DeepSpeed 0.16.9 (id
    # 56025705611): "After creating fp16 partitions: 2 MA 0.72 GB", "After creating fp32
    # partitions MA 2.16 GB", "After initializing optimizer states MA 2.16 GB", "After
    # initializing ZeRO optimizer MA 2.88 GB" with "Reduce bucket size 2359296"
    params, master = _step_states(_request("Qwen2.5-1.5B", Precision.BF16_MIXED, 3, 4))
    assert _matches_line(params, 0.72)
    assert _matches_line(params + master, 2.16)
    assert _matches_line(params + master + params + 2_359_296 * 2, 2.88)


def _rows() -> dict[str, MappedRow]:
    return {m.row.id: m for m in map_validation() if m.row.id.startswith("V47")}


def _planned(row_id: str) -> MemoryPlan:
    request = _rows()[row_id].request
    assert request is not None
    return plan_memory(request)


def test_batch_rows_parse_and_plan() -> None:
    rows = _rows()
    assert sorted(rows) == [f"V47{i}" for i in range(8)]
    for mapped in rows.values():
        assert mapped.request is not None, mapped.error


def test_deepseek_math_config_gives_the_logged_allocations() -> None:
    # V471: "OOM, short by 12.87G" is one 16-bit copy of every parameter; V475: "short by
    # 1.56G" is one fp32 copy of the 102,400 x 4,096 embedding (or untied LM head)
    plan = _planned("V471")
    spec = plan.request.model
    assert plan.total_parameters == 6_910_365_696
    assert _printed(plan.total_parameters * 2) == 12.87
    assert _printed(spec.vocab_size * spec.hidden_size * 4) == 1.56


def test_bloomz_config_gives_the_printed_counts() -> None:
    # V476: "trainable params: 786,432 || all params: 560,001,024"
    plan = _planned("V476")
    assert plan.trainable_parameters == 786_432
    assert plan.total_parameters + plan.trainable_parameters == 560_001_024


@pytest.mark.parametrize(
    ("begin_mib", "peaked_mib", "total_mib"),
    [(5038, 2917, 7955)],  # V476, every printed epoch
)
def test_peft_tracemalloc_lines_agree(begin_mib: int, peaked_mib: int, total_mib: int) -> None:
    # the example prints b2mb(begin), b2mb(peak - begin) and their sum as the total peak
    assert begin_mib + peaked_mib == total_mib
    # "After initializing ZeRO optimizer MA 4.92 GB" is the memory the epoch starts from
    assert _printed(begin_mib * 2**20) == 4.92
