"""The ``smi`` backend: telemetry from ``nvidia-smi`` output, for hosts with only the binary.

``open_smi(path)`` reads a saved output (XML ``-q -x``, ``-q`` text, ``--query-gpu`` CSV,
``--query-compute-apps`` CSV, ``dmon``, detected from the content), ``open_smi("-")`` reads stdin
and ``open_smi(None)`` runs the local ``nvidia-smi -q -x`` on every ``read()``.
``parse_topology`` / ``parse_nvlink_status`` read ``nvidia-smi topo -m`` / ``nvlink -s``
captures, which are not telemetry (no Snapshot).

The ``parse_*`` functions name their input (``source``) in their errors and Snapshots; the
``read_*`` ones raise ``cells.SmiOutputError`` naming only the line, for a caller that names the
input itself (``GpuwardenError.about``).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwarden.telemetry.smi.backend import SmiBackend
from gpuwarden.telemetry.smi.detect import (
    SmiFormat,
    detect_format,
    parse_smi_output,
    read_smi_output,
)
from gpuwarden.telemetry.smi.topo import (
    looks_like_nvlink_status,
    looks_like_topo,
    parse_nvlink_status,
    parse_topology,
    read_nvlink_status,
    read_topology,
)

__all__ = [
    "SmiBackend",
    "SmiFormat",
    "detect_format",
    "looks_like_nvlink_status",
    "looks_like_topo",
    "open_smi",
    "parse_nvlink_status",
    "parse_smi_output",
    "parse_topology",
    "read_nvlink_status",
    "read_smi_output",
    "read_topology",
]


def open_smi(source: str | None, *, query_fields: Sequence[str] | None = None) -> SmiBackend:
    """A file path, "-" for stdin, or None to run the local ``nvidia-smi -q -x``.

    ``query_fields`` names the columns of a ``--format=csv,noheader`` file."""
    return SmiBackend(source, query_fields=query_fields)
