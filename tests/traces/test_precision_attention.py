"""GEMM precision from kernel names and the attention backend from SDPA's ops, on real traces,
and the compute/memory verdicts' advice following them (no autocast advice for GEMMs already in
bf16/fp16, the SDPA math fallback named when it ran).

The precision read from a kernel's name is checked against the ``Input type`` PyTorch recorded
for the matmul op that launched it (record_shapes=True), linked independently of gpuwarden: the
kernel's correlation → its launch call → the innermost matmul op around that call."""

from __future__ import annotations

import dataclasses
import gzip
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from gpuwarden.traces.analyze import analyze
from gpuwarden.traces.classify import attention_backend, classify_name, gemm_dtype
from gpuwarden.traces.insights.attention import MATH_FIX
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.model import Category, LoadedTrace
from gpuwarden.traces.verdict import diagnose
from gpuwarden.types.trace import TraceReport, VerdictKind
from gpuwarden.types.trace_insights import GemmDtype, KernelKind, SdpaBackend

DATA = Path(__file__).resolve().parents[1] / "data"
SDPA_CPU = DATA / "traces_sdpa" / "cpu_sdpa_default_and_math.json"
GEMM_BF16_ROCM = DATA / "traces_public" / "tracelens_rocm_eval" / "gemm_01_compute_few_tiles.json"
GEMM_MISALIGNED = (
    DATA / "traces_public2" / "tracelens_rocm_eval" / "gemm_03_compute_misaligned.json"
)
SDPA_ROCM = DATA / "traces_public3" / "tracelens_rocm_eval" / "sdpa_01_long_seq_low_eff.json"
HF = "tracelens_h100_hf_inference"
QWEN = f"{HF}/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
NS_V100_FP32 = "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
CONTROL = "trace_diff/control/control.json.gz"

MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul"}
MATMUL_OPS |= {"aten::linear", "aten::_scaled_mm", "aten::addmv"}
# PyTorch's "Input type" text → the precisions a kernel of that input may name (FP32 data runs
# as FP32 or, allowed, TF32)
RECORDED: dict[str, set[GemmDtype]] = {
    "c10::BFloat16": {GemmDtype.BF16},
    "c10::Half": {GemmDtype.FP16},
    "float": {GemmDtype.FP32, GemmDtype.TF32},
    "double": {GemmDtype.FP64},
}
# every shared trace whose matmul ops recorded their input types, and the kernels they launched
TYPED = (
    "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # MI250, fp32 (Tensile SB)
    "astra_megatron_tp8_a100/megatron_kineto_0.json.gz",  # A100, fp16 (cuBLAS, CUTLASS)
    "call_stack/backward_thread.json",  # fp32 on CUTLASS tensorop (TF32)
    CONTROL,  # A100, fp32: TF32 CUTLASS + SIMT sgemm
    "trace_diff/test/test.json.gz",  # V100, fp32 SIMT
    "tracelens_b200_eager/eager_trace.json.gz",  # B200, bf16 (nvjet)
    f"{HF}/Falconsai_nsfw_image_detection__1016002.json.gz",  # H100, bf16 (CUTLASS, xmma)
    QWEN,
    f"{HF}/gaunernst_bert-small-uncased__1016001.json.gz",
)


def _events(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = orjson.loads(data)
    return [e for e in doc.get("traceEvents", []) if isinstance(e, dict)]


def _launching_op_types(events: list[dict[str, Any]]) -> dict[Any, str]:
    """correlation → the first matrix operand's recorded type of the innermost matmul op around
    the launch call with that correlation."""
    ops: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
    for e in events:
        args = e.get("args") or {}
        if (
            e.get("cat") != "cpu_op"
            or e.get("name") not in MATMUL_OPS
            or not args.get("Input type")
        ):
            continue
        types = args["Input type"]
        first = types[1] if e["name"] in ("aten::addmm", "aten::baddbmm") else types[0]
        ops.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], first))
    out = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") not in ("cuda_runtime", "cuda_driver", "Runtime") or corr is None:
            continue
        around = [o for o in ops.get((e["pid"], e["tid"]), ()) if o[0] <= e["ts"] <= o[1]]
        if around:
            out[corr] = min(around, key=lambda o: o[1] - o[0])[2]
    return out


