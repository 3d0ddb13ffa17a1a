"""``gpuwarden plan``: the breakdown table, the verdict, the fixes; and the ``gpuwarden.plan/1``
JSON document."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields
from enum import Enum
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuwarden.planner.fixes import NEEDS_MORE_GPUS
from gpuwarden.planner.quant_kernel import BNB_FIX, nf4_label
from gpuwarden.planner.quantization import format_label
from gpuwarden.planner.verdict import RULE, highest_utilization
from gpuwarden.report.output import console, print_json
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import (
    LORA_VARIANT_NAMES,
    ActivationFacts,
    Checkpointing,
    Engine,
    ExactReport,
    Fix,
    Framework,
    GradientFacts,
    InferenceCapacity,
    Kernels,
    MemoryComponent,
    MemoryPlan,
    Mode,
    ParameterFacts,
    PlanRequest,
    Precision,
    TrainLoop,
    Verdict,
)
from gpuwarden.units import GIB, MIB, format_bytes

SCHEMA = "gpuwarden.plan/1"

LABELS = {
    "parameters": "parameters",
    "buffers": "buffers (rotary tables)",
    "gradients": "gradients",
    "optimizer_states": "optimizer states",
    "activations": "activations",
    "logits": "logits / loss",
    "held_outputs": "previous outputs",
    "kv_cache": "KV cache",
    "cuda_graphs": "CUDA graphs",
    "recurrent_state": "recurrent state (hybrid blocks)",
    "communication": "communication buffers",
    "checkpoint": "checkpoint save",
    "temporaries": "temporaries",
    "runtime_overhead": "runtime overhead",
    "allocator_cache": "allocator cache",
}
PHASES = {
    "load": "loading the checkpoint (the weights as the loader materialises them)",
    "evaluation": "evaluation during training (no-grad forward, full logits)",
    "checkpoint-save": "saving a checkpoint (units gathered for a consolidated state dict)",
    "forward": "the end of forward: all activations alive, the loss and its gradient",
    "backward": "the start of backward: every activation or checkpoint alive",
    "backward-end": "the end of backward: all gradients, the first block's backward",
    "embedding-backward": "the tied embedding's lookup gradient added to the LM head's",
    "optimizer-step": "the optimizer step",
    "prefill": "prefill",
    "decode": "decode (full KV cache)",
    "profile": "vLLM's profile run",
    "serving": "serving (KV pool allocated)",
}


def print_warnings(out: Console, warnings: Iterable[str]) -> None:
    for w in warnings:
        out.print(Text.assemble(("warning:", "yellow"), f" {w}"))


def progress(message: str) -> None:
    """Progress of long work (``--exact`` tracing) on stderr, out of the way of stdout."""
    console(stderr=True).print(Text(f"… {message}", style="dim"))


DETAIL_WIDTH = 64  # the plan table's detail column at most (the rest is in --json)
TRADEOFF_WIDTH = 48  # the fixes table's trade-off column at most
FIX_WIDTH = 52  # the fixes table's fix column at most (it wraps)
FIX_MIN_WIDTH = 24  # what the fix column keeps on a narrow terminal: a description's first words
NARROWEST = 8  # a column squeezed to less shows nothing useful


def _last_column_room(terminal: int, columns: Sequence[Sequence[str]]) -> int:
    """Characters a table's last column has when its other ``columns`` (each its cells, header
    first) hold their cells whole: rich pads each cell by one space either side and rules
    between and around the columns."""
    used = sum(max(len(cell) for cell in column) for column in columns)
    return max(NARROWEST, terminal - used - 3 * len(columns) - 4)


def _gib(n: float) -> str:
    return f"{n / GIB:,.2f}"


def _parameters_text(r: PlanRequest, f: ParameterFacts) -> str:
    text = f"{f.count:,} params on this GPU"
    if f.shards > 1:
        text += f" / {f.shards} shards"
    if f.linear_bytes is not None:
        text += f"; Linear weights at {f.linear_bytes:.5g} B" + (nf4_label(r) or format_label(r))
    if f.expert_bytes is not None:
        text += f"; routed experts at {f.expert_bytes:.5g} B/param as the engine holds them"
    if f.offloaded:
        text += "; offloaded to host"
    if f.unsharded_quant_state_bytes and (f.offloaded or f.shards > 1):
        text += (
            f"; bitsandbytes quantization state {f.unsharded_quant_state_bytes / GIB:.2f} GiB "
            "whole on each GPU (not sharded or offloaded)"
        )
    return text


def _gradients_text(f: GradientFacts) -> str:
    """Bytes per trainable parameter the gradients component holds at its peak, and why."""
    sharded = f", sharded over {f.shards}" if f.shards > 1 else ""
    if f.one_at_a_time:
        return (
            f"{f.trainable:,} trainable × {max(f.grad_bytes, f.fp32_copy_bytes):g} B{sharded}: "
            f"the {f.grad_bytes:g} B partition through backward, converted to the fp32 "
            f"{f.fp32_copy_bytes:g} B partition at the step (one at a time)"
        )
    copy = f" + fp32 copy {f.fp32_copy_bytes:g} B" if f.fp32_copy_bytes else ""
    if f.with_grad > f.trainable:
        return (
            f"{f.with_grad:,} params × {f.grad_bytes:g} B{copy}{sharded}: FSDP units mixing "
            f"frozen and trainable parameters get a gradient for the whole unit "
            f"({f.trainable:,} trainable)"
        )
    return f"{f.trainable:,} trainable × {f.grad_bytes:g} B{copy}{sharded}"


def _activations_text(r: PlanRequest, f: ActivationFacts) -> str:
    parts = [f"{kind} {size / MIB:,.0f} MiB" for kind, size in f.per_block_bytes.items()]
    text = "per block per micro-batch: " + ", ".join(parts)
    if r.checkpointing is Checkpointing.FULL:
        text += "; full checkpointing keeps block inputs, recomputes one block in backward"
    if r.checkpointing is Checkpointing.OP:
        text += (
            "; op-level SAC keeps block inputs, every other matmul's and SDPA's outputs, "
            "recomputes the rest (torchtitan)"
        )
    if f.in_flight > 1:
        text += f"; {f.in_flight:g} micro-batches in flight"
    if f.loss_saved_bytes:
        text += f"; loss keeps {f.loss_saved_bytes / GIB:.2f} GiB"
    if f.weight_copy_bytes:
        fp8 = r.precision is Precision.FP8
        kind = "fp8 weight copies (Float8Linear)" if fp8 else "autocast weight casts"
        text += f"; {kind} {f.weight_copy_bytes / GIB:.2f} GiB"
    if f.offloaded_bytes:
        text += f"; {f.offloaded_bytes / GIB:.2f} GiB offloaded to host"
    if f.kernel_saved_bytes or f.kernel_recomputed_bytes:
        full = r.checkpointing is Checkpointing.FULL
        kept = f.kernel_recomputed_bytes if full else f.kernel_saved_bytes
        text += (
            f"; of which {kept / GIB:.2f} GiB are 4-bit Linear inputs bitsandbytes < 0.43.2 keeps"
            + (" in the recomputed block" if full else "")
            + f" (MatMul4Bit ctx.tensors = (A, B); dropped by {BNB_FIX})"
        )
    return text


def component_detail(plan: MemoryPlan, c: MemoryComponent) -> str:
    """The line a user reads next to a component's number: worded here from the planner's
    numbers (``c.facts``), else the planner's own line."""
    r = plan.request
    if isinstance(c.facts, ParameterFacts):
        return _parameters_text(r, c.facts)
    if isinstance(c.facts, GradientFacts):
        return _gradients_text(c.facts)
    if isinstance(c.facts, ActivationFacts):
        return _activations_text(r, c.facts)
    return c.detail


