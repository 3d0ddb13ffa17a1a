"""Where the parameters live: parallel degrees and the parameters one GPU holds.

Tensor parallelism splits the blocks' Linears and the vocabulary (embedding, LM head); norms and
learned position tables are replicated (Megatron, memory.md §2.6). Pipeline stage 0 holds the
embedding, the last stage the final norm and the LM head (and, for tied weights, a copy of the
embedding). Expert parallelism splits the routed experts only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwarden.catalog.traits import peft_has_default
from gpuwarden.planner.stacks import profile
from gpuwarden.types.model import LayerParameters, ModelSpec
from gpuwarden.types.plan import FsdpKind, LoraVariant, Mode, Offload, PlanRequest


@dataclass(frozen=True, slots=True)
class Layout:
    world: int
    tp: int
    pp: int
    cp: int
    ep: int
    dp: int  # data-parallel replicas (world / (tp · pp · cp))
    shard: int  # ranks that share one copy of the sharded states (ZeRO / FSDP group)
    replicate: int  # HYBRID_SHARD: shard groups that replicate each other
    param_shard: int  # ranks one parameter is split over (ZeRO-3 / FSDP full / hybrid)
    grad_shard: int  # ranks one gradient is split over (ZeRO-2+, FSDP)
    state_shard: int  # ranks one optimizer state is split over (ZeRO-1+, FSDP, dist. optimizer)


def layout(request: PlanRequest) -> Layout:
    world = request.num_gpus
    model_parallel = request.tp * request.pp * request.cp
    dp = max(1, world // model_parallel)
    # Context-parallel ranks hold the same weights and reduce gradients together (Megatron's
    # dp × cp group), so they share the sharded states too.
    group = dp * request.cp
    shard, replicate = group, 1
    if request.fsdp is FsdpKind.HYBRID:
        per_node = max(1, request.gpus_per_node // (request.tp * request.pp))
        shard = max(1, min(group, per_node))
        replicate = max(1, group // shard)
    zero = request.zero_stage
    full = request.fsdp in {FsdpKind.FULL, FsdpKind.HYBRID}
    param_shard = shard if (full or zero >= 3) else 1
    grad_shard = shard if (request.fsdp is not None or zero >= 2) else 1
    state_shard = shard if (request.fsdp is not None or zero >= 1) else 1
    return Layout(
        world=world,
        tp=request.tp,
        pp=request.pp,
        cp=request.cp,
        ep=request.ep,
        dp=dp,
        shard=shard,
        replicate=replicate,
        param_shard=param_shard,
        grad_shard=grad_shard,
        state_shard=state_shard,
    )


@dataclass(frozen=True, slots=True)
class StageParams:
    """Parameters on one GPU of a pipeline stage, after TP/EP splits (before ZeRO/FSDP)."""

    layers: int
    linear: float  # the blocks' non-expert nn.Linear weights (what quantization acts on)
    expert: float  # routed experts on this rank
    other: float  # norms, routers, biases-free leftovers, learned positions
    embedding: float
    head: float  # LM head (untied) and final norm
    largest_layer: float  # params of the largest block on this rank (an FSDP/ZeRO-3 unit)
    root: float  # what the FSDP root unit holds: embedding + final norm + head

    @property
    def total(self) -> float:
        return self.linear + self.expert + self.other + self.embedding + self.head


def zero3_offloads_parameters(request: PlanRequest) -> bool:
    """DeepSpeed ZeRO-3 with its parameters offloaded to the host (what ``--deepspeed-version``
    changes: how they are gathered back)."""
    return request.zero_stage >= 3 and request.offload is Offload.OPTIMIZER_AND_PARAMS


def stage_layers(num_layers: int, pp: int, stage: int) -> int:
    """Blocks on one stage: the first stages take the remainder (torchtitan / Megatron split)."""
    base, extra = divmod(num_layers, pp)
    return base + (1 if stage < extra else 0)


_UNIQUE: dict[int, tuple[tuple[LayerParameters, ...], dict[int, tuple[int, int, int]]]] = {}


def _split_counts(layers: tuple[LayerParameters, ...]) -> dict[int, tuple[int, int, int]]:
    """id(layer) → (non-expert Linear params, expert params, the rest), once per layer object:
    catalogs repeat one LayerParameters object for identical blocks."""
    entry = _UNIQUE.get(id(layers))
    if entry is not None and entry[0] is layers:
        return entry[1]
    out: dict[int, tuple[int, int, int]] = {}
    for layer in layers:
        if id(layer) not in out:
            linear = sum(lin.parameters for lin in layer.linears if not lin.expert)
            # Whatever the Linears do not cover (norms, routers) is replicated across TP ranks.
            rest = max(0, layer.total - layer.experts - linear)
            out[id(layer)] = (linear, layer.experts, rest)
    if len(_UNIQUE) > 64:
        _UNIQUE.clear()
    _UNIQUE[id(layers)] = (layers, out)
    return out


def stage_params(
    spec: ModelSpec, lay: Layout, stage: int, vocab_shards: int | None = None
) -> StageParams:
    """Parameters of one GPU of ``stage`` (0-based). ``vocab_shards``: ranks the embedding and
    LM head are split over (default: the TP degree; 1 where the stack keeps them whole,
    ``stacks.vocab_shards``)."""
    vocab = lay.tp if vocab_shards is None else vocab_shards
    blocks = spec.parameters.layers
    pp = lay.pp
    # Encoder-decoder models split the whole block list across stages the same way.
    n = len(blocks)
    start = sum(stage_layers(n, pp, s) for s in range(stage))
    count = stage_layers(n, pp, stage)
    counts = _split_counts(blocks)
    linear = expert = other = 0.0
    largest = 0.0
    for first, times, _ in stage_groups(blocks, start, count, 0):
        lin_p, exp_p, rest = counts[id(blocks[first])]
        lin, exp = lin_p / lay.tp, exp_p / (lay.ep * lay.tp)
        linear += lin * times
        expert += exp * times
        other += rest * times
        largest = max(largest, lin + exp + rest)
    p = spec.parameters
    first, last = stage == 0, stage == pp - 1
    embedding = 0.0
    if first:
        embedding = p.embedding / vocab + p.position_embedding + p.other
    head = 0.0
    if last:
        head = p.final_norm + (p.lm_head / vocab if p.lm_head else 0.0)
        if not p.lm_head and pp > 1:
            head += p.embedding / vocab  # tied head: the last stage keeps its own copy
    return StageParams(
        layers=count,
        linear=linear,
        expert=expert,
        other=other,
        embedding=embedding,
        head=head,
        largest_layer=largest,
        root=embedding + head,
    )


def pipeline_stages(pp: int) -> tuple[int, ...]:
    """The stages worth planning: the first (embedding, most activations) and the last (head)."""
    return (0,) if pp == 1 else (0, pp - 1)


DEFAULT_TARGETS = ("q_proj", "v_proj")


def lora_target_choice(spec: ModelSpec, request: PlanRequest) -> tuple[tuple[str, ...], str]:
    """The Linears LoRA adapts and why: the request's targets, else the stack's default.

    PEFT (``peft/tuners/tuners_utils.py`` ``_prepare_adapter_config``, 0.21.2) takes
    TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING[model_type] whenever ``target_modules`` is
    None (``BlockTraits.peft_targets``: Phi q/v + fc1, fc2; Nemotron-H q/k/v/o), also where
    q_proj / v_proj exist. Where the mapping has no entry (``traits.peft_has_default``) PEFT
    raises "Please specify `target_modules` in `peft_config`"; the planner assumes q_proj /
    v_proj there (phi3: its fused qkv_proj, ``peft_targets``), says so, and refuses
    (``lora-targets-unknown``) when they match nothing. LitGPT and torchtune apply their own
    LoRA (``StackProfile.peft_lora`` False): query / value, the names q_proj / v_proj, or the
    PEFT entry where those names miss (a fused QKV)."""
    if request.lora_targets is not None:
        return request.lora_targets, "as requested"
    peft = spec.traits.peft_targets
    stack = profile(request)
    if not stack.peft_lora:
        if peft is not None and not _default_names_match(spec):
            return (
                peft,
                f"{stack.framework.value}'s LoRA on the Linears PEFT names for {spec.model_type}",
            )
        return DEFAULT_TARGETS, f"{stack.framework.value}'s own LoRA on query and value"
    if peft_has_default(spec.model_type):
        return peft or DEFAULT_TARGETS, f"PEFT's default for {spec.model_type}"
    if peft is not None:
        return peft, f"PEFT has no default for {spec.model_type}: its fused projection assumed"
    return DEFAULT_TARGETS, (
        f"PEFT has no default for {spec.model_type}: {', '.join(DEFAULT_TARGETS)} assumed"
    )


def _default_names_match(spec: ModelSpec) -> bool:
    names = all_linear_names(spec)
    return any(t in names for t in DEFAULT_TARGETS)


def lora_targets(spec: ModelSpec, request: PlanRequest) -> tuple[str, ...]:
    """The Linear names LoRA adapts (``lora_target_choice``)."""
    return lora_target_choice(spec, request)[0]


def with_lora_targets(request: PlanRequest) -> PlanRequest:
    """The request with its LoRA targets filled in (None: the stack's default for the type)."""
    if request.lora_targets is not None:
        return request
    return replace(request, lora_targets=lora_targets(request.model, request))


def lora_targets_note(request: PlanRequest) -> dict[str, str]:
    """The plan note naming the Linears LoRA adapts and why (empty without LoRA)."""
    if request.mode not in {Mode.LORA, Mode.QLORA}:
        return {}
    targets, why = lora_target_choice(request.model, request)
    return {"lora_targets": f"{', '.join(targets) or '(none)'}: {why}"}


def _matches(name: str, targets: tuple[str, ...]) -> bool:
    return name in targets or "all-linear" in targets


def distinct_layers(spec: ModelSpec) -> list[tuple[LayerParameters, int]]:
    """Each distinct block object with how many times it occurs (catalogs repeat one object)."""
    layers = spec.parameters.layers
    return [(layers[first], times) for first, times, _ in stage_groups(layers, 0, len(layers), 0)]


_GROUPS: dict[tuple[int, int, int, int], tuple[object, tuple[tuple[int, int, bool], ...]]] = {}


def stage_groups(
    layers: tuple[LayerParameters, ...], start: int, count: int, n_encoder: int
) -> tuple[tuple[int, int, bool], ...]:
    """(first index, occurrences, is-decoder) per distinct block in ``layers[start:start+count]``.

    Memoised: ``--fit`` asks for the same model thousands of times.
    """
    key = (id(layers), start, count, n_encoder)
    hit = _GROUPS.get(key)
    if hit is not None and hit[0] is layers:
        return hit[1]
    found: dict[tuple[int, bool], list[int]] = {}
    for index in range(start, start + count):
        group = (id(layers[index]), n_encoder > 0 and index >= n_encoder)
        entry = found.get(group)
        if entry is None:
            found[group] = [index, 1]
        else:
            entry[1] += 1
    result = tuple((first, times, decoder) for (_, decoder), (first, times) in found.items())
    if len(_GROUPS) > 256:
        _GROUPS.clear()
    _GROUPS[key] = (layers, result)
    return result


_TOTALS: dict[int, tuple[object, int]] = {}


def total_parameters(spec: ModelSpec) -> int:
    """``spec.total_parameters``, computed once per parameter breakdown (it sums every block)."""
    params = spec.parameters
    entry = _TOTALS.get(id(params))
    if entry is not None and entry[0] is params:
        return entry[1]
    if len(_TOTALS) > 64:
        _TOTALS.clear()
    total = params.total
    _TOTALS[id(params)] = (params, total)
    return total


def largest_tensor(spec: ModelSpec) -> int:
    """Elements of the largest single parameter tensor (for per-tensor optimizer temporaries)."""
    return max(spec.parameters.embedding, spec.parameters.lm_head, largest_block_tensor(spec))


def largest_block_tensor(spec: ModelSpec) -> int:
    """Elements of the largest parameter tensor inside the blocks (a fused expert bank counts
    as one tensor)."""
    return max(
        (
            lin.in_features * lin.out_features * (lin.count if lin.expert else 1)
            for layer, _ in distinct_layers(spec)
            for lin in layer.linears
        ),
        default=0,
    )


def lora_parameters(spec: ModelSpec, request: PlanRequest) -> int:
    """Trainable adapter parameters of every adapted Linear (``_adapter_elements``)."""
    if request.mode not in {Mode.LORA, Mode.QLORA}:
        return 0
    targets = lora_targets(spec, request)
    total = 0
    for layer, times in distinct_layers(spec):
        for lin in layer.linears:
            if _matches(lin.name, targets):
                per_copy = _adapter_elements(request, lin.in_features, lin.out_features)
                total += per_copy * lin.count * times
    if "lm_head" in targets:
        total += _adapter_elements(request, spec.hidden_size, spec.vocab_size)
    return total


def _adapter_elements(request: PlanRequest, d_in: int, d_out: int) -> int:
    """One adapted Linear's trainable elements: r·(d_in + d_out) for A and B (memory.md §2.7),
    and DoRA's magnitude, one per output feature (PEFT ``lora_magnitude_vector``, dora.py)."""
    low_rank = request.lora_rank * (d_in + d_out)
    magnitude = d_out if request.lora_variant is LoraVariant.DORA else 0
    return low_rank + magnitude


def adapted_names(spec: ModelSpec, request: PlanRequest) -> frozenset[str]:
    """Names of the blocks' Linears that carry an adapter."""
    if request.mode not in {Mode.LORA, Mode.QLORA}:
        return frozenset()
    names = all_linear_names(spec)
    targets = lora_targets(spec, request)
    return frozenset(n for n in names if _matches(n, targets))


def all_linear_names(spec: ModelSpec) -> frozenset[str]:
    return frozenset(lin.name for layer, _ in distinct_layers(spec) for lin in layer.linears)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def heads_per_rank(heads: int, tp: int) -> float:
    """KV heads per TP rank: replicated when TP exceeds them (memory.md §2.6)."""
    return max(1.0, heads / tp) if heads else 0.0
