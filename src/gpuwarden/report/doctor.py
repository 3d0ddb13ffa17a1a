"""`gpuwarden doctor`: the node's verdict first, then each finding (cause, fix, evidence), then
every check with its status. JSON: `gpuwarden.doctor/1` (diagnosis.md §3)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime

from rich.table import Table
from rich.text import Text

from gpuwarden.doctor.captures import TimeSource
from gpuwarden.doctor.node import DoctorReport, InputRecord
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS, THRESHOLD_SOURCES, Thresholds
from gpuwarden.report.doctor_document import (
    verdict_word,
)
from gpuwarden.report.findings import SEVERITY_STYLE, device_label
from gpuwarden.report.output import console, print_json, print_line
from gpuwarden.report.snapshot import memory_cell, short_name
from gpuwarden.types.environment import NodeEnvironment, SmiStatus
from gpuwarden.types.health import CheckStatus, Finding, Severity

THRESHOLDS_SCHEMA = "gpuwarden.thresholds/1"
_STATUS_STYLE = {
    CheckStatus.PASS: "green",
    CheckStatus.WARN: "yellow",
    CheckStatus.FAIL: "bold red",
    CheckStatus.SKIP: "dim",
}


def _headline(report: DoctorReport) -> Text:
    counts = {s: sum(f.severity is s for f in report.findings) for s in Severity}
    word = verdict_word(report).upper()
    style = {
        "HEALTHY": "bold green",
        "UNKNOWN": "bold magenta",
        "WARNING": "bold yellow",
        "CRITICAL": "bold red",
    }[word]
    text = Text(word, style=style)
    where = report.host or ("this node" if report.mode == "live" else "the captures")
    gpus = len(report.samples)
    text.append(f"  {where} · {gpus} GPU(s) · ")
    text.append(
        f"{counts[Severity.CRITICAL]} critical, {counts[Severity.WARNING]} warning, "
        f"{counts[Severity.INFO]} info"
    )
    skipped = sum(c.status is CheckStatus.SKIP for c in report.checks)
    if skipped:
        text.append(f" · {skipped} check(s) could not run", style="dim")
    if report.simulated:
        text.append("  SIMULATED", style="bold reverse yellow")
    return text


def _gpu_table(report: DoctorReport) -> Table:
    table = Table(title="GPUs", title_justify="left")
    columns = ("GPU", "name", "bus id", "driver", "mem GiB", "temp °C", "verdict")
    for column in ("host", *columns) if report.sample_hosts else columns:
        table.add_column(column, justify="right" if column in ("GPU", "temp °C") else "left")
    for position, sample in enumerate(report.samples):
        info = sample.info
        mine = [f for f in report.findings if f.severity.rank > 0 and report.on_sample(f, position)]
        verdict = (
            Text(
                ", ".join(dict.fromkeys(f.code for f in mine)),
                style=SEVERITY_STYLE[mine[0].severity],
            )
            if mine
            # a node nothing judged (GPU names only) is no "ok": its verdict is UNKNOWN
            else Text("ok", style="green")
            if report.judged
            else Text("–")
        )
        host = (report.host_of(position) or "–",) if report.sample_hosts else ()
        table.add_row(
            *host,
            str(info.index),
            short_name(info.name),
            info.pci_bus_id or "–",
            info.driver_version or "–",
            memory_cell(sample),  # used/total, as snapshot and watch show it
            f"{sample.temperature_gpu_celsius:.0f}"
            if sample.temperature_gpu_celsius is not None
            else "–",
            verdict,
        )
    return table


# what the environment table says of each host: (column, the fact of the host's environment)
_ENVIRONMENT_COLUMNS: tuple[tuple[str, Callable[[NodeEnvironment], str | None]], ...] = (
    ("driver", lambda env: env.smi.driver_version),
    ("CUDA", lambda env: env.smi.cuda_version),
    ("kernel module", lambda env: env.kernel_module_version),
    # a capture's readings (nvidia-smi, dcgm-exporter), or what a failed nvidia-smi printed
    ("GPU readings", lambda env: _readings_said(env.smi)),
)


def _readings_said(smi: SmiStatus) -> str | None:
    if smi.failure is not None:
        return f"nvidia-smi failed: {smi.failure}"
    return "read" if smi.present else None


def _environment_table(report: DoctorReport) -> Table | None:
    """Several hosts' environments: one row of what all of them run where they agree, else
    one row per environment with the hosts that run it; None where no capture says any (a
    bundle of kernel logs)."""
    rows: dict[tuple[str, ...], list[str]] = {}
    for host, env in report.host_environments:
        row = tuple(fact(env) or "–" for _, fact in _ENVIRONMENT_COLUMNS)
        rows.setdefault(row, []).append(host)
    if all(cell == "–" for row in rows for cell in row):
        return None
    table = Table(title="environment by host", title_justify="left")
    table.add_column("host", overflow="fold")
    for column, _ in _ENVIRONMENT_COLUMNS:
        table.add_column(column)
    for row, hosts in rows.items():
        said = f"all {len(hosts)} hosts" if len(rows) == 1 else ", ".join(hosts)
        table.add_row(Text(said), *(Text(cell) for cell in row))  # captured text: no markup
    return table


def _finding_block(finding: Finding) -> list[Text]:
    head = Text()
    head.append(f"{finding.severity.value.upper():<8} ", style=SEVERITY_STYLE[finding.severity])
    head.append(f"{finding.code} ", style="bold")
    head.append(f"· {device_label(finding.device)} · {finding.title}")
    lines = [head, Text(f"    why:  {finding.cause}")]
    lines.append(Text(f"    fix:  {finding.remedy}"))
    if finding.action:
        lines.append(Text(f"    NVIDIA action: {finding.action}", style="dim"))
    for evidence in finding.evidence[:4]:
        detail = f" ({evidence.detail})" if evidence.detail else ""
        lines.append(
            Text(
                f"    read: {evidence.field} = {evidence.value} from {evidence.source}{detail}",
                style="dim",
            )
        )
    return lines


def _checks_table(report: DoctorReport) -> Table:
    table = Table(title="checks", title_justify="left")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for check in report.checks:
        table.add_row(
            check.name, Text(check.status.value, style=_STATUS_STYLE[check.status]), check.detail
        )
    return table


def print_doctor_table(report: DoctorReport) -> None:
    out = console()
    out.print(_headline(report))
    if report.samples:
        out.print(_gpu_table(report))
    environments = _environment_table(report) if report.several_hosts else None
    if environments is not None:
        out.print(environments)
    serious = [f for f in report.findings if f.severity.rank > 0]
    notes = [f for f in report.findings if f.severity.rank == 0]
    for finding in serious:
        for line in _finding_block(finding):
            print_line(out, line)
    for finding in notes:
        info = f"info     {finding.code} · {device_label(finding.device)} · {finding.title}"
        print_line(out, Text(info, style="cyan"))
    out.print(_checks_table(report))
    for item in report.inputs:
        said = f"read {item.kind}: {item.source} ({item.detail}{_time_said(item)})"
        print_line(out, Text(said, style="dim"))
    for skipped in report.skipped:
        print_line(out, Text(f"skipped {skipped.path}: {skipped.reason}", style="dim"))


# how each source of a capture's time is said beside it
_TIME_SOURCE_SAID = {
    TimeSource.STATED: "as it states",
    TimeSource.FILE_MTIME: "the file's modification time: the output states none",
    TimeSource.READ_TIME: "when read: the output states none",
}


def _time_said(item: InputRecord) -> str:
    """ "; at 2026-11-27 16:31:05 UTC (the file's modification time: ...)", or nothing for an
    input doctor dates nothing by."""
    if item.time_s is None:
        return ""
    when = datetime.fromtimestamp(item.time_s, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    source = "source unknown" if item.time_source is None else _TIME_SOURCE_SAID[item.time_source]
    return f"; at {when} ({source})"


def print_thresholds(thresholds: Thresholds, *, as_json: bool) -> None:
    """`doctor --show-thresholds`: every knob, its value in effect, its default, its source."""
    rows = [
        {
            "name": field.name,
            "value": getattr(thresholds, field.name),
            "default": getattr(DEFAULT_THRESHOLDS, field.name),
            "source": THRESHOLD_SOURCES.get(field.name, ""),
        }
        for field in dataclasses.fields(thresholds)
    ]
    if as_json:
        print_json({"schema": THRESHOLDS_SCHEMA, "thresholds": rows})
        return
    table = Table(title="health thresholds (TOML keys for --thresholds)", title_justify="left")
    table.add_column("key", no_wrap=True)
    table.add_column("value", justify="right")
    table.add_column("default", justify="right")
    table.add_column("source", overflow="fold")
    for row in rows:
        changed = row["value"] != row["default"]
        table.add_row(
            str(row["name"]),
            Text(str(row["value"]), style="bold" if changed else ""),
            str(row["default"]),
            str(row["source"]),
        )
    console().print(table)
