"""``gpuwarden explain`` over a whole paste: the error, an ``nvidia-smi`` screen in it, the job.

The pure explainer (``health.explain``) reads the error text. Here, around it: an nvidia-smi
screen, ``-q`` report, XML or ``--query-gpu`` CSV found in the paste is parsed with the
telemetry smi parsers, judged by the health rules and annotated field by field — and its
devices go back to the explainer, where they decide between candidates (MIG on, exclusive
compute mode). When the diagnosis is an out-of-memory error and the user described the job,
the planner's numbers and fixes follow it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpuwarden.errors import CorruptInputError
from gpuwarden.files import LINE_INDENT
from gpuwarden.health.explain import explain_text
from gpuwarden.health.explain.screen import FieldNote, field_notes
from gpuwarden.types.health import Explanation, Finding, OomFacts
from gpuwarden.types.telemetry import DeviceSample, Snapshot

if TYPE_CHECKING:
    from gpuwarden.telemetry.smi.detect import SmiFormat
    from gpuwarden.types.plan import MemoryPlan, PlanRequest

SCREEN_SOURCE = "paste"
# CUDA reports a GPU's memory less what the driver reserves (A100 40GB: 39.4 GiB; H100 80GB:
# 79.1 GiB): an OOM's "total capacity" within this band of the planned GPU's is that GPU.
SAME_GPU_RATIO = (0.90, 1.02)

# the first column of a --query-gpu / --query-compute-apps CSV header
_CSV_FIRST = rf"{LINE_INDENT}(?:index|name|pci\.bus_id|uuid|pid|timestamp|driver_version)\b[^\n]*,"
# Some nvidia-smi output is in the text only if one of these is: the parsers (and the health
# rules) are imported only then, so an error without a screen is explained fast.
_ANY_SCREEN = re.compile(
    rf"NVIDIA-SMI|NVSMI LOG|<nvidia_smi_log|{LINE_INDENT}#[ \t]*gpu\b|"
    rf"{LINE_INDENT}Timestamp[ \t]+:|{_CSV_FIRST}",
    re.MULTILINE | re.IGNORECASE,
)
_TABLE_HEADER = re.compile(r"NVIDIA-SMI \S+\s+(?:Driver|KMD) Version")
_TABLE_LINE = re.compile(r"^\s*[|+]")
_Q_HEADER = re.compile(r"^=+\s*NVSMI LOG\s*=+\s*$", re.MULTILINE)
_XML = re.compile(
    r"(?:<\?xml[^>]*>\s*)?(?:<!DOCTYPE[^>]*>\s*)?<nvidia_smi_log>.*?</nvidia_smi_log>", re.DOTALL
)
_CSV_HEADER = re.compile(_CSV_FIRST, re.MULTILINE)


@dataclass(frozen=True, slots=True)
class DeviceNotes:
    sample: DeviceSample
    notes: tuple[FieldNote, ...]


@dataclass(frozen=True, slots=True)
class Screen:
    """The nvidia-smi output found in the paste, read and judged."""

    format: str  # SmiFormat value: "table", "q-text", "xml", "query-gpu", "compute-apps"
    snapshot: Snapshot
    devices: tuple[DeviceNotes, ...]
    findings: tuple[Finding, ...]  # the health rules' verdict on this reading


@dataclass(frozen=True, slots=True)
class PlanCheck:
    """The planner's verdict on the job, next to the OOM message's numbers."""

    plan: MemoryPlan
    oom_total_bytes: int | None  # the GPU capacity the OOM message states
    same_gpu: bool | None  # the planned GPU is the one that ran out (None: cannot tell)
    # what the failing process held and asked for (reserved or allocated, + tried)
    oom_needed_bytes: int | None = None

    @property
    def disagreement(self) -> str | None:
        """ "fits" where the plan fits the GPU that ran out, so it cannot be this job as the error
        shows it; None otherwise (another GPU says nothing; a plan above the GPU agrees with any
        OOM: such a job fails wherever the memory ends)."""
        return "fits" if self.same_gpu is not False and self.plan.fits else None


@dataclass(frozen=True, slots=True)
class ExplainReport:
    explanation: Explanation
    screen: Screen | None = None
    screen_problem: str | None = None  # nvidia-smi output in the paste that could not be read
    plan: PlanCheck | None = None
    plan_skipped: str | None = None  # why the job given with --plan was not planned


def _table_section(text: str) -> str | None:
    """The box-drawn screen inside a longer paste: from its top border to its last row."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _TABLE_HEADER.search(line)), None)
    if start is None:
        return None
    while start > 0 and _TABLE_LINE.match(lines[start - 1]):
        start -= 1
    end = start
    for i in range(start, len(lines)):
        if _TABLE_LINE.match(lines[i]):
            end = i
        elif lines[i].strip():
            # a blank line separates the GPU and process tables; anything else ends the screen
            break
    return "\n".join(line.strip() for line in lines[start : end + 1]) + "\n"


