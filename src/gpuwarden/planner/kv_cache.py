"""KV cache: bytes per token, tokens held, and vLLM's paged blocks (memory.md §2.9).

Blocks whose K/V shapes or windows differ by kind (``ModelSpec.kv_groups``: Gemma 4's 256-wide
sliding and 512-wide full blocks, Gemma 3n's and MiMo's, KV-shared blocks in no group) and the
DSA indexer's key beside the MLA latent are kept as ``KvKind`` entries, one per kind, each with
its own bytes per token and window; a spec with neither keeps the single-shape layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwarden.planner.layout import Layout, ceil_div, heads_per_rank, stage_layers
from gpuwarden.planner.precision import kv_dtype_bytes, recipe
from gpuwarden.planner.state import stage_mixers, vllm_groups
from gpuwarden.planner.weight_formats import FP32_BYTES
from gpuwarden.types.model import KvGroup, MlaSpec, ModelSpec, Structure
from gpuwarden.types.plan import PlanRequest

# The DSA indexer key in vLLM and SGLang: fp8 values plus one fp32 scale per 128, whatever the KV
# cache dtype (vllm-project/vllm vllm/model_executor/models/deepseek_v2.py @ 002d6073 Indexer,
# DeepseekV32IndexerCache; sgl-project/sglang model_runner_kv_cache_mixin.py @ 001ccef0
# get_cell_size_per_token, NSATokenToKVPool.quant_block_size), whole on every TP rank.
INDEXER_QUANT_BLOCK = 128
INDEXER_SCALE_BYTES = FP32_BYTES


@dataclass(frozen=True, slots=True)
class KvKind:
    """Blocks of one kind on this GPU: what each caches per token, over how many tokens."""

    layers: int
    bytes_per_token_layer: float
    window: int | None  # None: every token
    # cached beside another kind's tensors in the same blocks (the DSA indexer key): vLLM gives
    # it its own layer spec, but it adds no block to the stack
    beside: bool = False


@dataclass(frozen=True, slots=True)
class KvLayout:
    """Per GPU of the most loaded pipeline stage."""

    full_layers: int  # layers caching every token
    window_layers: int  # sliding-window layers caching at most ``window`` tokens
    window: int | None
    bytes_per_token_layer: float  # K and V of one layer, one token, this GPU's heads
    source: str
    # per-kind layout (kv_groups, the DSA indexer); empty: one shape, the fields above
    kinds: tuple[KvKind, ...] = ()

    @property
    def layers(self) -> int:
        """Blocks on this GPU that cache anything."""
        return self.full_layers + self.window_layers

    @property
    def bytes_per_token(self) -> float:
        """All local layers, assuming the sequence is within every window."""
        if self.kinds:
            return sum(k.bytes_per_token_layer * k.layers for k in self.kinds)
        return self.bytes_per_token_layer * self.layers

    def bytes_for(self, tokens_per_sequence: int, sequences: int) -> float:
        if self.kinds:
            per_kind = (
                k.bytes_per_token_layer * k.layers * _held(tokens_per_sequence, k.window)
                for k in self.kinds
            )
            return sum(per_kind) * sequences
        held_window = min(tokens_per_sequence, self.window or tokens_per_sequence)
        per_seq = self.bytes_per_token_layer * (
            self.full_layers * tokens_per_sequence + self.window_layers * held_window
        )
        return per_seq * sequences

    def split_bytes_per_token(self) -> tuple[float, float]:
        """(every-token kinds, windowed kinds): one token's bytes over this GPU's blocks."""
        full = sum(k.bytes_per_token_layer * k.layers for k in self.kinds if k.window is None)
        return full, self.bytes_per_token - full


def _held(tokens: int, window: int | None) -> int:
    return min(tokens, window or tokens)


def kv_layout(request: PlanRequest, lay: Layout, *, paged: bool) -> KvLayout:
    spec: ModelSpec = request.model
    b_kv = kv_dtype_bytes(request)
    decoder_layers = spec.num_layers
    layers = stage_layers(decoder_layers, lay.pp, 0)
    if spec.kv_groups and spec.mla is None:
        return _grouped_layout(spec, spec.kv_groups, layers, lay.tp, b_kv)
    # a hybrid's state blocks cache no K and V (planner/state.py keeps their state)
    attention, _ = stage_mixers(spec, lay.pp, 0)
    if spec.mla is not None:
        # MLA caches its compressed latent and the rope key once per token, every TP rank a copy:
        # vLLM's MLA backends, and transformers 5 (DeepSeek-V2/V3 attention update the cache
        # "while latent KV is still compressed"; transformers 4 cached every head's K and V).
        per = (spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim) * b_kv
        source = "MLA latent: (kv_lora_rank + qk_rope_head_dim) per token and layer"
        if spec.mla.index_head_dim:
            key_bytes = _indexer_key_bytes(request, spec.mla, paged=paged)
            return _indexed_layout(spec, spec.mla, attention, layers, per, key_bytes, paged=paged)
    else:
        heads = heads_per_rank(spec.num_kv_heads, lay.tp)
        per = 2 * heads * spec.head_dim * b_kv
        source = "2 · n_kv/t · head_dim · bytes (memory.md §2.9); KV heads replicate when t > n_kv"
    window_layers = 0
    if spec.sliding_window is not None and spec.sliding_window_layers:
        window_layers = round(layers * spec.sliding_window_layers / max(1, decoder_layers))
        window_layers = min(window_layers, attention)
    return KvLayout(
        full_layers=attention - window_layers,
        window_layers=window_layers,
        window=spec.sliding_window,
        bytes_per_token_layer=per,
        source=source,
    )


def _grouped_layout(
    spec: ModelSpec, groups: tuple[KvGroup, ...], stage: int, tp: int, b_kv: float
) -> KvLayout:
    """Per-kind K/V: each group's heads split over TP (replicated when TP exceeds them), its
    keys and values as wide as the group says, over its own window; blocks in no group (KV
    sharing) cache nothing."""
    per_token = [_group_bytes(g, tp, b_kv) for g in groups]
    shares = _apportion([g.layers for g in groups], per_token, stage, spec.num_layers)
    kinds = tuple(
        KvKind(layers=n, bytes_per_token_layer=b, window=g.window)
        for g, n, b in zip(groups, shares, per_token, strict=True)
    )
    full = sum(k.layers for k in kinds if k.window is None)
    windowed = sum(k.layers for k in kinds if k.window is not None)
    total = full + windowed
    return KvLayout(
        full_layers=full,
        window_layers=windowed,
        window=max((k.window for k in kinds if k.window is not None), default=None),
        bytes_per_token_layer=sum(k.bytes_per_token_layer * k.layers for k in kinds)
        / max(1, total),
        source=_grouped_source(spec, groups),
        kinds=kinds,
    )


def _grouped_source(spec: ModelSpec, groups: tuple[KvGroup, ...]) -> str:
    """Each group's K/V shape and window, and the KV-shared blocks that cache nothing."""
    words = "; ".join(
        f"{g.layers} blocks {g.num_kv_heads} KV heads × ({g.head_dim} + {g.value_dim})"
        + (f" over {g.window:,} tokens" if g.window is not None else "")
        for g in groups
    )
    shared = spec.num_layers - sum(g.layers for g in groups)
    return f"K/V per kind, n_kv/t · (head_dim + v_head_dim) · bytes: {words}" + (
        f"; {shared} KV-shared blocks cache nothing" if shared > 0 else ""
    )


