"""Catalog listings: ``gpuwarden catalog gpus|instances|models`` as tables and JSON documents.

JSON keeps base units (bytes, bytes/s, watts, USD per hour); tables show what people read on
datasheets (GiB, TB/s, TFLOPS).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from gpuwarden.report.output import console, print_json
from gpuwarden.types.hardware import GpuSpec, InstanceSpec
from gpuwarden.types.model import ModelSpec
from gpuwarden.units import GB, GIB, TB

MODELS_SCHEMA = "gpuwarden.catalog.models/1"
GPUS_SCHEMA = "gpuwarden.catalog.gpus/1"
INSTANCES_SCHEMA = "gpuwarden.catalog.instances/1"

_NONE = "–"


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return _NONE if value is None else format(value, spec)


def _table(title: str, columns: Sequence[str], left: frozenset[str]) -> Table:
    """A table with ``columns``: those in ``left`` left-aligned (text), the rest right (numbers)."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    return table


# --- models -------------------------------------------------------------------------------------


def model_row(spec: ModelSpec) -> dict[str, object]:
    return {
        "name": spec.name,
        "model_type": spec.model_type,
        "structure": str(spec.structure),
        "parameters": spec.total_parameters,
        "active_parameters": spec.active_parameters,
        "hidden_size": spec.hidden_size,
        "num_layers": spec.num_layers,
        "num_encoder_layers": spec.num_encoder_layers,
        "num_heads": spec.num_heads,
        "num_kv_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "intermediate_size": spec.intermediate_size,
        "vocab_size": spec.vocab_size,
        "tied_embeddings": spec.tied_embeddings,
        "norm": str(spec.norm),
        "mlp": str(spec.mlp),
        "position_encoding": str(spec.position_encoding),
        "moe_experts": spec.moe.num_experts if spec.moe else None,
        "moe_experts_per_token": spec.moe.experts_per_token if spec.moe else None,
        "mla": spec.mla is not None,
        "sliding_window": spec.sliding_window,
        "sliding_window_layers": spec.sliding_window_layers,
        "checkpoint_dtype": spec.checkpoint_dtype,
        "source": spec.source,
    }


def print_models_json(specs: Sequence[ModelSpec]) -> None:
    print_json({"schema": MODELS_SCHEMA, "models": [model_row(s) for s in specs]})


def print_models_table(specs: Sequence[ModelSpec]) -> None:
    columns = ("name", "type", "params", "active", "layers", "hidden", "heads/kv", "vocab")
    table = _table("models", columns, frozenset({"name", "type"}))
    for s in specs:
        layers = f"{s.num_encoder_layers}+{s.num_layers}" if s.num_encoder_layers else s.num_layers
        table.add_row(
            s.name,
            s.model_type,
            f"{s.total_parameters / 1e9:.2f} B",
            f"{s.active_parameters / 1e9:.2f} B" if s.moe else _NONE,
            str(layers),
            str(s.hidden_size),
            f"{s.num_heads}/{s.num_kv_heads}",
            str(s.vocab_size),
        )
    console().print(table)


# --- GPUs ---------------------------------------------------------------------------------------


def gpu_row(gpu: GpuSpec) -> dict[str, object]:
    return {
        "key": gpu.key,
        "name": gpu.name,
        "family": gpu.family,
        "variant": gpu.variant,
        "architecture": gpu.architecture,
        "compute_capability": gpu.compute_capability,
        "memory_bytes": gpu.memory_bytes,
        "memory_basis": gpu.memory_basis,
        "usable_bytes": gpu.usable_bytes,
        "usable_basis": gpu.usable_basis,
        "nominal_memory_bytes": gpu.nominal_memory_bytes,
        "memory_type": gpu.memory_type,
        "memory_bandwidth_bytes_per_s": gpu.memory_bandwidth_bytes_per_s,
        "dense_tflops": dict(gpu.dense_tflops),
        "tdp_watts": gpu.tdp_watts,
        "nvlink_bytes_per_s": gpu.nvlink_bytes_per_s,
        "sm_count": gpu.sm_count,
        "mig_profiles": list(gpu.mig_profiles),
        "mig_instances_max": gpu.mig_instances_max,
        "smi_names": list(gpu.smi_names),
        "confidence": gpu.confidence,
        "source": gpu.source,
        "notes": gpu.notes,
    }


