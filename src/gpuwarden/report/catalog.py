"""Catalog listings."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from gpuwarden.report.output import console, print_json
from gpuwarden.types.model import ModelSpec

MODELS_SCHEMA = "gpuwarden.catalog.models/1"


def model_row(spec: ModelSpec) -> dict[str, object]:
    return {
        "name": spec.name,
        "model_type": spec.model_type,
        "parameters": spec.total_parameters,
        "hidden_size": spec.hidden_size,
        "num_layers": spec.num_layers,
        "num_heads": spec.num_heads,
        "num_kv_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "intermediate_size": spec.intermediate_size,
        "vocab_size": spec.vocab_size,
        "tied_embeddings": spec.tied_embeddings,
        "moe_experts": spec.moe.num_experts if spec.moe else None,
        "sliding_window": spec.sliding_window,
        "source": spec.source,
    }


def print_models_json(specs: Sequence[ModelSpec]) -> None:
    print_json({"schema": MODELS_SCHEMA, "models": [model_row(s) for s in specs]})


def print_models_table(specs: Sequence[ModelSpec]) -> None:
    table = Table(title="models")
    for column in ("name", "type", "params", "layers", "hidden", "heads/kv", "vocab"):
        table.add_column(column, justify="left" if column in {"name", "type"} else "right")
    for s in specs:
        table.add_row(
            s.name,
            s.model_type,
            f"{s.total_parameters / 1e9:.2f} B",
            str(s.num_layers),
            str(s.hidden_size),
            f"{s.num_heads}/{s.num_kv_heads}",
            str(s.vocab_size),
        )
    console().print(table)
