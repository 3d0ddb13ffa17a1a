"""What SGLang's start-up memory profile decides, per SGLang release (memory.md §2.9).

SGLang measures the free memory once the CUDA context and NCCL exist and before the weights
load (``ModelRunner.init_torch_distributed``: ``min_per_gpu_memory``, the least over the ranks),
then after loading sizes its KV pool (``profile_max_num_token``):

    rest = free_after_weights − free_before × (1 − mem_fraction_static)
    max_total_num_tokens = rest // cell_size          (then // page_size × page_size)

so the weights and the pool share ``mem_fraction_static × free_before`` and the rest of the free
memory is left for activations, CUDA graphs and the attention backend's workspaces. The cell is
one token's K and V over the rank's layers (MHA: kv_heads/tp · (head_dim + v_head_dim) · dtype;
MLA: (kv_lora_rank + qk_rope_head_dim) · dtype), the per-token bytes ``kv_cache.py`` computes.
SGLang refuses to start only when the pool is empty ("Not enough memory. Please try to increase
--mem-fraction-static"); a pool smaller than a request caps the request length instead
(``tp_worker.py``: ``max_req_len = min(context_len − 1, max_total_num_tokens − 1)``; longer
inputs are rejected, "Input length ... exceeds the maximum allowed length").

Sources (sgl-project/sglang, read 2026-11): python/sglang/srt/model_executor/model_runner.py
(v0.3-v0.4 ``profile_max_num_token`` / ``init_memory_pool``), model_runner_kv_cache_mixin.py
(v0.5: ``get_cell_size_per_token``, ``profile_max_num_token``, ``init_memory``), server_args.py
(the default fraction, below), managers/tp_worker.py (``max_req_len``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.layout import ceil_div
from gpuwarden.planner.versions import release
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.plan import Engine, Mode, PlanRequest
from gpuwarden.units import MIB

# The release planned when the request names none (types/plan.py DEFAULT_SGLANG_VERSION).
# server_args.py _handle_gpu_memory_settings: PR #10975 (merged 2025-09-27) replaced the TP-size
# table by "reserved memory" for activations and CUDA graphs. First release assumed 0.5.3 from the
# merge date (not confirmed from a release note).
RESERVED_HEURISTIC = (0, 5, 3)
# server_args.py __post_init__ of v0.3-v0.4: the default fraction by TP size, largest first.
# (v0.2 used 0.83 at TP 8. From 0.4.6 to 0.5.2 GPUs over 80 GB were given more, PRs #5893,
# #6718, #7054: not modelled; the plan's note says so.)
TP_TABLE: tuple[tuple[int, float], ...] = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
# server_args.py: the fraction when the GPU's memory is unknown
NO_GPU_FRACTION = 0.88


@dataclass(frozen=True, slots=True)
class GpuTier:
    """server_args.py _handle_gpu_memory_settings: defaults for GPUs below ``below_mib`` MiB
    (nvidia-smi memory.total, the least over the GPUs)."""

    below_mib: float
    chunked_prefill_size: int
    cuda_graph_max_bs: int  # tp < 4
    cuda_graph_max_bs_tp4: int  # tp >= 4
    examples: str


# PR #10975's chain (NVIDIA branches; the NPU branches are left out).
GPU_TIERS: tuple[GpuTier, ...] = (
    GpuTier(20 * 1024, 2048, 8, 8, "T4, 4080"),
    GpuTier(35 * 1024, 2048, 24, 80, "A10, 4090, 5090"),
    GpuTier(60 * 1024, 4096, 32, 160, "A100 40GB, L40"),
    GpuTier(90 * 1024, 8192, 256, 512, "H100, A100 80GB"),
    GpuTier(160 * 1024, 8192, 256, 512, "H20, H200"),
    GpuTier(float("inf"), 16384, 512, 512, "B200, MI300"),
)
# reserved_mem terms, in MB as server_args.py writes them (it divides by the MiB total)
RESERVED_CONSTANT_MB = 512  # "constant meta data (e.g., from attention backend)"
RESERVED_PER_PREFILL_TOKEN_MB = 1.5  # "for activation during large prefill", chunk ≥ 2048
RESERVED_MIN_PREFILL_TOKENS = 2048
RESERVED_PER_GRAPH_BS_MB = 2  # "for cuda graphs"
RESERVED_PER_EIGHTH_PARALLEL_MB = 1024  # tp · pp / 8 × 1024, "for large parallel size"
RESERVED_FLOOR_MB = 10 * 1024  # GPUs over 60 GiB keep at least 10 GB out of the fraction
RESERVED_FLOOR_ABOVE_MIB = 60 * 1024


@dataclass(frozen=True, slots=True)
class FractionChoice:
    fraction: float
    how: str  # for the plan's note: the rule and its inputs
    chunked_prefill_size: int
    cuda_graph_max_bs: int


def _bad(message: str, hint: str, reference: str) -> InvalidConfigError:
    return InvalidConfigError(message, hint=hint, reference=reference)


def check_engine(request: PlanRequest) -> None:
    """Raise ``InvalidConfigError`` for SGLang settings that cannot run."""
    fraction = request.mem_fraction_static
    engine = request.serving_engine
    if fraction is not None and not 0 < fraction < 1:
        raise _bad(
            f"mem_fraction_static must be between 0 and 1, got {fraction:g}",
            "SGLang's static share of the free GPU memory, e.g. 0.85 (weights + KV pool)",
            "value-out-of-range",
        )
    if request.page_size < 1:
        raise _bad(
            f"page_size must be at least 1, got {request.page_size}",
            "SGLang's --page-size in tokens: 1 (default), or 16/32/64 for paged backends",
            "value-out-of-range",
        )
    if fraction is not None and request.gpu_memory_utilization is not None:
        raise _bad(
            "mem_fraction_static (SGLang) and gpu_memory_utilization (vLLM) are two engines' "
            "budgets",
            "pass --mem-fraction-static for SGLang or --gpu-memory-utilization for vLLM",
            "engine-budget-conflict",
        )
    if engine is not Engine.SGLANG and fraction is not None:
        raise _bad(
            f"mem_fraction_static is an SGLang setting; the engine is {engine.value}",
            "drop --mem-fraction-static, or plan --engine sglang",
            "engine-budget-conflict",
        )
    if engine is Engine.SGLANG and request.gpu_memory_utilization is not None:
        raise _bad(
            "gpu_memory_utilization is a vLLM setting; the engine is sglang",
            "SGLang's budget is --mem-fraction-static",
            "engine-budget-conflict",
        )
    if engine is not Engine.HF and request.mode is not Mode.INFER and request.engine is not None:
        raise _bad(
            f"engine {engine.value} serves inference; it needs --mode infer",
            "drop --engine, or plan inference with --mode infer",
            "engine-needs-infer",
        )
    if fraction is not None and request.mode is not Mode.INFER:
        raise _bad(
            "mem_fraction_static is an SGLang serving budget; it needs --mode infer",
            "drop --mem-fraction-static, or plan inference with --mode infer",
            "engine-needs-infer",
        )
    if engine is Engine.SGLANG and release(request.sglang_version) is None:
        raise _bad(
            f"sglang_version {request.sglang_version!r} is not a version number",
            "pass it as pip shows it, e.g. 0.4.6 (python -m pip show sglang)",
            "sglang-version-unreadable",
        )


def _tier(gpu_mem_mib: float) -> GpuTier:
    return next(t for t in GPU_TIERS if gpu_mem_mib < t.below_mib)


def _reserved_mb(gpu_mem_mib: float, chunk: int, graph_bs: int, tp: int, pp: int) -> float:
    """server_args.py reserved_mem (MB) without DP attention or speculative decoding."""
    reserved = (
        RESERVED_CONSTANT_MB
        + max(chunk, RESERVED_MIN_PREFILL_TOKENS) * RESERVED_PER_PREFILL_TOKEN_MB
        + graph_bs * RESERVED_PER_GRAPH_BS_MB
        + tp * pp / 8 * RESERVED_PER_EIGHTH_PARALLEL_MB
    )
    if gpu_mem_mib > RESERVED_FLOOR_ABOVE_MIB:
        reserved = max(reserved, RESERVED_FLOOR_MB)
    return reserved


def default_fraction(gpu: GpuSpec | None, tp: int, pp: int, version: str) -> FractionChoice:
    """The mem_fraction_static SGLang ``version`` picks when none is passed."""
    parts = release(version) or RESERVED_HEURISTIC
    gpu_mem = gpu.memory_bytes / MIB if gpu is not None else None
    tier = _tier(gpu_mem) if gpu_mem is not None else GpuTier(0, 4096, 160, 160, "")
    graph_bs = tier.cuda_graph_max_bs if tp < 4 else tier.cuda_graph_max_bs_tp4
    chunk = tier.chunked_prefill_size
    if parts < RESERVED_HEURISTIC:
        fraction = next(f for size, f in TP_TABLE if tp >= size)
        how = (
            f"SGLang {version} default for tp={tp} (server_args.py table "
            "0.88/0.87/0.85/0.81/0.79); 0.4.6-0.5.2 gave GPUs over 80 GB more, not modelled: "
            "pass the logged value"
        )
        return FractionChoice(fraction, how, chunk, graph_bs)
    if gpu_mem is None:
        how = f"SGLang {version} default without a known GPU"
        return FractionChoice(NO_GPU_FRACTION, how, chunk, graph_bs)
    reserved = _reserved_mb(gpu_mem, chunk, graph_bs, tp, pp)
    fraction = round((gpu_mem - reserved) / gpu_mem, 3)
    how = (
        f"SGLang {version} default: (total {gpu_mem:,.0f} MiB − reserved {reserved:,.0f} MB) / "
        f"total, reserved for chunked_prefill_size {chunk:,} and cuda_graph_max_bs {graph_bs} "
        "(server_args.py _handle_gpu_memory_settings; no DP attention, speculative decoding or "
        "multimodal adjustment)"
    )
    return FractionChoice(fraction, how, chunk, graph_bs)


# Hybrids (model_runner_kv_cache_mixin.py handle_max_mamba_cache, init_memory_pool; v0.5.x with
# the radix cache on, no speculative decoding): the share of the pool left after the weights is
# split so that state memory / KV memory = mamba_full_memory_ratio, the state share cut into
# max_mamba_cache_size request slots; a running request takes
# MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO slots, which caps max_running_requests.
MAMBA_SLOTS_PER_REQUEST = 3  # MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO


@dataclass(frozen=True, slots=True)
class TokenPool:
    """SGLang's pool on one GPU, as profile_max_num_token and init_memory size it."""

    static_bytes: int  # fraction × free memory before the weights: weights + pool
    remainder_bytes: int  # the rest of that free memory: activations, CUDA graphs, workspaces
    tokens: int  # max_total_num_tokens (0: SGLang refuses to start)
    pool_bytes: int  # tokens × cell
    request_tokens: int  # one max-length request, in whole pages
    max_request_tokens: int  # the longest request SGLang then accepts (max_req_len)
    state_slots: int = 0  # hybrids: max_mamba_cache_size, one sequence's state each
    state_bytes: int = 0  # the MambaPool: state_slots × one sequence's state

    @property
    def state_requests(self) -> int | None:
        """Running requests the state slots admit (None: no state pool)."""
        return self.state_slots // MAMBA_SLOTS_PER_REQUEST if self.state_slots else None