@pytest.mark.parametrize("rel", TYPED)
def test_kernel_name_precision_agrees_with_recorded_input_type(fixtures: Path, rel: str) -> None:
    events = _events(fixtures / "traces" / rel)
    op_type = _launching_op_types(events)
    seen: Counter[str] = Counter()
    for e in events:
        if e.get("cat") not in ("kernel", "Kernel"):
            continue
        recorded = op_type.get((e.get("args") or {}).get("correlation"))
        if recorded not in RECORDED:
            continue
        dtype = gemm_dtype(e["name"])
        assert dtype is not None, e["name"]
        assert dtype in RECORDED[recorded], (recorded, e["name"])
        seen[recorded] += 1
    assert seen, f"{rel}: no GEMM kernel linked to a typed matmul op"


def _report(path: Path) -> TraceReport:
    return analyze(load_traces([path]))


def test_bf16_compute_bound_gemms_get_no_autocast_advice() -> None:
    """ROCm MI300 bf16 GEMM benchmark (Tensile ``Cijk_..._BBS_BH``; its aten::mm recorded
    c10::BFloat16): compute-bound, and the advice says the GEMMs already run in bf16."""
    report = _report(GEMM_BF16_ROCM)
    verdict = report.verdict
    assert verdict.kind is VerdictKind.COMPUTE_BOUND
    tc = report.ranks[0].tensor_cores
    assert tc is not None and tc.dtypes[0].dtype is GemmDtype.BF16
    assert tc.dtypes[0].time_us / tc.gemm_time_us > 0.99
    assert "autocast or TF32" not in verdict.fix
    assert verdict.fix.startswith("the GEMMs already run in bf16 (99.")
    assert any(
        e.startswith("GEMM input precision (kernel names): bf16 99.") for e in verdict.evidence
    )


def test_misaligned_bf16_gemms_get_the_padding_advice_alone() -> None:
    report = _report(GEMM_MISALIGNED)
    assert report.verdict.kind is VerdictKind.COMPUTE_BOUND
    assert (
        report.verdict.fix
        == "pad matmul dimensions (hidden size, vocab, batch×seq) to multiples of 8"
    )


def test_fp32_simt_compute_bound_keeps_the_autocast_advice(fixtures: Path) -> None:
    """V100 FP32 training (volta_sgemm_*): FP32 on CUDA cores, so autocast/TF32 is the advice."""
    report = _report(fixtures / "traces" / NS_V100_FP32)
    verdict = report.verdict
    assert verdict.kind is VerdictKind.COMPUTE_BOUND
    tc = report.ranks[0].tensor_cores
    assert tc is not None and tc.dtypes[0].dtype is GemmDtype.FP32
    assert "torch.autocast" in verdict.fix and "CUDA cores" in verdict.fix


@pytest.mark.parametrize(
    ("rel", "bf16_advice"),
    [(QWEN, False), (CONTROL, True)],
    ids=["h100-bf16-flash", "a100-fp32-tf32"],
)
def test_memory_bound_advice_follows_precision_and_attention(
    fixtures: Path, rel: str, bf16_advice: bool
) -> None:
    """Qwen on H100 runs bf16 GEMMs and SDPA flash: no 'bf16 activations', no 'attention
    kernels' to fuse; the A100 FP32 recommender (TF32 + sgemm) keeps both."""
    verdict = _report(fixtures / "traces" / rel).verdict
    assert verdict.kind is VerdictKind.MEMORY_BOUND_KERNELS
    assert ("bf16 activations" in verdict.fix) is bf16_advice
    assert ("attention kernels" in verdict.fix) is bf16_advice


def _raw_count(path: Path, name: str) -> int:
    return sum(1 for e in _events(path) if e.get("cat") == "cpu_op" and e.get("name") == name)


@pytest.mark.parametrize(
    "rel",
    [
        f"{HF}/Falconsai_nsfw_image_detection__1016002.json.gz",
        QWEN,
        f"{HF}/gaunernst_bert-small-uncased__1016001.json.gz",
    ],
)
def test_sdpa_flash_backend_on_h100(fixtures: Path, rel: str) -> None:
    path = fixtures / "traces" / rel
    att = _report(path).ranks[0].attention
    assert att is not None
    flash = _raw_count(path, "aten::_scaled_dot_product_flash_attention")
    kernels = sum(
        e["dur"] for e in _events(path) if e.get("cat") == "kernel" and "flash_fwd" in e["name"]
    )
    assert att.sdpa_calls == _raw_count(path, "aten::scaled_dot_product_attention") == flash > 0
    assert att.backends[0].backend is SdpaBackend.FLASH
    assert att.backends[0].calls == flash
    assert att.backends[0].kernel_time_us == pytest.approx(kernels)
    assert att.math_calls == 0 and att.fix is None


