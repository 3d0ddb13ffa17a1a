"""What vLLM's start-up memory profile counts, per vLLM release (memory.md §2.9).

vLLM sizes its KV pool as ``utilization × total − (weights + torch activation peak + non-torch
increase)``. Two of those terms changed between releases:

* the activation peak of the profile run is often the dummy sampler run over ``max_num_seqs``
  requests, whose tensors depend on the sampler's top-k/top-p implementation;
* the non-torch term either is everything on the device outside PyTorch (CUDA context included)
  or only what grew after a snapshot taken once the CUDA context existed.

Facts are from vLLM's own source, cited per entry; release numbers of a change are the first
release after its pull request was merged.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.planner.versions import release
from gpuwarden.units import MIB

# The release planned when the request names none: the newest whose behaviour is modelled here.
NEWEST_MODELLED = "0.19.0"

# V1 became the default engine in 0.8.0 (VLLM_USE_V1 defaults to 1).
V1_DEFAULT = (0, 8, 0)
# V0 vllm/worker/worker.py: 0.6.5 (PR #10511) measures non-torch memory from a baseline taken in
# init_device after torch.cuda.set_device, so the CUDA context is outside it; 0.6.4 (PR #9352 /
# #9516) counted all device memory not allocated by torch.
V0_BASELINE_AFTER_CONTEXT = (0, 6, 5)
# V1 vllm/v1/worker/gpu_worker.py determine_available_memory: until PR #19312 (merged 2025-06,
# first in 0.9.2) "total used − torch allocated" (context included, like 0.6.4); from it the
# memory_profiling util against init_snapshot, taken in init_device after set_device and before
# init_worker_distributed_environment (NCCL and custom all-reduce buffers count, the context not).
V1_BASELINE_AFTER_CONTEXT = (0, 9, 2)
# vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p: the Triton top-k/top-p kernel
# (PR #33538, opened 2026-02-02) masks the logits in place instead of sorting them. First release
# assumed 0.17.0 from the merge date (not confirmed from a release note).
V1_TRITON_TOPK_TOPP = (0, 17, 0)
# PR #33538: the kernel's [programs, vocab] outlier buffers, "around ~80MiB of extra VRAM".
TRITON_TOPK_TOPP_BUFFERS = 80 * MIB


@dataclass(frozen=True, slots=True)
class SamplerTensor:
    """One tensor of shape [requests, vocab] alive at the sampler's peak."""

    what: str
    bytes_per_element: int
    source: str


# V0 vllm/model_executor/layers/sampler.py (0.6-0.7), profile_run's SamplingParams top_p=0.99,
# top_k=vocab−1: Sampler.forward upcasts the logits, _apply_top_k_top_p sorts them and rebuilds
# the order by gathering through the inverse permutation; all of these are alive at that gather.
V0_SORT: tuple[SamplerTensor, ...] = (
    SamplerTensor("fp32 logits", 4, "sampler.py Sampler.forward logits.to(torch.float)"),
    SamplerTensor("sorted logits", 4, "sampler.py _apply_top_k_top_p logits.sort"),
    SamplerTensor("sort indices (int64)", 8, "sampler.py _apply_top_k_top_p logits.sort"),
    SamplerTensor("top-k mask (bool)", 1, "sampler.py _apply_top_k_top_p logits_sort < ..."),
    SamplerTensor("sorted probabilities", 4, "sampler.py _apply_top_k_top_p softmax"),
    SamplerTensor("cumulative sum", 4, "sampler.py _apply_top_k_top_p probs_sort.cumsum"),
    SamplerTensor("top-p mask (bool)", 1, "sampler.py _apply_top_k_top_p probs_sum <= 1 - p"),
    SamplerTensor("inverse permutation (int64)", 8, "sampler.py logits_idx_inv scatter_"),
    SamplerTensor("re-ordered logits", 4, "sampler.py torch.gather(logits_sort, ...)"),
)
# V1 vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p (PyTorch path; the dummy sampler
# run of gpu_model_runner.py sets top_k=vocab−1 and top_p=0.9): sort, cumsum written into the
# probabilities (out=probs_sort), masks, then logits.scatter_ in place.
V1_SORT: tuple[SamplerTensor, ...] = (
    SamplerTensor("fp32 logits", 4, "v1/sample/sampler.py logits.to(torch.float32)"),
    SamplerTensor("sorted logits", 4, "topk_topp_sampler.py logits.sort"),
    SamplerTensor("sort indices (int64)", 8, "topk_topp_sampler.py logits.sort"),
    SamplerTensor("top-k mask (bool)", 1, "topk_topp_sampler.py logits_sort < top_k_mask"),
    SamplerTensor("sorted probabilities", 4, "topk_topp_sampler.py softmax, cumsum in place"),
    SamplerTensor("top-p mask (bool)", 1, "topk_topp_sampler.py probs_sum <= 1 - p"),
)
# V1 with the Triton kernel: the fp32 logits are masked in place; random_sample then builds the
# probabilities and the exponential noise they are divided by.
V1_TRITON: tuple[SamplerTensor, ...] = (
    SamplerTensor("fp32 logits", 4, "v1/sample/sampler.py logits.to(torch.float32)"),
    SamplerTensor("probabilities", 4, "topk_topp_sampler.py forward_native logits.softmax"),
    SamplerTensor("exponential noise", 4, "topk_topp_sampler.py random_sample empty_like"),
)