def token_pool(
    free_before: int,
    fraction: float,
    weights: int,
    cell: float,
    page: int,
    context: int,
    state_per_request: float = 0.0,
    state_slots: Callable[[float], int] | None = None,
) -> TokenPool:
    """The pool that ``fraction`` of ``free_before`` leaves after ``weights``: whole pages of
    ``cell``-byte tokens; a request of ``context`` tokens needs that many pages' worth. A hybrid
    (``state_per_request``: one sequence's state blocks) first gives its state slots their share:
    ``state_slots`` of the bytes left after the weights (planner/state.py sglang_state_slots)."""
    static = int(fraction * free_before)
    rest = static - weights
    slots = state_slots(rest) if state_slots is not None and state_per_request else 0
    state = int(slots * state_per_request)
    rest -= state
    tokens = _whole_pages(int(rest // cell) if rest > 0 and cell else 0, page)
    return TokenPool(
        static_bytes=static,
        remainder_bytes=free_before - static,
        tokens=tokens,
        pool_bytes=int(tokens * cell),
        request_tokens=_pages_for(context, page),
        max_request_tokens=max(0, min(context, tokens - 1)),
        state_slots=slots,
        state_bytes=state,
    )


def batch_pool(
    weights: int, cell: float, page: int, context: int, batch: int, state_per_request: float
) -> TokenPool:
    """No GPU: a pool sized for the request itself, ``batch`` requests of ``context`` tokens in
    whole pages (a hybrid: the state slots those requests take)."""
    request_tokens = _pages_for(context, page)
    tokens = request_tokens * batch
    pool = int(tokens * cell)
    slots = batch * MAMBA_SLOTS_PER_REQUEST if state_per_request else 0
    state = int(slots * state_per_request)
    return TokenPool(
        static_bytes=weights + pool + state,
        remainder_bytes=0,
        tokens=tokens,
        pool_bytes=pool,
        request_tokens=request_tokens,
        max_request_tokens=context,
        state_slots=slots,
        state_bytes=state,
    )


def _pages_for(tokens: int, page: int) -> int:
    """``tokens`` rounded up to whole pages: what a request of that length takes."""
    return ceil_div(tokens, page) * page


def _whole_pages(tokens: int, page: int) -> int:
    """``tokens`` rounded down to whole pages: what a pool of that many cells holds."""
    return tokens // page * page


# Hybrid SWA (model_runner_kv_cache_mixin.py @ 001ccef0 set_num_tokens_hybrid_swa): the pool's
# memory, profiled with every layer holding every token, is split so that the sliding-window
# layers hold swa_full_tokens_ratio × the full layers' tokens; max_total_num_tokens becomes the
# full layers' count.
SWA_FULL_TOKENS_RATIO = 0.8  # server_args.py swa_full_tokens_ratio default


def swa_split(tokens: int, full_bytes: float, swa_bytes: float, page: int) -> tuple[int, int]:
    """(full-layer tokens, sliding-window tokens) of a pool of ``tokens`` profiled cells;
    ``full_bytes`` / ``swa_bytes``: one token over the full / sliding-window layers."""
    if not swa_bytes:
        return tokens, 0
    if not full_bytes:  # every layer slides: one SWA pool of the profiled tokens
        aligned = _whole_pages(tokens, page)
        return aligned, aligned
    memory = tokens * (full_bytes + swa_bytes)
    full = int(memory / (full_bytes + SWA_FULL_TOKENS_RATIO * swa_bytes))
    return _whole_pages(full, page), _whole_pages(int(full * SWA_FULL_TOKENS_RATIO), page)
