"""vLLM's and SGLang's rotary position tables: the cos/sin cache each RotaryEmbedding keeps on the
GPU.

vLLM's ``RotaryEmbedding.__init__`` (vllm/model_executor/layers/rotary_embedding, ``base.py``)
computes ``cos_sin_cache`` — one row per position, ``rotary_dim`` columns (cos and sin halves) —
casts it to the ``dtype`` ``get_rope`` was given (the model dtype unless the model file passes
one) and registers it as a non-persistent buffer. The model is built on the GPU, so the table is
inside what "Loading model weights took X GiB" measures, although no checkpoint tensor holds it.
``get_rope`` caches instances by (head size, rotary dim, max position, rope parameters, dtype):
every layer with the same rope shares one table, so a model holds one per distinct rope (Gemma-3:
its sliding layers' local rope and its global layers' scaled rope). Every rank builds its own
(tensor parallelism does not split it; each pipeline stage holds one).

Rows per scaling type, from each class's ``_compute_cos_sin_cache``:

* default, ``llama3`` (only the inverse frequencies change): ``max_position_embeddings``;
* ``linear`` and ``dynamic`` (with ``factor``): ``max_position_embeddings × factor``
  (linear: one block per factor, concatenated);
* ``yarn`` (``YaRNScalingRotaryEmbedding``) and DeepSeek's ``deepseek_yarn``: get_rope passes
  ``original_max_position_embeddings`` and the class builds ``original × factor`` rows;
* ``longrope`` (``Phi3LongRoPEScaledRotaryEmbedding``): a short table of
  ``original_max_position_embeddings`` rows and a long one of ``max_position_embeddings``.

Not modelled (rows not confirmed from the source read): MRoPE (``mrope_section``), ``ntk``,
``dynamic`` with ``alpha``, dual-chunk and xdrope variants; such models get no table and a note.
Kept in fp32 instead of the model dtype only where the model file says so (gpt-oss passes
``dtype=torch.float32``); DeepSeek's class keeps fp32 when FlashInfer's rope kernel is enabled,
which needs the rotary custom op on (off by default under torch.compile): not modelled.

SGLang (python/sglang/srt/layers/rotary_embedding.py, read at 00a66eb, 2026-11) keeps the same
tables with three differences, modelled here only as its source reads:

* ``RotaryEmbedding.__init__`` leaves the table in fp32 on CUDA ("cache needs to be in FP32 for
  numerical stability": ``if not _is_cuda: cache = cache.to(dtype)``), for every class built on
  it (default, llama3, linear, dynamic, yarn, deepseek_yarn), from PR #3169 "[kernel] Use
  sgl_kernel rope" (merged 2025-01-27; first release assumed 0.4.2 from the date). Before it
  SGLang took ``get_rope`` from vLLM: the model dtype. A forward outside the sgl_kernel path
  casts the table later; the load has already counted it in fp32.
* ``Phi3LongRoPEScaledRotaryEmbedding`` (its own nn.Module) casts to the model dtype and
  registers three buffers: the short table, the long table and their concatenation, so
  ``2 × (original + max)`` rows.
* Gemma-3 (models/gemma3_causal.py ``Gemma3Attention``, read at 038c87d) passes
  ``rope_scaling={"rope_type": "default"}`` to both ropes: two tables of
  ``max_position_embeddings`` rows (local base, global base), the global one not stretched.

``get_rope`` caches by the same key as vLLM (``_ROPE_DICT``): one table per distinct rope on
every rank. The tables are allocated while the model is built, so they are inside SGLang's
"Load weight end ... mem usage" and inside the static share its pool is cut from.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.catalog.families.fields import MAX_CONFIG_INT
from gpuwarden.planner.context import positive_number
from gpuwarden.planner.versions import release
from gpuwarden.planner.weight_formats import FP32_BYTES
from gpuwarden.types.model import ModelSpec, PositionKind, RopeTables

SOURCE = (
    "vLLM RotaryEmbedding cos_sin_cache (rotary_embedding/base.py register_buffer), one per "
    "distinct rope (get_rope's cache)"
)
SGLANG_SOURCE = (
    "SGLang RotaryEmbedding cos_sin_cache (layers/rotary_embedding.py register_buffer; fp32 on "
    "CUDA), one per distinct rope (get_rope's _ROPE_DICT)"
)
# SGLang PR #3169 (merged 2025-01-27): tables stay fp32 on CUDA; first release assumed 0.4.2.
SGLANG_FP32_TABLES = (0, 4, 2)

# Model files that pass get_rope an explicit dtype (vllm/model_executor/models/<file>.py;
# BlockTraits.vllm_rope_fp32: gpt_oss.py OAIAttention dtype=torch.float32). Gemma-3
# (models/gemma3.py Gemma3Attention; BlockTraits.rope_tables PER_LAYER_TYPE): sliding layers use
# rope_local_base_freq with rope_scaling {"rope_type": "default"}, global layers rope_theta with
# config.rope_scaling.
# transformers' Gemma3TextConfig defaults, for configs that leave them out
_GEMMA3_DEFAULT_BASES = (10_000.0, 1_000_000.0)
_STRETCHED = frozenset({"linear", "dynamic"})  # max_position × factor
_FROM_ORIGINAL = frozenset({"yarn", "deepseek_yarn"})  # original_max_position × factor
_AS_STATED = frozenset({"default", "llama3"})


@dataclass(frozen=True, slots=True)
class RotaryTable:
    """One cos/sin cache: ``rows`` positions × ``width`` values of ``dtype_bytes`` each."""

    what: str
    rows: int
    width: int
    dtype_bytes: float

    @property
    def bytes(self) -> int:
        return int(self.rows * self.width * self.dtype_bytes)


@dataclass(frozen=True, slots=True)
class RotaryTables:
    tables: tuple[RotaryTable, ...]
    unmodelled: str | None = None  # why a rope the model uses has no table here

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tables)


def _config(spec: ModelSpec) -> dict[str, object]:
    """The text model's config: multimodal configs (Gemma-3) nest it under text_config."""
    raw: dict[str, object] = dict(spec.raw_config)
    text = raw.get("text_config")
    if isinstance(text, dict):
        raw.update(text)
    return raw


