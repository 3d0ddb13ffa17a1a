"""Hybrids: the fixed-size state a linear-attention / state-space block keeps per sequence.

A hybrid's state blocks (gated DeltaNet, Mamba-2, short convolutions: ``ModelSpec.state``) cache
no K and V. Each keeps, per sequence, the last columns of its causal convolution's input and its
recurrent state, whatever the sequence's length: a fixed cost per running sequence. How many
columns and in which dtype is the serving stack's choice:

* transformers 5.24 (``cache_utils.py`` ``LinearAttentionLayer.lazy_initialization``, read in the
  installed package): ``conv_kernel`` columns in the conv input's dtype (the compute dtype); the
  recurrent state is ``zeros_like`` the kernel's returned state, fp32 for every mixer that keeps
  one: ``modeling_qwen3_next.py`` ``torch_chunk_gated_delta_rule`` /
  ``torch_recurrent_gated_delta_rule`` and ``modeling_kimi_linear.py``'s delta rules cast q, k,
  v, g and beta to fp32 and return that state (so does fla: ``fla/ops/gated_delta_rule/chunk.py``
  allocates the final state fp32); ``modeling_mamba2.py`` ``mamba2_chunk_scan`` (shared by
  Nemotron-H, Bamba, Granite 4.0 hybrids and Falcon-H1) computes the scan in fp32, as mamba-ssm's
  ``mamba_chunk_scan_combined`` does; ``modeling_mamba.py``'s scan multiplies the fp32
  discretised A. Falcon-H1's blocks (``LinearAttentionAndFullAttentionLayer``) keep this state
  beside their K and V.
* vLLM v1 (vllm-project/vllm ``vllm/model_executor/layers/mamba/mamba_utils.py`` at 02d71083:
  ``MambaStateShapeCalculator.gated_delta_net_state_shape`` / ``mamba2_state_shape``): conv state
  ``conv_dim / tp × (conv_kernel − 1)``, temporal state ``heads / tp × d × d``;
  ``MambaStateDtypeCalculator``: conv in ``--mamba-cache-dtype`` (auto: the model dtype), the
  temporal state in ``--mamba-ssm-cache-dtype`` (auto: the conv dtype); the mixers with one
  dtype (``short_conv_state_dtype``, ``kda_state_dtype``) keep every state in the conv dtype. The
  model hooks (``vllm/model_executor/models/config.py``) fill an auto SSM dtype from the config:
  Qwen3.5's ``mamba_ssm_dtype``; ``NemotronHForCausalLMConfig`` its ``mamba_ssm_cache_dtype``,
  float32 when the config has none ("only float32 is known to have no accuracy issues").
  ``--mamba-cache-mode``: a request holds one state block, two under "align".
* SGLang (sgl-project/sglang ``python/sglang/srt/configs/mamba_utils.py``): conv state
  ``conv_dim / tp × (conv_kernel − 1)`` in bf16 (``CONV_DTYPE``), temporal state in
  ``mamba2_state_dtype``: ``SGLANG_MAMBA_SSM_DTYPE``, else the config's ``mamba_ssm_dtype``, else
  float32 (Nemotron-H's ``mamba_ssm_cache_dtype`` is not read there).
  ``model_runner_kv_cache_mixin.py`` ``handle_max_mamba_cache``: ``--max-mamba-cache-size`` state
  slots, else the ``--mamba-full-memory-ratio`` share of what the weights leave.

The knobs are ``PlanRequest`` fields (types/plan.py); transformers has none.

The state and the convolution split over tensor parallelism by heads (``StateSpec.num_heads``),
replicated where TP exceeds them, as KV heads are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.layout import Layout, ceil_div, heads_per_rank, stage_layers
from gpuwarden.planner.versions import release
from gpuwarden.types.model import Mamba2Shape, ModelSpec, StateKind, StateSpec
from gpuwarden.types.plan import Attention, Engine, MambaCacheMode, PlanRequest


class StateStack(StrEnum):
    HF = "transformers"
    VLLM = "vLLM"
    SGLANG = "SGLang"


def state_stack(engine: Engine) -> StateStack:
    """The stack whose state layout an inference engine keeps (HF generate: transformers')."""
    return {Engine.VLLM: StateStack.VLLM, Engine.SGLANG: StateStack.SGLANG}.get(
        engine, StateStack.HF
    )


# Bytes of the recurrent state transformers keeps, by mixer (StateSpec.kind): every scan and
# delta rule it runs (torch fallbacks and kernels) returns an fp32 state (module docstring).
# Short convolutions keep none; an unlisted mixer is planned in the compute dtype.
HF_RECURRENT_BYTES = {
    StateKind.GATED_DELTANET: 4.0,
    StateKind.KIMI_DELTA: 4.0,
    StateKind.MAMBA2: 4.0,
    StateKind.MAMBA: 4.0,
}
# SGLang's state dtypes when neither the environment nor the config names one (mamba_utils.py)
SGLANG_CONV_BYTES = 2.0  # CONV_DTYPE = torch.bfloat16
SGLANG_SSM_BYTES = 4.0  # mamba2_state_dtype default "float32"
_DTYPE_BYTES = {"float32": 4.0, "fp32": 4.0, "bfloat16": 2.0, "float16": 2.0, "half": 2.0}
# vLLM's --mamba-cache-dtype / --mamba-ssm-cache-dtype values (vllm/config/cache.py MambaDType);
# "auto" (None here) defers to the model dtype / the conv dtype / the model's config hook
VLLM_MAMBA_DTYPES = {"auto": None, "float32": 4.0, "float16": 2.0, "bfloat16": 2.0}
# the mixers whose temporal state vLLM keeps in --mamba-ssm-cache-dtype (MambaStateDtypeCalculator
# mamba1/mamba2/gated_delta_net_state_dtype); the others keep every state in the conv dtype
VLLM_SSM_DTYPE_MIXERS = frozenset({StateKind.MAMBA, StateKind.MAMBA2, StateKind.GATED_DELTANET})
# the keys a config names the SSM state's dtype under, and what each stack reads: vLLM's model
# hooks read both (Nemotron-H's under its own name, float32 when absent); SGLang's
# mamba2_state_dtype reads mamba_ssm_dtype only
SSM_DTYPE_KEYS = ("mamba_ssm_dtype", "mamba_ssm_cache_dtype")
VLLM_SSM_DEFAULTS = {"nemotron_h": 4.0}  # NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE

SOURCES = {
    StateStack.HF: "transformers 5.24 cache_utils.py LinearAttentionLayer: conv_kernel columns in "
    "the compute dtype, the recurrent state as the kernel returns it",
    StateStack.VLLM: "vLLM mamba_utils.py MambaStateShapeCalculator / MambaStateDtypeCalculator: "
    "conv_kernel − 1 columns, states in --mamba-cache-dtype / --mamba-ssm-cache-dtype (auto: the "
    "model dtype, the SSM state as the model's config hook sets it)",
    StateStack.SGLANG: "SGLang configs/mamba_utils.py Mamba2CacheParams: conv_kernel − 1 bf16 "
    "columns, the temporal state in mamba_ssm_dtype (float32 by default)",
}


@dataclass(frozen=True, slots=True)
class StateLayout:
    """Per GPU of the most loaded pipeline stage: what one sequence's state blocks keep."""

    layers: int  # state blocks on this stage
    conv_bytes: float  # one sequence, one block: the convolution's cached columns, this GPU's
    recurrent_bytes: float  # one sequence, one block: the recurrent state, this GPU's share
    source: str

    @property
    def bytes_per_layer(self) -> float:
        return self.conv_bytes + self.recurrent_bytes

    @property
    def bytes_per_sequence(self) -> float:
        return self.bytes_per_layer * self.layers


def stage_mixers(spec: ModelSpec, pp: int, stage: int) -> tuple[int, int]:
    """(attention blocks, state blocks) on one pipeline stage: a hybrid's state blocks (and its
    mixerless blocks, which cache nothing) spread over the stages in proportion, as
    sliding-window layers are; every block attends otherwise. Blocks that run both (Falcon-H1,
    ``StateSpec.beside_attention``) count in both."""
    layers = stage_layers(spec.num_layers, pp, stage)
    if spec.state is None or not spec.num_layers:
        return layers, 0
    attention = round(layers * spec.attention_layers / spec.num_layers)
    state = round(layers * spec.state.num_layers / spec.num_layers)
    if spec.state.beside_attention:
        return attention, min(state, layers)
    return attention, min(state, layers - attention)


def _config_dtype(raw: dict[str, object], key: str) -> str | None:
    """``key`` at the top level or in a multimodal config's ``text_config``."""
    value = raw.get(key)
    text = raw.get("text_config")
    if value is None and isinstance(text, dict):
        value = text.get(key)
    return value.lower() if isinstance(value, str) else None


def config_ssm_bytes(spec: ModelSpec, stack: StateStack = StateStack.VLLM) -> float | None:
    """The SSM state's dtype a config asks ``stack`` for (module docstring: vLLM's hooks read
    ``mamba_ssm_dtype`` and Nemotron-H's ``mamba_ssm_cache_dtype``, SGLang the first only);
    None when it names none."""
    keys = SSM_DTYPE_KEYS if stack is StateStack.VLLM else SSM_DTYPE_KEYS[:1]
    for key in keys:
        value = _config_dtype(spec.raw_config, key)
        if value is not None:
            return _DTYPE_BYTES.get(value)
    return VLLM_SSM_DEFAULTS.get(spec.model_type) if stack is StateStack.VLLM else None


def mamba_dtype(option: str, text: str) -> str:
    """A vLLM Mamba cache dtype as given (``option`` names it in the error), lower-cased."""
    value = text.strip().lower()
    if value not in VLLM_MAMBA_DTYPES:
        raise InvalidConfigError(
            f"{option} {text!r} is not a dtype vLLM keeps states in",
            hint=f"one of {', '.join(VLLM_MAMBA_DTYPES)} (vllm/config/cache.py MambaDType)",
            reference="mamba-dtype-unknown",
        )
    return value


def mamba_cache_mode(text: str) -> MambaCacheMode:
    """--mamba-cache-mode as planned; "all" is refused (not modelled)."""
    value = text.strip().lower()
    if value == "all":
        raise InvalidConfigError(
            "--mamba-cache-mode all is not modelled: vLLM then keeps a state at every block "
            "boundary and ties the block size to the mamba chunk size",
            hint="plan with align (prefix caching on) or none (prefix caching off)",
            reference="mamba-cache-mode-unsupported",
        )
    try:
        return MambaCacheMode(value)
    except ValueError:
        raise InvalidConfigError(
            f"--mamba-cache-mode {text!r} is not one of vLLM's modes",
            hint=f"one of {', '.join(m.value for m in MambaCacheMode)} (all is not modelled)",
            reference="mamba-cache-mode-unsupported",
        ) from None


def vllm_cache_mode(request: PlanRequest) -> MambaCacheMode:
    """The request's --mamba-cache-mode, else its vLLM release's default (align from
    ``VLLM_ALIGN_FROM``, prefix caching on for hybrids)."""
    if request.mamba_cache_mode is not None:
        return request.mamba_cache_mode
    return MambaCacheMode.ALIGN if _vllm_from(request, VLLM_ALIGN_FROM) else MambaCacheMode.NONE


def vllm_logs_concurrency(request: PlanRequest) -> bool:
    """Whether the request's vLLM release logs its KV tokens as max concurrency × max_model_len
    (``VLLM_CONCURRENCY_LOG_FROM``) rather than blocks // groups × block size."""
    return _vllm_from(request, VLLM_CONCURRENCY_LOG_FROM)


def _vllm_from(request: PlanRequest, first: tuple[int, int, int]) -> bool:
    """Whether the request's vLLM release is ``first`` or later (an unreadable one: earlier)."""
    return (release(request.vllm_version) or (0, 0, 0)) >= first


def mixer_kernels(request: PlanRequest) -> bool:
    """Whether a hybrid's training runs the mixer kernels (fla, causal-conv1d, mamba-ssm): as the
    request says, else unless attention is eager (the kernels' absence stands in for it)."""
    if request.mixer_kernels is not None:
        return request.mixer_kernels
    return request.attention is not Attention.EAGER


def sglang_state_slots(request: PlanRequest, rest: float, per_request: float) -> int:
    """SGLang's max_mamba_cache_size: --max-mamba-cache-size, else the slots in the
    --mamba-full-memory-ratio share of ``rest`` bytes (state / KV = ratio)."""
    if request.max_mamba_cache_size is not None:
        return request.max_mamba_cache_size
    if rest <= 0 or not per_request:
        return 0
    # rest · r / (1 + r), written so a huge ratio does not overflow to inf / inf
    share = rest / (1 + 1 / request.mamba_full_memory_ratio)
    return int(share // per_request)


def _vllm_dtypes(
    state: StateSpec, compute_bytes: float, config_ssm: float | None, request: PlanRequest | None
) -> tuple[float, float]:
    """(conv bytes, recurrent bytes) per element as vLLM keeps them under the request's knobs."""
    conv_name = request.mamba_cache_dtype if request is not None else None
    ssm_name = request.mamba_ssm_cache_dtype if request is not None else None
    conv = VLLM_MAMBA_DTYPES[mamba_dtype("--mamba-cache-dtype", conv_name or "auto")]
    conv = conv or compute_bytes
    if state.kind not in VLLM_SSM_DTYPE_MIXERS:
        return conv, conv
    ssm = VLLM_MAMBA_DTYPES[mamba_dtype("--mamba-ssm-cache-dtype", ssm_name or "auto")]
    return conv, ssm or config_ssm or conv


def _columns_and_dtypes(
    spec: ModelSpec,
    state: StateSpec,
    stack: StateStack,
    compute_bytes: float,
    request: PlanRequest | None,
) -> tuple[int, float, float]:
    """(conv columns, conv bytes, recurrent bytes) per element as ``stack`` keeps them."""
    if stack is StateStack.HF:
        recurrent = HF_RECURRENT_BYTES.get(state.kind, compute_bytes)
        return state.conv_kernel, compute_bytes, recurrent
    columns = max(0, state.conv_kernel - 1)
    config_ssm = config_ssm_bytes(spec, stack)
    if stack is StateStack.VLLM:
        return columns, *_vllm_dtypes(state, compute_bytes, config_ssm, request)
    return columns, SGLANG_CONV_BYTES, config_ssm or SGLANG_SSM_BYTES


def conv_channels_per_rank(state: StateSpec, tp: int, share: float) -> float:
    """The conv channels one rank keeps: its ``share`` of them, but a Mamba-2 mixer with one
    B/C group copies that group to every rank (MambaStateShapeCalculator.mamba2_state_shape:
    n_groups + extra_groups_for_head_shards, i.e. tp groups, before the split by tp)."""
    scan = state.mixer_shape
    if not isinstance(scan, Mamba2Shape) or tp <= 1 or scan.groups % tp == 0:
        return state.conv_channels * share
    bc = 2 * scan.groups * scan.d_state
    return (state.conv_channels - bc) * share + 2 * scan.d_state * ceil_div(scan.groups, tp)


def state_layout(
    spec: ModelSpec,
    lay: Layout,
    stack: StateStack,
    compute_bytes: float,
    stage: int = 0,
    *,
    request: PlanRequest | None = None,
) -> StateLayout | None:
    """The state one sequence keeps on a GPU of ``stage`` (None: no state blocks).
    ``compute_bytes``: the model's compute dtype (what the conv input and vLLM's auto use);
    ``request``: the engine's knobs (vLLM's Mamba cache dtypes), None: their defaults."""
    state = spec.state
    if state is None:
        return None
    _, layers = stage_mixers(spec, lay.pp, stage)
    columns, conv_b, recurrent_b = _columns_and_dtypes(spec, state, stack, compute_bytes, request)
    share = heads_per_rank(state.num_heads, lay.tp) / state.num_heads if state.num_heads else 1.0
    return StateLayout(
        layers=layers,
        conv_bytes=conv_channels_per_rank(state, lay.tp, share) * columns * conv_b,
        recurrent_bytes=state.recurrent_state_elements * share * recurrent_b,
        source=f"{state.kind} state per sequence and block: {SOURCES[stack]}",
    )


# --- vLLM's hybrid allocator ----------------------------------------------------------------------

# HybridAttentionMambaModelConfig (vllm/model_executor/models/config.py): the attention block is
# raised to a multiple of 16 tokens (the attention backends' kernel block alignment) until one
# attention page holds one state page; the state page is padded to the attention page.
VLLM_BLOCK_ALIGNMENT = 16
# vllm/v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size: layers of one kind are
# grouped by the smallest kind's count, or the largest's when it is under 1.5× the smallest.
VLLM_GROUP_SPREAD = 1.5
# MambaSpec.max_memory_usage_bytes: a state group takes one block per request; under
# mamba_cache_mode "align" (prefix caching on) two, the last block boundary's state kept. A
# v0.17.0 start-up log of a Qwen3.5 hybrid shows "align" by default; earlier releases are
# planned with "none" (the first release with align by default is not confirmed).
VLLM_ALIGN_FROM = (0, 17, 0)
# "GPU KV cache size: N tokens" (kv_cache_utils._report_kv_cache_config). Older releases log
# num_blocks // len(kv_cache_groups) × min block size: so 0.10.2 (held-out V360) and 0.19.0
# (vllm#40691: 290,864 tokens beside "33.04x" for 32,768, a Qwen3.5 hybrid). Newer ones log
# int(max_concurrency × max_model_len), the concurrency from get_max_concurrency_for_kv_cache_
# config (a state group one block per request, "align" or not): 0.23.0 reproduces so exactly
# (held-out V362) and 0.24.0 logs so (club-3090#612: 567,978 tokens = 4.33x × 131,072). The
# change was proposed by vllm#38364 / #40694 (closed) / #40384 (open on 2026-04-22); the first
# release between 0.19.0 and 0.23.0 that carries it is not confirmed: 0.23.0 is the first
# release known to log the new way, the older formula is kept below it.
VLLM_CONCURRENCY_LOG_FROM = (0, 23, 0)


@dataclass(frozen=True, slots=True)
class HybridPool:
    """vLLM's one block pool shared by the attention and state groups of a hybrid."""

    block_size: int  # attention block in tokens (vLLM's override of --block-size)
    page_bytes: float  # one block of one layer; a state layer's page padded to it
    group_size: int  # layers per KV-cache group: the pool has this many tensors
    attention_groups: int
    state_groups: int
    state_blocks: int  # blocks one request's state group takes (1; 2 under "align")
    blocks: int  # blocks in the pool (num_gpu_blocks)
    blocks_per_sequence: int  # one max_model_len request: attention blocks + state blocks
    sequences: int  # max_model_len requests that fit (vLLM's "Maximum concurrency")
    logged_tokens: int  # "GPU KV cache size: N tokens", by release (VLLM_CONCURRENCY_LOG_FROM)

    @property
    def block_bytes(self) -> float:
        """One block id across the group's layers (page × group_size)."""
        return self.page_bytes * self.group_size

    @property
    def pool_bytes(self) -> int:
        return int(self.blocks * self.block_bytes)

    @property
    def sequence_bytes(self) -> int:
        return int(self.blocks_per_sequence * self.block_bytes)

    def state_bytes(self, sequences: int) -> int:
        """The state blocks ``sequences`` running requests hold."""
        return int(sequences * self.state_groups * self.state_blocks * self.block_bytes)


def vllm_block_size(kv_page_token: float, state_page: float, requested: int) -> int:
    """The attention block vLLM runs: the requested one unless too small to hold a state page."""
    if not kv_page_token:
        return requested
    needed = VLLM_BLOCK_ALIGNMENT * math.ceil(state_page / (VLLM_BLOCK_ALIGNMENT * kv_page_token))
    return max(requested, needed)


def vllm_groups(counts: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    """(group size, groups per kind) as vLLM groups layers of several kinds (the counts of
    each; a kind with none gets no group): groups of the smallest kind's count, or of the
    largest's when every count is within ``VLLM_GROUP_SPREAD`` of the smallest."""
    present = [n for n in counts if n]
    size = min(present)
    if max(present) < VLLM_GROUP_SPREAD * size:
        size = max(present)
    return size, tuple(ceil_div(n, size) for n in counts)


def hybrid_pool(
    kv_page_token: float,
    attention_layers: int,
    state: StateLayout,
    pool_bytes: float,
    requested_block: int,
    max_len: int,
    *,
    mode: MambaCacheMode = MambaCacheMode.NONE,
    concurrency_log: bool = False,
) -> HybridPool:
    """vLLM's pool for a hybrid with ``pool_bytes`` to fill. ``kv_page_token``: K and V of one
    attention layer and token on this GPU (vllm/v1/kv_cache_interface.py FullAttentionSpec with
    block_size 1); ``state.bytes_per_layer`` is the MambaSpec page before padding. ``mode``:
    ``vllm_cache_mode`` (align keeps two state pages per request, none one).
    ``concurrency_log``: ``vllm_logs_concurrency``, how the release logs the KV tokens."""
    block = vllm_block_size(kv_page_token, state.bytes_per_layer, requested_block)
    page = max(block * kv_page_token, state.bytes_per_layer)
    size, (attention_groups, state_groups) = vllm_groups((attention_layers, state.layers))
    blocks = max(0, int(pool_bytes // (page * size))) if page and size else 0
    state_blocks = 2 if mode is MambaCacheMode.ALIGN else 1
    per_seq = attention_groups * ceil_div(max_len, block) + state_groups * state_blocks
    groups = attention_groups + state_groups
    if concurrency_log:
        # the logged concurrency counts one block per state group, whatever the mode
        logged_per_seq = attention_groups * ceil_div(max_len, block) + state_groups
        logged = blocks * max_len // logged_per_seq
    else:
        logged = blocks // groups * block if groups else 0
    return HybridPool(
        block_size=block,
        page_bytes=page,
        group_size=size,
        attention_groups=attention_groups,
        state_groups=state_groups,
        state_blocks=state_blocks,
        blocks=blocks,
        blocks_per_sequence=per_seq,
        sequences=blocks // per_seq if per_seq else 0,
        logged_tokens=logged,
    )
