"""What torch.compile keeps for the backward of one decoder block (imports torch).

torch.compile's default backend (Inductor) splits the joint forward-backward graph with
AOTAutograd's min-cut rematerialisation partitioner
(``torch._functorch.partitioners.min_cut_rematerialization_partition``, ``compiler="inductor"``):
it recomputes cheap fusible ops (pointwise, norms' arithmetic) in the backward and saves what
is expensive or unfusible (matmul and SDPA outputs, the logsumexp). The inputs of the backward
graph it returns, less the tangents and the parameters, are what the compiled block holds from its
forward to its backward.

Method: the model is built from its HF config with one block under ``FakeTensorMode`` (no
memory, no arithmetic), a forward of (micro_batch, seq_len) token ids captures the arguments the
model hands its first block (hidden states, mask, RoPE tables), and ``aot_function`` traces that
block alone with the partitioner and compilers that only read the graphs. Tensors are CPU fakes in
the request's dtypes: a CPU-only torch cannot run autograd on CUDA fakes (``InputMetadata`` needs
a CUDA device guard). The partitioner sees the same graph either way except the SDPA op (CPU's
flash kernel; CUDA's flash / memory-efficient kernels keep the same q, k, v, output and
logsumexp, plus a philox seed and offset of a few bytes).

Saved tensors are counted by storage (a view of a saved tensor costs nothing more). Tensors the
block receives that every block shares (RoPE tables, the mask, position ids) are listed apart:
the formula planner counts them once per model, not per block.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
import transformers
from torch._functorch.aot_autograd import aot_function
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import GraphModule
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils import _pytree as pytree

from gpuwarden.planner.exact import _run
from gpuwarden.planner.exact._build import (
    DTYPES,
    default_dtype,
    fake_safe_masks,
    load_config,
    quiet,
)
from gpuwarden.planner.exact._recipe import resolve, unsupported
from gpuwarden.types.plan import Mode, PlanRequest


@dataclass(frozen=True, slots=True)
class PartitionedTensor:
    """One input of the compiled backward: the forward node it comes from and its storage."""

    node: str  # the FX node name (``mm_4``, ``rsqrt``, ``primals_10``)
    shape: tuple[int, ...]
    dtype: str
    bytes: int  # 0 when it shares the storage of a tensor listed before it
    kind: str  # "activation", "block input" or "shared input"


@dataclass(frozen=True, slots=True)
class CompiledBlock:
    """What the partitioner keeps for one block's backward, for ``tokens`` tokens."""

    block: str  # the decoder layer's class name
    tokens: int
    tensors: tuple[PartitionedTensor, ...]

    @property
    def block_bytes(self) -> int:
        """Bytes the block holds for backward (its activations and its own input)."""
        return sum(t.bytes for t in self.tensors if t.kind != "shared input")

    @property
    def shared_bytes(self) -> int:
        return sum(t.bytes for t in self.tensors if t.kind == "shared input")


_AUTO_CAUSAL: Any = transformers.AutoModelForCausalLM  # untyped upstream


def _storage(tensor: torch.Tensor) -> StorageWeakRef:
    """A hashable key of the tensor's storage, shared by its views."""
    return StorageWeakRef(tensor.untyped_storage())  # type: ignore[no-untyped-call]


class _BlockReachedError(Exception):
    """Stops the model's forward once its first block has been called."""


def _one_block_config(request: PlanRequest) -> Any:
    config, kind, _ = load_config(request.model, use_cache=False)
    if kind != "causal":
        raise unsupported(f"the compiled block of {request.model.name}: causal LMs only")
    config.num_hidden_layers = 1
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, list) and layer_types:
        config.layer_types = layer_types[:1]
    return config


def _first_block(model: torch.nn.Module) -> torch.nn.Module:
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == 1:
            return module[0]
    raise unsupported(f"{type(model).__name__}: no list of decoder blocks found")