@dataclass(frozen=True, slots=True)
class VllmProfile:
    """How one vLLM release profiles memory at start-up."""

    version: str
    engine: str  # "V0" or "V1"
    sampler: tuple[SamplerTensor, ...]  # besides the model-dtype logits the caller holds
    sampler_fixed_bytes: int  # workspace independent of requests × vocab
    counts_cuda_context: bool  # non-torch memory includes the context the process started with
    source: str

    @property
    def sampler_bytes_per_element(self) -> int:
        return sum(t.bytes_per_element for t in self.sampler)


def vllm_profile(version: str) -> VllmProfile:
    """The behaviour of vLLM ``version`` (``"0.7.3"``, ``"v0.19.0"``); raises ValueError when it
    is not a version number (validate.py reports it as bad input first)."""
    parts = release(version)
    if parts is None:
        raise ValueError(f"not a version number: {version!r}")
    if parts < V1_DEFAULT:
        return VllmProfile(
            version,
            "V0",
            V0_SORT,
            0,
            parts < V0_BASELINE_AFTER_CONTEXT,
            "vllm/worker/worker.py determine_num_available_blocks; "
            "vllm/model_executor/layers/sampler.py",
        )
    triton = parts >= V1_TRITON_TOPK_TOPP
    return VllmProfile(
        version,
        "V1",
        V1_TRITON if triton else V1_SORT,
        TRITON_TOPK_TOPP_BUFFERS if triton else 0,
        parts < V1_BASELINE_AFTER_CONTEXT,
        "vllm/v1/worker/gpu_worker.py determine_available_memory; gpu_model_runner.py "
        "_dummy_sampler_run; vllm/v1/sample/ops/topk_topp_sampler.py",
    )


def sampler_peak_bytes(profile: VllmProfile, requests: int, vocab: int, logits_bytes: float) -> int:
    """The dummy sampler run's tensors: the model-dtype logits [requests, vocab] the caller keeps
    (gathered to the full vocabulary on every TP rank) and the sampler's own copies."""
    per_element = logits_bytes + profile.sampler_bytes_per_element
    return int(requests * vocab * per_element) + profile.sampler_fixed_bytes


def non_torch_bytes(profile: VllmProfile, context: int, bare_context: int, nccl: int) -> int:
    """What vLLM logs as non-torch memory: the whole CUDA context, or only the part that loads
    after the snapshot (lazily loaded kernel images), plus NCCL / custom all-reduce buffers."""
    counted = context if profile.counts_cuda_context else max(0, context - bare_context)
    return counted + nccl


def uncounted_context_bytes(profile: VllmProfile, context: int, bare_context: int) -> int:
    """The part of the CUDA context the non-torch term leaves out, being in the baseline snapshot
    already: outside the budget, yet on the GPU beside it."""
    return context - non_torch_bytes(profile, context, bare_context, 0)
