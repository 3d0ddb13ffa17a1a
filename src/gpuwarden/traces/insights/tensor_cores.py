"""Share of GEMM time on tensor cores vs FP32 SIMT kernels (from kernel names), and matmul ops
whose recorded shapes have K or N not a multiple of 8.

Multiples of 8 (FP16/BF16) let cuBLAS use tensor cores with aligned, full-width loads
(NVIDIA Deep Learning Performance Documentation, "Matrix Multiplication Background User's
Guide", Tensor Core requirements).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuwarden.traces.arrays import distinct_inverse
from gpuwarden.traces.classify import gemm_dtype, is_tensor_core_gemm
from gpuwarden.traces.column_store import MATMUL_OPS
from gpuwarden.traces.insights.view import RankView
from gpuwarden.traces.model import Category
from gpuwarden.traces.precision_advice import cheaper_precision
from gpuwarden.types.trace_insights import GemmDtype, KernelKind

if TYPE_CHECKING:
    from gpuwarden.types.trace_tensor_cores import DtypeTime, GemmShape, TensorCoreReport

SIMT_FIX_RATIO = 0.2
ALIGN = 8


# Index of the two matrix operands in each op's inputs (addmm/baddbmm: bias/self first).
_OPERANDS = {"aten::addmm": (1, 2), "aten::baddbmm": (1, 2), "aten::addmv": (1, 2)}
_BATCHED = frozenset({"aten::bmm", "aten::baddbmm"})


def _gemm_dims(op: str, dims: Any) -> tuple[int, list[int]] | None:
    """(M, [K, and the second operand's dims]) of a matmul; a non-batched op with an N-D first
    operand flattens its leading dims into M, as PyTorch does before calling cuBLAS."""
    if not isinstance(dims, list):
        return None
    i, j = _OPERANDS.get(op, (0, 1))
    if len(dims) <= j:
        return None
    a, b = dims[i], dims[j]
    if not (isinstance(a, list) and isinstance(b, list) and len(a) >= 1 and len(b) >= 1):
        return None
    if not all(isinstance(d, int) for d in a + b):
        return None
    batched = op in _BATCHED or len(b) >= 3
    m = 1 if len(a) < 2 else (a[-2] if batched else math.prod(a[:-1]))
    return m, [a[-1], *b[-2:]]


def _misaligned(op: str, dims: Any) -> bool:
    """True when K or N of a matmul is not a multiple of 8 (they set the row alignment of the
    operands). GEMV-like ops (a dimension below 8) are left out: padding does not help them."""
    found = _gemm_dims(op, dims)
    if found is None:
        return False
    m, kn = found
    if min(m, *kn) < ALIGN:
        return False
    return any(d % ALIGN for d in kn)


def _shapes(view: RankView) -> tuple[int | None, int | None, tuple[GemmShape, ...]]:
    rank = view.rank
    seen = 0
    bad: Counter[tuple[str, str]] = Counter()
    verdicts: dict[tuple[str, str], bool] = {}  # the same shapes repeat every layer and step
    # the loader shares one decoded value between rows with the same dims text: str() it once
    texts: dict[int, str] = {}
    found = [(r, d) for r, extra in rank.args.items() if (d := extra.get("Input Dims")) is not None]
    at = np.array([row for row, _ in found], dtype=np.int64)
    cpu_op = (rank.category[at] == int(Category.CPU_OP)).tolist()
    name_ids = rank.name_id[at].tolist()
    for (_, dims), is_op, name_id in zip(found, cpu_op, name_ids, strict=True):
        if not is_op:
            continue
        name = rank.names[name_id]
        if name not in MATMUL_OPS:
            continue
        seen += 1
        text = texts.get(id(dims))
        if text is None:
            text = texts[id(dims)] = str(dims)
        key = (name, text)
        if key not in verdicts:
            verdicts[key] = _misaligned(name, dims)
        if verdicts[key]:
            bad[key] += 1
    if seen == 0:
        return None, None, ()
    from gpuwarden.types.trace_tensor_cores import GemmShape

    examples = tuple(GemmShape(op=o, dims=d, count=c) for (o, d), c in bad.most_common(5))
    return seen, sum(bad.values()), examples


def _dtype_times(
    dtypes: list[GemmDtype | None], per_name: Any, counts: Any
) -> tuple[tuple[DtypeTime, ...], float]:
    """GEMM time per input precision (by time desc) and the time of names that do not say it."""
    from gpuwarden.types.trace_tensor_cores import DtypeTime

    time: dict[GemmDtype, float] = {}
    launches: Counter[GemmDtype] = Counter()
    unknown = 0.0
    for dtype, us, n in zip(dtypes, per_name.tolist(), counts.tolist(), strict=True):
        if dtype is None:
            unknown += us
            continue
        time[dtype] = time.get(dtype, 0.0) + us
        launches[dtype] += n
    out = [DtypeTime(dtype=d, kernels=launches[d], time_us=t) for d, t in time.items()]
    out.sort(key=lambda d: (-d.time_us, d.dtype))
    return tuple(out), unknown


def tensor_cores(view: RankView) -> TensorCoreReport | None:
    rank = view.rank
    rows = np.flatnonzero(view.kinds == int(KernelKind.GEMM))
    if rows.size == 0:
        return None
    from gpuwarden.types.trace_tensor_cores import KernelTime, TensorCoreReport

    ids, inverse = distinct_inverse(rank.name_id[rows])
    tc = [is_tensor_core_gemm(rank.names[int(i)]) for i in ids.tolist()]
    per_name = np.bincount(inverse, weights=rank.dur[rows], minlength=ids.size)
    counts = np.bincount(inverse, minlength=ids.size)
    tc_us = float(sum(t for t, f in zip(per_name, tc, strict=True) if f is True))
    simt_us = float(sum(t for t, f in zip(per_name, tc, strict=True) if f is False))
    total = float(per_name.sum())
    unknown = max(total - tc_us - simt_us, 0.0)
    simt_idx = [i for i, f in enumerate(tc) if f is False]
    simt_idx.sort(key=lambda i: -per_name[i])
    top = tuple(
        KernelTime(name=rank.names[int(ids[i])], count=int(counts[i]), time_us=float(per_name[i]))
        for i in simt_idx[:5]
    )
    dtypes, unknown_dtype_us = _dtype_times(
        [gemm_dtype(rank.names[int(i)]) for i in ids.tolist()], per_name, counts
    )
    with_shapes, misaligned, examples = _shapes(view)
    simt_ratio = simt_us / total if total > 0 else 0.0
    parts = []
    if simt_ratio >= SIMT_FIX_RATIO:
        parts.append(
            "FP32 GEMMs run on CUDA cores, not tensor cores: "
            + cheaper_precision(view.compute_capability)
        )
    if misaligned:
        parts.append("pad matmul dimensions (hidden size, vocab, batch×seq) to multiples of 8")
    return TensorCoreReport(
        gemm_kernels=int(rows.size),
        gemm_time_us=total,
        tensor_core_us=tc_us,
        simt_us=simt_us,
        unknown_us=unknown,
        tensor_core_ratio=tc_us / total if total > 0 else 0.0,
        simt_ratio=simt_ratio,
        top_simt_kernels=top,
        matmul_ops_with_shapes=with_shapes,
        misaligned_ops=misaligned,
        misaligned_examples=examples,
        fix="; ".join(parts) or None,
        dtypes=dtypes,
        unknown_dtype_us=unknown_dtype_us,
    )
