"""Kernel classification on the kernel names of the real fixtures (NVIDIA A100/H100/B200/V100,
AMD MI250, Triton, NCCL old and new naming)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.traces.classify import classify_name, classify_rank, is_tensor_core_gemm
from gpuwarden.traces.model import Category
from gpuwarden.types.trace_insights import KernelKind as K
from tests.traces.insights import raw
from tests.traces.insights.cache import rank_of

ALL_GPU_FIXTURES = [
    raw.CONTROL,
    raw.TEST,
    raw.NCCL,
    raw.AMD,
    raw.NS,
    raw.B200,
    raw.H100_QWEN,
    raw.TRITON,
    raw.megatron(0),
]


def _kernel_names(rel: str) -> set[str]:
    return {str(e["name"]) for e in raw.complete(rel) if e["cat"] in ("kernel", "Kernel")}


def _kinds_of(rel: str, needle: str) -> set[K]:
    return {classify_name(n, Category.KERNEL) for n in _kernel_names(rel) if needle in n}


def test_nccl_names_old_and_new_are_communication_by_collective() -> None:
    assert _kinds_of(raw.megatron(0), "ncclDevKernel_AllReduce") == {K.COMM_ALLREDUCE}
    assert _kinds_of(raw.B200, "ncclDevKernel_AllGather") == {K.COMM_ALLGATHER}
    assert _kinds_of(raw.NCCL, "ncclKernel_AllReduce") == {K.COMM_ALLREDUCE}
    assert _kinds_of(raw.NCCL, "ncclKernel_Broadcast") == {K.COMM_BROADCAST}
    assert _kinds_of(raw.CONTROL, "ncclKernel_SendRecv") == {K.COMM_SENDRECV}
    # torch symmetric-memory all-reduce (no nccl in the name)
    assert _kinds_of(raw.B200, "multimem_all_reduce_kernel") == {K.COMM_ALLREDUCE}


@pytest.mark.parametrize("rel", ALL_GPU_FIXTURES)
def test_every_hta_communication_kernel_is_communication(rel: str) -> None:
    """HTA 0.5.0 calls `^nccl` kernels communication; we must at least agree on those."""
    for name in _kernel_names(rel):
        kind = classify_name(name, Category.KERNEL)
        if name.startswith("nccl"):
            assert kind.is_communication, name
        elif "Memcpy" in name or "Memset" in name:
            assert kind.is_memory, name


def test_gemm_and_tensor_core_names() -> None:
    tc_true = {
        n
        for n in _kernel_names(raw.NCCL) | _kernel_names(raw.B200) | _kernel_names(raw.megatron(0))
        if n.startswith(("ampere_fp16_s16816gemm", "sm80_xmma_gemm", "nvjet_tst"))
        or "cutlass_80_tensorop" in n
    }
    tc_true |= {n for n in _kernel_names(raw.H100_QWEN) if n.startswith("sm90_xmma_gemm")}
    tc_true |= {n for n in _kernel_names(raw.AMD) if n.startswith("Cijk_")}  # Tensile MFMA
    assert len(tc_true) >= 8
    for n in tc_true:
        assert classify_name(n, Category.KERNEL) is K.GEMM, n
        assert is_tensor_core_gemm(n) is True, n
    simt = {n for n in _kernel_names(raw.TEST) if n.startswith("volta_sgemm")}
    simt |= {n for n in _kernel_names(raw.NCCL) if "simt_sgemm" in n or "ampere_sgemm" in n}
    assert len(simt) >= 10
    for n in simt:
        assert classify_name(n, Category.KERNEL) is K.GEMM, n
        assert is_tensor_core_gemm(n) is False, n


def test_compute_subkinds_from_real_names() -> None:
    names = _kernel_names(raw.H100_QWEN) | _kernel_names(raw.TRITON) | _kernel_names(raw.NCCL)
    for n in names:
        kind = classify_name(n, Category.KERNEL)
        if "flash_fwd_kernel" in n:
            assert kind is K.ATTENTION, n
        elif "vectorized_elementwise_kernel" in n or n.startswith("triton_poi_"):
            assert kind is K.ELEMENTWISE, n
        elif "at::native::reduce_kernel<" in n or "layer_norm" in n:
            assert kind is K.REDUCTION, n
    assert any("flash_fwd_kernel" in n for n in names)
    assert any(n.startswith("triton_poi_") for n in names)


def test_memcpy_directions_and_sync_by_category() -> None:
    for rel, name, kind in [
        (raw.CONTROL, "Memcpy HtoD (Pinned -> Device)", K.MEMCPY_H2D),
        (raw.SIMPLE_ADD, "Memcpy HtoD (Pageable -> Device)", K.MEMCPY_H2D),
        (raw.AMD, "Memcpy HtoD (Host -> Device)", K.MEMCPY_H2D),
        (raw.CONTROL, "Memcpy DtoH (Device -> Pageable)", K.MEMCPY_D2H),
        (raw.NCCL, "Memcpy DtoD (Device -> Device)", K.MEMCPY_D2D),
    ]:
        found = [e for e in raw.complete(rel) if e["name"] == name]
        assert found and found[0]["cat"] == "gpu_memcpy"
        assert classify_name(name, Category.GPU_MEMCPY) is kind
    assert classify_name("Memset (Device)", Category.GPU_MEMSET) is K.MEMSET
    assert classify_name("Stream Wait Event", Category.CUDA_SYNC) is K.SYNC
    # a runtime call with a memcpy name is host work, not a GPU copy
    assert classify_name("hipMemcpyWithStream", Category.CUDA_RUNTIME) is K.NOT_GPU


@pytest.mark.parametrize("rel", [raw.NCCL, raw.B200, raw.AMD, raw.CPU_ONLY])
def test_classify_rank_matches_row_by_row(rel: str) -> None:
    """Vectorised classification = classify_name per row, plus the Collective-name override."""
    rank = rank_of(rel)
    kinds = classify_rank(rank)
    assert kinds.shape == (len(rank),)
    for row in range(len(rank)):
        expected = classify_name(rank.name(row), int(rank.category[row]))
        coll = rank.args.get(row, {}).get("Collective name")
        if coll and rank.category[row] == Category.KERNEL:
            assert K(int(kinds[row])).is_communication
        else:
            assert kinds[row] == expected


def test_collective_arg_decides_the_collective() -> None:
    """nccl_data: kernels carry `Collective name`; counts per collective match the raw args."""
    rank = rank_of(raw.NCCL)
    kinds = classify_rank(rank)
    expected = {"allreduce": 0, "broadcast": 0}
    for e in raw.complete(raw.NCCL):
        if e["cat"] == "kernel" and (e.get("args") or {}).get("Collective name") in expected:
            expected[e["args"]["Collective name"]] += 1
    assert int(np.sum(kinds == K.COMM_ALLREDUCE)) == expected["allreduce"] == 15
    assert int(np.sum(kinds == K.COMM_BROADCAST)) == expected["broadcast"] == 6


def test_gpu_less_trace_has_no_gpu_rows() -> None:
    kinds = classify_rank(rank_of(raw.CPU_ONLY))
    assert kinds.size > 0 and np.all(kinds == K.NOT_GPU)


@given(st.text(max_size=300), st.sampled_from([int(c) for c in Category]))
def test_classify_name_never_raises(name: str, category: int) -> None:
    kind = classify_name(name, category)
    assert isinstance(kind, K)
    assert is_tensor_core_gemm(name) in (True, False, None)


def test_vllm_kv_cache_writes_are_copies_not_attention() -> None:
    # the real B200 vLLM trace (tracelens_b200_eager) launches it beside FlashInfer's attention
    name = (
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, "
        "(vllm::Fp8KVCacheDataType)1>(__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*, "
        "unsigned char*, long const*, long, long, long, long, long, int, int, int, float const*, "
        "float const*)"
    )
    assert classify_name(name.lower(), Category.KERNEL) is K.ELEMENTWISE
    assert classify_name("void vllm::concat_and_cache_mla_kernel<float>", Category.KERNEL) is (
        K.ELEMENTWISE
    )
    assert classify_name("flash_fwd_kernel", Category.KERNEL) is K.ATTENTION


def test_inductor_kernels_named_after_sdpa_are_their_own_kind() -> None:
    # torch.compile's generated kernels (names from public inductor caches) copy, scale or mask
    poi = "triton_poi_fused__scaled_dot_product_efficient_attention_17"
    red = "triton_red_fused__scaled_dot_product_flash_attention_3"
    assert classify_name(poi, Category.KERNEL) is K.ELEMENTWISE
    assert classify_name(red, Category.KERNEL) is K.REDUCTION
    assert classify_name("triton_tem_fused_flex_attention_0", Category.KERNEL) is K.ATTENTION
