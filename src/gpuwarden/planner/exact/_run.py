"""Run the built model and count bytes (imports torch).

* ``saved_activations``: a forward under ``saved_tensors_hooks``, unique storages (memory.md §5.1).
* ``train_step`` / ``inference``: PyTorch's ``MemTracker`` (§5.4), which categorises every live
  storage (parameter, buffer, gradient, optimizer state, activation, temporary) after each op.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

import torch
import transformers
from torch.distributed._tools import mem_tracker
from torch.distributed._tools.mem_tracker import MemTracker

from gpuwarden.planner.exact._build import DTYPES, Built
from gpuwarden.planner.exact._quant import BNB_MIN_8BIT_SIZE, BNB_OPTIMIZER_BLOCK
from gpuwarden.planner.exact._recipe import Recipe
from gpuwarden.types.plan import Optimizer

# MemTracker reference types → the component keys MemoryPlan uses.
_CATEGORY = {
    "PARAM": "parameters",
    "BUFFER": "buffers",
    "GRAD": "gradients",
    "OPT": "optimizer_states",
    "ACT": "activations",
    "TEMP": "temporaries",
    "OTH": "inputs",  # tensors we register ourselves: input ids (and, in inference, the KV cache)
}
_TOTAL = getattr(mem_tracker, "_TOTAL_KEY", "Total")


class _NoHook:
    """Stands in for a hook handle MemTracker will ``remove()`` at exit."""

    def remove(self) -> None:
        return None


# TorchDispatchMode.__init_subclass__ is untyped upstream.
class PeakTracker(MemTracker):  # type: ignore[no-untyped-call]
    """``MemTracker`` that keeps only the global peak, and the phase that reached it.

    The stock tracker also refreshes a peak snapshot for every active module after every op,
    which is O(ops × modules): 86 s for a Llama-2-7B step instead of 5 s, with identical totals.
    """

    def __init__(self) -> None:
        super().__init__()
        # Private hooks of torch.distributed._tools (2.5 – 2.13): fail loudly, never silently.
        if not callable(getattr(MemTracker, "_update_peak_stats", None)) or not all(
            hasattr(self, name)
            for name in (
                "_curr_mem_snap",
                "_peak_mem",
                "_peak_mem_snap",
                "_param_to_grad_hook_handles",
            )
        ):
            raise RuntimeError(
                f"torch {torch.__version__}'s MemTracker lacks the internals exact mode uses"
            )
        self.phase = ""
        self.peak_phase = ""
        self.phase_peaks: dict[str, int] = {}

    def _update_peak_stats(self, peak_state: object) -> None:
        for device, snapshot in self._curr_mem_snap.items():
            total = snapshot[_TOTAL]
            if total > self.phase_peaks.get(self.phase, -1):
                self.phase_peaks[self.phase] = total
            if total > self._peak_mem.get(device, 0):
                self._peak_mem[device] = total
                self._peak_mem_snap[device] = dict(snapshot)
                self.peak_phase = self.phase

    def skip_frozen(self, model: torch.nn.Module) -> None:
        """Stock MemTracker registers a gradient hook on every parameter it meets, which raises
        for frozen ones (a LoRA base); mark those as hooked already."""
        for p in model.parameters():
            if not p.requires_grad:
                self._param_to_grad_hook_handles[p] = (_NoHook(), _NoHook())

    def peak(self) -> int:
        return sum(s[_TOTAL] for s in self.get_tracker_snapshot("peak").values())

    def breakdown(self, which: str = "peak") -> dict[str, int]:
        """Bytes by category at the peak (sums to ``peak()``), or now (``which="current"``)."""
        out: dict[str, int] = {}
        for snapshot in self.get_tracker_snapshot(which).values():
            for key, value in snapshot.items():
                if key == _TOTAL:
                    continue
                name = _CATEGORY.get(getattr(key, "name", str(key)), str(key))
                out[name] = out.get(name, 0) + value
        return out


class _ModelledOptimizer(torch.optim.Optimizer):
    """Holds tensors of exactly the sizes a real optimizer allocates, for optimizers that cannot
    run here; ``step`` reproduces only the temporaries the real update allocates."""

    def __init__(self, params: Iterable[torch.nn.Parameter]) -> None:
        super().__init__(list(params), {})
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = self.states_for(p)

    def states_for(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        return None


class _Modelled8bitAdamW(_ModelledOptimizer):
    """bitsandbytes (paged) AdamW8bit: CUDA-only kernels; the update is in place."""

    def __init__(self, params: Iterable[torch.nn.Parameter]) -> None:
        self._first = True
        super().__init__(params)

    def states_for(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        n = p.numel()
        if n < BNB_MIN_8BIT_SIZE:
            state = {
                "state1": torch.zeros_like(p, dtype=torch.float32),
                "state2": torch.zeros_like(p, dtype=torch.float32),
            }
        else:
            blocks = -(-n // BNB_OPTIMIZER_BLOCK)
            state = {
                "state1": torch.zeros_like(p, dtype=torch.uint8),
                "state2": torch.zeros_like(p, dtype=torch.uint8),
                "absmax1": torch.zeros(blocks, dtype=torch.float32),
                "absmax2": torch.zeros(blocks, dtype=torch.float32),
            }
        if self._first:  # the two 256-entry quantization maps, shared by all parameters
            state["qmap1"] = torch.zeros(256, dtype=torch.float32)
            state["qmap2"] = torch.zeros(256, dtype=torch.float32)
            self._first = False
        return state


class _ModelledAdafactor(_ModelledOptimizer):
    """torch.optim.Adafactor, whose step() calls ``.item()`` and cannot run on fake tensors.

    States as its ``_init_group`` allocates them; step() builds the full-size variance estimate
    ``row_var @ col_var`` (2-D and up) or ``variance`` copy per tensor — all at once on the
    foreach path, one at a time on the for-loop path.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], *, foreach: bool) -> None:
        self.foreach = foreach
        super().__init__(params)

    def states_for(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        state = {"step": torch.tensor(0.0)}
        if p.dim() > 1:
            state["row_var"] = p.new_zeros((*p.shape[:-1], 1))
            state["col_var"] = p.new_zeros((*p.shape[:-2], 1, p.shape[-1]))
        else:
            state["variance"] = torch.zeros_like(p)
        return state

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        params = [p for group in self.param_groups for p in group["params"] if p.grad is not None]
        if self.foreach:
            estimates = [torch.empty_like(p) for p in params]
            del estimates
        else:
            for p in params:
                estimate = torch.empty_like(p)
                del estimate


def make_optimizer(
    kind: Optimizer, params: list[torch.nn.Parameter], impl: str = "fused"
) -> torch.optim.Optimizer | None:
    """The optimizer a real job builds; ``impl`` is "fused", "foreach" or "for-loop"."""
    fused, foreach = impl == "fused", impl == "foreach"
    if kind is Optimizer.ADAMW:
        return torch.optim.AdamW(params, lr=1e-5, fused=fused, foreach=foreach)
    if kind in (Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT):
        return _Modelled8bitAdamW(params)
    if kind is Optimizer.SGD:
        return torch.optim.SGD(params, lr=1e-3, fused=fused, foreach=foreach)
    if kind is Optimizer.SGD_MOMENTUM:
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, fused=fused, foreach=foreach)
    if kind is Optimizer.ADAFACTOR:
        return _ModelledAdafactor(params, foreach=impl != "for-loop")
    return None