def _rotary_dim(spec: ModelSpec, cfg: dict[str, object]) -> int:
    """Columns of the table: get_rope's rotary_dim = head_size × partial_rotary_factor
    (GPT-NeoX ``rotary_pct``); MLA ropes only the qk_rope_head_dim part."""
    if spec.mla is not None:
        return spec.mla.qk_rope_head_dim
    factor = (
        positive_number(cfg.get("partial_rotary_factor"))
        or positive_number(cfg.get("rotary_pct"))
        or 1.0
    )
    return int(spec.head_dim * min(factor, 1.0))


def _rows(max_position: int, rope: object) -> int | None:
    """Positions in the table for one rope_scaling dict (None: a type not modelled)."""
    if not isinstance(rope, dict):
        return max_position
    if "mrope_section" in rope:
        return None
    kind = _kind(rope)
    factor = positive_number(rope.get("factor"))
    original = positive_number(rope.get("original_max_position_embeddings"))
    rows: float | None = None
    if kind in _AS_STATED:
        rows = max_position
    elif kind in _STRETCHED and factor is not None and "alpha" not in rope:
        rows = max_position * factor
    elif kind in _FROM_ORIGINAL and factor is not None and original is not None:
        rows = original * factor
    elif kind in {"longrope", "su"} and original is not None:
        rows = int(original) + max_position
    # more positions than any config field may hold (catalog MAX_CONFIG_INT) is a damaged config
    return int(rows) if rows is not None and rows <= MAX_CONFIG_INT else None


def _kind(rope: object) -> str:
    if not isinstance(rope, dict):
        return "default"
    return str(rope.get("rope_type", rope.get("type", "default")))