def _apportion(counts: list[int], weights: list[float], stage: int, total: int) -> list[int]:
    """The blocks of each kind on a stage of ``stage`` of the ``total`` blocks, in proportion
    (largest remainders; a tie goes to the kind caching more per token, the stage planned being
    the most loaded): the stage's caching blocks add up to its share of all caching blocks."""
    exact = [stage * n / max(1, total) for n in counts]
    shares = [int(x) for x in exact]
    left = min(stage, round(stage * sum(counts) / max(1, total))) - sum(shares)
    order = sorted(range(len(counts)), key=lambda i: (exact[i] - shares[i], weights[i]))
    for i in order[len(order) - left :] if left > 0 else ():
        shares[i] += 1
    return shares


def _group_bytes(group: KvGroup, tp: int, b_kv: float) -> float:
    """K and V of one block of the group and one token on this GPU."""
    heads = heads_per_rank(group.num_kv_heads, tp)
    return heads * (group.head_dim + group.value_dim) * b_kv


def _indexer_key_bytes(request: PlanRequest, mla: MlaSpec, *, paged: bool) -> float:
    """One token's DSA indexer key in one block. vLLM / SGLang: fp8 values and an fp32 scale per
    128; transformers 5.24 (cache_utils DynamicIndexedLayer): ``indexer_keys`` in the
    activation dtype."""
    if paged:
        scales = math.ceil(mla.index_head_dim / INDEXER_QUANT_BLOCK) * INDEXER_SCALE_BYTES
        return float(mla.index_head_dim + scales)
    return float(mla.index_head_dim * recipe(request).act_bytes)


def _indexed_layout(
    spec: ModelSpec,
    mla: MlaSpec,
    attention: int,
    stage: int,
    latent: float,
    key: float,
    *,
    paged: bool,
) -> KvLayout:
    """MLA with the DSA indexer: the latent in every block, the indexer key beside it in the
    indexed blocks (GLM-5's "shared" blocks reuse another block's top-k and cache no key)."""
    indexed = spec.num_layers if mla.indexed_layers is None else mla.indexed_layers
    keyed = min(stage, round(stage * indexed / max(1, spec.num_layers)))
    how = "fp8 + an fp32 scale per 128" if paged else "activation dtype"
    return KvLayout(
        full_layers=attention,
        window_layers=0,
        window=None,
        bytes_per_token_layer=latent,
        source="MLA latent: (kv_lora_rank + qk_rope_head_dim) per token and layer; DSA indexer "
        f"key ({mla.index_head_dim}, {how}: {key:g} B) in {indexed} indexed blocks",
        kinds=(
            KvKind(layers=attention, bytes_per_token_layer=latent, window=None),
            KvKind(layers=keyed, bytes_per_token_layer=key, window=None, beside=True),
        ),
    )


