"""KV cache: bytes per token, tokens held, and vLLM's paged blocks (memory.md §2.9)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.planner.layout import Layout, ceil_div, heads_per_rank, stage_layers
from gpuwarden.planner.precision import kv_dtype_bytes
from gpuwarden.planner.state import stage_mixers
from gpuwarden.types.model import ModelSpec, Structure
from gpuwarden.types.plan import PlanRequest


@dataclass(frozen=True, slots=True)
class KvLayout:
    """Per GPU of the most loaded pipeline stage."""

    full_layers: int  # layers caching every token
    window_layers: int  # sliding-window layers caching at most ``window`` tokens
    window: int | None
    bytes_per_token_layer: float  # K and V of one layer, one token, this GPU's heads
    source: str

    @property
    def bytes_per_token(self) -> float:
        """All local layers, assuming the sequence is within every window."""
        return self.bytes_per_token_layer * (self.full_layers + self.window_layers)

    def bytes_for(self, tokens_per_sequence: int, sequences: int) -> float:
        held_window = min(tokens_per_sequence, self.window or tokens_per_sequence)
        per_seq = self.bytes_per_token_layer * (
            self.full_layers * tokens_per_sequence + self.window_layers * held_window
        )
        return per_seq * sequences


def kv_layout(request: PlanRequest, lay: Layout, *, paged: bool) -> KvLayout:
    spec: ModelSpec = request.model
    b_kv = kv_dtype_bytes(request)
    decoder_layers = spec.num_layers
    layers = stage_layers(decoder_layers, lay.pp, 0)
    # a hybrid's state blocks cache no K and V (planner/state.py keeps their state)
    attention, _ = stage_mixers(spec, lay.pp, 0)
    if spec.mla is not None:
        # MLA caches its compressed latent and the rope key once per token, every TP rank a copy:
        # vLLM's MLA backends, and transformers 5 (DeepSeek-V2/V3 attention update the cache
        # "while latent KV is still compressed"; transformers 4 cached every head's K and V).
        per = (spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim) * b_kv
        source = "MLA latent: (kv_lora_rank + qk_rope_head_dim) per token and layer"
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


def paged_pool(kv: KvLayout, pool_bytes: float, block: int, max_model_len: int) -> PagedPool:
    """vLLM: num_blocks = available // (page_size · layers) (vllm/v1/kv_cache_interface.py)."""
    layers = kv.full_layers + kv.window_layers
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
    )