# Knobs that mean something only for some jobs: echoed as null for the others.
_ONLY_FOR = {
    "lora_rank": lambda r: r.mode in {Mode.LORA, Mode.QLORA},
    "lora_targets": lambda r: r.mode in {Mode.LORA, Mode.QLORA},
    "lora_dropout": lambda r: r.mode in {Mode.LORA, Mode.QLORA},
    "lora_variant": lambda r: r.mode in {Mode.LORA, Mode.QLORA},
    "quant_kernel": lambda r: r.precision is Precision.NF4,
    "double_quant": lambda r: r.precision is Precision.NF4,
}


def _plain(value: object) -> Any:
    """A knob's value as JSON: enums by value, the model by name, the GPU by key."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, ModelSpec):
        return value.name
    if isinstance(value, GpuSpec):
        return value.key
    if isinstance(value, tuple):
        return list(value)
    return value


def request_echo(r: PlanRequest) -> dict[str, Any]:
    """Every knob of the job, from ``PlanRequest`` itself (a new knob is echoed with no edit)."""
    return {
        f.name: _plain(getattr(r, f.name)) if _ONLY_FOR.get(f.name, _always)(r) else None
        for f in fields(r)
    }


def _always(_: PlanRequest) -> bool:
    return True


_HEADLINE = {
    Verdict.FITS: "FITS",
    Verdict.TIGHT: "TIGHT",
    Verdict.DOES_NOT_FIT: "DOES NOT FIT",
}
_STYLE = {Verdict.FITS: "green", Verdict.TIGHT: "yellow", Verdict.DOES_NOT_FIT: "red"}


def _room(plan: MemoryPlan) -> str:
    """How much is left (or missing), against the margin the verdict keeps."""
    room = plan.headroom_bytes or 0
    margin = f"margin {_gib(plan.margin_bytes or 0)} GiB"
    if plan.verdict is Verdict.FITS:
        return f"{_gib(room)} GiB to spare (≥ the {margin})"
    if plan.verdict is Verdict.TIGHT:
        return (
            f"{_gib(room)} GiB to spare, less than the {margin}: within the planner's error, it "
            "may not fit; take a fix below, or measure it before sizing a cluster on it"
        )
    short = f"short by {_gib(-room)} GiB"
    if -room < (plan.margin_bytes or 0):
        short += " (within the planner's error: measure it before buying more)"
    return short


def _beside_budget(plan: MemoryPlan, cap: InferenceCapacity) -> str:
    """vLLM's budget against the GPU, beside what it keeps outside it (the CUDA context its
    baseline already held, the CUDA graphs captured after the pool), and what to change (this
    check decides the verdict only when it is worse than the budget's own: tight or short)."""
    r = plan.request
    usable = plan.usable_bytes or 0
    budget = cap.budget_bytes or 0
    parts = [
        f"the {what} {_gib(size)} GiB"
        for what, size in (
            ("CUDA context", cap.outside_context_bytes),
            ("CUDA graphs", cap.outside_graph_bytes),
        )
        if size
    ]
    text = (
        f"vLLM budget {r.vllm_utilization:g} × {_gib(usable)} GiB = {_gib(budget)} GiB leaves "
        f"{_gib(usable - budget)} GiB outside it; "
        + " and ".join(parts)
        + f" need {_gib(cap.outside_budget_bytes)} GiB there; "
        + _room(plan)
    )
    highest = highest_utilization(usable, cap.outside_budget_bytes)
    eager = " or --enforce-eager" if cap.outside_graph_bytes else ""
    return text + f"; lower --gpu-memory-utilization to ≤ {highest:g}{eager}"


def verdict(plan: MemoryPlan) -> str:
    """One sentence: what must fit, against what, and by how much."""
    r = plan.request
    smi = plan.predicted.nvidia_smi_used_bytes
    phase = PHASES.get(plan.peak_phase, plan.peak_phase)
    if r.gpu is None or plan.usable_bytes is None or plan.verdict is None:
        return (
            f"needs {_gib(smi)} GiB per GPU as nvidia-smi would show it, peak at {phase}; "
            "pass --gpu to check it against a GPU"
        )
    head = _HEADLINE[plan.verdict]
    cap = plan.inference
    length = r.max_model_len or r.prompt_tokens + r.new_tokens  # one request of a serving engine
    if r.serving_engine is Engine.VLLM and cap is not None and plan.beside_budget:
        return f"{head}: " + _beside_budget(plan, cap)
    if r.serving_engine is Engine.VLLM and cap is not None:
        return (
            f"{head}: vLLM budget {r.vllm_utilization:g} × {_gib(r.gpu.usable_bytes)} GiB "
            f"= {_gib(plan.usable_bytes)} GiB; weights, activations"
            + (
                ", non-torch memory and CUDA graphs"
                if cap.budgeted_graph_bytes
                else " and non-torch memory"
            )
            + f" take {_gib(cap.non_kv_bytes)} GiB, one {length:,}-token request "
            f"{_gib(cap.sequence_bytes or 0)} GiB of KV blocks; the pool {_gib(cap.kv_pool_bytes)} "
            f"GiB ({cap.kv_tokens:,} tokens, {cap.max_sequences or 0:,} such requests); "
            + _room(plan)
        )
    if r.serving_engine is Engine.SGLANG and cap is not None:
        return (
            f"{head}: SGLang static share {_gib(plan.usable_bytes)} GiB holds the weights "
            f"{_gib(cap.non_kv_bytes)} GiB and a pool of {cap.kv_tokens:,} tokens "
            f"({_gib(cap.kv_pool_bytes)} GiB, {cap.max_sequences or 0:,} requests of "
            f"{length:,} tokens; one needs {_gib(cap.sequence_bytes or 0)} GiB); the remainder "
            f"{_gib(cap.remainder_bytes or 0)} GiB is for activations and CUDA graphs; "
            + _room(plan)
        )
    return (
        f"{head}: predicted nvidia-smi used {_gib(smi)} GiB (allocator reserved + CUDA context + "
        f"NCCL) vs {_gib(plan.usable_bytes)} GiB usable on the {r.gpu.name} (nvidia-smi total "
        f"{_gib(r.gpu.memory_bytes)} GiB less the driver's reservation), peak at {phase}; "
        + _room(plan)
    )


def scale_out(plan: MemoryPlan) -> str | None:
    """When no single change fits: how many GPUs it needs (or that the search found none)."""
    needed = next((f for f in plan.fixes if f.key == NEEDS_MORE_GPUS), None)
    single = [f for f in plan.fixes if f is not needed]
    if plan.fits is not False or any(f.fits for f in single):
        return None
    r = plan.request
    if needed is None:
        gpu = r.gpu.name if r.gpu else "GPU"
        searched = (
            f"no tensor-parallel layout of up to {r.gpus_per_node} × {gpu} (one node)"
            if r.mode is Mode.INFER
            else f"no layout of up to 128 × {gpu}"
        )
        return (
            f"no single change fits, and {searched} does: try `--fit` over the catalog's GPUs, "
            "a smaller model, or quantized weights"
        )
    return (
        f"no single change fits: it needs {needed.description} "
        f"(`gpuwarden plan {r.model.name} --fit` ranks GPU types, counts and layouts)"
    )


def _exact_doc(exact: ExactReport) -> dict[str, Any]:
    return {
        "components": dict(exact.components),
        "peak_bytes": exact.peak_bytes,
        "peak_phase": exact.peak_phase,
        "saved_activation_bytes": exact.saved_activation_bytes,
        "method": exact.method,
        "versions": dict(exact.versions),
        "elapsed_seconds": round(exact.elapsed_seconds, 3),
        "notes": list(exact.notes),
    }


def plan_document(plan: MemoryPlan, exact: ExactReport | None = None) -> dict[str, Any]:
    r = plan.request
    per_gpu = {c.key: c.bytes for c in plan.components}
    per_gpu["total"] = plan.peak_bytes
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "request": request_echo(r),
        "model": {
            "name": r.model.name,
            "model_type": r.model.model_type,
            "parameters": plan.total_parameters,
            "trainable_parameters": plan.trainable_parameters,
            "source": r.model.source,
        },
        "gpu": None
        if r.gpu is None
        else {
            "key": r.gpu.key,
            "name": r.gpu.name,
            "memory_bytes": r.gpu.memory_bytes,
            "usable_bytes": r.gpu.usable_bytes,
            "nominal_memory_bytes": r.gpu.nominal_memory_bytes,
        },
        "per_gpu_bytes": per_gpu,
        "at_peak_bytes": plan.at_peak(),
        "peak_phase": plan.peak_phase,
        "phases": [
            {"name": p.name, "total_bytes": p.total, "bytes": dict(p.bytes_by_component)}
            for p in plan.phases
        ],
        "predicted": {
            "max_allocated_bytes": plan.predicted.max_allocated_bytes,
            "max_reserved_bytes": plan.predicted.max_reserved_bytes,
            "nvidia_smi_used_bytes": plan.predicted.nvidia_smi_used_bytes,
            "max_active_bytes": plan.predicted.max_active_bytes,
        },
        "usable_bytes": plan.usable_bytes,
        "fits": plan.fits,
        "verdict": plan.verdict.value if plan.verdict else None,
        "headroom_bytes": plan.headroom_bytes,
        "margin_bytes": plan.margin_bytes,
        "verdict_rule": RULE,
        "summary": verdict(plan),
        "scale_out": scale_out(plan),
        "host_bytes": plan.host_bytes,
        "inference": None,
        "fixes": [
            {
                "key": f.key,
                "description": f.description,
                "changes": dict(f.changes),
                "saved_bytes": f.saved_bytes,
                "total_bytes": f.total_bytes,
                "fits": f.fits,
                "verdict": f.verdict.value if f.verdict else None,
                "tradeoff": f.tradeoff,
            }
            for f in plan.fixes
        ],
        "warnings": list(plan.warnings),
        "sources": {
            c.key: {"source": c.source, "detail": component_detail(plan, c)}
            for c in plan.components
        },
        "notes": dict(plan.notes),
    }
    if plan.inference is not None:
        inf = plan.inference
        doc["inference"] = {
            "kv_bytes_per_token": inf.kv_bytes_per_token,
            "kv_tokens": inf.kv_tokens,
            "kv_pool_bytes": inf.kv_pool_bytes,
            "non_kv_bytes": inf.non_kv_bytes,
            "max_sequences": inf.max_sequences,
            "block_size": inf.block_size,
            "sequence_bytes": inf.sequence_bytes,
            "remainder_bytes": inf.remainder_bytes,
            "budget_bytes": inf.budget_bytes,
            "outside_budget_bytes": inf.outside_budget_bytes,
        }
    if exact is not None:
        doc["exact"] = _exact_doc(exact)
    return doc


