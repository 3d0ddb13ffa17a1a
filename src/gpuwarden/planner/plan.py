"""``plan_memory``: the per-GPU memory of one job, by component, per measuring tool."""

from __future__ import annotations

from gpuwarden.catalog.gpus import computes
from gpuwarden.planner import stacks
from gpuwarden.planner.dora import dora_notes
from gpuwarden.planner.families import framework_model
from gpuwarden.planner.inference import inference_phases
from gpuwarden.planner.layout import (
    Layout,
    layout,
    lora_parameters,
    lora_targets_note,
    total_parameters,
    with_lora_targets,
)
from gpuwarden.planner.lifecycle import SAVE, SOURCES
from gpuwarden.planner.liger import kernel_notes
from gpuwarden.planner.overheads import (
    Communicator,
    Overheads,
    allocator_slack,
    cublas_workspace,
    cuda_context,
    nccl_bytes,
)
from gpuwarden.planner.precision import Recipe, adapter_notes, recipe, runs_on
from gpuwarden.planner.quantization import checkpoint_notes, checkpoint_warnings
from gpuwarden.planner.training import Assembled, hybrid_note, training_phases
from gpuwarden.planner.validate import validate
from gpuwarden.planner.verdict import Judgement, judge, judge_beside_budget, worse
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.plan import (
    Engine,
    FsdpKind,
    InferenceCapacity,
    MemoryComponent,
    MemoryPlan,
    Mode,
    ModuleLoading,
    Phase,
    PlanRequest,
    PredictedReadings,
    Verdict,
)
from gpuwarden.units import MIB

# JSON per_gpu_bytes always carries these keys (0 when a job has none of it).
SAVE_SOURCE = SOURCES[SAVE]
REQUIRED = ("parameters", "gradients", "optimizer_states", "activations", "kv_cache")
ORDER = (
    "parameters",
    "buffers",  # non-persistent module buffers (vLLM's rotary tables): not checkpoint tensors
    "gradients",
    "optimizer_states",
    "activations",
    "logits",
    "held_outputs",
    "kv_cache",
    "recurrent_state",  # hybrids: the fixed state per sequence of the state blocks (state.py)
    "cuda_graphs",  # vLLM's captured graphs (vllm_graphs.py)
    "communication",
    "checkpoint",
    "temporaries",
    "runtime_overhead",
    "allocator_cache",
)


def communicators(request: PlanRequest, lay: Layout) -> tuple[Communicator, ...]:
    spans = request.num_gpus > request.gpus_per_node
    comms: list[Communicator] = []
    if request.mode is Mode.INFER:
        if request.tp > 1:
            # vLLM and SGLang: a torch process group and a PyNccl communicator
            count = 2 if request.serving_engine is not Engine.HF else 1
            comms += [Communicator("tp", request.tp, False)] * count
        if request.pp > 1:
            comms.append(Communicator("pp", request.pp, spans))
        return tuple(comms)
    group = lay.dp * lay.cp
    if request.fsdp is FsdpKind.HYBRID and lay.replicate > 1:
        comms += [Communicator("dp", lay.shard, False), Communicator("dp", lay.replicate, True)]
    elif group > 1:
        comms.append(Communicator("dp", group, spans))
    for name, size in (("tp", request.tp), ("cp", request.cp), ("ep", request.ep)):
        if size > 1:
            comms.append(Communicator(name, size, False))
    if request.pp > 1:
        comms.append(Communicator("pp", request.pp, spans))
    return tuple(comms)


def _overheads(request: PlanRequest, lay: Layout) -> Overheads:
    ctx = cuda_context(request.gpu, request.module_loading)
    comms = communicators(request, lay)
    nccl = nccl_bytes(request.gpu, comms)
    cublas = cublas_workspace(request.gpu, 1 if request.mode is Mode.INFER else 2)
    detail = f"CUDA context {ctx.bytes / MIB:,.0f} MiB ({ctx.detail})"
    if nccl:
        detail += f"; NCCL {nccl / MIB:,.0f} MiB for {len(comms)} communicator(s)"
    detail += f"; cuBLAS workspaces {cublas / MIB:,.1f} MiB"
    return Overheads(ctx, nccl, cublas, detail)


