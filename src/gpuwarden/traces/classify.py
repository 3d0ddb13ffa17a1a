"""Classify every trace row into a KernelKind: compute (GEMM, attention, elementwise, reduction),
communication by collective, memcpy by direction, memset, sync, or not a GPU event.

Unlike HTA (name regex ``^nccl`` only, reference/traces.md §1.2 and §4 #3) the rules use the
category, broad name patterns (NCCL ``ncclKernel*``/``ncclDevKernel*``, RCCL, HCCL, symmetric-
memory all-reduce, cuBLAS/CUTLASS/Tensile/Triton names) and the kernel's ``Collective name`` arg.
Each distinct (name, category) is classified once; rows get their kind by array indexing.
The names also tell a GEMM kernel's input precision (``gemm_dtype``) and a fused attention
kernel's family (``attention_backend``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from gpuwarden.errors import MissingExtraError
from gpuwarden.traces.model import Category
from gpuwarden.types.trace_insights import GemmDtype, KernelKind, SdpaBackend

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from gpuwarden.traces.model import RankTrace

K = KernelKind

# The patterns are lower-case and matched against the lower-cased name: several times faster
# than re.IGNORECASE on the 1-2 kB template names of CUTLASS/cuDNN kernels.
_COMM_NAME = re.compile(
    r"nccl|rccl|hccl|msccl|multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce"
    r"|cross_device_reduce|allreduce_kernel|all_reduce_kernel",
)
# Collective from a kernel name or a `Collective name` arg (lower-cased, separators removed).
_COLLECTIVES: tuple[tuple[str, KernelKind], ...] = (
    ("reducescatter", K.COMM_REDUCESCATTER),
    ("allreduce", K.COMM_ALLREDUCE),
    ("allgather", K.COMM_ALLGATHER),
    ("alltoall", K.COMM_ALLTOALL),
    ("broadcast", K.COMM_BROADCAST),
    ("sendrecv", K.COMM_SENDRECV),
    ("send", K.COMM_SENDRECV),
    ("recv", K.COMM_SENDRECV),
)
# vLLM's KV-cache writes (csrc/cache_kernels.cu: reshape_and_cache[_flash], concat_and_cache_mla,
# copy_blocks): a copy, with a cast where the cache is fp8, whose names also match _ATTENTION
_KV_CACHE_WRITE = re.compile(r"reshape_and_cache|concat_and_cache|copy_blocks|swap_blocks")
# TorchInductor names a generated kernel ``triton_<kind>_fused_<the aten ops it fused>_<n>``, the
# kind from its heuristics: poi(ntwise), for(each), red(uction), per(sistent reduction); tem(plate)
# kernels (FlexAttention, GEMM templates) compute what the template does. A pointwise kernel fused
# from an SDPA op's inputs (``triton_poi_fused__scaled_dot_product_efficient_attention_1``: the
# mask fill, the q/k/v transposes) carries the op's name but is no attention kernel.
_INDUCTOR = re.compile(r"triton_(poi|for|red|per)_")
_INDUCTOR_KINDS = {
    "poi": K.ELEMENTWISE,
    "for": K.ELEMENTWISE,
    "red": K.REDUCTION,
    "per": K.REDUCTION,
}
_ATTENTION = re.compile(
    r"flash_|flash::|flashattn|fmha|attention|_attn|attn_|mha_|sdpa|paged_?kv|memory_efficient"
    r"|xformers",
)
# MIOpen's own convolution kernels (ROCm): ``miopenSp3AsmConv*`` from its assembly Winograd
# solvers (kernel files Conv_Winograd_*), ``miopenGcnAsmConv*``, ``MIOpenConv*``. MIOpen appends
# the problem's data type to the name (``_fp32``, ``_fp16_dot2[_edc]``): unlike NVIDIA's names,
# that token says nothing of the matrix cores, so the name does not tell tensor-core or not.
_MIOPEN_CONV = re.compile(r"^miopen\w*conv")
# GEMM and implicit-GEMM convolution kernels: cuBLAS/cuBLASLt (sm80_xmma_gemm, ampere_*gemm,
# volta_sgemm, nvjet), CUTLASS, rocBLAS/Tensile (Cijk_), hipBLASLt, gemv, cuDNN convolutions,
# and the Triton grouped GEMMs of mixture-of-experts layers, named for the expert routing they
# fuse rather than for the matmul: ScatterMoE's ``_scatter2scatter`` (forward/input grad) and
# ``_groupXtY`` (weight grad), vLLM/SGLang's ``fused_moe_kernel``; each is a tl.dot loop over
# one expert's rows, not a scatter copy.
_GEMM = re.compile(
    r"(?<!fb)gemm|gemv|^cijk_|nvjet|wgmma|xmma|cutlass_\w*(tensorop|simt|wmma)|cublas|hipblaslt"
    r"|matmul|_mm_|^triton_tem_|fft|scatter2scatter|_groupxty|fused_moe_kernel"
    r"|bmm_|s884|s1688|s16816|h884|h1688|h16816|i8816|scudnn|fprop|dgrad|wgrad|winograd"
    r"|conv2d|convolve|implicit_convolve|" + _MIOPEN_CONV.pattern,
)
# C++ scope qualifiers (``deep_gemm::``, ``cutlass::gemm::kernel::``, ``at::native::``) name
# the library or the namespace a kernel lives in, not what it does: DeepGEMM's
# ``deep_gemm::transpose_fp32`` lays out the scaling factors, a memory-bound copy, not a matmul.
# A GEMM is named by its own function/class name or its template arguments (``GemmUniversal``,
# ``sm90_fp8_gemm_1d2d_impl``, ``Kernel2<cutlass_80_tensorop_...gemm>``), so the GEMM test reads
# the name with the qualifiers removed. A qualifier starts at its first letter or "_": the digits
# before it in the same word are kept (``_QUALIFIER.sub(_KEEP_DIGITS, ...)``) and a word is tried
# once from its start, not from each of its characters (quadratic on a long word no "::" ends).
_QUALIFIER = re.compile(r"(?<![a-z0-9_])(?P<digits>[0-9]*)[a-z_][a-z0-9_]*::")
_KEEP_DIGITS = r"\g<digits>"
_REDUCTION = re.compile(
    r"reduce|norm|softmax|cub::|scan|sort|argmax|argmin|topk|histogram"
    r"|cumsum|sum_kernel|mean|welford|bn_(fw|bw)|gammabeta|pool",
)
_ELEMENTWISE = re.compile(
    r"elementwise|functor|fill|copy|cat_?array|index|gather|scatter|dropout"
    r"|activation|gelu|silu|relu|sigmoid|tanh|cast|convert|transpose|permute|rotary|quant"
    r"|embedding|clamp|where|masked|arange|tril|triu|nchwto|nhwcto",
)
_POINTWISE = re.compile(r"elementwise")
# Tensor-core GEMM markers: HMMA/IMMA tile shapes (s1688, s16816, h884...), CUTLASS tensorop/
# wmma, cuBLAS xmma/nvjet (Hopper+ cuBLASLt), wgmma, Tensile MFMA "_MI16x16x..".
_TENSOR_CORE = re.compile(
    r"tensorop|wmma|xmma|wgmma|nvjet|hmma|imma|[shi]\d{3,5}gemm|s\d{3,5}(fprop|dgrad|wgrad)"
    r"|_mi\d+x\d+|tensor\d+x\d+|sm(90|100|120)_|bf16|fp16|f16|e4m3|e5m2|fp8|int8",
)
# FP32 CUDA-core (SIMT) GEMMs: sgemm (volta_sgemm, ampere_sgemm, magma_sgemm), simt CUTLASS,
# gemv, scudnn/winograd/engine convolutions, complex gcgemm.
_SIMT = re.compile(
    r"simt|sgemm|dgemm|gemv|gemmk1|gcgemm|scudnn|winograd|_engine<|implicit_convolve",
)


def collective_kind(text: str) -> KernelKind:
    """The collective named by a kernel name or a ``Collective name`` arg."""
    flat = re.sub(r"[^a-z]", "", text.lower())
    for token, kind in _COLLECTIVES:
        if token in flat:
            return kind
    return K.COMM_OTHER


def _memcpy_kind(name: str) -> KernelKind:
    if "HtoD" in name or "Host -> Device" in name or "H2D" in name:
        return K.MEMCPY_H2D
    if "DtoH" in name or "Device -> Host" in name or "D2H" in name:
        return K.MEMCPY_D2H
    if "DtoD" in name or "PtoP" in name or "D2D" in name:
        return K.MEMCPY_D2D
    return K.MEMCPY_OTHER


def _compute_kind(name: str) -> KernelKind:
    """``name`` lower-cased."""
    if _KV_CACHE_WRITE.search(name):
        return K.ELEMENTWISE
    # by Inductor's kind, not by the ops the name lists
    inductor = _INDUCTOR.match(name)
    if inductor is not None:
        return _INDUCTOR_KINDS[inductor.group(1)]
    if _ATTENTION.search(name):
        return K.ATTENTION
    if _GEMM.search(_QUALIFIER.sub(_KEEP_DIGITS, name)):
        return K.GEMM
    if _POINTWISE.search(name):
        return K.ELEMENTWISE
    if _REDUCTION.search(name):
        return K.REDUCTION
    if _ELEMENTWISE.search(name):
        return K.ELEMENTWISE
    return K.COMPUTE_OTHER


_PAIR = max(Category) + 1  # category values per name in the (name, category) key


@lru_cache(maxsize=65536)
def classify_name(name: str, category: int) -> KernelKind:
    """Kind of an event from its name and Category (an int, for the cache)."""
    if category == Category.GPU_MEMCPY:
        return _memcpy_kind(name)
    if category == Category.GPU_MEMSET:
        return K.MEMSET
    if category == Category.CUDA_SYNC:
        return K.SYNC
    if category not in (Category.KERNEL, Category.MTIA_CCP_EVENTS):
        return K.NOT_GPU
    # Kernel rows: copies and sets that some runtimes report as kernels first.
    if name.startswith(("Memcpy", "hipMemcpy", "memcpy")):
        return _memcpy_kind(name)
    if name.startswith(("Memset", "hipMemset", "memset")):
        return K.MEMSET
    lower = name.lower()
    if _COMM_NAME.search(lower):
        return collective_kind(name)
    return _compute_kind(lower)


def is_tensor_core_gemm(name: str) -> bool | None:
    """True for a GEMM/conv kernel that runs on tensor cores, False for an FP32 SIMT one, None
    when the name does not say (e.g. old Triton names, MIOpen's convolutions)."""
    lower = name.lower()
    if _SIMT.search(lower):
        return False
    if _MIOPEN_CONV.search(lower):
        return None
    if _TENSOR_CORE.search(lower):
        return True
    return None


# Input precision of a GEMM/convolution kernel from its name, first match wins: the vendors'
# dtype tokens (cuBLAS ``sm90_xmma_gemm_bf16bf16_bf16f32``, ``ampere_fp16_s16816gemm``, CUTLASS
# ``tensorop_bf16_s16816gemm``, template arguments ``__half``/``cutlass::tfloat32_t``), narrowest
# first because output and accumulator types follow the input's (``e4m3..._bf16f32``,
# ``f16f16_f16f32``). CUTLASS ``tensorop_s1688gemm`` without a dtype token is FP32 data on tensor
# cores, which NVIDIA tensor cores only do as TF32; ``sgemm``/``gcgemm``/``gemmSN<float``, scudnn
# and winograd are FP32 CUDA-core kernels.
_GEMM_DTYPES: tuple[tuple[re.Pattern[str], GemmDtype], ...] = (
    (re.compile(r"e4m3|e5m2|fp8"), GemmDtype.FP8),
    (re.compile(r"int8|imma|i8816|i16832|s8s8"), GemmDtype.INT8),
    (re.compile(r"bf16|bfloat16"), GemmDtype.BF16),
    (re.compile(r"tf32|xf32|tfloat32"), GemmDtype.TF32),
    (re.compile(r"fp16|f16|half|h884|h1688|h16816|hgemm"), GemmDtype.FP16),
    (re.compile(r"dgemm|fp64|f64|double"), GemmDtype.FP64),
    (re.compile(r"tensorop_s\d+(gemm|fprop|dgrad|wgrad)"), GemmDtype.TF32),
    (re.compile(r"sgemm|gcgemm|cgemm|scudnn|winograd|fp32|f32|float"), GemmDtype.FP32),
)
# rocBLAS/hipBLASLt (Tensile) names: ``Cijk_<A indices>_<B indices>_<types>_...``, the first
# letter of the types token being the input type (S single, D double, H half, B bf16, I8, F8/B8
# FP8, X xf32): ``Cijk_Ailk_Bljk_BBS_BH_MT256x128x64_MI16x16x16x1`` is bf16.
_TENSILE = re.compile(r"^cijk_a[a-z]+_b[a-z]+_([a-z0-9]+)_")
_TENSILE_TYPES: tuple[tuple[str, GemmDtype], ...] = (
    ("f8", GemmDtype.FP8),
    ("b8", GemmDtype.FP8),
    ("i8", GemmDtype.INT8),
    ("s", GemmDtype.FP32),
    ("d", GemmDtype.FP64),
    ("h", GemmDtype.FP16),
    ("b", GemmDtype.BF16),
    ("x", GemmDtype.TF32),
)


# cuBLASLt's nvjet kernels (Hopper/Blackwell): ``nvjet_[sm100_]<A/B><compute><C/D>_<tiles>``;
# ``t`` is bf16 (the aten::mm/addmm with "Input type" c10::BFloat16 launch nvjet_tst_* in
# recorded traces), ``h`` half as in BLAS names. ``s`` is left unread: FP32 data runs as FP32
# or TF32 depending on torch's matmul precision, which the name does not show.
_NVJET = re.compile(r"^nvjet_(?:sm\d+_)?([a-z])[a-z]{2}_")
_NVJET_TYPES = {"t": GemmDtype.BF16, "h": GemmDtype.FP16}


@lru_cache(maxsize=4096)
def gemm_dtype(name: str) -> GemmDtype | None:
    """Input precision of a GEMM/convolution kernel from its name; None when the name does not
    say (FP32 nvjet, Triton templates, Tensile post-processing kernels)."""
    lower = name.lower()
    tensile = _TENSILE.match(lower)
    if tensile is not None:
        types = tensile.group(1)
        return next((d for prefix, d in _TENSILE_TYPES if types.startswith(prefix)), None)
    nvjet = _NVJET.match(lower)
    if nvjet is not None:
        return _NVJET_TYPES.get(nvjet.group(1))
    return next((d for pattern, d in _GEMM_DTYPES if pattern.search(lower)), None)


# Fused attention kernels by family: cuDNN's SDPA kernels name cudnn (and often flash), PyTorch's
# memory-efficient backend runs CUTLASS fmha_cutlassF/B (xformers' AttentionKernel), flash runs
# FlashAttention's flash_fwd/flash_bwd (pytorch_flash::, flash::) or AOTriton's attn_fwd on ROCm.
_ATTENTION_BACKENDS: tuple[tuple[re.Pattern[str], SdpaBackend], ...] = (
    (re.compile(r"cudnn.*(sdpa|fmha|flash|attention|attn)"), SdpaBackend.CUDNN),
    (
        re.compile(r"fmha_cutlass|attentionkernel|efficient_attention|mem_eff|memory_efficient"),
        SdpaBackend.EFFICIENT,
    ),
    (
        re.compile(r"flash_(fwd|bwd)|flash::|pytorch_flash|flashattn|^attn_(fwd|bwd)"),
        SdpaBackend.FLASH,
    ),
)


@lru_cache(maxsize=4096)
def attention_backend(name: str) -> SdpaBackend:
    """Family of a fused attention kernel (a row classified ATTENTION) from its name."""
    lower = name.lower()
    return next(
        (b for pattern, b in _ATTENTION_BACKENDS if pattern.search(lower)), SdpaBackend.OTHER_FUSED
    )


def classify_rank(rank: RankTrace) -> npt.NDArray[np.int8]:
    """One KernelKind per row of ``rank``. Comm kernels whose ``Collective name`` arg names a
    collective take that collective, whatever their kernel name says."""
    try:
        import numpy as np
    except ImportError as exc:
        raise MissingExtraError("trace analysis", "trace", "numpy") from exc

    n = len(rank)
    if n == 0:
        return np.zeros(0, dtype=np.int8)
    # (name, category) pairs present, found with a flag per possible pair rather than a sort
    # (names × 16 bytes; np.unique when that table would dwarf the rows)
    key = rank.name_id.astype(np.intp) * _PAIR + rank.category.astype(np.intp)
    size = len(rank.names) * _PAIR
    if size <= 16 * n:
        present = np.zeros(size, dtype=bool)
        present[key] = True
        pairs = np.flatnonzero(present)
        table = np.zeros(size, dtype=np.int8)
        table[pairs] = [
            int(classify_name(rank.names[k // _PAIR], k % _PAIR)) for k in pairs.tolist()
        ]
        kinds = table[key]
    else:
        from gpuwarden.traces.arrays import distinct_inverse

        uniq, inverse = distinct_inverse(key)
        found = [int(classify_name(rank.names[k // _PAIR], k % _PAIR)) for k in uniq.tolist()]
        kinds = np.array(found, dtype=np.int8)[inverse]
    gpu_cats = (int(Category.KERNEL), int(Category.MTIA_CCP_EVENTS))
    for row, extra in rank.args.items():
        if "Collective name" not in extra:
            continue
        coll = extra["Collective name"]
        if isinstance(coll, str) and coll and int(rank.category[row]) in gpu_cats:
            kinds[row] = int(collective_kind(coll))
    return kinds
