"""What the held-out nvidia-smi sets (tests/data/smi_public, smi_xml_public, topo_public) share:
the per-GPU values their expected.json files hold, and the cut-and-splice check every parser
gets (a damaged capture reads, or is refused with exit 2 and a hint naming it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuwarden.errors import GpuwardenError
from gpuwarden.types.telemetry import DeviceSample
from gpuwarden.units import MIB


def mib(value: int | None) -> float | None:
    return None if value is None else value / MIB


def key_values(device: DeviceSample) -> dict[str, Any]:
    """The per-GPU values an expected.json records, as read (a set may record a subset)."""
    return {
        "index": device.info.index,
        "name": device.info.name or None,
        "mem_total_mib": mib(device.info.memory_total_bytes),
        "mem_used_mib": mib(device.memory_used_bytes),
        "temp_c": device.temperature_gpu_celsius,
        "power_w": device.power_draw_watts,
        "power_limit_w": device.power_limit_watts,
        "util_pct": device.gpu_utilization_percent,
    }


def assert_reads_or_refused_clearly(
    parse: Callable[[str], object], text: str, cut: float, noise: str, name: str | None = None
) -> None:
    """``text`` with ``noise`` spliced in at ``cut`` (0..1 of its length): ``parse`` reads it or
    refuses it as bad input (exit 2) with a hint — naming the file, when ``name`` is given."""
    at = int(len(text) * cut)
    refused: GpuwardenError | None = None
    try:
        parse(text[:at] + noise + text[at:])
    except GpuwardenError as exc:
        refused = exc
    if refused is not None:
        assert (refused.exit_code, bool(refused.hint)) == (2, True)
        assert name is None or name in str(refused)


# what the sets of default tables, -q text and CSV record per GPU (their outputs print no limit)
TABLE_KEYS = ("index", "name", "mem_used_mib", "mem_total_mib", "temp_c", "power_w", "util_pct")


def table_values(device: DeviceSample) -> dict[str, Any]:
    values = key_values(device)
    return {key: values[key] for key in TABLE_KEYS}


def sample_ids(samples: list[dict[str, Any]]) -> list[str]:
    return [s["file"] for s in samples]
