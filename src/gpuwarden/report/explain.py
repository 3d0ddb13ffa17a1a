"""``gpuwarden explain``: the ``gpuwarden.explain/1`` JSON document and the terminal form.

JSON (diagnosis.md §3, plus the keys marked *added*)::

    {"schema": "gpuwarden.explain/1",
     "matched": bool,                                    # added: a cause or a screen was read
     "diagnoses": [{"cause", "category", "confidence", "title", "evidence", "fixes",
                    "references",
                    "score", "decides"}],                # added: ranking score 0..1; what decides
     "facts": {"oom": {"tried_bytes", "total_bytes", "allocated_bytes", "reserved_bytes",
                       "free_bytes",
                       "framework", "this_process_bytes", "other_processes": [{"pid",
                       "bytes"}], "device"} | null,      # added: the last four keys
               ...},                                     # other numbers read: nccl_seq_num, ...
     "xid_events": [{"xid", "pci_bus_id", "uuid", "count", "first_seen", "last_seen",
                     "mnemonic", "action", "severity", "lines",
                     "meaning", "escalation"}],          # added: the last two keys
     "findings": [finding records, as gpuwarden.doctor/1],          # added: a pasted screen
     "screen": {"format", "devices": [{"index", "uuid", "pci_bus_id", "name",
                "notes": [{"field", "label", "value", "status", "note", "codes"}]}]} | null,
     "screen_problem": str | null,                       # added: a screen that did not parse
     "next_steps": [str],                                # added: what to capture (no match)
     "plan": gpuwarden.plan/1 document + {"oom_total_bytes", "same_gpu"} | null,   # added
     "plan_skipped": str | null}                         # added: why --plan did not run

The JSON path imports neither rich nor the planner's report unless a plan is in it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuwarden.report.findings import device_label, finding_record
from gpuwarden.report.output import console, print_json
from gpuwarden.units import format_bytes, iso_utc

if TYPE_CHECKING:
    from rich.console import Console

    from gpuwarden.doctor.explain import ExplainReport, PlanCheck, Screen
    from gpuwarden.types.health import Diagnosis, KernelLogReport, OomFacts, XidGroup

SCHEMA = "gpuwarden.explain/1"
_OTHER_EVIDENCE = 2  # evidence lines shown for a candidate after the first


def _iso(timestamp_s: float | None) -> str | None:
    if timestamp_s is None:
        return None
    return iso_utc(timestamp_s, offset="+00:00")


def diagnosis_record(d: Diagnosis) -> dict[str, Any]:
    return {
        "cause": d.cause,
        "category": d.category,
        "confidence": d.confidence.value,
        "title": d.title,
        "evidence": list(d.evidence),
        "fixes": list(d.fixes),
        "references": list(d.references),
        "score": d.score,
        "decides": d.decides,
    }


def oom_record(oom: OomFacts | None) -> dict[str, Any] | None:
    if oom is None:
        return None
    return {
        "tried_bytes": oom.tried_bytes,
        "total_bytes": oom.total_bytes,
        "allocated_bytes": oom.allocated_bytes,
        "reserved_bytes": oom.reserved_bytes,
        "free_bytes": oom.free_bytes,
        "framework": oom.framework,
        "this_process_bytes": oom.this_process_bytes,
        "other_processes": [{"pid": pid, "bytes": n} for pid, n in oom.other_processes],
        "device": oom.device,
    }


def xid_event_record(group: XidGroup) -> dict[str, Any]:
    return {
        "xid": group.xid,
        "pci_bus_id": group.pci_bus_id,
        "uuid": group.uuid,
        "count": group.count,
        "first_seen": _iso(group.first_seen_s),
        "last_seen": _iso(group.last_seen_s),
        "mnemonic": group.mnemonic,
        "action": group.action,
        "severity": group.severity.value,
        "lines": list(group.lines),
        "meaning": group.meaning,
        "escalation": group.escalation,
    }


def _xid_groups(report: KernelLogReport | None) -> list[XidGroup]:
    return [] if report is None else [*report.groups, *report.fallen_off_bus]


def screen_record(screen: Screen | None) -> dict[str, Any] | None:
    if screen is None:
        return None
    return {
        "format": screen.format,
        "devices": [
            {
                "index": d.sample.info.index,
                "uuid": d.sample.info.uuid,
                "pci_bus_id": d.sample.info.pci_bus_id,
                "name": d.sample.info.name,
                "notes": [
                    {
                        "field": n.field,
                        "label": n.label,
                        "value": n.value,
                        "status": n.status,
                        "note": n.note,
                        "codes": list(n.codes),
                    }
                    for n in d.notes
                ],
            }
            for d in screen.devices
        ],
    }


def plan_record(check: PlanCheck | None) -> dict[str, Any] | None:
    if check is None:
        return None
    from gpuwarden.report.plan import plan_document

    return {
        **plan_document(check.plan),
        "oom_total_bytes": check.oom_total_bytes,
        "same_gpu": check.same_gpu,
        "oom_needed_bytes": check.oom_needed_bytes,
        "disagreement": check.disagreement,
    }


def explain_document(report: ExplainReport) -> dict[str, Any]:
    e = report.explanation
    return {
        "schema": SCHEMA,
        "matched": bool(e.diagnoses) or report.screen is not None,
        "diagnoses": [diagnosis_record(d) for d in e.diagnoses],
        "facts": {"oom": oom_record(e.oom), **e.facts},
        "xid_events": [xid_event_record(g) for g in _xid_groups(e.kernel_log)],
        "findings": [finding_record(f) for f in e.findings],
        "screen": screen_record(report.screen),
        "screen_problem": report.screen_problem,
        "next_steps": list(e.next_steps),
        "plan": plan_record(report.plan),
        "plan_skipped": report.plan_skipped,
    }


def print_explain_json(report: ExplainReport) -> None:
    print_json(explain_document(report))


# --- terminal ---------------------------------------------------------------------------------
_CONFIDENCE_STYLE = {"high": "bold green", "medium": "yellow", "low": "dim"}
_STATUS_STYLE = {"finding": "bold red", "ok": "green", "info": "dim"}


def _print_diagnosis(out: Console, rank: int, d: Diagnosis, *, full: bool) -> None:
    from rich.text import Text

    out.print(
        Text.assemble(
            (f"{rank}. {d.cause}", "bold"),
            "  ",
            (f"{d.confidence.value} confidence", _CONFIDENCE_STYLE[d.confidence.value]),
            " ",
            (f"({d.category}, score {d.score:.2f})", "dim"),
        )
    )
    out.print(f"   {d.title}")
    evidence = d.evidence if full else d.evidence[:_OTHER_EVIDENCE]
    for line in evidence:
        out.print(Text.assemble("   ", ("read:", "dim"), f" {line}"))
    if full:
        for i, fix in enumerate(d.fixes, start=1):
            out.print(Text.assemble("   ", (f"fix {i}.", "bold"), f" {fix}"))
    if d.decides:
        out.print(Text.assemble("   ", ("decides:", "cyan"), f" {d.decides}"))
    if full and d.references:
        out.print(Text(f"   see: {' · '.join(d.references)}", style="dim"))


def _oom_line(oom: OomFacts) -> str:
    parts = [
        f"{label} {format_bytes(value)}"
        for label, value in (
            ("tried", oom.tried_bytes),
            ("total", oom.total_bytes),
            ("allocated", oom.allocated_bytes),
            ("reserved", oom.reserved_bytes),
            ("free", oom.free_bytes),
            ("this process", oom.this_process_bytes),
        )
        if value is not None
    ]
    parts += [f"process {pid} {format_bytes(n)}" for pid, n in oom.other_processes]
    where = f" on {oom.device}" if oom.device else ""
    return f"{oom.framework} out of memory{where}: " + (" · ".join(parts) or "no numbers stated")


def _print_xids(out: Console, report: KernelLogReport | None) -> None:
    for g in _xid_groups(report):
        where = g.pci_bus_id or "?"
        what = f" {g.mnemonic}" if g.mnemonic else ""
        action = f" → {g.action}" if g.action else ""
        out.print(f"kernel log: Xid {g.xid}{what} on {where}, {g.count}×{action}")


def _print_screen(out: Console, screen: Screen) -> None:
    from rich.table import Table
    from rich.text import Text

    for device in screen.devices:
        info = device.sample.info
        table = Table(
            title=f"nvidia-smi ({screen.format}) · GPU {info.index} · {info.name}",
            title_justify="left",
        )
        for column in ("field", "value", "", "what it means"):
            table.add_column(column)
        for n in device.notes:
            style = _STATUS_STYLE[n.status]
            mark = ", ".join(n.codes) if n.codes else n.status
            table.add_row(n.label, n.value, Text(mark, style=style), n.note)
        out.print(table)
    for f in screen.findings:
        out.print(
            Text.assemble(
                (f.severity.value, "bold"), f" {f.code} ({device_label(f.device)}): {f.title}"
            )
        )
    if not screen.findings:
        out.print(Text("the health rules flag nothing on this screen", style="green"))


def _print_plan(out: Console, report: ExplainReport) -> None:
    from rich.text import Text

    check = report.plan
    if check is None:
        if report.plan_skipped:
            out.print(Text(f"--plan not used: {report.plan_skipped}", style="dim"))
        return
    from gpuwarden.report.plan import print_plan

    out.print(Text.assemble(("the job, planned", "bold"), " (gpuwarden plan):"))
    print_plan(check.plan)
    gpu = check.plan.request.gpu
    if check.same_gpu is False and gpu is not None and check.oom_total_bytes is not None:
        out.print(
            Text.assemble(
                ("note:", "yellow"),
                f" the OOM happened on a {format_bytes(check.oom_total_bytes)} GPU; the plan is "
                f"for a {gpu.name} ({format_bytes(gpu.memory_bytes)})",
            )
        )
    said = _disagreement_text(check)
    if said is not None:
        out.print(Text.assemble(("note:", "yellow"), f" {said}"))


def _disagreement_text(check: PlanCheck) -> str | None:
    """Where the plan and the error's numbers cannot both describe one job."""
    peak = format_bytes(check.plan.peak_bytes)
    held = (
        ""
        if check.oom_needed_bytes is None
        else (f" (it held and asked for {format_bytes(check.oom_needed_bytes)})")
    )
    if check.disagreement == "fits":
        return (
            f"the plan says this job fits (peak {peak}), yet it ran out of memory{held}: the "
            "flags may not be the job's, or the process holds what the plan does not (a second "
            "model, evaluation, a leak, another framework's pool)"
        )
    return None