def test_rocm_aotriton_attn_fwd_is_the_flash_backend() -> None:
    report = _report(SDPA_ROCM)
    att = report.ranks[0].attention
    assert att is not None
    assert [b.backend for b in att.backends] == [SdpaBackend.FLASH]
    assert att.backends[0].calls == _raw_count(
        SDPA_ROCM, "aten::_scaled_dot_product_flash_attention"
    )
    assert any("attention backends" in e and "flash (10 SDPA" in e for e in report.verdict.evidence)


def test_cpu_capture_counts_math_fallback_calls() -> None:
    """A real PyTorch 2.13 capture: one SDPA call on the CPU flash kernel, two forced to math."""
    report = _report(SDPA_CPU)
    att = report.ranks[0].attention
    assert att is not None
    assert att.sdpa_calls == _raw_count(SDPA_CPU, "aten::scaled_dot_product_attention") == 3
    calls = {b.backend: b.calls for b in att.backends}
    assert calls == {
        SdpaBackend.MATH: _raw_count(SDPA_CPU, "aten::_scaled_dot_product_attention_math"),
        SdpaBackend.FLASH: _raw_count(
            SDPA_CPU, "aten::_scaled_dot_product_flash_attention_for_cpu"
        ),
    }
    assert att.math_calls == 2 and att.fix == MATH_FIX
    assert report.verdict.kind is VerdictKind.NO_GPU_ACTIVITY


def test_math_fallback_leads_the_compute_bound_advice() -> None:
    """The verdict is a pure function of the insights: the bf16 GEMM benchmark's own numbers,
    with the attention facts of a capture where SDPA took the math path."""
    gemm = _report(GEMM_BF16_ROCM)
    math = _report(SDPA_CPU).ranks[0].attention
    ranks = {0: dataclasses.replace(gemm.ranks[0], attention=math)}
    verdict = diagnose(gemm.hta, ranks, None)
    assert verdict.kind is VerdictKind.COMPUTE_BOUND
    assert verdict.fix.startswith(MATH_FIX + "; the GEMMs already run in bf16")
    assert "FlashAttention)" not in verdict.fix
    assert any("math (2 SDPA call(s))" in e for e in verdict.evidence)


def _all_traces(fixtures: Path) -> list[Path]:
    shared = [
        p
        for p in sorted((fixtures / "traces").rglob("*.json*"))
        if "hta_expected" not in str(p)
        and not p.name.endswith("_et.json.gz")
        and "astra_megatron" not in str(p)
    ]
    public = [p for d in sorted(DATA.glob("traces_public*")) for p in sorted(d.rglob("*.json"))]
    return shared + [p for p in public if p.name != "expected.json"]


# Every compute-bound single-file real trace and the advice its kernels call for, read from the
# kernel names (what each trace's GEMMs/attention are is in the comment):
COMPUTE_BOUND_ADVICE = {
    # MTIA inference: no kernel name says GEMM, attention or a precision → the generic advice
    "mtia_inference_trace/mtia_inference_rank_0.json.gz": "the GPU is doing math: make it cheaper",
    # V100, every GEMM a volta_sgemm_* (FP32 on CUDA cores)
    NS_V100_FP32: "FP32 GEMMs run on CUDA cores, not tensor cores: train in fp16",
    # MI300 Tensile Cijk_..._BBS_BH (bf16): 10,843 of 10,890 µs of GEMM time; the rest is the
    # Cijk_B_PostGSU2 post-processing kernel, whose name says no precision
    "tracelens_rocm_eval/gemm_01_compute_few_tiles.json": (
        "the GEMMs already run in bf16 (99.6 % of GEMM time), so autocast has nothing left"
    ),
    # bf16 Tensile GEMMs whose shapes are not multiples of 8 (the benchmark's own name)
    "tracelens_rocm_eval/gemm_02_compute_non_pow2.json": "pad matmul dimensions",
    "tracelens_rocm_eval/gemm_03_compute_misaligned.json": "pad matmul dimensions",
    # all of the math is AOTriton's flash kernel attn_fwd.kd
    "tracelens_rocm_eval/sdpa_01_long_seq_low_eff.json": "the math is mostly fused attention",
    "tracelens_rocm_eval/sdpa_02_very_long_seq_head_waste.json": (
        "the math is mostly fused attention"
    ),
    # MI300X replay of an fp16 convolution_backward: 29 MIOpen Winograd kernels *_fp16_dot2_edc
    "hpctraining_mi300x_conv_replay/replay_trace.json": (
        "the GEMMs already run in fp16 (100.0 % of GEMM time), so autocast has nothing left"
    ),
}


