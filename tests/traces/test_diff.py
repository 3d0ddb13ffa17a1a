"""Trace diff: trace_diff/control (A100) → trace_diff/test (V100), checked per kernel name
against per-step sums from the raw events."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.traces.diff import TOP_KERNELS, diff_traces, kernel_identity
from gpuwarden.types.trace_insights import KernelKind
from tests.traces.insights import raw
from tests.traces.insights.cache import loaded


def _per_step_by_name(rel: str) -> dict[str, float]:
    n_steps = len(raw.steps(rel))
    out: dict[str, float] = {}
    for e in raw.gpu_events(rel):
        out[e["name"]] = out.get(e["name"], 0.0) + e["dur"] / n_steps
    return out


def test_control_vs_test_per_kernel() -> None:
    before = _per_step_by_name(raw.CONTROL)
    after = _per_step_by_name(raw.TEST)
    d = diff_traces(loaded(raw.CONTROL), loaded(raw.TEST))
    assert d.per_step and d.before_steps == 6 and d.after_steps == 6
    assert len(d.top_kernels) == TOP_KERNELS
    for k in d.top_kernels:
        assert k.before_us == pytest.approx(before.get(k.name, 0.0))
        assert k.after_us == pytest.approx(after.get(k.name, 0.0))
    deltas = sorted(
        (abs(after.get(n, 0.0) - before.get(n, 0.0)) for n in before | after), reverse=True
    )
    assert [abs(k.delta_us) for k in d.top_kernels] == pytest.approx(deltas[:TOP_KERNELS])
    assert d.new_kernels == len(set(after) - set(before))
    assert d.gone_kernels == len(set(before) - set(after))
    total_before = sum(before.values())
    assert sum(k.before_us for k in d.kinds) == pytest.approx(total_before)
    assert sum(k.after_us for k in d.kinds) == pytest.approx(sum(after.values()))
    # The copy kernel that grew most: DtoD copies (3 per step on A100 vs ~774 on V100)
    memcpy = next(k for k in d.top_kernels if k.name == "Memcpy DtoD (Device -> Device)")
    assert memcpy.kind is KernelKind.MEMCPY_D2D
    assert "MEMCPY_D2D" in d.slower
    assert d.before_step_us == pytest.approx(
        sorted(e["dur"] for e in raw.steps(raw.CONTROL))[2:4][0] / 2
        + sorted(e["dur"] for e in raw.steps(raw.CONTROL))[2:4][1] / 2
    )


def test_same_trace_has_no_change() -> None:
    d = diff_traces(loaded(raw.NCCL), loaded(raw.NCCL))
    assert all(k.delta_us == 0 for k in d.kinds)
    assert d.faster == () and d.slower == ()
    assert d.new_kernels == 0 and d.gone_kernels == 0


def test_gpu_less_side() -> None:
    d = diff_traces(loaded(raw.CPU_ONLY), loaded(raw.NCCL))
    assert all(k.before_us == 0 for k in d.kinds)
    assert d.gone_kernels == 0 and d.new_kernels > 0
    assert not d.per_step or d.before_steps > 0


SET_11 = Path(__file__).resolve().parents[1] / "data" / "traces_public11"


def test_one_kernel_spelled_by_two_pytorch_builds_is_one_kernel() -> None:
    """The same pow kernel: a GTX 1050 Ti build prints ``at::detail::Array<char*, 2>``, an L4
    build ``std::array<char*, 2ul>`` (set 11): matched, with the after side's spelling."""
    old = str(SET_11 / "gpumode_gtx1050tiq_square" / "test_trace_4.json")
    new = str(SET_11 / "gpumode_l4_square" / "test_trace_4.json")
    d = diff_traces(loaded(old), loaded(new))
    assert (d.new_kernels, d.gone_kernels) == (0, 0)
    (pow_kernel,) = [k for k in d.top_kernels if "pow_tensor_scalar" in k.name]
    assert "std::array<char*, 2ul>" in pow_kernel.name
    assert (pow_kernel.before_count, pow_kernel.after_count) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("k<4, at::detail::Array<char*, 2> >(int)", "k<4, std::array<char*, 2ul> >(int)"),
        ("reduce_kernel<512, 1>", "reduce_kernel<512u, 1l>"),
    ],
)
def test_kernel_identity_makes_the_build_spellings_one(a: str, b: str) -> None:
    assert kernel_identity(a) == kernel_identity(b)


def test_kernel_identity_keeps_other_kernels_apart() -> None:
    assert kernel_identity("gemm_128x64") != kernel_identity("gemm_128x128")
    assert kernel_identity("sm90_xmma_gemm_f16f16_f32") == "sm90_xmma_gemm_f16f16_f32"