def static_kv_bytes(request: PlanRequest, kv: KvLayout) -> int:
    """HF generate with a batch of equal-length sequences (prompt + generated tokens)."""
    spec = request.model
    length = request.prompt_tokens + request.new_tokens
    if spec.structure is Structure.ENCODER_DECODER:
        # Self-attention caches generated tokens; cross-attention caches the encoder output.
        return int(kv.bytes_per_token_layer * kv.full_layers * length * request.batch)
    return int(kv.bytes_for(length, request.batch))


@dataclass(frozen=True, slots=True)
class PagedPool:
    page_bytes: float  # one block of one layer
    blocks: int  # blocks that fit the pool (per layer)
    tokens: int
    blocks_per_sequence: int
    sequences: int
    tensors: int = 0  # layers sharing one block id (vLLM's group size); 0: every layer
    block_size: int = 0  # tokens of the smallest block (kinds raised to one page); 0: requested
    groups: int = 0  # KV-cache groups (per-kind layouts)


def paged_pool(kv: KvLayout, pool_bytes: float, block: int, max_model_len: int) -> PagedPool:
    """vLLM: num_blocks = available // (page_size · layers) (vllm/v1/kv_cache_interface.py)."""
    if kv.kinds:
        return _grouped_pool(kv.kinds, pool_bytes, block, max_model_len)
    layers = kv.layers
    page = block * kv.bytes_per_token_layer
    blocks = int(pool_bytes // (page * layers)) if page and layers else 0
    per_seq = ceil_div(max_model_len, block)
    if kv.window_layers and kv.window and not kv.full_layers:
        per_seq = min(per_seq, ceil_div(kv.window - 1, block) + 1)
    return PagedPool(
        page_bytes=page,
        blocks=max(0, blocks),
        tokens=max(0, blocks) * block,
        blocks_per_sequence=per_seq,
        sequences=blocks // per_seq if per_seq else 0,
        tensors=layers,
    )


def _grouped_pool(
    kinds: tuple[KvKind, ...], pool_bytes: float, block: int, max_len: int
) -> PagedPool:
    """vLLM v1's pool when blocks differ by kind (vllm-project/vllm vllm/v1/core/kv_cache_utils.py:
    get_kv_cache_groups, UniformTypeKVCacheSpecs, unify_kv_cache_spec_page_size,
    _get_kv_cache_groups_uniform_page_size; read in 2025-26 copies of the file in the code index,
    the copy stored at bbf906a8 predating the page-size unification).

    * Every kind attends to every token (DSA's latent and indexer key, per-kind widths without
      windows): one group whose block holds every layer's page; blocks = pool // Σ pages.
    * Windows differ: each kind's page is raised to the largest by multiplying its block size
      (a page that does not divide the largest is padded to it, as newer vLLM does for backends
      that index by block stride, else vLLM refuses); layers are grouped by kind in groups of
      the smallest kind's count (the largest when all counts are within 1.5×); the pool has
      group-size tensors of num_blocks pages and every group draws its blocks from it.
    """
    present = tuple(k for k in kinds if k.layers and k.bytes_per_token_layer)
    if not present:
        return PagedPool(0.0, 0, 0, 0, 0)
    per_seq_full = ceil_div(max_len, block)
    if all(k.window is None for k in present):
        page = block * sum(k.bytes_per_token_layer * k.layers for k in present)
        blocks = max(0, int(pool_bytes // page))
        return PagedPool(
            page_bytes=page,
            blocks=blocks,
            tokens=blocks * block,
            blocks_per_sequence=per_seq_full,
            sequences=blocks // per_seq_full if per_seq_full else 0,
            tensors=1,
            block_size=block,
            groups=1,
        )
    largest = max(block * k.bytes_per_token_layer for k in present)
    sizes = [block * max(1, int(largest // (block * k.bytes_per_token_layer))) for k in present]
    size, groups = vllm_groups([k.layers for k in present])
    blocks = max(0, int(pool_bytes // (largest * size)))
    per_seq = sum(
        g * _blocks_needed(max_len, b, k.window)
        for g, b, k in zip(groups, sizes, present, strict=True)
    )
    return PagedPool(
        page_bytes=largest,
        blocks=blocks,
        tokens=blocks // sum(groups) * min(sizes),
        blocks_per_sequence=per_seq,
        sequences=blocks // per_seq if per_seq else 0,
        tensors=size,
        block_size=min(sizes),
        groups=sum(groups),
    )


def _blocks_needed(max_len: int, block: int, window: int | None) -> int:
    """One max_len request's blocks in one group (a window keeps its last window − 1 tokens and
    the block being written, as the single-shape pool counts them)."""
    full = ceil_div(max_len, block)
    if window is None:
        return full
    return min(full, ceil_div(window - 1, block) + 1)