def compute_plan(request: PlanRequest) -> MemoryPlan:
    """Per-GPU memory of ``request`` by component and phase, and what each tool would show.

    No fixes: ``fixes.py`` re-plans variants with this, ``memory.plan_memory`` adds them.
    """
    warnings = list(validate(request))
    targets_note = lora_targets_note(request)
    request = framework_model(with_lora_targets(request))
    rc: Recipe = recipe(request)
    if request.gpu is not None and not runs_on(request.gpu, request):
        other = "fp16 / another GPU" if computes(request.gpu, "fp16") else "another GPU"
        warnings.append(
            f"the {request.gpu.name} has no {rc.compute} tensor-core math "
            f"({request.gpu.architecture}); plan memory only, or pick {other}"
        )
    lay = layout(request)
    overheads = _overheads(request, lay)
    capacity: InferenceCapacity | None = None
    budget: int | None = None
    if request.mode is Mode.INFER:
        inf = inference_phases(request, rc, lay, overheads)
        assembled: Assembled = inf.assembled
        capacity, budget = inf.capacity, inf.budget_bytes
    else:
        assembled = training_phases(request, rc, lay)
    note = hybrid_note(request, lay)
    prof = stacks.profile(request)
    warnings += checkpoint_warnings(request)
    notes = {
        **assembled.notes,
        **checkpoint_notes(request),
        **adapter_notes(request, rc),
        **dora_notes(request, rc),
        **targets_note,
        "stack": rc.stack.value,
        "framework": f"{prof.framework.value}: {prof.version}",
        **stacks.unknowns(request),
        **kernel_notes(request),
    }
    if request.serving_engine is not Engine.HF:
        del notes["framework"]  # a serving engine loads and runs the model, not the HF stack
    if note:
        notes["hybrid"] = note
    if overheads.context.loading is ModuleLoading.EAGER:
        notes["cuda_context"] = (
            f"{overheads.context.bytes / MIB:,.0f} MiB: {overheads.context.detail}"
        )

    peak = max(assembled.phases, key=lambda p: p.total)
    slack = allocator_slack(assembled.dynamic_bytes, assembled.tensors, request.expandable_segments)
    allocated = peak.total - assembled.unified_bytes + overheads.cublas
    reserved = allocated + slack
    outside = overheads.non_torch
    smi = reserved + outside + assembled.unified_bytes
    gpu = request.gpu
    if gpu is not None and assembled.unified_bytes and smi > gpu.usable_bytes:
        # Paged optimizer states give way: the driver evicts them to host RAM.
        smi = max(reserved + outside, gpu.usable_bytes)
    overhead = overheads.total

    phases = tuple(
        Phase(
            p.name, {**p.bytes_by_component, "runtime_overhead": overhead, "allocator_cache": slack}
        )
        for p in assembled.phases
    )
    footprint: dict[str, int] = {}
    for p in phases:
        for key, value in p.bytes_by_component.items():
            footprint[key] = max(footprint.get(key, 0), value)
    sources = dict(assembled.sources)
    if "checkpoint" in footprint:
        sources["checkpoint"] = (SAVE_SOURCE, notes.get("checkpoint_save", ""))
    sources["runtime_overhead"] = ("memory.md §2.10: CUDA context, NCCL, cuBLAS", overheads.detail)
    sources["allocator_cache"] = (
        "PyTorch caching allocator (memory.md §2.10): 2 MiB segment rounding + fragmentation",
        "reserved − allocated; "
        + ("expandable segments" if request.expandable_segments else "12% of per-step allocations"),
    )
    components = tuple(
        MemoryComponent(
            key=key,
            bytes=footprint.get(key, 0),
            source=sources.get(key, ("", ""))[0],
            detail=sources.get(key, ("", ""))[1],
            facts=assembled.facts.get(key),
        )
        for key in ORDER
        if key in REQUIRED or key in {"runtime_overhead", "allocator_cache"} or footprint.get(key)
    )

    judgement = _judge(gpu, smi - assembled.unified_bytes, budget, capacity)
    trainable = assembled.trainable
    if request.mode in {Mode.LORA, Mode.QLORA}:
        trainable = lora_parameters(request.model, request)
    elif request.mode is Mode.TRAIN:
        trainable = total_parameters(request.model)
    return MemoryPlan(
        request=request,
        components=components,
        peak_bytes=int(smi),
        peak_phase=peak.name,
        predicted=PredictedReadings(
            max_allocated_bytes=int(allocated),
            max_reserved_bytes=int(reserved),
            nvidia_smi_used_bytes=int(smi),
            max_active_bytes=int(allocated),
        ),
        usable_bytes=judgement.usable_bytes if judgement else None,
        fits=judgement.verdict is Verdict.FITS if judgement else None,
        warnings=tuple(warnings),
        host_bytes=assembled.host_bytes * min(request.num_gpus, request.gpus_per_node),
        trainable_parameters=int(trainable),
        notes=notes,
        total_parameters=total_parameters(request.model),
        phases=phases,
        inference=capacity,
        verdict=judgement.verdict if judgement else None,
        headroom_bytes=judgement.headroom_bytes if judgement else None,
        margin_bytes=judgement.margin_bytes if judgement else None,
        beside_budget=judgement.beside_budget if judgement else False,
    )


def _judge(
    gpu: GpuSpec | None, need: int, budget: int | None, capacity: InferenceCapacity | None
) -> Judgement | None:
    """The verdict against what the job may use: the GPU's usable memory, or vLLM's budget,
    which must hold the weights, the profile's peak and one max-length request's KV blocks, and
    must itself fit in the GPU beside what vLLM keeps outside it (the worse of the two)."""
    if gpu is None:
        return None
    if budget is None or capacity is None:
        return judge(need, gpu.usable_bytes)
    inside = judge(capacity.non_kv_bytes + (capacity.sequence_bytes or 0), budget)
    if capacity.budget_bytes is None:
        return inside  # SGLang: its static share is a fraction of the memory left free
    beside = judge_beside_budget(
        capacity.budget_bytes, capacity.outside_budget_bytes, gpu.usable_bytes
    )
    return worse(inside, beside)