def _block_call(
    model: torch.nn.Module, block: torch.nn.Module, batch: int, seq: int
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments the model passes its first block."""
    seen: dict[str, Any] = {}

    def hook(_module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen["args"], seen["kwargs"] = args, kwargs
        raise _BlockReachedError

    handle = block.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        model(input_ids=torch.zeros(batch, seq, dtype=torch.long), use_cache=False)
    except _BlockReachedError:
        pass
    finally:
        handle.remove()
    if "args" not in seen:
        raise unsupported(f"{type(model).__name__}: its first block was never called")
    return seen["args"], seen["kwargs"]


def _layer_norm_stats(joint: GraphModule) -> frozenset[str]:
    """Nodes holding native_layer_norm's mean and rstd: CPU returns them in the input's dtype,
    CUDA in fp32 (its accumulate type), so they are priced as CUDA keeps them."""
    return frozenset(
        node.name
        for node in joint.graph.nodes
        if node.target is operator.getitem
        and isinstance(node.args[0], torch.fx.Node)
        and node.args[0].target is torch.ops.aten.native_layer_norm.default
        and node.args[1] in (1, 2)
    )


def _backward_inputs(
    backward: GraphModule,
    kinds: list[str],
    parameter_storages: set[StorageWeakRef],
    fp32_on_cuda: frozenset[str],
) -> tuple[PartitionedTensor, ...]:
    """The backward graph's placeholders, tangents and parameters (and views of them) left out."""
    seen: set[StorageWeakRef] = set()
    out: list[PartitionedTensor] = []
    for node in backward.graph.nodes:
        if node.op != "placeholder" or node.name.startswith("tangents"):
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            continue  # SymInts, philox seeds as ints
        kind = "activation"
        if node.name.startswith("primals_"):
            kind = kinds[int(node.name.removeprefix("primals_")) - 1]
            if kind == "parameter":
                continue
        storage = _storage(value)
        if storage in parameter_storages:
            continue  # a transposed weight
        size = 0 if storage in seen else value.untyped_storage().nbytes()
        seen.add(storage)
        dtype = value.dtype
        if node.name in fp32_on_cuda and dtype.itemsize < 4:
            size, dtype = value.numel() * 4, torch.float32
        out.append(PartitionedTensor(node.name, tuple(value.shape), str(dtype), size, kind))
    return tuple(out)


def compiled_block_saves(request: PlanRequest) -> CompiledBlock:
    """Trace the request's first decoder block through the partitioner (see the module doc).

    Full training (``Mode.TRAIN``) of a causal LM only; the block runs in the request's weight
    dtype, under CPU autocast when the precision is mixed.
    """
    if request.mode is not Mode.TRAIN:
        raise unsupported("the compiled block: full training (--mode train) only")
    # the eager recipe names the dtypes and the attention kernel; compiling is this module's part
    recipe = resolve(replace(request, compile=False))
    batch, seq = request.micro_batch, request.seq_len
    # the kernels exact mode stands in for CUDA's (dropout's bool mask, the memory-efficient
    # SDPA where CUDA picks it), and the unpacked-batch answer a fake run cannot compute
    with quiet(), _run.cuda_dropout(), _run.cuda_sdpa():
        config = _one_block_config(request)
        with FakeTensorMode(), fake_safe_masks():
            with default_dtype(DTYPES[recipe.weight_dtype]):
                model = _AUTO_CAUSAL.from_config(config, attn_implementation=recipe.attention)
            model.train()
            block = _first_block(model)
            args, kwargs = _block_call(model, block, batch, seq)
            # inside the mode: tensors the block makes from scratch (arange, masks) are fakes too
            return _partition(block, args, kwargs, recipe.autocast_dtype, batch * seq)


def _partition(
    block: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    autocast_dtype: str | None,
    tokens: int,
) -> CompiledBlock:
    params: dict[str, torch.Tensor] = dict(block.named_parameters())
    leaves, spec = pytree.tree_flatten((args, kwargs))
    tensor_at = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    hidden_leaf = args[0] if args else kwargs["hidden_states"]
    # the block's input requires grad, as the output of the blocks before it does
    hidden = hidden_leaf.detach().requires_grad_(True)
    inputs = [hidden if leaves[i] is hidden_leaf else leaves[i] for i in tensor_at]

    def run(weights: dict[str, torch.Tensor], *tensors: torch.Tensor) -> torch.Tensor:
        filled = list(leaves)
        for i, tensor in zip(tensor_at, tensors, strict=True):
            filled[i] = tensor
        call_args, call_kwargs = pytree.tree_unflatten(filled, spec)
        cast = (
            torch.autocast("cpu", dtype=DTYPES[autocast_dtype])
            if autocast_dtype
            else torch.autocast("cpu", enabled=False)
        )
        with cast:
            out = torch.func.functional_call(block, weights, call_args, call_kwargs)
        result: torch.Tensor = out[0] if isinstance(out, tuple) else out
        return result

    graphs: dict[str, GraphModule] = {}

    def partition(joint: GraphModule, joint_inputs: Any, **kw: Any) -> Any:
        forward, backward = min_cut_rematerialization_partition(
            joint, joint_inputs, compiler="inductor", **kw
        )
        graphs["joint"], graphs["backward"] = joint, backward
        return forward, backward

    def keep(gm: GraphModule, example_inputs: Sequence[Any]) -> GraphModule:
        return gm  # read, not compiled

    compiled = aot_function(run, fw_compiler=keep, bw_compiler=keep, partition_fn=partition)
    compiled(params, *inputs)
    kinds = ["parameter"] * len(params) + [
        "block input" if t is hidden else "shared input" for t in inputs
    ]
    parameter_storages = {_storage(p) for p in params.values()}
    return CompiledBlock(
        block=type(block).__name__,
        tokens=tokens,
        tensors=_backward_inputs(
            graphs["backward"], kinds, parameter_storages, _layer_norm_stats(graphs["joint"])
        ),
    )
