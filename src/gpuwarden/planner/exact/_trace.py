"""Orchestrate one exact-mode run: build, count, assemble the numbers (imports torch)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode

from gpuwarden.planner.exact import _build, _run
from gpuwarden.planner.exact._recipe import DTYPE_BYTES, Recipe, unsupported
from gpuwarden.types.plan import Mode, PeakStep, PlanRequest, TrainLoop

Progress = Callable[[str], None]


@dataclass
class Traced:
    """Numbers of one run, before they become an ``ExactReport``."""

    components: dict[str, int]
    peak_bytes: int
    peak_phase: str
    saved_activation_bytes: int
    method: str
    phase_peaks: dict[str, int]
    trainable_parameters: int
    versions: dict[str, str]
    notes: list[str] = field(default_factory=list)


def _versions(recipe: Recipe) -> dict[str, str]:
    versions = {"torch": str(torch.__version__), "transformers": transformers.__version__}
    if recipe.mode in (Mode.LORA, Mode.QLORA):
        import peft

        versions["peft"] = str(peft.__version__)
    return versions


def _train(request: PlanRequest, recipe: Recipe, built: _build.Built, progress: Progress) -> Traced:
    inputs = _run.training_inputs(built, request.micro_batch, request.seq_len, request.target_len)
    progress("tracing the forward pass (saved activations)")
    saved = _run.saved_activations(built, inputs, recipe)
    progress("simulating a training step (forward, backward, optimizer step)")
    grads_alive = request.grad_accum > 1 or request.keep_grads
    script = request.loop is TrainLoop.SCRIPT
    first = request.peak_step is PeakStep.FIRST
    step = _run.train_step(
        built, inputs, recipe, grads_alive=grads_alive, script_loop=script, first_step=first
    )
    saved_bytes = saved.bytes
    if recipe.op_sac:
        # the selective checkpoint's cache is invisible to saved-tensor hooks: count what is
        # alive at the end of the forward instead
        saved_bytes = step.forward_end.get("activations", 0) + step.forward_end.get(
            "temporaries", 0
        )
    components = {k: v for k, v in step.breakdown.items() if v}
    saving = built.quantized_saving
    if saving:
        # The frozen base was traced in bf16: swap in its quantized size everywhere it is alive.
        components["parameters"] -= saving
    notes = list(built.notes)
    if script and first:
        notes.append("script loop, first step: no previous step's outputs at its forward")
    elif script:
        notes.append(
            "script loop: the previous step's outputs (logits, KV cache) are counted under "
            "inputs until the forward returns"
        )
    if recipe.checkpointing:
        notes.append(
            "with checkpointing, saved_activation_bytes counts the checkpoint boundaries only; "
            "the recomputed layer shows in the step's peak (MemTracker may file part of it under "
            "temporaries rather than activations; the peak itself is exact)"
        )
    return Traced(
        components=components,
        peak_bytes=step.peak - saving,
        peak_phase=step.peak_phase,
        saved_activation_bytes=saved_bytes,
        method="FakeTensorMode + saved_tensors_hooks (saved activations) + MemTracker (step)",
        phase_peaks={k: v - saving for k, v in step.phase_peaks.items()},
        trainable_parameters=sum(p.numel() for p in built.model.parameters() if p.requires_grad),
        versions=_versions(recipe),
        notes=notes,
    )


def _infer(request: PlanRequest, recipe: Recipe, built: _build.Built, progress: Progress) -> Traced:
    if built.kind != "causal":
        kind = "an encoder-decoder" if built.kind == "seq2seq" else "an encoder-only"
        raise unsupported(f"inference of {request.model.name}, {kind} model (no KV-cache decode)")
    progress("tracing prefill and a decode step")
    run = _run.inference(built, request.batch, request.prompt_tokens, request.new_tokens)
    scale = 1.0
    if recipe.kv_bytes is not None:
        scale = recipe.kv_bytes / DTYPE_BYTES[recipe.compute_dtype]

    def adjusted(tracker: _run.PeakTracker, inputs: int) -> tuple[int, dict[str, int]]:
        parts = tracker.breakdown()
        kv_alive = parts.get("inputs", 0) - inputs
        peak = tracker.peak() - built.quantized_saving - round(kv_alive * (1 - scale))
        return peak, parts

    prefill_peak, prefill = adjusted(run.prefill, run.prefill_inputs)
    phase_peaks = {"prefill": prefill_peak}
    peak, phase = prefill_peak, "prefill"
    if run.decode is not None:
        decode_peak, _ = adjusted(run.decode, run.decode_inputs)
        phase_peaks["decode"] = decode_peak
        if decode_peak > peak:
            peak, phase = decode_peak, "decode"
    components = {
        "parameters": prefill.get("parameters", 0) - built.quantized_saving,
        "buffers": prefill.get("buffers", 0),
        "kv_cache": round(run.kv_cache * scale),
        "activations": prefill.get("activations", 0) + prefill.get("temporaries", 0),
        "inputs": run.prefill_inputs,
    }
    notes = list(built.notes)
    if request.model.mla is not None:
        notes.append(
            "transformers caches multi-head latent attention as per-head K and V; serving "
            "engines (vLLM, SGLang) cache the compressed latent, which is far smaller"
        )
    notes += [
        "inference components are measured separately: kv_cache holds prompt + new tokens, "
        "activations is the prefill's transient working set above weights and cache; "
        "peak_bytes is the larger of the prefill and the last decode step",
    ]
    return Traced(
        components={k: v for k, v in components.items() if v},
        peak_bytes=peak,
        peak_phase=phase,
        saved_activation_bytes=0,
        method="FakeTensorMode + MemTracker (prefill and last decode step, DynamicCache)",
        phase_peaks=phase_peaks,
        trainable_parameters=0,
        versions=_versions(recipe),
        notes=notes,
    )


def trace(
    request: PlanRequest,
    recipe: Recipe,
    *,
    progress: Progress | None = None,
    fake: bool = True,
) -> Traced:
    """Run the request's job; ``fake=False`` runs it for real on CPU (tiny models only)."""
    report = progress or (lambda message: None)
    mode: contextlib.AbstractContextManager[Any] = (
        FakeTensorMode() if fake else contextlib.nullcontext()
    )
    masks = _build.fake_safe_masks() if fake else contextlib.nullcontext()
    with _build.quiet(), mode, masks, _run.cuda_dropout(), _run.cuda_sdpa():
        report(f"building {request.model.name} from its config")
        built = _build.build(request, recipe)
        if recipe.mode is Mode.INFER:
            return _infer(request, recipe, built, report)
        return _train(request, recipe, built, report)