def test_compute_bound_advice_per_trace(fixtures: Path) -> None:
    """Over every single-file real trace: exactly the traces above are compute-bound, each with
    the advice its kernel names call for (autocast only for the FP32 one)."""
    shared = fixtures / "traces"
    advice = {}
    for path in _all_traces(fixtures):
        verdict = _report(path).verdict
        if verdict.kind is VerdictKind.COMPUTE_BOUND:
            name = (
                path.relative_to(shared)
                if shared in path.parents
                else path.relative_to(path.parents[1])
            )
            advice[name.as_posix()] = verdict
    assert set(advice) == set(COMPUTE_BOUND_ADVICE)
    for name, verdict in advice.items():
        assert verdict.fix.startswith(COMPUTE_BOUND_ADVICE[name]), (name, verdict.fix)
        assert ("torch.autocast" in verdict.fix) is (name == NS_V100_FP32), name


INDUCTOR_SDPA_INPUT_KERNEL = "triton_poi_fused__scaled_dot_product_efficient_attention_17"


# Real kernel names → (the input precision the name says, the fused attention family). Sources: the
# traces named; the Inductor kernels from TorchInductor output code on GitHub
# (Stonepia/Tools kernel_extraction/ipex2.1/kernels/34260.py: a pointwise copy of q/k/v;
# iammuhammadamir/CapRemover .torch_compile_cache/4e/c4e6637….py: a pointwise scale-and-add).
REAL_KERNEL_NAMES: list[tuple[str, GemmDtype | None, SdpaBackend | None]] = [
    (  # Qwen H100, SDPA flash
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, "
        "128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, "
        "128, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false>"
        "(pytorch_flash::Flash_fwd_params)",
        GemmDtype.BF16,
        SdpaBackend.FLASH,
    ),
    ("attn_fwd.kd", None, SdpaBackend.FLASH),  # ROCm sdpa_01, AOTriton
    (  # B200 eager, TensorRT-LLM-style paged fp8 FMHA
        "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
        GemmDtype.FP8,  # QkvE4m3: fp8 e4m3 inputs
        SdpaBackend.OTHER_FUSED,
    ),
    (INDUCTOR_SDPA_INPUT_KERNEL, None, None),
    ("triton_poi_fused__scaled_dot_product_flash_attention_5", None, None),
    ("nvjet_tst_192x8_64x8_4x1_v_bz_TNT", GemmDtype.BF16, None),  # B200 eager
    ("volta_sgemm_128x32_nt", GemmDtype.FP32, None),  # V100 ns_resolution_trace
    (  # MI300 gemm_01
        "Cijk_Ailk_Bljk_BBS_BH_MT256x128x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0",
        GemmDtype.BF16,
        None,
    ),
    ("Cijk_B_PostGSU2", None, None),  # MI300 gemm_01: Tensile post-processing, no precision
]


@pytest.mark.parametrize(("name", "dtype", "backend"), REAL_KERNEL_NAMES)
def test_real_kernel_names(name: str, dtype: GemmDtype | None, backend: SdpaBackend | None) -> None:
    assert gemm_dtype(name) is dtype
    kind = classify_name(name, int(Category.KERNEL))
    fused = attention_backend(name) if kind is KernelKind.ATTENTION else None
    assert fused is backend


def test_inductor_kernel_named_after_sdpa_is_no_fused_attention() -> None:
    """The AOTriton flash trace with its attention kernel's name replaced by an Inductor pointwise
    kernel's that only prepares SDPA inputs: the SDPA flash calls stay, but no fused attention
    kernel time remains, so the advice is no longer "the math is mostly fused attention"."""
    loaded = load_traces([SDPA_ROCM])
    rank = loaded.ranks[0]
    names = tuple(INDUCTOR_SDPA_INPUT_KERNEL if n == "attn_fwd.kd" else n for n in rank.names)
    assert names != rank.names
    renamed = LoadedTrace(ranks={0: dataclasses.replace(rank, names=names)}, skipped=())
    original, report = analyze(loaded), analyze(renamed)
    assert original.verdict.fix.startswith("the math is mostly fused attention")
    att = report.ranks[0].attention
    assert att is not None
    calls = _raw_count(SDPA_ROCM, "aten::_scaled_dot_product_flash_attention")
    assert [(b.backend, b.calls, b.kernel_time_us) for b in att.backends] == [
        (SdpaBackend.FLASH, calls, 0.0)
    ]
    # the renamed kernel is a pointwise kernel now (traces.classify reads Inductor's prefix
    # before the op name): its time is elementwise, so the trace reads memory-bound
    assert report.verdict.kind is VerdictKind.MEMORY_BOUND_KERNELS
    assert "fused attention" not in report.verdict.fix
