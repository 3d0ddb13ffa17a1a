"""Public estimators run on the rows of measured.csv: accelerate and DeepSpeed (memory.md §3).

* accelerate ``estimate-memory``: its CLI calls the Hub (``model_info``) even for local paths, so
  we run its internals as the CLI does: ``AutoModel.from_config(config, torch_dtype=float32)``
  under ``init_empty_weights()`` (note: the *base* model, no LM head, exactly as the CLI builds
  it), ``calculate_maximum_sizes`` (parameters + buffers), and ``estimate_training_usage``
  reduced with ``max()`` over its phases, as the CLI prints "Training using Adam".
* DeepSpeed: ``estimate_zero{2,3}_model_states_mem_needs`` — the functions that
  ``estimate_zero{2,3}_model_states_mem_needs_all_cold`` call and print — with the true parameter
  count (``named_parameters`` of the task model on the meta device, tied weights once) and, for
  ZeRO-3, the largest layer as DeepSpeed defines it (max over modules of their direct
  parameters). When deepspeed cannot be imported the same formulas (memory.md §3.2) are used and
  the column says "DeepSpeed formula (reimplemented)".

Both need the ``bench`` extra (``pip install -e '.[bench]'``); a missing package prints "n/a".
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpuwarden.types import Mode, Offload
from gpuwarden.units import GIB
from measured_rows import MappedRow, shared_dir


@dataclass(frozen=True, slots=True)
class AnchorValue:
    gib: float | None  # per-GPU bytes the tool reports, in GiB; None = n/a
    label: str  # which number of the tool, or why n/a


def _na(reason: str) -> AnchorValue:
    return AnchorValue(None, f"n/a: {reason}")


@dataclass(frozen=True, slots=True)
class MetaSizes:
    accelerate_total_bytes: int  # calculate_maximum_sizes(AutoModel) total at fp32
    true_parameters: int  # task model (…ForCausalLM / …ForConditionalGeneration), tied once
    largest_layer_parameters: int  # DeepSpeed: max over modules of direct parameters


def _config_path(mapped: MappedRow) -> Path:
    # arch_source is "shared/fixtures/models/<name>.json", relative to the workspace.
    rel = Path(mapped.row.arch_source)
    parts = rel.parts[1:] if rel.parts and rel.parts[0] == "shared" else rel.parts
    return shared_dir().joinpath(*parts)


@cache
def meta_sizes(config_path: Path) -> MetaSizes:
    import warnings

    import torch
    import transformers
    from accelerate import init_empty_weights
    from accelerate.utils import calculate_maximum_sizes

    raw: dict[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))
    model_type = raw.pop("model_type")
    architectures = raw.pop("architectures", None) or []
    config = transformers.AutoConfig.for_model(model_type, **raw)
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        with init_empty_weights():
            # What `accelerate estimate-memory` builds (AutoModel unless the config has an
            # auto_map naming an AutoModelFor* class; none of the bundled configs has one).
            base = transformers.AutoModel.from_config(config, dtype=torch.float32)
        total, _largest = calculate_maximum_sizes(base)
        task_cls = getattr(transformers, architectures[0], None) if architectures else None
        with init_empty_weights():
            task = task_cls(config) if task_cls is not None else base
    true_params = sum(p.numel() for p in task.parameters())  # parameters() dedupes tied weights
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in task.modules())
    return MetaSizes(int(total), int(true_params), int(largest))


# --------------------------------------------------------------------------------------------
# accelerate
# --------------------------------------------------------------------------------------------


def accelerate_available() -> bool:
    try:
        import accelerate.commands.estimate  # noqa: F401
    except Exception:
        return False
    return True


def accelerate_estimate(mapped: MappedRow) -> AnchorValue:
    req = mapped.request
    row = mapped.row
    if not row.arch_source:
        return _na("no config")
    mode = req.mode if req is not None else None
    if mode is None:
        mode = {"train": Mode.TRAIN, "infer": Mode.INFER}.get(row.mode, Mode.LORA)
    if mode in (Mode.LORA, Mode.QLORA):
        return _na("no LoRA/QLoRA")
    if row.n_gpus > 1:
        return _na("no parallelism (whole-model number)")
    if not accelerate_available():
        return _na("accelerate not installed")
    from accelerate.commands.estimate import estimate_training_usage

    sizes = meta_sizes(_config_path(mapped))
    fp32 = "fp32" in row.precision.lower()
    dtype = "float32" if fp32 else "float16"  # the CLI's dtype rows; no bfloat16 row
    if mode is Mode.INFER:
        total = sizes.accelerate_total_bytes / (1 if fp32 else 2)
        return AnchorValue(total / GIB, f"Total Size ({dtype})")
    usage = estimate_training_usage(sizes.accelerate_total_bytes, dtype)
    return AnchorValue(max(usage.values()) / GIB, f"Training using Adam ({dtype})")


# --------------------------------------------------------------------------------------------
# DeepSpeed
# --------------------------------------------------------------------------------------------


def _zero2_reimplemented(p: int, gpus_per_node: int, nodes: int, cpu_offload: bool) -> int:
    # deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs (memory.md §3.2)
    total_gpus = gpus_per_node * nodes
    return 2 * p if cpu_offload else 2 * p + int(18 * p / total_gpus)


def _zero3_reimplemented(
    p: int, largest: int, gpus_per_node: int, nodes: int, offload: bool, offload_params: bool
) -> int:
    # deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs (memory.md §3.2)
    total_gpus = gpus_per_node * nodes
    largest_layer_memory = 4 * largest
    if offload and offload_params:
        return largest_layer_memory
    if offload:
        return largest_layer_memory + int(2 * p / total_gpus)
    return largest_layer_memory + int(18 * p / total_gpus)


@cache
def deepspeed_functions() -> tuple[Any, Any] | None:
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            import logging

            logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
            from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
            from deepspeed.runtime.zero.stage_1_and_2 import (
                estimate_zero2_model_states_mem_needs,
            )
    except Exception:
        return None
    return estimate_zero2_model_states_mem_needs, estimate_zero3_model_states_mem_needs


def deepspeed_column_title() -> str:
    if deepspeed_functions() is None:
        return "DeepSpeed formula (reimplemented)"
    return "DeepSpeed estimate_zero*_all_cold"


def deepspeed_estimate(mapped: MappedRow) -> AnchorValue:
    req = mapped.request
    row = mapped.row
    if not row.arch_source:
        return _na("no config")
    if row.mode == "infer":
        return _na("inference (model states only)")
    text = row.zero_stage_or_fsdp.lower()
    zero3 = "zero-3" in text
    fsdp_full = "fsdp" in text and "full" in text
    full_training = row.mode == "train"
    if not zero3 and not full_training:
        return _na("LoRA without ZeRO")
    if not accelerate_available():
        return _na("needs accelerate+transformers to count params")
    sizes = meta_sizes(_config_path(mapped))
    p, largest = sizes.true_parameters, sizes.largest_layer_parameters
    gpus_per_node = min(row.n_gpus, req.gpus_per_node if req is not None else 8)
    nodes = math.ceil(row.n_gpus / gpus_per_node)
    offload = req.offload if req is not None else Offload.NONE
    if req is None:
        offload = Offload.OPTIMIZER_AND_PARAMS if "offload" in text else Offload.NONE
    funcs = deepspeed_functions()
    lora = "" if full_training else ", all params trainable"
    if zero3 or fsdp_full:
        cpu_offload = offload is not Offload.NONE
        offload_params = offload is Offload.OPTIMIZER_AND_PARAMS
        if funcs is not None:
            _cpu, gpu, _ = funcs[1](
                total_params=p,
                largest_layer_params=largest,
                num_gpus_per_node=gpus_per_node,
                num_nodes=nodes,
                cpu_offload=cpu_offload,
                cpu_offload_params=offload_params,
                zero_init=True,
            )
        else:
            gpu = _zero3_reimplemented(
                p, largest, gpus_per_node, nodes, cpu_offload, offload_params
            )
        what = "zero3" if zero3 else "zero3≈FSDP full"
        opts = {
            Offload.NONE: "",
            Offload.OPTIMIZER: " off:opt",
            Offload.OPTIMIZER_AND_PARAMS: " off:opt+param",
        }
        return AnchorValue(gpu / GIB, f"{what}{opts[offload]}{lora}")
    # Full training without ZeRO (single GPU, DDP): ZeRO-2 on G GPUs without offload is DeepSpeed's
    # model-states accounting; with G = 1 it is unsharded (2P + 18P).
    if funcs is not None:
        _cpu, gpu = funcs[0](
            total_params=p, num_gpus_per_node=gpus_per_node, num_nodes=nodes, cpu_offload=False
        )
    else:
        gpu = _zero2_reimplemented(p, gpus_per_node, nodes, cpu_offload=False)
    return AnchorValue(gpu / GIB, f"zero2 G={gpus_per_node * nodes} (no ZeRO in row)")
