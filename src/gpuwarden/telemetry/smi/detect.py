"""Which nvidia-smi output a text is, from its content alone, and the parse that goes with it.

Also reads nvidia_gpu_exporter capture files (fixtures/nvidia-smi/captures/): sections between
"####" banners, each naming the command that produced it; the ``-q`` and ``-q -x`` sections are
read, in file order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from enum import StrEnum

from gpuwarden.errors import naming
from gpuwarden.telemetry.smi import cells
from gpuwarden.telemetry.smi.capture import BANNER, capture_sections
from gpuwarden.telemetry.smi.dmon import dmon_interval_s, looks_like_dmon, read_dmon
from gpuwarden.telemetry.smi.failure import smi_failure_output
from gpuwarden.telemetry.smi.nvlink_counters import holds_nvlink_counters
from gpuwarden.telemetry.smi.paste import (
    CommandOutput,
    QueryCommand,
    command_outputs,
    command_selection,
    strip_terminal,
)
from gpuwarden.telemetry.smi.q_text import is_report_without_banner, read_q_text
from gpuwarden.telemetry.smi.query_csv import (
    Column,
    is_compute_apps_header,
    parse_header,
    read_compute_apps,
    read_query_gpu,
)
from gpuwarden.telemetry.smi.selection import GpuSelection, SelectedOutput
from gpuwarden.telemetry.smi.table import looks_like_table, read_table
from gpuwarden.telemetry.smi.topo import (
    holds_link_states,
    lists_nvlink_capabilities,
    looks_like_topo,
)
from gpuwarden.telemetry.smi.xml_format import read_xml
from gpuwarden.types.telemetry import Snapshot


class SmiFormat(StrEnum):
    XML = "xml"  # nvidia-smi -q -x
    Q_TEXT = "q-text"  # nvidia-smi -q
    QUERY_GPU = "query-gpu"  # nvidia-smi --query-gpu=... --format=csv
    COMPUTE_APPS = "compute-apps"  # nvidia-smi --query-compute-apps=... --format=csv
    DMON = "dmon"  # nvidia-smi dmon
    TABLE = "table"  # nvidia-smi (the default screen)
    CAPTURE = "capture"  # nvidia_gpu_exporter capture: several outputs between banners


_MIG_PROFILES = re.compile(r"GPU instance profiles:", re.IGNORECASE)
# `nvidia-smi -L`: "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)", MIG devices indented under it
_GPU_LIST = re.compile(r"^GPU \d+: .+\(UUID: GPU-[^)]*\)\s*$", re.MULTILINE)
# The banner opening each -q report (and each reading of a -q loop)
_Q_BANNER = re.compile(r"^=+NVSMI LOG=+\s*$", re.MULTILINE)
_Q_TEXT = re.compile(rf"{_Q_BANNER.pattern}|^Timestamp\s+: ", re.MULTILINE)


# What tells the formats apart is in the first lines: a long input is not split and searched
# again and again for it (50 MB of garbage was refused in 80 s before).
_SNIFF_CHARS = 1 << 16


def _first_line(text: str) -> str:
    return next((line for line in text[:_SNIFF_CHARS].splitlines() if line.strip()), "")


def detect_format(text: str) -> SmiFormat | None:
    head = text.lstrip("\ufeff \t\r\n")
    first = _first_line(head)
    if head.startswith("<"):
        return SmiFormat.XML
    if BANNER.match(first):
        return SmiFormat.CAPTURE
    if looks_like_dmon(head[:_SNIFF_CHARS]):
        return SmiFormat.DMON
    if _Q_TEXT.search(head[:4000]):
        return SmiFormat.Q_TEXT
    if looks_like_table(head[:4000]):
        return SmiFormat.TABLE
    # a -q report copied from below its banner: from "Attached GPUs" or a "GPU <bus id>" line,
    # or from inside a GPU's report. Read in ``text``, whose first row keeps its indent (in
    # ``head`` the rows below would nest under it)
    if is_report_without_banner(text[:4000]):
        return SmiFormat.Q_TEXT
    header = parse_header(first)
    if header is not None:
        return SmiFormat.COMPUTE_APPS if is_compute_apps_header(header) else SmiFormat.QUERY_GPU
    if first.count(", ") >= 2:
        return SmiFormat.QUERY_GPU  # CSV rows without a header: the CSV reader says why not
    return None


def _unsupported(text: str) -> cells.SmiOutputError:
    text = text[:_SNIFF_CHARS]  # enough to name what it is
    if not text.strip():
        what = "the input is empty"
    elif _MIG_PROFILES.search(text):
        what = "an `nvidia-smi mig -lgip` profile table, which is not a telemetry format"
    elif looks_like_topo(text):
        what = (
            "an `nvidia-smi topo -m` matrix, which is not telemetry (`gpuwarden doctor` reads it)"
        )
    elif listings := _nvlink_listings(text):
        what = f"{listings} output, which is not telemetry (`gpuwarden doctor --from` reads it)"
    elif lists_nvlink_capabilities(text):
        what = (
            "an `nvidia-smi nvlink -c` listing of what each link supports, neither telemetry nor "
            "the links' state (`gpuwarden doctor --from` reads `nvlink -s` and `nvlink -e`)"
        )
    elif _GPU_LIST.search(text):
        what = (
            "an `nvidia-smi -L` list, which names the GPUs and MIG devices but holds no readings "
            "(`nvidia-smi -q` has them)"
        )
    elif (failed := smi_failure_output(text)) is not None:
        what = (
            f"nvidia-smi's own failure message ({(failed.message or '')[:80]!r}): it read no GPU "
            "(`gpuwarden doctor --from` reads it)"
        )
    else:
        what = f"not recognised ({_first_line(text).strip()[:40]!r})"
    lines = text.splitlines()
    first = next((n for n, line in enumerate(lines, start=1) if line.strip()), None)
    return cells.SmiOutputError(first, f"not a supported nvidia-smi format: {what}")


def _nvlink_listings(text: str) -> str | None:
    """Which `nvidia-smi nvlink` outputs ``text`` holds, as a refusal names them: link states
    (``-s``), error counters (``-e``) or both; None for neither."""
    held = [
        command
        for command, holds in (
            ("`nvidia-smi nvlink -s`", holds_link_states),
            ("`nvidia-smi nvlink -e`", holds_nvlink_counters),
        )
        if holds(text)
    ]
    return " and ".join(held) or None


def _query_fields(
    command: QueryCommand | None, given: Sequence[str] | None
) -> tuple[Sequence[str] | None, SmiFormat | None]:
    """The field list of a header-less CSV: the caller's, else the pasted query ``command``'s;
    and which query it is (compute-apps fields name processes, not GPUs)."""
    fields = given if given is not None else (None if command is None else command.fields)
    if fields is None:
        return None, None
    columns = [Column(name, "") for name in fields]
    apps = is_compute_apps_header(columns) or (
        given is None and command is not None and command.kind == "compute-apps"
    )
    return fields, SmiFormat.COMPUTE_APPS if apps else SmiFormat.QUERY_GPU


def parse_smi_output(
    text: str,
    source: str,
    default_timestamp_s: float,
    *,
    query_fields: Sequence[str] | None = None,
) -> list[Snapshot]:
    """``read_smi_output`` of an input named ``source``: its errors name it (and the line), its
    Snapshots carry it."""
    with naming(source):
        snapshots = read_smi_output(text, default_timestamp_s, query_fields=query_fields)
    return [replace(reading, source=source) for reading in snapshots]


def read_smi_output(
    text: str, default_timestamp_s: float, *, query_fields: Sequence[str] | None = None
) -> list[Snapshot]:
    """Every Snapshot in ``text`` (dmon and ``-l`` loops hold several), oldest first; bad input
    raises ``cells.SmiOutputError`` naming the line, not the input.

    ``query_fields``: the columns of a CSV written with ``noheader`` (its --query-gpu= or
    --query-compute-apps= names); a file with a header row keeps its own."""
    ends_inside_a_line = not text.endswith(("\n", "\r"))
    given = text
    paste = strip_terminal(text)
    text = paste.text
    command = paste.query()
    fields, csv_kind = _query_fields(command, query_fields)
    kind = detect_format(text)
    headerless = parse_header(_first_line(text)) is None
    if fields is not None and headerless and kind in (None, SmiFormat.QUERY_GPU):
        kind = csv_kind
    if kind is SmiFormat.XML:
        # a prompt line above the XML: the declaration must open the document
        document = text.lstrip("\ufeff \t\r\n")
        return [read_xml(document, default_timestamp_s, selection=_one_selection(given))]
    if kind is SmiFormat.Q_TEXT:
        return [
            read_q_text(
                text,
                default_timestamp_s,
                ends_inside_a_line=ends_inside_a_line,
                outputs=_selected_outputs(given),
            )
        ]
    if kind is SmiFormat.QUERY_GPU:
        return read_query_gpu(
            text,
            default_timestamp_s,
            fields,
            interrupted=paste.interrupted,
            selection=None if command is None else command.selection,
            looped=command is None or command.loops,
        )
    if kind is SmiFormat.COMPUTE_APPS:
        return [
            read_compute_apps(
                text,
                default_timestamp_s,
                fields,
                interrupted=paste.interrupted,
                selection=None if command is None else command.selection,
            )
        ]
    if kind is SmiFormat.DMON:
        return read_dmon(
            text,
            default_timestamp_s,
            interrupted=paste.interrupted,
            interval_s=dmon_interval_s(paste.command),
        )
    if kind is SmiFormat.TABLE:
        return [read_table(text, default_timestamp_s)]
    if kind is SmiFormat.CAPTURE:
        return read_exporter_capture(text, default_timestamp_s)
    raise _unsupported(text)


def _one_selection(given: str) -> GpuSelection | None:
    """The GPUs the command above a -q -x document selects with -i: the one rule of
    ``_selected_outputs``, where the paste is that one command's output (a document under
    several commands' lines is none of theirs alone)."""
    outputs = _selected_outputs(given)
    return outputs[0].selection if len(outputs) == 1 else None


