"""``gpuwarden plan --fit``: ranked configurations that fit, and the ``gpuwarden.plan.fit/1``
JSON document."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from gpuwarden.planner.context import model_context
from gpuwarden.report.output import console, print_json
from gpuwarden.report.plan import print_warnings, request_echo
from gpuwarden.types.plan import FitOption, FitResult, Mode
from gpuwarden.units import GIB, format_duration

SCHEMA = "gpuwarden.plan.fit/1"


def _layout(option: FitOption) -> str:
    if not option.changes:
        return "as requested"
    return ", ".join(f"{k.replace('_', '-')} {v}" for k, v in option.changes.items())


def _max_len(option: FitOption) -> str:
    if option.max_seq_len is None:
        return "–"
    context = model_context(option.plan.request.model)
    capped = " (context)" if option.max_seq_len == context else ""
    return f"{option.max_seq_len:,}{capped}"


def option_document(rank: int, option: FitOption) -> dict[str, Any]:
    plan = option.plan
    return {
        "rank": rank,
        "gpu": option.gpu.key,
        "gpu_name": option.gpu.name,
        "num_gpus": option.num_gpus,
        "changes": dict(option.changes),
        "peak_bytes": plan.peak_bytes,
        "peak_phase": plan.peak_phase,
        "usable_bytes": plan.usable_bytes,
        "predicted": {
            "max_allocated_bytes": plan.predicted.max_allocated_bytes,
            "max_reserved_bytes": plan.predicted.max_reserved_bytes,
            "nvidia_smi_used_bytes": plan.predicted.nvidia_smi_used_bytes,
        },
        "step_seconds": option.step_seconds,
        "tokens_per_second": option.tokens_per_second,
        "bottleneck": option.bottleneck or None,
        "usd_per_hour": option.usd_per_hour,
        "usd_per_gpu_hour": option.usd_per_gpu_hour,
        "instance": option.instance,
        "instance_gpus": option.instance_gpus,
        "verdict": plan.verdict.value if plan.verdict else None,
        "headroom_bytes": plan.headroom_bytes,
        "max_micro_batch": option.max_micro_batch,
        "max_seq_len": option.max_seq_len,
    }


def fit_document(result: FitResult) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "request": request_echo(result.request),
        "considered": result.considered,
        "options": [option_document(i + 1, o) for i, o in enumerate(result.options)],
        "assumptions": list(result.assumptions),
        "warnings": list(result.warnings),
    }


def print_fit_json(result: FitResult) -> None:
    print_json(fit_document(result))


def print_fit(result: FitResult) -> None:
    out = console()
    r = result.request
    infer = r.mode is Mode.INFER
    table = Table(
        title=f"{r.model.name} · {r.mode.value}: configurations that fit "
        f"({len(result.options)} shown, {result.considered} planned)",
        title_justify="left",
    )
    columns = [
        "#",
        "GPU",
        "GPUs",
        "settings",
        "peak GiB",
        "step" if not infer else "run",
        "tokens/s",
        "$/GPU-h",
        "$/hour",
        "instance",
        "max batch" if infer else "max micro-batch",
        "max context" if infer else "max seq len",
    ]
    for col in columns:
        table.add_column(col, justify="left" if col in {"GPU", "settings", "instance"} else "right")
    for i, o in enumerate(result.options, start=1):
        table.add_row(
            str(i),
            o.gpu.name,
            str(o.num_gpus),
            _layout(o),
            f"{o.plan.peak_bytes / GIB:,.1f} / {(o.plan.usable_bytes or 0) / GIB:,.0f}",
            format_duration(o.step_seconds) if o.step_seconds is not None else "–",
            f"{o.tokens_per_second:,.0f}" if o.tokens_per_second else "–",
            f"{o.usd_per_gpu_hour:,.2f}" if o.usd_per_gpu_hour is not None else "no price",
            f"{o.usd_per_hour:,.2f}" if o.usd_per_hour is not None else "–",
            o.instance or "–",
            str(o.max_micro_batch) if o.max_micro_batch is not None else "–",
            _max_len(o),
        )
    if result.options:
        out.print(table)
    else:
        out.print(
            Text.assemble(
                (f"no configuration of {r.model.name} fits", "red"),
                f" on the GPUs considered ({result.considered} planned); try "
                f"{', '.join(_next_tries(r.mode))} or another GPU",
            )
        )
    for a in result.assumptions:
        out.print(Text(a, style="dim"))
    print_warnings(out, result.warnings)


def _next_tries(mode: Mode) -> list[str]:
    """What to try when nothing fits: more GPUs, and a lighter mode than the one asked for."""
    lighter = {Mode.TRAIN: "--mode lora/qlora", Mode.LORA: "--mode qlora"}.get(mode)
    return ["--max-gpus", *([lighter] if lighter else [])]
