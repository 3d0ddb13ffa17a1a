"""vLLM's CUDA graphs (planner/vllm_graphs.py): the sizes each release captures, where their
memory sits against gpu_memory_utilization, and the graphs' bytes against public logs.

Calibration (the constants are fitted on these): vllm PR #11349 (Llama-3.2-1B-Instruct, V0, TP 1,
"Graph capturing finished in 14 secs, took 0.21 GiB"), vllm#34005 (Qwen3-1.7B, V1, TP 2, "took 0.63
GiB"), LMCache#3430 (Qwen3-8B, 0.21.0, "Estimated CUDA graph memory: 0.52 GiB total"; h288), vllm PR
#2192's Llama 33B and 7B NCCL-minus-custom all-reduce memory (998 and 494 MB). Validation (never
fitted on): vllm#7553 (Yi-1.5-34B, 0.5.4, TP 4 on RTX 4090: 23859 − 21395 = 2464 MiB), PR #2192's
Llama 70B and 13B rows (1006 and 608 MB).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.cli.commands.plan import build_request, register
from gpuwarden.planner import plan_memory
from gpuwarden.planner.fixes import fixes_for
from gpuwarden.planner.layout import layout
from gpuwarden.planner.precision import recipe
from gpuwarden.planner.vllm_graphs import (
    PER_NCCL_CALL_BYTES,
    capture_sizes,
    custom_all_reduce,
    graph_memory,
)
from gpuwarden.types.plan import Engine, MemoryPlan, Mode, PlanRequest
from gpuwarden.units import GIB, MIB

ROOT = Path(__file__).resolve().parents[2]
YI = ROOT / "benchmarks" / "data" / "vllm_configs" / "Yi-1.5-34B.json"
QWEN3_4B = ROOT / "tests" / "data" / "model_configs_heldout" / "Qwen3-4B.json"


def _request(*args: str) -> PlanRequest:
    parser = argparse.ArgumentParser()
    register(parser)
    return build_request(parser.parse_args(list(args)))


def _graph_bytes(request: PlanRequest) -> int:
    memory = graph_memory(request, recipe(request), layout(request))
    assert memory is not None
    return memory.bytes


def _no_graphs(plan: MemoryPlan) -> bool:
    return all(c.key != "cuda_graphs" for c in plan.components)


def _v0_sizes(largest: int) -> tuple[int, ...]:
    return (1, 2, 4, *range(8, largest + 1, 8))


def test_v0_captures_the_sizes_up_to_the_first_one_at_or_above_max_num_seqs() -> None:
    full = capture_sizes("0.5.4", 256, 4096)
    assert full.full == _v0_sizes(256) and len(full.full) == 35  # "35/35" in PR #11349's log
    assert full.piecewise == () and not full.in_budget and full.holds_outputs
    assert capture_sizes("0.6.5", 100, 4096).full == _v0_sizes(104)
    assert capture_sizes("0.6.5", 3, 4096).full == (1, 2, 4)
    # 0.5.4's list stops at 256; 0.7's runs to 8 × 1024
    assert capture_sizes("0.5.4", 1024, 4096).full[-1] == 256
    assert capture_sizes("0.7.3", 1024, 4096).full[-1] == 1024


def test_v1_piecewise_before_0_11_and_full_and_piecewise_after() -> None:
    before = capture_sizes("0.10.1", 256, 8192)
    assert before.full == () and before.piecewise == _v0_sizes(512)  # 67 sizes
    assert capture_sizes("0.10.1", 256, 2048).piecewise[-1] == 512
    assert capture_sizes("0.10.1", 256, 200).piecewise[-1] == 200
    # 0.11.0 (a log of it: 67 piecewise, 35 full at 256 sequences)
    eleven = capture_sizes("0.11.0", 256, 8192)
    assert (len(eleven.piecewise), len(eleven.full)) == (67, 35)
    # later: "PIECEWISE=51, FULL=35" at 256 sequences; vllm#34005's 51 + 51 at 512 or more
    later = capture_sizes("0.19.0", 256, 8192)
    assert (len(later.piecewise), len(later.full)) == (51, 35)
    assert later.piecewise[-3:] == (480, 496, 512)
    assert capture_sizes("0.15.0", 1024, 8192).count == 102
    assert not later.in_budget and capture_sizes("0.21.0", 256, 8192).in_budget


@settings(max_examples=200, deadline=None)
@given(
    st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(0, 9)),
    st.integers(1, 10**6),
    st.integers(1, 10**6),
)
def test_capture_sizes_are_bounded_and_ordered(
    version: tuple[int, int, int], seqs: int, tokens: int
) -> None:
    captures = capture_sizes(".".join(map(str, version)), seqs, tokens)
    for sizes in (captures.piecewise, captures.full):
        assert list(sizes) == sorted(set(sizes))
        assert len(sizes) <= 1 + 3 + 1024  # the longest V0 list, 8 × 1024
    assert captures.count >= 1


def test_custom_all_reduce_needs_p2p_and_nvlink_above_two_gpus() -> None:
    rtx4090, rtx3090 = resolve_gpu("rtx-4090"), resolve_gpu("rtx-3090")
    a100_sxm, a100_pcie, l40s = (
        resolve_gpu("a100-sxm4-80gb"),
        resolve_gpu("a100-pcie-80gb"),
        resolve_gpu("l40s"),
    )
    assert not custom_all_reduce(rtx4090, 2) and not custom_all_reduce(rtx4090, 4)
    assert custom_all_reduce(rtx3090, 2) and not custom_all_reduce(rtx3090, 4)  # one bridge
    assert custom_all_reduce(a100_sxm, 8) and custom_all_reduce(a100_pcie, 2)
    assert not custom_all_reduce(a100_pcie, 4) and not custom_all_reduce(l40s, 4)
    assert custom_all_reduce(l40s, 2) and not custom_all_reduce(a100_sxm, 3)
    assert custom_all_reduce(None, 4)


def test_calibration_logs_within_a_fifth() -> None:
    llama = _request(
        "Llama-3.2-1B", "--mode", "infer", "--engine", "vllm", "--vllm-version", "0.6.5",
        "--max-model-len", "8192", "--max-num-batched-tokens", "8192",
    )  # fmt: skip
    assert abs(_graph_bytes(llama) / (0.21 * GIB) - 1) < 0.21
    # Qwen3-1.7B: Qwen3's shapes with 28 blocks (the log's 57 all-reduces = 2 × 28 + 1), hidden
    # 2048, intermediate 6144; TP 2 with the custom all-reduce ("Registering ... addresses")
    qwen = _request(
        str(QWEN3_4B), "--mode", "infer", "--engine", "vllm", "--vllm-version", "0.15.0",
        "--max-num-seqs", "1024", "--tp", "2", "--max-model-len", "8192",
    )  # fmt: skip
    small = dataclasses.replace(qwen.model, hidden_size=2048, num_layers=28, intermediate_size=6144)
    qwen = dataclasses.replace(qwen, model=small)
    assert abs(_graph_bytes(qwen) / (0.63 * GIB) - 1) < 0.21


def test_v1_estimate_of_lmcache_3430() -> None:
    """V1 calibration (h288): LMCache#3430, Qwen3-8B on vLLM 0.21.0 (offline LLM, 256 sequences,
    16,384-token requests): "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35
    (largest=256)", "Estimated CUDA graph memory: 0.52 GiB total" — the bytes its budget holds."""
    request = _request(
        "Qwen3-8B", "--mode", "infer", "--engine", "vllm", "--vllm-version", "0.21.0",
        "--max-model-len", "16384", "--gpu-memory-utilization", "0.9764",
    )  # fmt: skip
    memory = graph_memory(request, recipe(request), layout(request))
    assert memory is not None and memory.captures.in_budget
    assert (len(memory.captures.piecewise), len(memory.captures.full)) == (51, 35)
    assert abs(memory.bytes / (0.52 * GIB) - 1) < 0.17
    # V1's graphs hold fewer nodes per layer than V0's whole-decode graphs
    v0 = capture_sizes("0.6.5", 256, 8192)
    assert memory.captures.per_capture_layer_bytes < v0.per_capture_layer_bytes