def print_gpus_json(gpus: Sequence[GpuSpec]) -> None:
    print_json({"schema": GPUS_SCHEMA, "gpus": [gpu_row(g) for g in gpus]})


def print_gpus_table(gpus: Sequence[GpuSpec]) -> None:
    columns = (
        "key",
        "name",
        "GiB spec",
        "smi",
        "usable",
        "TB/s",
        "bf16",
        "fp8",
        "TDP W",
        "NVLink GB/s",
        "MIG",
        "cc",
    )
    title = (
        "GPUs (memory GiB: datasheet, nvidia-smi total, usable = what CUDA gives a job, the "
        "total less the driver's reservation; dense TFLOPS; MIG: the most instances; – = no such "
        "unit or not published)"
    )
    table = _table(title, columns, frozenset({"key", "name"}))
    table.columns[0].no_wrap = True  # the key is what --gpu takes: keep it whole
    for g in gpus:
        nvlink = None if g.nvlink_bytes_per_s is None else g.nvlink_bytes_per_s / GB
        table.add_row(
            g.key,
            g.name,
            _fmt(None if g.nominal_memory_bytes is None else g.nominal_memory_bytes / GIB, ".0f"),
            f"{g.memory_bytes / GIB:.2f}",
            f"{g.usable_bytes / GIB:.2f}" + ("" if g.usable_memory_bytes is not None else "*"),
            f"{g.memory_bandwidth_bytes_per_s / TB:.2f}",
            _fmt(g.tflops("bf16"), ".1f"),
            _fmt(g.tflops("fp8"), ".1f"),
            _fmt(g.tdp_watts),
            _fmt(nvlink, ".4g"),
            _fmt(g.mig_instances_max or None),  # the most MIG instances; 0 = no MIG
            g.compute_capability or _NONE,
        )
    console().print(table)
    if any(g.usable_memory_bytes is None for g in gpus):
        console().print(
            "* no reading of CUDA's total found: usable = the nvidia-smi total (the driver keeps "
            "0.2-1.1 GiB more on the GPUs where it was read); --json has each basis"
        )


# --- instances ----------------------------------------------------------------------------------


def instance_row(spec: InstanceSpec) -> dict[str, object]:
    return {
        "provider": spec.provider,
        "instance_type": spec.instance_type,
        "gpu_key": spec.gpu_key,
        "gpu_count": spec.gpu_count,
        "vcpus": spec.vcpus,
        "memory_gib": spec.memory_gib,
        "interconnect": spec.interconnect,
        "network": spec.network,
        "region": spec.region,
        "usd_per_hour": spec.usd_per_hour,
        "usd_per_gpu_hour": spec.usd_per_gpu_hour,
        "price_basis": spec.price_basis,
        "price_date": spec.price_date or None,
        "verified": spec.extra.get("verified"),
        "source": spec.source,
        "notes": spec.notes,
    }


def print_instances_json(specs: Sequence[InstanceSpec]) -> None:
    print_json({"schema": INSTANCES_SCHEMA, "instances": [instance_row(s) for s in specs]})


def print_instances_table(specs: Sequence[InstanceSpec]) -> None:
    columns = ("provider", "instance", "GPU", "GPUs", "vCPU", "RAM GiB", "$/h", "$/GPU-h", "priced")
    table = _table(
        "cloud instances (on-demand list prices; dated, they change)",
        columns,
        frozenset({"provider", "instance", "GPU", "priced"}),
    )
    for s in specs:
        table.add_row(
            s.provider,
            s.instance_type,
            s.gpu_key,
            str(s.gpu_count),
            _fmt(s.vcpus),
            _fmt(s.memory_gib),
            _fmt(s.usd_per_hour, ".2f"),
            _fmt(s.usd_per_gpu_hour, ".2f"),
            s.price_date or "no public price",
        )
    console().print(table)
