"""Inference: weights + KV cache + one block's working set (memory.md §2.9).

Three engines. Static batching (HF ``generate``): the cache holds ``batch × (prompt + new)``
tokens and grows by concatenation. vLLM (``gpu_memory_utilization`` set): a profile forward over
``max_num_batched_tokens`` measures weights, activation peak and non-torch memory; the KV pool
takes the rest of ``utilization × total`` in blocks of ``kv_block_size`` tokens. SGLang
(``mem_fraction_static`` or ``engine``): weights and a token pool share ``fraction × free memory``
(planner/sglang.py); activations and CUDA graphs live in the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gpuwarden.planner import stacks
from gpuwarden.planner.kv_cache import (
    KvLayout,
    PagedPool,
    kv_layout,
    paged_pool,
    static_kv_bytes,
)
from gpuwarden.planner.layout import Layout, ceil_div, stage_params
from gpuwarden.planner.lifecycle import LOAD, dequant_bytes, inference_load, packed_head
from gpuwarden.planner.overheads import Overheads
from gpuwarden.planner.precision import Recipe
from gpuwarden.planner.quant_kernel import fp32_compute, nf4_notes
from gpuwarden.planner.quantization import packed_checkpoint
from gpuwarden.planner.rotary import SGLANG_SOURCE as SGLANG_ROTARY_SOURCE
from gpuwarden.planner.rotary import SOURCE as ROTARY_SOURCE
from gpuwarden.planner.rotary import RotaryTables, sglang_rotary_tables, vllm_rotary_tables
from gpuwarden.planner.sglang import (
    MAMBA_SLOTS_PER_REQUEST,
    RESERVED_PER_GRAPH_BS_MB,
    SWA_FULL_TOKENS_RATIO,
    TokenPool,
    batch_pool,
    default_fraction,
    swa_split,
    token_pool,
)
from gpuwarden.planner.state import (
    HybridPool,
    StateLayout,
    hybrid_pool,
    sglang_state_slots,
    state_layout,
    state_stack,
    vllm_cache_mode,
    vllm_logs_concurrency,
)
from gpuwarden.planner.training import Assembled
from gpuwarden.planner.versions import TRANSFORMERS_LAST_POSITION_LOGITS, release
from gpuwarden.planner.vllm_graphs import GraphMemory, graph_memory
from gpuwarden.planner.vllm_profile import (
    VllmProfile,
    non_torch_bytes,
    sampler_peak_bytes,
    uncounted_context_bytes,
    vllm_profile,
)
from gpuwarden.planner.weight_formats import FP32_BYTES
from gpuwarden.planner.working_set import working_set
from gpuwarden.types.plan import (
    ComponentFacts,
    Engine,
    InferenceCapacity,
    MambaCacheMode,
    ParameterFacts,
    Phase,
    PlanRequest,
)
from gpuwarden.units import GIB, KIB, MIB

# Bytes per (sequence × vocabulary entry) while sampling, logits gathered to the full vocabulary
# on every rank. HF generate: the last position's logits upcast to fp32, softmax probabilities.
# vLLM's sampler: per release, from its source (vllm_profile.py).
HF_SAMPLER_BYTES = 8
# Why the engines load a multimodal checkpoint's vision tower (ModelSpec.engine_tower_parameters)
TOWER_SOURCE = (
    "the vision tower: vLLM and SGLang load the *ForConditionalGeneration architecture, its "
    "encoder with the language model (vLLM skips it only under --language-model-only, or "
    "--limit-mm-per-prompt 0 for every modality: docs 'Multimodal models')"
)


# model types whose ForCausalLM.forward in transformers 4.3x-4.44 upcasts the head's output,
# ``logits = self.lm_head(hidden_states)`` then ``logits = logits.float()``: LlamaForCausalLM
# (issue #30860, stacks.py) and the classes copied from it, read in copies of modeling_mistral
# (find_string id 1055326843), modeling_mixtral (24714979108), modeling_qwen2 (58717039988) and
# modeling_gemma ("Copied from ... LlamaForCausalLM with LLAMA->GEMMA", 15086331959)
PROMPT_LOGITS_UPCAST = frozenset({"llama", "mistral", "mixtral", "qwen2", "gemma"})


def _upcasts_prompt_logits(request: PlanRequest) -> bool:
    """Whether the model's pre-4.45 forward copies its logits to fp32 (read for
    ``PROMPT_LOGITS_UPCAST`` only; another type gets a note saying so)."""
    return request.model.model_type in PROMPT_LOGITS_UPCAST


def _logits(request: PlanRequest, rc: Recipe) -> int:
    """HF generate: last-position logits of each sequence and the sampler's copies (not split
    by TP)."""
    return int(request.batch * request.model.vocab_size * (rc.act_bytes + HF_SAMPLER_BYTES))


def keeps_prompt_logits(request: PlanRequest) -> bool:
    """Whether generate's prefill forward returns every prompt position's logits: transformers
    before 4.45 passes no ``num_logits_to_keep`` (versions.py). Unnamed: the newest release."""
    if request.transformers_version is None:
        return False
    parts = release(request.transformers_version)
    return parts is not None and parts < TRANSFORMERS_LAST_POSITION_LOGITS


def _prefill_logits(request: PlanRequest, rc: Recipe) -> int:
    """HF generate's prefill logits. Before transformers 4.45 the head runs on every prompt
    position: while ``.float()`` copies its output both exist (the Llama-style forwards,
    ``PROMPT_LOGITS_UPCAST``), then the returned logits stay while the last position is
    sampled. From 4.45, the last position only (``_logits``)."""
    if not keeps_prompt_logits(request):
        return _logits(request, rc)
    positions = request.batch * request.prompt_tokens * request.model.vocab_size
    upcast = FP32_BYTES if _upcasts_prompt_logits(request) else 0
    returned = upcast or rc.act_bytes
    head = positions * (rc.act_bytes + upcast)
    sampling = positions * returned + request.batch * request.model.vocab_size * HF_SAMPLER_BYTES
    return int(max(head, sampling))


@dataclass(frozen=True, slots=True)
class InferencePlan:
    assembled: Assembled
    capacity: InferenceCapacity
    budget_bytes: int | None  # vLLM: utilization × total


def _served(
    phases: tuple[Phase, ...],
    sources: dict[str, tuple[str, str]],
    facts: dict[str, ComponentFacts],
    notes: dict[str, str],
    *,
    dynamic_bytes: int = 0,
    tensors: int = 0,
) -> Assembled:
    """A serving plan's phases: nothing on the host, nothing trained, one stage planned;
    ``dynamic_bytes`` / ``tensors``: what the allocator's slack is planned from (the paged
    engines allocate their pool once and reuse their activations: none)."""
    return Assembled(
        phases=phases,
        sources=sources,
        facts=facts,
        host_bytes=0,
        unified_bytes=0,
        dynamic_bytes=dynamic_bytes,
        tensors=tensors,
        trainable=0,
        stage=0,
        notes=notes,
    )


def _stage_weights(request: PlanRequest, rc: Recipe, lay: Layout, tower: int) -> int:
    """Weight bytes on the GPU that holds the most: the first stage (embedding, the vision
    tower in the compute dtype, and the head when one stage holds it all), else the last (the
    head) under pipeline parallelism."""
    spec = request.model
    vocab = stacks.vocab_shards(request)
    sp = stage_params(spec, lay, 0, vocab)
    head = packed_head(request, lay, rc)
    weights = int(
        (sp.linear + head) * rc.linear_bytes
        + sp.expert * rc.expert_bytes
        + (sp.other + sp.embedding + sp.head - head + tower) * rc.weight_bytes
    )
    if lay.pp > 1:
        last = stage_params(spec, lay, lay.pp - 1, vocab)
        weights = max(
            weights,
            int(
                last.linear * rc.linear_bytes
                + last.expert * rc.expert_bytes
                + (last.other + last.head) * rc.weight_bytes
            ),
        )
    return weights


def _engine_tower(request: PlanRequest, lay: Layout) -> int:
    """Vision-tower parameters on the first GPU that the engine loads beside the language
    model (``ModelSpec.engine_tower_parameters``): vLLM and SGLang build the
    *ForConditionalGeneration class and load it; HF generate runs AutoModelForCausalLM, which
    does not. Split over TP (vLLM's ``--mm-encoder-tp-mode`` default "weights" shards the
    tower's Linears; the few replicated norms and embeddings are ignored), on the first
    pipeline stage. 0 under vLLM's --language-model-only (``language_model_only``). SGLang has
    no text-only switch for one server (its --language-only is the language server of encoder
    disaggregation, fed by a separate encoder server): its plan keeps the tower."""
    engine = request.serving_engine
    if engine is Engine.HF or (engine is Engine.VLLM and request.language_model_only):
        return 0
    return request.model.engine_tower_parameters // lay.tp


def inference_phases(
    request: PlanRequest, rc: Recipe, lay: Layout, overheads: Overheads
) -> InferencePlan:
    """The phases of serving the model: HF generate's static batch, vLLM's or SGLang's pool."""
    sp = stage_params(request.model, lay, 0, stacks.vocab_shards(request))
    tower = _engine_tower(request, lay)
    weights = _stage_weights(request, rc, lay, tower)
    engine = request.serving_engine
    kv = kv_layout(request, lay, paged=engine is not Engine.HF)
    packed = packed_checkpoint(request)
    stored = "routed experts" if packed and packed.experts_only else "quantized Linears"
    sources: dict[str, tuple[str, str]] = {
        "parameters": (
            "memory.md §2.2: quantized Linears, embeddings and norms in the compute dtype"
            + (f"; {stored} as the checkpoint stores them ({packed.source})" if packed else "")
            + (f"; {TOWER_SOURCE}" if tower else ""),
            f"vision tower {tower:,} parameters on this GPU" if tower else "",
        ),
    }
    facts: dict[str, ComponentFacts] = {
        "parameters": ParameterFacts(
            count=int(sp.total) + tower,
            shards=1,  # ZeRO / FSDP are ignored for inference; TP's split is in sp already
            linear_bytes=rc.linear_bytes if rc.linear_bytes != rc.weight_bytes else None,
            offloaded=False,
            expert_bytes=rc.packed_expert_bytes,
        )
    }
    state = state_layout(request.model, lay, state_stack(engine), rc.act_bytes, request=request)
    if engine is Engine.VLLM:
        return _vllm(request, rc, lay, kv, state, weights, overheads, sources, facts)
    if engine is Engine.SGLANG:
        return _sglang(request, rc, lay, kv, state, weights, overheads, sources, facts)
    return _hf_generate(request, rc, lay, kv, state, weights, overheads, sources, facts)


def _state_detail(state: StateLayout, sequences: int) -> str:
    """One sequence's state blocks, for the plan's ``recurrent_state`` detail."""
    return (
        f"{state.bytes_per_sequence / MIB:,.2f} MiB per sequence ({state.layers} blocks × "
        f"(conv {state.conv_bytes / KIB:,.1f} KiB + recurrent {state.recurrent_bytes / KIB:,.1f} "
        f"KiB)) × {sequences:,} sequences"
    )


def _hybrid_notes(request: PlanRequest, kv: KvLayout, state: StateLayout | None) -> dict[str, str]:
    """The ``hybrid_state`` note of a model with state blocks (none otherwise)."""
    spec = request.model.state
    if state is None or spec is None:
        return {}
    return {
        "hybrid_state": f"hybrid: {state.layers} {spec.kind} blocks keep a fixed state per "
        f"sequence instead of a KV cache; {kv.layers} attention blocks cache K and V"
    }


def _hf_generate(
    request: PlanRequest,
    rc: Recipe,
    lay: Layout,
    kv: KvLayout,
    state: StateLayout | None,
    weights: int,
    overheads: Overheads,
    sources: dict[str, tuple[str, str]],
    facts: dict[str, ComponentFacts],
) -> InferencePlan:
    """transformers' generate: a static batch, prefill then decode, the cache growing by cat."""
    length = request.prompt_tokens + request.new_tokens
    prefill_tokens = request.batch * request.prompt_tokens
    # a prefill matmul dequantizes the 4-bit / 8-bit weight it uses (decode's gemv does not)
    dequant = int(dequant_bytes(request, rc, lay.tp, prefill_tokens))
    ws_prefill = working_set(request, rc, lay, prefill_tokens, request.prompt_tokens) + dequant
    ws_decode = working_set(request, rc, lay, request.batch, length)
    logits = _logits(request, rc)
    prefill_logits = _prefill_logits(request, rc)
    kv_full = static_kv_bytes(request, kv)
    kv_prompt = int(kv_full * request.prompt_tokens / length) if length else 0
    # DynamicCache grows by torch.cat: one layer's cache exists twice while it is extended.
    layers = max(1, kv.layers)
    growth = kv_full // layers if request.new_tokens else 0
    prefill = {
        "parameters": weights,
        "kv_cache": kv_prompt,
        "activations": ws_prefill,
        "logits": prefill_logits,
    }
    decode = {
        "parameters": weights,
        "kv_cache": kv_full,
        "activations": ws_decode + growth,
        "logits": logits,
    }
    sources.update(_hf_sources(kv, request.batch, length, prefill_tokens))
    notes = nf4_notes(request)
    if keeps_prompt_logits(request):
        sources["logits"] = _prompt_logits_source(request)
        notes.update(_prompt_logits_notes(request))
    held_state = 0
    if state is not None and request.model.state is not None:
        # the cache's state blocks exist from the prefill on, one state per sequence
        held_state = int(request.batch * state.bytes_per_sequence)
        prefill["recurrent_state"] = decode["recurrent_state"] = held_state
        sources["recurrent_state"] = (state.source, _state_detail(state, request.batch))
        notes.update(_hybrid_notes(request, kv, state))
    phases = [Phase("prefill", prefill), Phase("decode", decode)]
    loading = inference_load(request, rc, lay, weights, notes)
    if loading is not None:
        zeros = dict.fromkeys(prefill, 0)
        phases.insert(0, Phase(LOAD, {**zeros, **{k: int(v) for k, v in loading.items()}}))
    if dequant:
        notes["dequantize"] = _dequant_note(request, dequant)
    assembled = _served(
        tuple(phases),
        sources,
        facts,
        notes,
        dynamic_bytes=max(ws_prefill + prefill_logits, ws_decode + growth + logits),
        tensors=4 * layers + 8,
    )
    capacity = InferenceCapacity(
        kv_bytes_per_token=int(kv.bytes_per_token),
        kv_tokens=request.batch * length,
        kv_pool_bytes=kv_full + held_state,
        non_kv_bytes=weights
        + max(ws_prefill + prefill_logits, ws_decode + logits)
        + overheads.total,
    )
    return InferencePlan(assembled, capacity, None)


def _hf_sources(
    kv: KvLayout, batch: int, length: int, prefill_tokens: int
) -> dict[str, tuple[str, str]]:
    """HF generate's cache, working set and logits: where each comes from."""
    return {
        "kv_cache": (
            kv.source,
            f"{kv.bytes_per_token / KIB:,.1f} KiB per token × {batch} × {length} tokens",
        ),
        "activations": (
            "one block's forward working set (no autograd); HF DynamicCache concatenation copy",
            f"prefill {prefill_tokens:,} tokens",
        ),
        "logits": ("HF generate: last-position logits, fp32 upcast, sampling", ""),
    }


def _prompt_logits_source(request: PlanRequest) -> tuple[str, str]:
    """Where the prefill's every-position logits come from (transformers < 4.45)."""
    upcast = _upcasts_prompt_logits(request)
    return (
        f"HF generate, transformers {request.transformers_version} (before 4.45): the prefill "
        "computes every prompt position's logits"
        + (", and the forward's logits.float() copies them to fp32" if upcast else "")
        + "; decode: the last position, sampling",
        f"prefill {request.batch:,} × {request.prompt_tokens:,} positions × "
        f"{request.model.vocab_size:,} vocabulary",
    )


def _prompt_logits_notes(request: PlanRequest) -> dict[str, str]:
    """A model type whose pre-4.45 forward nobody here has read: planned without the fp32 copy."""
    if _upcasts_prompt_logits(request):
        return {}
    return {
        "prompt_logits": f"transformers {request.transformers_version}: whether "
        f"{request.model.model_type}'s forward copies its logits to fp32 was not read; the "
        "prefill's every-position logits are planned in the compute dtype only"
    }


def _dequant_note(request: PlanRequest, dequant: int) -> str:
    """What the prefill's dequantized copy of the largest packed weight holds."""
    copies = stacks.profile(request).dequant_copies
    held = (
        "a 16-bit and an fp32 copy, with the fp32 input and output"
        if fp32_compute(request)
        else f"{copies} 16-bit cop" + ("ies" if copies > 1 else "y")
    )
    return f"prefill dequantizes the largest packed weight: {dequant / GIB:.2f} GiB ({held})"


def _vllm(
    request: PlanRequest,
    rc: Recipe,
    lay: Layout,
    kv: KvLayout,
    state: StateLayout | None,
    weights: int,
    overheads: Overheads,
    sources: dict[str, tuple[str, str]],
    facts: dict[str, ComponentFacts],
) -> InferencePlan:
    util = request.vllm_utilization
    gpu = request.gpu
    max_len = request.max_model_len or request.prompt_tokens + request.new_tokens
    tokens = request.max_num_batched_tokens
    engine = vllm_profile(request.vllm_version)
    # the dummy run schedules min(tokens, max_num_seqs) requests; one logit row each
    requests = min(tokens, request.max_num_seqs)
    activation_peak = _vllm_activation_peak(request, rc, lay, engine, requests, max_len)
    non_torch = non_torch_bytes(
        engine, overheads.context.bytes, overheads.context.bare_bytes, overheads.nccl
    )
    rotary = vllm_rotary_tables(request.model, rc.weight_bytes)
    buffers = rotary.bytes  # loaded with the weights, outside the checkpoint's tensors
    graphs = graph_memory(request, rc, lay)
    graph_bytes = graphs.bytes if graphs is not None else 0
    # from 0.21 the profile captures the graphs and the KV budget leaves room for them; before,
    # they are captured after the pool is allocated, on top of the budget
    budgeted_graphs = graph_bytes if graphs is not None and graphs.captures.in_budget else 0
    non_kv = weights + buffers + activation_peak + non_torch + overheads.cublas + budgeted_graphs
    budget = int(util * gpu.usable_bytes) if gpu is not None else None
    room = None if budget is None else max(0, budget - non_kv)
    if state is None:
        pool = _vllm_paged(request, kv, room, max_len)
    else:
        pool = _vllm_hybrid(request, kv, state, room, max_len)
    profile = {
        "parameters": weights,
        "buffers": buffers,
        "kv_cache": 0,
        "activations": activation_peak,
        "logits": 0,
    }
    serving = {**profile, "kv_cache": pool.kv_bytes}
    if graphs is not None:
        serving["cuda_graphs"] = graph_bytes
        sources["cuda_graphs"] = _graph_source(graphs, request.vllm_version)
    if pool.state is not None:
        profile["recurrent_state"] = 0
        serving["recurrent_state"] = pool.state_bytes
        sources["recurrent_state"] = pool.state
    sources["kv_cache"] = pool.kv_source
    if buffers:
        sources["buffers"] = (ROTARY_SOURCE, _rotary_detail(rotary))
    sources["activations"] = _vllm_profile_source(engine, tokens, requests, rc.act_bytes)
    # one KV tensor, weights and a reused activation pool: no fragmentation
    assembled = _served(
        (Phase("profile", profile), Phase("serving", serving)),
        sources,
        facts,
        {
            "engine": "vLLM",
            "non-torch": _non_torch_note(engine, non_torch),
            **_graph_notes(request, graphs),
            **({"rotary": rotary.unmodelled} if rotary.unmodelled else {}),
            **nf4_notes(request),
            **pool.notes,
            **_hybrid_notes(request, kv, state),
        },
    )
    capacity = InferenceCapacity(
        kv_bytes_per_token=int(kv.bytes_per_token),
        kv_tokens=pool.tokens,
        kv_pool_bytes=pool.kv_bytes + pool.state_bytes,
        non_kv_bytes=non_kv,
        budgeted_graph_bytes=budgeted_graphs,
        budget_bytes=budget,
        outside_context_bytes=uncounted_context_bytes(
            engine, overheads.context.bytes, overheads.context.bare_bytes
        ),
        outside_graph_bytes=graph_bytes - budgeted_graphs,
        max_sequences=pool.sequences,
        block_size=pool.block_size,
        sequence_bytes=pool.sequence_bytes,
    )
    return InferencePlan(assembled, capacity, budget)


def _graph_source(graphs: GraphMemory, version: str) -> tuple[str, str]:
    """Where the CUDA graphs' bytes come from, and which sizes vLLM ``version`` captures."""
    caps = graphs.captures
    reduce = {
        None: "",
        True: "; vLLM's custom all-reduce (its captured buffers registered, no NCCL state)",
        False: f"; NCCL captured: {graphs.collectives / MIB:,.0f} MiB of per-call state",
    }[graphs.custom_all_reduce]
    sizes = ", ".join(
        f"{len(kind)} {name} (1…{max(kind)})"
        for name, kind in (("piecewise", caps.piecewise), ("full", caps.full))
        if kind
    )
    place = (
        "inside the KV budget (profiled, vllm PR #30515)"
        if caps.in_budget
        else "on top of the budget (captured after the KV pool)"
    )
    return (
        f"vLLM {version} CUDA graphs ({caps.source}): the largest size's working set in the "
        "shared pool, the instantiated graphs per captured size and layer"
        + (", each graph's held output" if caps.holds_outputs else "")
        + reduce,
        f"{sizes} sizes, {place}; pool {graphs.pool / MIB:,.0f} MiB, graphs "
        f"{graphs.nodes / MIB:,.0f} MiB"
        + (f", outputs {graphs.outputs / MIB:,.0f} MiB" if graphs.outputs else ""),
    )


def _graph_notes(request: PlanRequest, graphs: GraphMemory | None) -> dict[str, str]:
    """What the plan assumed about vLLM's CUDA graphs."""
    if graphs is None:
        return {"cuda_graphs": "--enforce-eager: no CUDA graphs captured"}
    if graphs.captures.in_budget:
        return {}
    return {
        "cuda_graphs": f"vLLM {request.vllm_version} captures its CUDA graphs after the KV pool: "
        f"{graphs.bytes / GIB:.2f} GiB on top of gpu_memory_utilization × total (lower the "
        "utilization, --max-num-seqs, or --enforce-eager if the capture runs out of memory)"
    }


def _vllm_activation_peak(
    request: PlanRequest, rc: Recipe, lay: Layout, engine: VllmProfile, requests: int, max_len: int
) -> int:
    """The profile run's activation peak: one block's forward over max_num_batched_tokens, or
    the dummy sampler over ``requests`` rows beside the forward's hidden states, still held."""
    tokens = request.max_num_batched_tokens
    ws = working_set(request, rc, lay, tokens, min(tokens, max_len))
    sampler = sampler_peak_bytes(engine, requests, request.model.vocab_size, rc.act_bytes)
    return max(ws, sampler + 2 * tokens * request.model.hidden_size * rc.act_bytes)


def _vllm_profile_source(
    engine: VllmProfile, tokens: int, requests: int, act_bytes: float
) -> tuple[str, str]:
    sampler_items = ", ".join(f"{t.what} {t.bytes_per_element} B" for t in engine.sampler)
    return (
        f"vLLM {engine.version} ({engine.engine}) profile run: one block over "
        f"max_num_batched_tokens, dummy sampler over max_num_seqs ({engine.source})",
        f"{tokens:,} tokens, {requests} sequences; sampler per sequence × vocab entry: "
        f"logits {act_bytes:g} B, {sampler_items}",
    )


def _non_torch_note(engine: VllmProfile, non_torch: int) -> str:
    counted = (
        "all device memory outside PyTorch, CUDA context included"
        if engine.counts_cuda_context
        else "only what grew after the snapshot taken once the CUDA context existed"
    )
    return f"vLLM {engine.version} non-torch memory: {counted}, {non_torch / MIB:,.0f} MiB"


@dataclass(frozen=True, slots=True)
class _VllmPool:
    """What vLLM's block pool holds, and the plan's words for it."""

    kv_bytes: int
    state_bytes: int  # hybrids: the state blocks of the sequences the pool admits
    tokens: int  # what vLLM logs as the GPU KV cache size
    sequences: int
    block_size: int
    sequence_bytes: int  # one max_model_len request's blocks, the least pool vLLM starts with
    kv_source: tuple[str, str]
    state: tuple[str, str] | None = None  # recurrent_state source and detail (hybrids)
    notes: dict[str, str] = field(default_factory=dict)


def _vllm_paged(request: PlanRequest, kv: KvLayout, room: int | None, max_len: int) -> _VllmPool:
    """Every layer caches K and V: one block table, ``room`` bytes of blocks (None: no GPU)."""
    pool = _batch_pool_bytes(request, kv, max_len) if room is None else room
    paged = paged_pool(kv, pool, request.kv_block_size, max_len)
    tensors = paged.tensors
    block = paged.block_size or request.kv_block_size
    return _VllmPool(
        kv_bytes=int(paged.blocks * paged.page_bytes * tensors),
        state_bytes=0,
        tokens=paged.tokens,
        sequences=paged.sequences,
        block_size=block,
        sequence_bytes=int(paged.blocks_per_sequence * paged.page_bytes * tensors),
        kv_source=(
            kv.source
            + (
                "; vLLM KV-cache groups (vllm/v1/core/kv_cache_utils.py)"
                if paged.groups > 1
                else "; vLLM paged blocks (vllm/v1/kv_cache_interface.py)"
            ),
            _paged_detail(paged, block, max_len),
        ),
    )


def _batch_pool_bytes(request: PlanRequest, kv: KvLayout, max_len: int) -> float:
    """No GPU: a pool sized for the request itself (one block-rounded batch; per-kind groups:
    the batch's own blocks, a window holding only its last blocks)."""
    if kv.kinds:
        one = paged_pool(kv, 0, request.kv_block_size, max_len)
        return request.batch * one.blocks_per_sequence * one.page_bytes * one.tensors
    blocks = ceil_div(max_len, request.kv_block_size) * request.batch
    return blocks * request.kv_block_size * kv.bytes_per_token


def _paged_detail(paged: PagedPool, block: int, max_len: int) -> str:
    """The pool's blocks and the sequences they hold (grouped pools: the tokens vLLM logs)."""
    if paged.groups > 1:
        return (
            f"{paged.blocks:,} blocks of {paged.tensors} layers' pages over {paged.groups} "
            f"KV-cache groups; logged as {paged.tokens:,} tokens (blocks // groups × {block}); "
            f"{paged.sequences:,} sequences of {max_len:,} tokens "
            f"({paged.blocks_per_sequence} blocks each)"
        )
    return (
        f"{paged.blocks:,} blocks × {block} tokens = {paged.tokens:,} "
        f"tokens; {paged.sequences:,} sequences of {max_len:,} tokens"
    )


def _vllm_hybrid(
    request: PlanRequest, kv: KvLayout, state: StateLayout, room: int | None, max_len: int
) -> _VllmPool:
    """A hybrid: attention and state layers share one pool of equal pages (planner/state.py);
    the state share is what the admitted sequences' state blocks take."""
    mode = vllm_cache_mode(request)
    concurrency_log = vllm_logs_concurrency(request)
    attention = kv.layers

    def pool(room_bytes: float) -> HybridPool:
        return hybrid_pool(
            kv.bytes_per_token_layer,
            attention,
            state,
            room_bytes,
            request.kv_block_size,
            max_len,
            mode=mode,
            concurrency_log=concurrency_log,
        )

    hp = pool(room if room is not None else 0)
    if room is None:
        # No GPU: size the pool for the request itself (one max-length request per sequence).
        hp = pool(request.batch * hp.sequence_bytes)
    sequences = hp.sequences if room is not None else request.batch
    held = hp.state_bytes(sequences)
    return _VllmPool(
        kv_bytes=hp.pool_bytes - held,
        state_bytes=held,
        tokens=hp.logged_tokens,
        sequences=hp.sequences,
        block_size=hp.block_size,
        sequence_bytes=hp.sequence_bytes,
        kv_source=(
            kv.source + "; vLLM hybrid block pool (vllm/v1/core/kv_cache_utils.py)",
            _hybrid_pool_detail(hp, max_len, concurrency_log=concurrency_log),
        ),
        state=(
            state.source + "; one padded page per request and state group",
            _state_detail(state, sequences)
            + f"; {hp.state_groups * hp.state_blocks} pages of {hp.page_bytes / KIB:,.0f} KiB "
            f"× {hp.group_size} layers per sequence",
        ),
        notes={"hybrid_pool": _hybrid_pool_note(hp, state, mode, concurrency_log=concurrency_log)},
    )


def _hybrid_pool_detail(hp: HybridPool, max_len: int, *, concurrency_log: bool) -> str:
    """The hybrid pool's blocks and groups, and the KV tokens vLLM logs for it."""
    logged_as = (
        "max concurrency × max_model_len, one block per state group"
        if concurrency_log
        else "blocks // groups × block"
    )
    return (
        f"{hp.blocks:,} blocks × {hp.block_size:,} tokens over {hp.attention_groups} attention "
        f"and {hp.state_groups} state groups of {hp.group_size} layers; logged as "
        f"{hp.logged_tokens:,} tokens ({logged_as}); {hp.sequences:,} sequences of "
        f"{max_len:,} tokens ({hp.blocks_per_sequence} blocks each)"
    )


def _hybrid_pool_note(
    hp: HybridPool, state: StateLayout, mode: MambaCacheMode, *, concurrency_log: bool
) -> str:
    """Why vLLM's hybrid block differs from --block-size, and what its log understates."""
    understated = (
        ""
        if concurrency_log
        else "; the logged 'GPU KV cache size' divides the blocks by all groups and "
        "understates the tokens"
    )
    return (
        f"vLLM hybrid allocator: attention block raised to {hp.block_size:,} tokens so one "
        f"page ({hp.page_bytes / KIB:,.0f} KiB) holds a state block's "
        f"{state.bytes_per_layer / KIB:,.0f} KiB (HybridAttentionMambaModelConfig); each "
        f"request takes {hp.state_blocks} block(s) per state group (mamba_cache_mode "
        f"{mode.value}){understated}"
    )


def _rotary_detail(rotary: RotaryTables) -> str:
    return "; ".join(
        f"rotary table ({t.what}): {t.rows:,} positions × {t.width} × {t.dtype_bytes:g} B"
        for t in rotary.tables
    )


def _sglang(
    request: PlanRequest,
    rc: Recipe,
    lay: Layout,
    kv: KvLayout,
    state: StateLayout | None,
    weights: int,
    overheads: Overheads,
    sources: dict[str, tuple[str, str]],
    facts: dict[str, ComponentFacts],
) -> InferencePlan:
    choice = default_fraction(request.gpu, lay.tp, lay.pp, request.sglang_version)
    fraction = request.mem_fraction_static or choice.fraction
    max_len = request.max_model_len or request.prompt_tokens + request.new_tokens
    cell = kv.bytes_per_token  # SGLang's cell_size: every local attention layer, every token
    rotary = sglang_rotary_tables(request.model, rc.weight_bytes, request.sglang_version)
    buffers = rotary.bytes  # built with the model: inside "Load weight end ... mem usage"
    loaded = weights + buffers  # what the load took from the static share
    gpu = request.gpu
    # min_per_gpu_memory: free once the CUDA context and the communicators exist
    free_before = (
        None if gpu is None else gpu.usable_bytes - overheads.context.bytes - overheads.nccl
    )
    pool = _sglang_pool(request, state, loaded, cell, max_len, fraction, free_before)
    swa = _swa_tokens(kv, pool.tokens, request.page_size)
    if swa is not None:
        pool = replace(pool, tokens=swa[0])  # max_total_num_tokens: the full layers' count
    chunk = choice.chunked_prefill_size
    ws = working_set(request, rc, lay, chunk, min(chunk, max_len))
    # SGLang's own allowance for its decode CUDA graphs (server_args.py reserved_mem)
    graphs = choice.cuda_graph_max_bs * RESERVED_PER_GRAPH_BS_MB * MIB
    serving = {
        "parameters": weights,
        "buffers": buffers,
        "kv_cache": pool.pool_bytes,
        "activations": ws + graphs,
        "logits": 0,
    }
    if buffers:
        sources["buffers"] = (SGLANG_ROTARY_SOURCE, _rotary_detail(rotary))
    sequences = pool.tokens // pool.request_tokens if pool.request_tokens else 0
    if state is not None and pool.state_requests is not None:
        # the state slots cap the running requests (max_running_requests)
        sequences = min(sequences, pool.state_requests)
        serving["recurrent_state"] = pool.state_bytes
        sources["recurrent_state"] = _sglang_state_source(state, pool)
    sources["kv_cache"] = (
        kv.source + "; SGLang token pool (model_runner profile_max_num_token)",
        f"{pool.tokens:,} tokens × {cell / KIB:,.1f} KiB; {sequences:,} requests of "
        f"{max_len:,} tokens",
    )
    sources["activations"] = _sglang_activation_source(chunk, choice.cuda_graph_max_bs, ws, graphs)
    notes = {
        "engine": f"SGLang {request.sglang_version}",
        **_sglang_notes(request, fraction, choice.how, free_before, pool, ws + graphs),
        **({"rotary": rotary.unmodelled} if rotary.unmodelled else {}),
        **nf4_notes(request),
    }
    notes.update(_hybrid_notes(request, kv, state))
    if swa is not None:
        notes["sglang_swa"] = _swa_note(*swa)
    # one KV tensor per layer, weights and reused activations: no fragmentation
    assembled = _served((Phase("serving", serving),), sources, facts, notes)
    capacity = InferenceCapacity(
        kv_bytes_per_token=int(cell),
        kv_tokens=pool.tokens,
        kv_pool_bytes=pool.pool_bytes + pool.state_bytes,
        # a hybrid's MambaPool is allocated before the token pool, like the weights: the verdict
        # then asks the token pool left for one max-length request (both under a ratio-sized
        # and a user-set --max-mamba-cache-size)
        non_kv_bytes=loaded + pool.state_bytes,
        max_sequences=sequences,
        block_size=request.page_size,
        sequence_bytes=int(pool.request_tokens * cell),
        remainder_bytes=pool.remainder_bytes if gpu is not None else None,
    )
    return InferencePlan(assembled, capacity, pool.static_bytes if gpu is not None else None)


def _sglang_pool(
    request: PlanRequest,
    state: StateLayout | None,
    loaded: int,
    cell: float,
    max_len: int,
    fraction: float,
    free_before: int | None,
) -> TokenPool:
    """SGLang's token pool (and a hybrid's MambaPool) after ``loaded`` bytes of weights: the
    ``fraction`` share of ``free_before``, or without a GPU one sized for the batch."""
    per_request = state.bytes_per_sequence if state is not None else 0.0
    if free_before is None:
        return batch_pool(loaded, cell, request.page_size, max_len, request.batch, per_request)
    return token_pool(
        free_before,
        fraction,
        loaded,
        cell,
        request.page_size,
        max_len,
        per_request,
        lambda rest: sglang_state_slots(request, rest, per_request),
    )


def _sglang_activation_source(chunk: int, graph_bs: int, ws: int, graphs: int) -> tuple[str, str]:
    return (
        f"one block's forward over chunked_prefill_size {chunk:,} tokens, and SGLang's "
        f"allowance of {RESERVED_PER_GRAPH_BS_MB} MiB per CUDA-graph batch size up to "
        f"{graph_bs}",
        f"{ws / GIB:.2f} GiB + {graphs / GIB:.2f} GiB of CUDA graphs",
    )


def _swa_tokens(kv: KvLayout, tokens: int, page: int) -> tuple[int, int] | None:
    """(full-layer tokens, sliding-window tokens) of SGLang's hybrid SWA pool of ``tokens``
    profiled cells; None when no kind slides (one pool)."""
    full_bytes, swa_bytes = kv.split_bytes_per_token()
    if not kv.kinds or not swa_bytes:
        return None
    return swa_split(tokens, full_bytes, swa_bytes, page)


def _swa_note(full_tokens: int, swa_tokens: int) -> str:
    return (
        f"hybrid SWA pool: {full_tokens:,} tokens in the full-attention layers, "
        f"{swa_tokens:,} in the sliding-window layers (swa_full_tokens_ratio "
        f"{SWA_FULL_TOKENS_RATIO:g})"
    )


def _sglang_state_source(state: StateLayout, pool: TokenPool) -> tuple[str, str]:
    """The MambaPool's source and detail: its slots, and the running requests they admit."""
    return (
        state.source + "; SGLang MambaPool (model_runner_kv_cache_mixin.py handle_max_mamba_cache)",
        _state_detail(state, pool.state_slots)
        + f" (max_mamba_cache_size); {MAMBA_SLOTS_PER_REQUEST} slots per running request "
        f"admit {pool.state_requests:,}",
    )


def _sglang_notes(
    request: PlanRequest,
    fraction: float,
    default_how: str,
    free_before: int | None,
    pool: TokenPool,
    dynamic: int,
) -> dict[str, str]:
    """What the plan assumed about SGLang, and what SGLang does with a pool this size."""
    chosen = (
        f"mem_fraction_static {fraction:g} as passed"
        if request.mem_fraction_static is not None
        else f"mem_fraction_static {fraction:g}: {default_how}"
    )
    notes = {"sglang": chosen}
    if free_before is None:
        return notes
    notes["sglang_pool"] = (
        f"{fraction:g} × {free_before / GIB:.2f} GiB free before the weights = "
        f"{pool.static_bytes / GIB:.2f} GiB for weights and pool; max_total_num_tokens "
        f"{pool.tokens:,} (page {request.page_size})"
    )
    if pool.tokens <= 0:
        notes["sglang_refusal"] = (
            'the weights fill the static share: SGLang stops at start-up ("Not enough memory. '
            'Please try to increase --mem-fraction-static")'
        )
    elif pool.tokens < pool.request_tokens:
        notes["sglang_refusal"] = (
            f"the pool holds {pool.tokens:,} tokens: SGLang starts but rejects requests longer "
            f"than {pool.max_request_tokens:,} tokens (max_req_len)"
        )
    if dynamic > pool.remainder_bytes:
        notes["sglang_remainder"] = (
            f"the remainder {pool.remainder_bytes / GIB:.2f} GiB is below the planned "
            f"activations and CUDA graphs {dynamic / GIB:.2f} GiB: expect an OOM in CUDA-graph "
            "capture or the first long prefill; lower --mem-fraction-static"
        )
    return notes