def _screen_format(text: str) -> SmiFormat | None:
    """The nvidia-smi format of ``text`` when it positively is one: a comma-separated error
    line is not a headerless --query-gpu CSV unless the pasted command says so."""
    from gpuwarden.telemetry.smi.detect import SmiFormat, detect_format
    from gpuwarden.telemetry.smi.paste import strip_terminal
    from gpuwarden.telemetry.smi.query_csv import parse_header

    paste = strip_terminal(text)
    kind = detect_format(paste.text)
    if kind is SmiFormat.XML and "<nvidia_smi_log" not in paste.text[:4096]:
        return None
    if kind in (SmiFormat.QUERY_GPU, SmiFormat.COMPUTE_APPS):
        first = next((line for line in paste.text.splitlines() if line.strip()), "")
        if parse_header(first) is None and paste.query() is None:
            return None
    return kind


def screen_candidates(text: str) -> list[str]:
    """The parts of ``text`` that may be nvidia-smi output, most likely first: the whole paste,
    then an XML document, a ``-q`` report, a box-drawn screen or a CSV inside it."""
    if _ANY_SCREEN.search(text) is None:
        return []
    found = [text] if _screen_format(text) is not None else []
    if (xml := _XML.search(text)) is not None:
        found.append(xml[0])
    if (q_text := _Q_HEADER.search(text)) is not None:
        found.append(text[q_text.start() :])
    if (table := _table_section(text)) is not None:
        found.append(table)
    if (header := _CSV_HEADER.search(text)) is not None:
        rest = text[header.start() :]
        if _screen_format(rest) is not None:
            found.append(rest)
    return found


def read_screen(text: str, now_s: float) -> tuple[Screen | None, str | None]:
    """The screen in the paste, parsed and judged; or why the one found could not be read."""
    candidates = screen_candidates(text)
    if not candidates:
        return None, None
    from gpuwarden.telemetry.smi.detect import parse_smi_output

    problem: str | None = None
    for section in candidates:
        try:
            snapshots = parse_smi_output(section, SCREEN_SOURCE, now_s)
        except CorruptInputError as exc:
            problem = problem or exc.message
            continue
        if snapshots and snapshots[-1].samples:
            return _judged(snapshots[-1], _screen_format(section)), None
    return None, problem


def _judged(snapshot: Snapshot, kind: SmiFormat | None) -> Screen:
    from gpuwarden.health.evaluate import evaluate_snapshot

    findings = evaluate_snapshot(snapshot).findings
    devices = tuple(
        DeviceNotes(sample, field_notes(sample, findings, judged=True))
        for sample in snapshot.samples
    )
    name = "unknown" if kind is None else kind.value
    return Screen(format=name, snapshot=snapshot, devices=devices, findings=findings)


def _same_gpu(oom_total: int | None, gpu_bytes: int | None) -> bool | None:
    if oom_total is None or gpu_bytes is None or gpu_bytes <= 0:
        return None
    low, high = SAME_GPU_RATIO
    return low <= oom_total / gpu_bytes <= high


def check_plan(
    explanation: Explanation, request: PlanRequest
) -> tuple[PlanCheck | None, str | None]:
    """The plan of the job when the diagnosis is an out-of-memory error; else why not."""
    top = explanation.diagnoses[0] if explanation.diagnoses else None
    if top is None or top.category != "oom":
        return None, "the error is not an out-of-memory error"
    from gpuwarden.catalog import gpu_catalog
    from gpuwarden.planner import plan_memory

    plan = plan_memory(request, gpus=gpu_catalog() if request.gpu is not None else ())
    oom = explanation.oom
    total = None if oom is None else oom.total_bytes
    gpu_bytes = None if request.gpu is None else request.gpu.memory_bytes
    same = _same_gpu(total, gpu_bytes)
    needed = _needed(oom)
    return PlanCheck(plan, total, same, needed), None


def _needed(oom: OomFacts | None) -> int | None:
    """What the failing process held (reserved, else allocated) and asked for on top."""
    if oom is None:
        return None
    held = oom.reserved_bytes if oom.reserved_bytes is not None else oom.allocated_bytes
    if held is None:
        return None
    return held + (oom.tried_bytes or 0)


def explain(
    text: str, *, plan_request: PlanRequest | None = None, now_s: float = 0.0
) -> ExplainReport:
    """Everything ``explain`` says about a paste. ``now_s``: the time a screen without its own
    timestamp is dated (an explanation does not depend on it)."""
    screen, problem = read_screen(text, now_s)
    samples = () if screen is None else screen.snapshot.samples
    explanation = explain_text(text, screen=samples)
    if screen is not None:  # the screen's verdict replaces "capture more"
        explanation = replace(explanation, next_steps=(), findings=screen.findings)
    plan, skipped = (None, None) if plan_request is None else check_plan(explanation, plan_request)
    return ExplainReport(explanation, screen, problem, plan, skipped)