def print_plan_json(plan: MemoryPlan, exact: ExactReport | None = None) -> None:
    print_json(plan_document(plan, exact))


def _title(plan: MemoryPlan) -> str:
    r = plan.request
    parts = [r.model.name, r.mode.value, r.precision.value]
    if r.mode is Mode.INFER:
        parts.append(f"batch {r.batch} × ({r.prompt_tokens}+{r.new_tokens}) tokens")
    else:
        parts.append(r.optimizer.value)
        target = f" → {r.target_len}" if r.target_len else ""
        parts.append(f"micro-batch {r.micro_batch} × {r.seq_len}{target} tokens")
        parts.append(
            "no checkpointing"
            if r.checkpointing is Checkpointing.NONE
            else f"checkpointing {r.checkpointing.value}"
        )
        if r.mode in {Mode.LORA, Mode.QLORA}:
            targets = ",".join(r.lora_targets) if r.lora_targets else "PEFT's default targets"
            parts.append(f"{LORA_VARIANT_NAMES[r.lora_variant]} r{r.lora_rank} {targets}")
    layout = f"{r.num_gpus}× {r.gpu.name if r.gpu else 'GPU'}"
    extras = [
        f"ZeRO-{r.zero_stage}" if r.zero_stage else "",
        f"FSDP {r.fsdp.value}" if r.fsdp else "",
        f"TP{r.tp}" if r.tp > 1 else "",
        f"PP{r.pp}" if r.pp > 1 else "",
        f"CP{r.cp}" if r.cp > 1 else "",
        f"EP{r.ep}" if r.ep > 1 else "",
        r.framework.value if r.framework is not Framework.HF else "",
        "Liger kernels" if r.kernels is Kernels.LIGER and r.mode is not Mode.INFER else "",
        "script loop" if r.loop is TrainLoop.SCRIPT and r.mode is not Mode.INFER else "",
    ]
    return " · ".join([*parts, layout, *[e for e in extras if e]])