def vllm_rotary_tables(spec: ModelSpec, model_dtype_bytes: float) -> RotaryTables:
    """The rotary tables vLLM builds on every GPU for ``spec`` (none for non-rotary models)."""
    max_position = spec.max_position_embeddings
    if spec.position_encoding is not PositionKind.ROPE or not max_position:
        return RotaryTables(())
    cfg = _config(spec)
    width = _rotary_dim(spec, cfg)
    dtype_bytes = FP32_BYTES if spec.traits.vllm_rope_fp32 else model_dtype_bytes
    rope = cfg.get("rope_scaling")
    ropes: list[tuple[str, object]] = [(_kind(rope), rope)]
    if _local_and_global(spec) and _two_ropes(cfg, rope):
        ropes = [("local (sliding layers)", None), (f"global {_kind(rope)}", rope)]
    tables: list[RotaryTable] = []
    for what, scaling in ropes:
        rows = _rows(max_position, scaling)
        if rows is None:
            return RotaryTables((), f"rope type {_kind(scaling)!r}: vLLM's table not modelled")
        tables.append(RotaryTable(what, rows, width, dtype_bytes))
    return RotaryTables(tuple(tables))


def _local_and_global(spec: ModelSpec) -> bool:
    return spec.traits.rope_tables is RopeTables.PER_LAYER_TYPE


def _two_ropes(cfg: dict[str, object], rope: object) -> bool:
    """Gemma-3's local and global ropes are one get_rope key only if base and scaling agree."""
    local, global_ = _gemma3_bases(cfg)
    return local != global_ or _kind(rope) != "default"


def _gemma3_bases(cfg: dict[str, object]) -> tuple[float, float]:
    """Gemma-3's local (sliding layers) and global rope bases."""
    local = positive_number(cfg.get("rope_local_base_freq")) or _GEMMA3_DEFAULT_BASES[0]
    global_ = positive_number(cfg.get("rope_theta")) or _GEMMA3_DEFAULT_BASES[1]
    return local, global_


def sglang_rotary_tables(spec: ModelSpec, model_dtype_bytes: float, version: str) -> RotaryTables:
    """The rotary tables SGLang ``version`` builds on every GPU for ``spec`` (module docstring)."""
    max_position = spec.max_position_embeddings
    if spec.position_encoding is not PositionKind.ROPE or not max_position:
        return RotaryTables(())
    cfg = _config(spec)
    width = _rotary_dim(spec, cfg)
    parts = release(version)
    fp32 = parts is None or parts >= SGLANG_FP32_TABLES
    dtype_bytes = FP32_BYTES if fp32 else model_dtype_bytes
    rope = cfg.get("rope_scaling")
    if _local_and_global(spec):
        return RotaryTables(_sglang_gemma3(cfg, max_position, width, dtype_bytes))
    kind = _kind(rope)
    if kind in {"longrope", "su"}:
        return _sglang_longrope(rope, max_position, width, model_dtype_bytes)
    rows = _rows(max_position, rope)
    if rows is None:
        return RotaryTables((), f"rope type {kind!r}: SGLang's table not modelled")
    return RotaryTables((RotaryTable(kind, rows, width, dtype_bytes),))


def _sglang_gemma3(
    cfg: dict[str, object], max_position: int, width: int, dtype_bytes: float
) -> tuple[RotaryTable, ...]:
    """Gemma3Attention: both ropes "default" (no stretch), one table per distinct base."""
    local, global_ = _gemma3_bases(cfg)
    if local == global_:
        return (RotaryTable("default", max_position, width, dtype_bytes),)
    return (
        RotaryTable("local (sliding layers)", max_position, width, dtype_bytes),
        RotaryTable("global default", max_position, width, dtype_bytes),
    )


def _sglang_longrope(
    rope: object, max_position: int, width: int, model_dtype_bytes: float
) -> RotaryTables:
    """Phi3LongRoPEScaledRotaryEmbedding: short, long and their concatenation, model dtype."""
    original = (
        positive_number(rope.get("original_max_position_embeddings"))
        if isinstance(rope, dict)
        else None
    )
    if original is None or original > MAX_CONFIG_INT:
        return RotaryTables((), "rope type 'longrope' without original_max_position_embeddings")
    rows = 2 * (int(original) + max_position)
    return RotaryTables(
        (RotaryTable("longrope short + long + both", rows, width, model_dtype_bytes),)
    )