def print_explain(report: ExplainReport) -> None:
    from rich.text import Text

    out = console()
    e = report.explanation
    if e.diagnoses:
        lead = "most likely cause first" if len(e.diagnoses) > 1 else "one cause"
        out.print(
            Text.assemble(("explain", "bold"), f": {len(e.diagnoses)} candidate(s), {lead}\n")
        )
    elif report.screen is not None:
        out.print(
            Text.assemble(
                ("explain", "bold"), ": no error message; the nvidia-smi output, field by field\n"
            )
        )
    for rank, d in enumerate(e.diagnoses, start=1):
        _print_diagnosis(out, rank, d, full=rank == 1)
        out.print()
    if e.oom is not None:
        out.print(_oom_line(e.oom))
    for key, value in e.facts.items():
        out.print(Text(f"{key}: {value}", style="dim"))
    _print_xids(out, e.kernel_log)
    if report.screen is not None:
        _print_screen(out, report.screen)
    elif report.screen_problem:
        out.print(
            Text.assemble(
                ("nvidia-smi output in the paste could not be read:", "yellow"),
                f" {report.screen_problem}",
            )
        )
    if e.next_steps:
        out.print(Text.assemble(("No known GPU error in this text.", "bold"), " Capture next:"))
        for step in e.next_steps:
            out.print(f"  • {step}")
    _print_plan(out, report)