def test_nccl_captured_calls_against_pr_2192_validation_rows() -> None:
    """PR #2192's NCCL-minus-custom memory of the rows not fitted: Llama 70B TP 4 (1006 MB, 80
    blocks) and Llama 13B TP 2 (608 MB, 40 blocks), 35 captured sizes."""
    for measured_mib, blocks in ((1006, 80), (608, 40)):
        predicted = 35 * (2 * blocks + 1) * PER_NCCL_CALL_BYTES
        assert abs(predicted / (measured_mib * MIB) - 1) < 0.30


def _yi(*extra: str) -> PlanRequest:
    return _request(
        str(YI), "--mode", "infer", "--engine", "vllm", "--vllm-version", "0.5.4",
        "--precision", "bf16", "--tp", "4", "--gpus", "4", "--gpu", "rtx-4090",
        "--gpu-memory-utilization", "0.9", "--max-model-len", "4096",
        "--max-num-batched-tokens", "4096", "--max-num-seqs", "256", *extra,
    )  # fmt: skip


def test_v0_graphs_sit_on_top_of_the_budget_and_eager_removes_them() -> None:
    graphs, eager = plan_memory(_yi()), plan_memory(_yi("--enforce-eager"))
    graph_bytes = graphs.component("cuda_graphs")
    assert graph_bytes > 0 and _no_graphs(eager)
    # NCCL is captured on RTX 4090s (no P2P): its per-call state is in the figure
    memory = graph_memory(_yi(), recipe(_yi()), layout(_yi()))
    assert memory is not None and memory.custom_all_reduce is False and memory.collectives > 0
    # captured after the pool: the pool and the budget do not move, nvidia-smi grows by them
    assert graphs.inference is not None and eager.inference is not None
    assert graphs.inference.kv_tokens == eager.inference.kv_tokens
    assert graphs.inference.non_kv_bytes == eager.inference.non_kv_bytes
    smi = graphs.predicted.nvidia_smi_used_bytes - eager.predicted.nvidia_smi_used_bytes
    assert smi == graph_bytes
    # vllm#7553 (validation): 23859 − 21395 = 2464 MiB per card with the graphs
    assert abs(graph_bytes / (2464 * MIB) - 1) < 0.40
    assert "on top of" in graphs.notes["cuda_graphs"]