def _autocast(recipe: Recipe) -> contextlib.AbstractContextManager[Any]:
    if recipe.autocast_dtype is None:
        return contextlib.nullcontext()
    # CPU autocast: CUDA cannot be faked by a CPU-only torch (§5.5.3). Both policies run
    # matmuls, linear and SDPA in the low precision; transformers upcasts norms and the loss
    # explicitly, so the two agree on the decoder families we trace.
    return torch.autocast("cpu", dtype=DTYPES[recipe.autocast_dtype])


@contextlib.contextmanager
def cuda_dropout() -> Iterator[None]:
    """Dropout as CUDA runs it. On CPU ``F.dropout`` multiplies by a noise tensor of the input's
    dtype and saves it; on CUDA it is ``native_dropout``, which saves a bool mask (1 B per
    element). The trace runs on CPU, so it calls ``native_dropout`` directly."""
    original = torch.nn.functional.dropout

    def dropout(
        input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
    ) -> torch.Tensor:
        if not training or p == 0.0 or inplace or not input.requires_grad:
            return original(input, p, training, inplace)
        out, _mask = torch.native_dropout(input, p, True)
        return out

    torch.nn.functional.dropout = dropout
    try:
        yield
    finally:
        torch.nn.functional.dropout = original


# sdp_utils.cpp: the memory-efficient kernel needs head dims aligned to 16 bytes, and pads an
# attention mask whose last dimension is not a multiple of 8 (attention.cpp preprocess_mask).
_MEM_EFF_ALIGN_BYTES = 16
_MEM_EFF_MASK_ALIGN = 8


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _on_meta_or_zeros(op: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a CUDA-only op: its meta kernel under FakeTensorMode (fake CPU tensors), else the meta
    kernel for the layout and zeros of that layout on CPU, so a real CPU run allocates what the
    fake one does. The values are not the kernel's: exact mode counts bytes, never reads them.
    The meta run is hidden from the dispatch modes (MemTracker would count its meta tensors)."""
    from torch.utils._python_dispatch import _disable_current_modes

    if any(_is_fake(a) for a in args if isinstance(a, torch.Tensor)):
        return op(*args, **kwargs)

    def meta(a: Any) -> Any:
        if not isinstance(a, torch.Tensor):
            return a
        return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")

    with _disable_current_modes():
        outs = op(*[meta(a) for a in args], **kwargs)

    def real(m: Any) -> Any:
        if not isinstance(m, torch.Tensor):
            return m
        return torch.empty_strided(m.shape, m.stride(), dtype=m.dtype).zero_()

    return tuple(real(m) for m in outs)


class _MemEfficientSdpa(torch.autograd.Function):
    """SDPA as CUDA's memory-efficient kernel: derivatives.yaml
    (``_scaled_dot_product_efficient_attention``) keeps q, k, v, the bias, the output, the
    logsumexp (rows padded to 32) and the philox seed / offset, and differentiates the bias."""

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        bias: torch.Tensor | None,
        dropout_p: float,
        is_causal: bool,
        scale: float | None,
    ) -> torch.Tensor:
        op = torch.ops.aten._scaled_dot_product_efficient_attention
        out, lse, seed, offset = _on_meta_or_zeros(
            op, q, k, v, bias, True, dropout_p, is_causal, scale=scale
        )
        ctx.save_for_backward(q, k, v, bias, out, lse, seed, offset)
        ctx.options = (dropout_p, is_causal, scale)
        return out  # type: ignore[no-any-return]

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> Any:
        q, k, v, bias, out, lse, seed, offset = ctx.saved_tensors
        dropout_p, is_causal, scale = ctx.options
        wanted = [*ctx.needs_input_grad[:3], bias is not None and ctx.needs_input_grad[3]]
        op = torch.ops.aten._scaled_dot_product_efficient_attention_backward
        args = (grad_out.contiguous(), q, k, v, bias, out, lse, seed, offset, dropout_p, wanted)
        grads = _on_meta_or_zeros(op, *args, is_causal, scale=scale)
        return (*grads, None, None, None)


def _cuda_picks_mem_efficient(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, gqa: bool
) -> bool:
    """Where CUDA's SDPA runs the memory-efficient kernel and CPU's falls back to the math path.

    CUDA's priority is flash, then memory-efficient, then math (sdp_utils.cpp). Flash takes no
    mask and needs q, k and v of one head dim; the memory-efficient kernel takes a mask and
    differentiates it, and lets v's head dim differ from q's and k's (MLA: 128 vs 192), when the
    head dims are 16-byte aligned. CPU's flash kernel has neither the mask gradient nor the
    unequal head dims (sdp_utils_cpp.cpp), so both cases run CPU's fp32 math path, which keeps
    fp32 copies of q, k, v and the s² probabilities. GQA calls (enable_gqa with fewer K/V heads)
    are left to the original: the memory-efficient kernel does not group heads."""
    if gqa and k.shape[-3] != q.shape[-3]:
        return False
    align = _MEM_EFF_ALIGN_BYTES // q.element_size()
    if q.shape[-1] != k.shape[-1] or q.shape[-1] % align or v.shape[-1] % align:
        return False
    bias_grad = mask is not None and mask.requires_grad and mask.is_floating_point()
    return bias_grad or v.shape[-1] != q.shape[-1]


def _mem_efficient_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """attention.cpp preprocess_mask: the mask in the compute dtype (CUDA autocast casts it:
    scaled_dot_product_attention is on its lower-precision list), its rows padded to a multiple
    of 8 and sliced back, so the padded storage is what the kernel keeps."""
    if mask.dtype == torch.bool:  # convert_boolean_attn_mask: True keeps, False gets -inf
        mask = torch.zeros_like(mask, dtype=dtype).masked_fill(~mask, float("-inf"))
    mask = mask.to(dtype)
    cols = mask.shape[-1]
    if cols % _MEM_EFF_MASK_ALIGN:
        pad = _MEM_EFF_MASK_ALIGN - cols % _MEM_EFF_MASK_ALIGN
        mask = torch.nn.functional.pad(mask, (0, pad))[..., :cols]
    return mask


@contextlib.contextmanager
def cuda_sdpa() -> Iterator[None]:
    """SDPA calls CUDA hands its memory-efficient kernel where CPU takes the fp32 math path
    (``_cuda_picks_mem_efficient``: T5's learned position bias, which requires grad; MLA's v
    head dim ≠ q / k's) run as that kernel, so the trace keeps what CUDA keeps."""
    original = torch.nn.functional.scaled_dot_product_attention

    def sdpa(
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> torch.Tensor:
        q, k, v = query, key, value
        if not _cuda_picks_mem_efficient(q, k, v, attn_mask, enable_gqa):
            return original(
                q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
            )
        bias = None if attn_mask is None else _mem_efficient_mask(attn_mask, q.dtype)
        kernel = _MemEfficientSdpa.apply
        out: torch.Tensor = kernel(  # type: ignore[no-untyped-call]
            q, k, v, bias, dropout_p, is_causal, scale
        )
        return out

    torch.nn.functional.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = original


def training_inputs(
    built: Built, batch: int, seq_len: int, target_len: int | None = None
) -> dict[str, torch.Tensor]:
    """A batch of token ids; labels are the ids (the model shifts them). An encoder-decoder's
    labels (its decoder's input) have ``target_len`` tokens when given."""
    vocab = int(built.config.vocab_size)
    ids = torch.randint(0, vocab, (batch, seq_len))
    if built.kind == "seq2seq" and target_len:
        return {"input_ids": ids, "labels": torch.randint(0, vocab, (batch, target_len))}
    return {"input_ids": ids, "labels": ids}


def output_tensors(outputs: Any) -> list[torch.Tensor]:
    """The tensors a model output keeps alive after backward: logits, KV cache, encoder output
    (the loss's graph is gone by then)."""
    found: list[torch.Tensor] = []
    for key, value in outputs.items():
        if key == "loss":
            continue
        if isinstance(value, torch.Tensor):
            found.append(value)
        else:
            found.extend(cache_tensors(value))
    return found


def storage_id(t: torch.Tensor) -> int:
    return int(t.untyped_storage()._cdata)


def storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views share their base's storage)."""
    seen: dict[int, int] = {}
    for t in tensors:
        seen.setdefault(storage_id(t), t.untyped_storage().nbytes())
    return sum(seen.values())


@dataclass
class Saved:
    bytes: int
    storages: int


def saved_activations(built: Built, inputs: dict[str, torch.Tensor], recipe: Recipe) -> Saved:
    """Unique storages autograd saves for backward during one forward (memory.md §5.1)."""
    model = built.model
    owned = {storage_id(t) for t in chain(model.parameters(), model.buffers())}
    seen: dict[int, int] = {}
    # Saved tensors stay referenced so a freed storage's id cannot be reused by a new one.
    pinned: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        key = int(storage._cdata)
        if key not in owned and key not in seen:
            seen[key] = storage.nbytes()
            pinned.append(t)
        return t

    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack), _autocast(recipe):
        loss = model(**inputs).loss
    del loss
    pinned.clear()
    return Saved(bytes=sum(seen.values()), storages=len(seen))


@dataclass
class Step:
    peak: int
    peak_phase: str
    breakdown: dict[str, int]
    phase_peaks: dict[str, int]
    # live bytes by category right after the forward and the loss (outputs dropped): what the
    # step keeps for backward, checkpoint caches included
    forward_end: dict[str, int]


def train_step(
    built: Built,
    inputs: dict[str, torch.Tensor],
    recipe: Recipe,
    *,
    grads_alive: bool = False,
    script_loop: bool = False,
    first_step: bool = False,
) -> Step:
    """Peak of a steady-state step (forward, backward, optimizer step) under MemTracker.

    ``script_loop``: the step of an ``outputs = model(**batch)`` loop: the previous step's
    outputs are alive until the forward returns, the step's own until the next one's does.
    ``first_step``: the job's first step, which has no previous step's outputs."""
    model = built.model
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(recipe.optimizer, trainable, recipe.optimizer_impl)
    if optimizer is not None:
        # Steady state: the first step() allocates the states, which every later step starts
        # with. A step on zero gradients creates them without running a forward and backward.
        for p in trainable:
            p.grad = torch.zeros_like(p)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if grads_alive:
        # The last micro-batch of an accumulation window, or any step after
        # zero_grad(set_to_none=False), runs with every gradient allocated.
        for p in trainable:
            p.grad = torch.zeros_like(p)
    previous: list[torch.Tensor] = []
    if script_loop and not first_step:
        with _autocast(recipe):
            outputs = model(**inputs)
        outputs.loss.backward()
        previous = output_tensors(outputs)
        del outputs
        for p in trainable:
            p.grad = torch.zeros_like(p) if grads_alive else None
    tracker = PeakTracker()
    tracker.skip_frozen(model)
    external: list[Any] = [model, *inputs.values(), *previous]
    if optimizer is not None:
        external.append(optimizer)
    tracker.track_external(*external)
    external.clear()  # the previous outputs' only references are `previous` now
    with tracker:
        tracker.phase = "forward"
        with _autocast(recipe):
            outputs = model(**inputs)
        previous.clear()  # `outputs` rebound: the previous step's die
        loss = outputs.loss
        if not script_loop:
            del outputs
        forward_end = tracker.breakdown("current")
        tracker.phase = "backward"
        loss.backward()
        del loss
        if optimizer is not None:
            tracker.phase = "optimizer-step"
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return Step(
        peak=tracker.peak(),
        peak_phase=tracker.peak_phase,
        breakdown=tracker.breakdown(),
        phase_peaks=dict(tracker.phase_peaks),
        forward_end=forward_end,
    )


def cache_tensors(cache: Any) -> list[torch.Tensor]:
    """Every tensor a transformers cache object holds (layers → keys/values, any layout)."""
    found: dict[int, torch.Tensor] = {}

    def walk(obj: Any, depth: int) -> None:
        if isinstance(obj, torch.Tensor):
            found[id(obj)] = obj
        elif depth < 4 and isinstance(obj, list | tuple):
            for item in obj:
                walk(item, depth + 1)
        elif depth < 4 and isinstance(obj, dict):
            for item in obj.values():
                walk(item, depth + 1)
        elif depth < 4 and hasattr(obj, "__dict__") and not isinstance(obj, type):
            for item in vars(obj).values():
                walk(item, depth + 1)

    walk(cache, 0)
    return list(found.values())


@contextlib.contextmanager
def _label_cache(cache: Any, tracker: PeakTracker) -> Iterator[None]:
    """Re-label what the cache stores from "activation" to "other" as soon as it is stored.

    MemTracker sees K/V being created as activations; the cache keeps them, so at the peak
    "other" minus the input ids is exactly the KV cache alive at that moment.
    """
    original: Callable[..., Any] = cache.update

    def update(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        tracker.track_external(*cache_tensors(cache))
        return result

    cache.update = update
    try:
        yield
    finally:
        cache.update = original


@dataclass
class Inference:
    prefill: PeakTracker
    decode: PeakTracker | None
    prefill_inputs: int
    decode_inputs: int
    kv_cache: int  # bytes the cache holds after the last token


def _new_cache(config: Any) -> Any:
    try:
        return transformers.DynamicCache(config=config)  # sliding-window layers (≥ 4.56)
    except TypeError:
        return transformers.DynamicCache()


def inference(built: Built, batch: int, prompt: int, new: int) -> Inference:
    """Prefill of the prompt, then one decode step with prompt + new tokens in the cache.

    This is ``generate()`` with its default DynamicCache: the cache grows by concatenation, so
    the last decode step holds the largest cache plus one layer's growth copy.
    """
    model = built.model
    vocab = int(built.config.vocab_size)
    keep: dict[str, Any] = {}
    params = inspect.signature(model.forward).parameters
    if "logits_to_keep" in params:
        keep["logits_to_keep"] = 1  # what generate() passes: only the last position's logits
    # transformers 5.24 renamed `past_key_values` to `cache` (the old name warns until 5.40)
    cache_arg = "cache" if "cache" in params else "past_key_values"
    with torch.no_grad():
        ids = torch.randint(0, vocab, (batch, prompt))
        cache = _new_cache(built.config)
        prefill = PeakTracker()
        prefill.track_external(model, ids)
        with _label_cache(cache, prefill), prefill:
            prefill.phase = "prefill"
            out = model(input_ids=ids, use_cache=True, **{cache_arg: cache}, **keep)
            del out
        prefill_inputs = storage_bytes([ids])
        kv_cache = storage_bytes(cache_tensors(cache))
        del cache, ids
        if new == 0:
            return Inference(prefill, None, prefill_inputs, 0, kv_cache)
        context = torch.randint(0, vocab, (batch, prompt + new - 1))
        out = model(input_ids=context, use_cache=True, **keep)
        cache = out[cache_arg]
        del out, context
        step_ids = torch.randint(0, vocab, (batch, 1))
        decode = PeakTracker()
        decode.track_external(model, step_ids, *cache_tensors(cache))
        with _label_cache(cache, decode), decode:
            decode.phase = "decode"
            out = model(input_ids=step_ids, use_cache=True, **{cache_arg: cache}, **keep)
            del out
        kv_cache = storage_bytes(cache_tensors(cache))
        return Inference(prefill, decode, prefill_inputs, storage_bytes([step_ids]), kv_cache)