def print_plan(plan: MemoryPlan, exact: ExactReport | None = None) -> None:
    out = console()
    at_peak = plan.at_peak()
    total = plan.peak_bytes
    rows = [("component", "GiB", "at peak", "share", "detail (--json has each source)")]
    for c in plan.components:
        if not c.bytes and c.key not in {"parameters", "activations"}:
            continue
        here = at_peak.get(c.key, 0)
        rows.append(
            (
                LABELS.get(c.key, c.key),
                _gib(c.bytes),
                _gib(here),
                f"{here / total:.0%}" if total else "–",
                component_detail(plan, c) or c.source,
            )
        )
    rows.append(("total per GPU", "", _gib(total), "100%", f"peak phase: {plan.peak_phase}"))
    table = Table(title=_title(plan), title_justify="left")
    # labels and numbers stay whole: the detail column takes what the terminal has left
    table.add_column(rows[0][0], no_wrap=True)
    for header in rows[0][1:4]:
        table.add_column(header, justify="right", no_wrap=True)
    detail_width = min(
        DETAIL_WIDTH, _last_column_room(out.width, [[row[i] for row in rows] for i in range(4)])
    )
    table.add_column(rows[0][4], no_wrap=True, overflow="ellipsis", max_width=detail_width)
    for row in rows[1:]:
        table.add_row(*row)
    out.print(table)
    p = plan.predicted
    out.print(
        f"predicted: torch.cuda.max_memory_allocated {_gib(p.max_allocated_bytes)} GiB · "
        f"max_memory_reserved {_gib(p.max_reserved_bytes)} GiB · "
        f"nvidia-smi used {_gib(p.nvidia_smi_used_bytes)} GiB"
    )
    out.print(
        f"parameters {plan.total_parameters:,}, trainable {plan.trainable_parameters:,}"
        + (
            f"; host RAM for offloaded states {_gib(plan.host_bytes)} GiB per node"
            if plan.host_bytes
            else ""
        )
    )
    for key, label in (
        ("checkpoint_weights", "checkpoint weights"),
        ("nf4_weights", "4-bit weights"),
        ("quant_kernel", "4-bit kernel"),
        ("compute_dtype", "4-bit compute"),
        ("framework", "stack"),
        ("kernels", "kernels"),
        ("dora", "DoRA"),
        ("cuda_context", "CUDA context"),
        ("load", "load"),
        ("evaluation", "evaluation"),
        ("checkpoint_save", "checkpoint save"),
        ("dequantize", "dequantize"),
        ("float8", "float8"),
        ("fsdp_frozen_units", "FSDP frozen units"),
        ("non-torch", "vLLM non-torch"),
        ("sglang", "SGLang"),
        ("sglang_pool", "SGLang pool"),
        ("sglang_refusal", "SGLang refuses"),
        ("sglang_remainder", "SGLang remainder"),
        ("stack_unknown", "not read in this stack"),
        ("torchtitan_release", "torchtitan release"),
        ("torchtitan_root", "torchtitan root unit"),
    ):
        if key in plan.notes:
            out.print(f"{label}: {plan.notes[key]}")
    style = _STYLE.get(plan.verdict, "yellow") if plan.verdict else "yellow"
    out.print(Text(verdict(plan), style=style))
    if plan.verdict is not None:
        out.print(Text(RULE, style="dim"))
    print_warnings(out, plan.warnings)
    if plan.fixes:
        fixes = Table(title="fixes (each re-planned with the change)", title_justify="left")
        cells = [
            (f.description, _saves(f), _gib(f.total_bytes), _fix_verdict(f), f.tradeoff)
            for f in plan.fixes
        ]
        numbers = [["saves GiB", *(c[1] for c in cells)], ["new peak GiB", *(c[2] for c in cells)]]
        numbers.append(["fits", *(c[3] for c in cells)])
        # the fix and its trade-off wrap (what a fix costs is read whole, not cut at "…"); the
        # numbers keep one line
        tradeoff_width = min(
            TRADEOFF_WIDTH, _last_column_room(out.width, [["x" * FIX_MIN_WIDTH], *numbers])
        )
        fixes.add_column("fix", max_width=FIX_WIDTH)
        for column in numbers:
            fixes.add_column(column[0], justify="left" if column[0] == "fits" else "right",
                             no_wrap=True)  # fmt: skip
        fixes.add_column("trade-off", max_width=tradeoff_width)
        for row in cells:
            fixes.add_row(*row)
        out.print(fixes)
    if (needed := scale_out(plan)) is not None:
        out.print(Text(needed, style="bold"))
    if exact is not None:
        _print_exact(plan, exact)