def _selected_outputs(given: str) -> tuple[SelectedOutput, ...]:
    """The outputs of a paste, each under its own command line, with the GPUs that command
    selects: each -q report is read under the command that printed it (a -q -x document, the
    one output of its paste, too: ``_one_selection``)."""
    paste = strip_terminal(given)
    if paste.command is None and "nvidia-smi" not in paste.text:
        return ()  # no command line: no selection (most files)
    return tuple(
        SelectedOutput(output.lines[0][0], _output_selection(output))
        for output in command_outputs(given)
    )


def _output_selection(output: CommandOutput) -> GpuSelection | None:
    """The GPUs the command above one output selects with -i; None when it prints several
    reports (a loop's readings, or a prompt no pattern knows between two commands' reports)."""
    if output.command is None:
        return None
    reports = sum(1 for _, line in output.lines if _Q_BANNER.match(line))
    return None if reports > 1 else command_selection(output.command)


def read_exporter_capture(text: str, default_timestamp_s: float) -> list[Snapshot]:
    snapshots: list[Snapshot] = []
    for section in capture_sections(text):
        if section.command not in ("nvidia-smi -q", "nvidia-smi -q -x"):
            continue
        body = "\n".join(section.lines)
        # Line numbers in errors count from the start of the capture file.
        if section.command.endswith("-x"):
            snapshots.append(read_xml(body.strip(), default_timestamp_s))
        else:
            padded = "\n" * section.start + body
            snapshots.append(read_q_text(padded, default_timestamp_s))
    if not snapshots:
        raise cells.SmiOutputError(None, "capture file without an `nvidia-smi -q` section")
    return snapshots
