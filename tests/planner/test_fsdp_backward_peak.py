"""The first block's backward under FSDP1 + LoRA + reentrant checkpointing (hf-legacy), against a
traced CPU step (PEFT's default fp32 adapters on the bf16 base).

At the peak of the first block's backward (the frozen units' hooks keep every later block's input
and its gradient: ``training.frozen_unit_inputs``) a dense gated MLP has just run the gated
product's backward: the product's gradient and both factors' gradients, i-wide each, beside every
saved tensor of the recomputed block (``working_set.gated_mlp_gradient_bytes``), and reentrant
``CheckpointFunction.backward`` still holds the recomputed block's output
(``training.recomputed_output``). The block's incoming gradient is the second block's input
gradient, which the hooks keep.

The trace: a small Mistral (transformers' MistralDecoderLayer), PEFT LoRA with dropout on q/k/v/o,
each FSDP-wrapped decoder layer checkpointed from outside as transformers 4.x does
(``checkpoint(decoder_layer.__call__, hidden_states, use_reentrant=True)``, so FSDP's pre-forward
runs again in the recompute), FSDP1 on gloo with world size 1 and PEFT's
``fsdp_auto_wrap_policy``. A dispatch mode counts live storages after every op (parameters and
buffers excluded); F.dropout runs as CUDA's ``native_dropout`` (bool mask). Per-token figures are
the difference of two sequence lengths, so per-step constants (the adapters' gradients) drop out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.planner import plan_memory
from gpuwarden.planner.activations import activations, training_of
from gpuwarden.planner.layout import adapted_names, all_linear_names, layout
from gpuwarden.planner.precision import recipe
from gpuwarden.planner.training import frozen_unit_inputs, recomputed_output
from gpuwarden.planner.working_set import gated_mlp_gradient_bytes
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import (
    Attention,
    Checkpointing,
    Framework,
    FsdpKind,
    Mode,
    PlanRequest,
    Precision,
)

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
SMALL = {
    "hidden_size": 256,
    "intermediate_size": 896,  # Mistral's 3.5 × hidden
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "num_hidden_layers": 4,
    "vocab_size": 1000,
}
BATCH = 2
SEQ_LENS = (128, 256)
# what the plan's backward-end counts apart from activations and the working set
NOT_PER_TOKEN = ("parameters", "optimizer_states", "gradients", "communication")


def mistral_lora_fsdp(spec: ModelSpec | None = None, **knobs: object) -> PlanRequest:
    """fms-acceleration's standard-peft run (validation V246): Mistral-7B, pure bf16, LoRA r16
    with dropout 0.1 on q/k/v/o, FSDP FULL_SHARD on 2 GPUs, HF gradient checkpointing, b2."""
    base: dict[str, object] = {
        "model": spec or resolve_model("Mistral-7B-v0.1"),
        "mode": Mode.LORA,
        "num_gpus": 2,
        "precision": Precision.BF16,
        "load_dtype": "bf16",
        "fsdp": FsdpKind.FULL,
        "micro_batch": BATCH,
        "seq_len": 4096,
        "checkpointing": Checkpointing.FULL,
        "attention": Attention.FLASH,
        "lora_rank": 16,
        "lora_dropout": 0.1,
        "lora_targets": TARGETS,
        "framework": Framework.HF_LEGACY,
    }
    return PlanRequest(**{**base, **knobs})  # type: ignore[arg-type]


def backward_end(request: PlanRequest) -> dict[str, int]:
    plan = plan_memory(request)
    return next(p for p in plan.phases if p.name == "backward-end").bytes_by_component


def test_gated_mlp_holds_the_product_and_both_factor_gradients() -> None:
    mistral = resolve_model("Mistral-7B-v0.1")
    assert mistral.intermediate_size == 14336
    assert gated_mlp_gradient_bytes(mistral, 2) == 3 * 14336 * 2  # 86,016 B per token
    assert gated_mlp_gradient_bytes(mistral, 2, t=2) == 3 * 7168 * 2
    assert gated_mlp_gradient_bytes(resolve_model("gpt2"), 2) is None  # GELU MLP: widest rule


def test_v246_backward_end_is_the_recompute_the_kept_inputs_and_the_mlp_peak() -> None:
    request = mistral_lora_fsdp()
    rc, lay = recipe(request), layout(request)
    spec = request.model
    tr = training_of(request, rc, adapted_names(spec, request), all_linear_names(spec))
    one_layer = activations(request, rc, lay, tr, 0).one_layer
    tokens = BATCH * 4096
    stream = 4096 * 2 * tokens  # one bf16 residual-stream tensor
    end = backward_end(request)
    # the recomputed block's saved set, 31 kept inputs and gradients, the recomputed output
    assert frozen_unit_inputs(request, rc, lay, 32) == 62 * stream
    assert end["activations"] == int(one_layer + 62 * stream + stream)
    # the gated product's three gradients beside the block output's gradient: 94,208 B per token
    assert end["temporaries"] == (3 * 14336 * 2 + 4096 * 2) * tokens


def test_the_recomputed_output_is_reentrant_full_checkpointing_only() -> None:
    request = mistral_lora_fsdp()
    rc, lay = recipe(request), layout(request)
    assert recomputed_output(request, rc, lay, decoder=True) == 4096 * 2 * BATCH * 4096
    for other in (
        replace(request, framework=Framework.TORCHTUNE),  # non-reentrant checkpoint wrapper
        replace(request, checkpointing=Checkpointing.SELECTIVE),
        replace(request, checkpointing=Checkpointing.NONE),
    ):
        assert recomputed_output(other, recipe(other), layout(other), decoder=True) == 0


# --- the traced step --------------------------------------------------------------------------


def small_spec() -> ModelSpec:
    raw = dict(resolve_model("Mistral-7B-v0.1").raw_config)
    return normalise("small-mistral", {**raw, **SMALL}, "small Mistral-7B-v0.1")


def planned_per_token() -> float:
    """Bytes per token of the plan's backward-end: activations and working set."""
    totals = []
    for seq in SEQ_LENS:
        parts = backward_end(mistral_lora_fsdp(small_spec(), seq_len=seq))
        totals.append(sum(v for k, v in parts.items() if k in ("activations", "temporaries")))
    return (totals[1] - totals[0]) / (BATCH * (SEQ_LENS[1] - SEQ_LENS[0]))