def test_from_0_21_the_budget_leaves_room_for_the_graphs() -> None:
    def qwen(version: str, *extra: str) -> PlanRequest:
        return _request(
            str(QWEN3_4B), "--mode", "infer", "--engine", "vllm", "--vllm-version", version,
            "--gpu", "l40s", "--gpu-memory-utilization", "0.9", "--max-model-len", "8192",
            *extra,
        )  # fmt: skip

    profiled, eager = plan_memory(qwen("0.21.0")), plan_memory(qwen("0.21.0", "--enforce-eager"))
    graph_bytes = profiled.component("cuda_graphs")
    assert profiled.inference is not None and eager.inference is not None
    assert profiled.inference.non_kv_bytes - eager.inference.non_kv_bytes == graph_bytes
    # the pool gives the bytes up (whole blocks: within one block of every layer)
    kv_drop = eager.component("kv_cache") - profiled.component("kv_cache")
    block = eager.inference.kv_bytes_per_token * eager.inference.block_size
    assert abs(kv_drop - graph_bytes) < block
    # 0.20 captured on top: same pool as eager
    on_top, on_top_eager = (
        plan_memory(qwen("0.20.0")),
        plan_memory(qwen("0.20.0", "--enforce-eager")),
    )
    assert on_top.inference is not None and on_top_eager.inference is not None
    assert on_top.inference.kv_tokens == on_top_eager.inference.kv_tokens


def test_enforce_eager_is_offered_where_the_budget_holds_the_graphs() -> None:
    def qwen(version: str) -> PlanRequest:
        return _request(
            str(QWEN3_4B), "--mode", "infer", "--engine", "vllm", "--vllm-version", version,
            "--gpu", "l40s", "--gpu-memory-utilization", "0.9", "--max-model-len", "8192",
        )  # fmt: skip

    profiled = fixes_for(plan_memory(qwen("0.21.0")))
    eager = next(f for f in profiled if f.key == "enforce-eager")
    assert eager.changes == {"enforce_eager": "true"} and eager.saved_bytes > 0
    # before 0.21 the verdict's budget does not hold the graphs: eager saves it nothing
    assert all(f.key != "enforce-eager" for f in fixes_for(plan_memory(qwen("0.20.0"))))


def test_other_engines_and_the_flag_left_off() -> None:
    """Look-alikes: HF generate and SGLang never get vLLM's graphs, flag or not; the CLI's flag
    sets the knob and its absence leaves it off."""
    model = resolve_model("Llama-3.2-1B")
    for engine in (Engine.HF, Engine.SGLANG):
        for eager in (False, True):
            request = PlanRequest(model=model, mode=Mode.INFER, engine=engine, enforce_eager=eager)
            plan = plan_memory(request)
            assert _no_graphs(plan)
            said = [w for w in plan.warnings if "--enforce-eager" in w]
            assert said == ([f"--enforce-eager turns off vLLM's CUDA graphs: with --engine "
                             f"{engine.value} it has no effect"] if eager else [])  # fmt: skip
    assert not any("--enforce-eager" in w for w in plan_memory(_yi("--enforce-eager")).warnings)
    assert not _yi().enforce_eager and _yi("--enforce-eager").enforce_eager
