"""Exact mode of ``gpuwarden plan --exact``: run the real model and count the bytes it holds.

Method (memory.md §5). The model is built from its HF config with ``transformers`` inside torch's
``FakeTensorMode``: every tensor has a shape, dtype and storage but no memory and no arithmetic, so
a 70 B model costs a few hundred MB of host RAM and seconds of time.

* Training (``train`` / ``lora`` / ``qlora``): one forward of (micro_batch, seq_len) with labels
  under ``saved_tensors_hooks`` gives ``saved_activation_bytes`` (unique storages, parameters and
  buffers excluded). Then PyTorch's ``MemTracker`` follows a steady-state step — forward, backward,
  optimizer step, with the optimizer states already allocated (and the gradients too under
  gradient accumulation) — and reports the peak of live tensors, its phase and its breakdown into
  parameters, gradients, optimizer_states, activations, temporaries (+ buffers, inputs).
* Inference (``infer``): MemTracker over a prefill of the prompt (``torch.no_grad``, transformers'
  DynamicCache, last-position logits as ``generate()`` asks for) and over the last decode step with
  prompt + new tokens in the cache. Components are parameters, kv_cache (all tokens) and the
  prefill's transient activations, measured separately; the peak is the larger phase.

What "exact" means here: the count is the one a real run of the same code on CPU gives, to the byte
(the tests check this on tiny models), which is what ``torch.cuda.max_memory_allocated`` measures
for the same kernels. Limits, each stated in ``ExactReport.notes`` when it applies:

* CPU kernels are traced (a CPU-only torch cannot fake CUDA): SDPA's CPU flash kernel saves what
  FlashAttention saves; CUDA's mem-efficient / cuDNN kernels add small extras; CPU autocast's op
  policy stands in for CUDA's.
* Memory outside autograd's tensors is not counted: CUDA context, cuBLAS workspaces, NCCL, the
  caching allocator's rounding and fragmentation.
* Formats without CPU kernels are modelled from their libraries' layouts, not run: NF4 / int8 / int4
  frozen weights (a bf16 stand-in is traced) and bitsandbytes' 8-bit optimizer states.
* One process, one replica: TP / PP / CP / EP, ZeRO, FSDP and offload are refused
  (``exact-unsupported``); use the formula planner for them.
* MoE: transformers' default ``grouped_mm`` experts process every token's top-k rows with static
  shapes, so routing does not change the count; capacity-factor implementations would.
* A model whose code needs tensor values (``.item()``, data-dependent shapes) cannot be traced:
  ``exact-trace-failed`` names the op.

``compiled_block(request)`` answers a narrower question for ``--compile`` plans: which tensors
torch.compile's partitioner keeps for one decoder block's backward (``_compiled``), the check of
the formula's compile terms (benchmarks/planner_accuracy.py table (a')).

Only this package imports torch, transformers and peft, and only inside ``run_exact`` and
``compiled_block``: ``import gpuwarden.planner`` works without them.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwarden.errors import GpuwardenError, MissingExtraError
from gpuwarden.planner.exact._recipe import resolve
from gpuwarden.types.plan import ExactReport, PlanRequest

if TYPE_CHECKING:
    from gpuwarden.planner.exact._compiled import CompiledBlock

__all__ = ["compiled_block", "run_exact"]

TRACE_FAILED = "exact-trace-failed"


def _failing_op(exc: BaseException) -> str:
    """The aten op a fake-tensor error names, else the innermost frame of the traceback."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        func = getattr(current, "func", None)
        if func is not None:
            return str(func)
        current = current.__cause__ or current.__context__
    frames = traceback.extract_tb(exc.__traceback__)
    # The innermost public function names the op (e.g. meta_grouped_mm), not torch._check.
    named = [f for f in frames if not f.name.startswith("_")] or frames
    if named:
        frame = named[-1]
        return f"{frame.name} ({Path(frame.filename).name}:{frame.lineno})"
    return type(exc).__name__


def _trace_failed(model: str, exc: Exception) -> GpuwardenError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(detail) > 200:  # transformers lists every model type it knows
        detail = detail[:200] + "…"
    op = _failing_op(exc)
    return GpuwardenError(
        f"exact trace of {model} failed at {op}: {type(exc).__name__}"
        + (f": {detail}" if detail else ""),
        reference=TRACE_FAILED,
        hint="use the formula planner (run without --exact)",
        context=op,
    )


# Exact mode traces under FakeTensorMode on the CPU: the CPU wheel is all it needs (PyPI's
# default Linux wheel bundles the CUDA libraries, several GB).
CPU_WHEELS = "https://download.pytorch.org/whl/cpu"


def _torch_missing() -> MissingExtraError:
    error = MissingExtraError("exact mode", "torch", "torch")
    error.hint = (
        f"pip install torch --index-url {CPU_WHEELS}  (the CPU build: exact mode traces on the "
        "CPU, no GPU needed), then pip install 'gpuwarden[torch]' for transformers and peft"
    )
    return error


def run_exact(
    request: PlanRequest, *, progress: Callable[[str], None] | None = None
) -> ExactReport:
    """Trace ``request``'s job under FakeTensorMode and return what it holds (see module doc).

    ``progress`` receives a short message as each stage starts (building, tracing, the step).
    Raises ``MissingExtraError`` without the ``torch`` extra, ``exact-unsupported`` for jobs
    exact mode cannot run, and ``exact-trace-failed`` when the model cannot be built or traced.
    """
    start = time.perf_counter()
    try:
        import torch  # noqa: F401  (imported here, never at module level)
    except ImportError as exc:
        raise _torch_missing() from exc
    try:
        import transformers  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("exact mode", "torch", "transformers") from exc
    recipe = resolve(request)

    from gpuwarden.planner.exact import _trace

    try:
        traced = _trace.trace(request, recipe, progress=progress)
    except GpuwardenError:
        raise
    except Exception as exc:  # any failure of transformers or of the fake run
        raise _trace_failed(request.model.name, exc) from exc
    return ExactReport(
        components=traced.components,
        peak_bytes=traced.peak_bytes,
        peak_phase=traced.peak_phase,
        saved_activation_bytes=traced.saved_activation_bytes,
        method=traced.method,
        versions=traced.versions,
        elapsed_seconds=time.perf_counter() - start,
        notes=(*recipe.notes, *traced.notes),
        phase_peaks=traced.phase_peaks,
        trainable_parameters=traced.trainable_parameters,
    )


def compiled_block(request: PlanRequest) -> CompiledBlock:
    """What torch.compile's min-cut partitioner keeps for the backward of the request's first
    decoder block (full training of a causal LM; see ``_compiled``). Raises
    ``MissingExtraError`` without the ``torch`` extra, ``exact-unsupported`` for other jobs and
    ``exact-trace-failed`` when the block cannot be traced."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise _torch_missing() from exc
    from gpuwarden.planner.exact import _compiled

    try:
        return _compiled.compiled_block_saves(request)
    except GpuwardenError:
        raise
    except Exception as exc:  # any failure of transformers, the fake run or the partitioner
        raise _trace_failed(request.model.name, exc) from exc