def _saves(fix: Fix) -> str:
    """What the fix takes off the job's peak; a bigger GPU takes nothing off, it brings room
    (its ``saved_bytes`` is the capacity gained, said as such)."""
    if fix.key == "bigger-gpu":
        return f"+{_gib(fix.saved_bytes)} room"
    return _gib(fix.saved_bytes)


def _fix_verdict(fix: Fix) -> str:
    if fix.verdict is Verdict.TIGHT:
        return "tight"
    return "yes" if fix.fits else ("no" if fix.fits is False else "?")


def _print_exact(plan: MemoryPlan, exact: ExactReport) -> None:
    out = console()
    table = Table(
        title=f"formula vs exact ({exact.method}, {exact.elapsed_seconds:.1f} s)",
        title_justify="left",
    )
    for col in ("component", "formula", "exact", "difference"):
        table.add_column(col, justify="left" if col == "component" else "right")
    rows: list[tuple[str, int, int]] = [
        ("saved activations", plan.component("activations"), exact.saved_activation_bytes)
    ]
    for key, value in exact.components.items():
        if key != "activations":
            rows.append((LABELS.get(key, key), plan.component(key), value))
    # Exact mode counts tensors only: compare with the peak phase minus what lives outside them.
    at_peak = plan.at_peak()
    tensors = (
        plan.peak_bytes - at_peak.get("runtime_overhead", 0) - at_peak.get("allocator_cache", 0)
    )
    rows.append(("peak (tensors)", tensors, exact.peak_bytes))
    for label, formula, measured in rows:
        diff = f"{(formula - measured) / measured:+.1%}" if measured else "–"
        table.add_row(label, format_bytes(formula), format_bytes(measured), diff)
    out.print(table)
    for note in exact.notes:
        out.print(Text(f"exact: {note}", style="dim"))