def _checkpointed(layer: Any, on_recompute: Callable[[], None] | None) -> Any:
    """transformers 4.x's call, checkpoint(decoder_layer.__call__, hidden_states, ...), the
    decoder layer being the FSDP unit; ``on_recompute`` runs when the block is recomputed."""
    import torch
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = layer

        def forward(self, hidden_states: Any, **kwargs: Any) -> Any:
            def run(h: Any) -> Any:
                if on_recompute is not None and torch.is_grad_enabled():
                    on_recompute()
                return self.inner(h, **kwargs)

            return checkpoint(run, hidden_states, use_reentrant=True)

    return Checkpointed()


def _live_bytes_mode(ignore: set[int]) -> Any:
    """A dispatch mode that tracks the bytes of live storages after every op and the peak since
    ``armed`` was set."""
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class LiveBytes(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.live: dict[int, tuple[Any, int]] = {}
            self.now = 0
            self.peak = 0
            self.armed = False

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            for key in [k for k, (ref, _) in self.live.items() if ref.expired()]:
                self.now -= self.live.pop(key)[1]
            for t in tree_leaves(out):
                if not isinstance(t, torch.Tensor):
                    continue
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key not in self.live and key not in ignore and storage.nbytes():
                    self.live[key] = (StorageWeakRef(storage), storage.nbytes())
                    self.now += storage.nbytes()
            if self.armed:
                self.peak = max(self.peak, self.now)
            return out

    return LiveBytes()


@contextmanager
def _gloo_world_of_one(tmp_path: Path) -> Iterator[None]:
    import torch.distributed as dist

    store = tmp_path / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _build(seq: int) -> Any:
    import torch
    from peft import LoraConfig, get_peft_model
    from peft.utils.other import fsdp_auto_wrap_policy
    from torch.distributed.fsdp import FullyShardedDataParallel
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    config = MistralConfig(
        **SMALL, max_position_embeddings=seq, attn_implementation="sdpa", use_cache=False
    )
    model = MistralForCausalLM(config).to(torch.bfloat16)
    model.enable_input_require_grads()
    lora = LoraConfig(r=16, lora_alpha=16, lora_dropout=0.1, target_modules=list(TARGETS))
    # PEFT's default autocast_adapter_dtype=True makes the adapters fp32 on a bf16 base
    model = get_peft_model(model, lora)
    model.train()
    policy = fsdp_auto_wrap_policy(model)
    return FullyShardedDataParallel(model, auto_wrap_policy=policy, device_id=torch.device("cpu"))


def traced_first_block_peak(seq: int) -> int:
    """Live bytes at the peak of the first block's backward (from its recompute on)."""
    import torch

    model = _build(seq)
    params = list(model.parameters()) + list(model.buffers())
    mode = _live_bytes_mode({p.untyped_storage().data_ptr() for p in params})

    def arm() -> None:
        mode.armed = True

    layers = model.module.base_model.model.model.layers
    for index in range(len(layers)):
        layers[index] = _checkpointed(layers[index], arm if index == 0 else None)
    ids = torch.randint(0, SMALL["vocab_size"], (BATCH, seq))
    with mode:
        logits = model(input_ids=ids).logits
        loss = logits[..., :1].float().sum()  # a loss whose own buffers are small
        del logits
        loss.backward()
    return int(mode.peak)


def traced_per_token() -> float:
    peaks = [traced_first_block_peak(seq) for seq in SEQ_LENS]
    return (peaks[1] - peaks[0]) / (BATCH * (SEQ_LENS[1] - SEQ_LENS[0]))


def _torch_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip without the torch extra; run F.dropout as CUDA does (``native_dropout``: a bool mask
    and the dropped copy; CPU's ``dropout`` keeps a noise tensor in the input's dtype)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")

    def cuda_dropout(x: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
        return torch.native_dropout(x, p, training)[0] if training and p > 0 else x

    monkeypatch.setattr(torch.nn.functional, "dropout", cuda_dropout)


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore::UserWarning")  # FSDP: NO_SHARD at world size 1
@pytest.mark.filterwarnings("ignore::FutureWarning")  # FSDP1's deprecation
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_first_block_backward_is_what_the_traced_step_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PEFT's default fp32 adapters on the bf16 base (autocast_adapter_dtype=True): each adapter
    # keeps an fp32 dropped copy of its input, a bool mask and its fp32 lora_A output. Per token:
    # saved set 14,120 + kept inputs and gradients 3,072 + the gated product's gradients 5,376 +
    # block output gradient 512 + recomputed output 512 = 23,592 B; the trace adds the RoPE
    # tables and position ids (~68 B), which the plan keeps in the forward's head.
    _torch_stack(monkeypatch)
    with _gloo_world_of_one(tmp_path):
        traced = traced_per_token()
    planned = planned_per_token()
    assert planned == 23_592
    assert planned == pytest.approx(traced, rel=0.01)
