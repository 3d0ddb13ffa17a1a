"""What the held-out nvidia-smi sets (tests/data/smi_public, smi_forum, smi_testdata,
smi_xml_public, topo_public) share: how a set is loaded and checked against its SOURCES.md, the
per-GPU values their expected.json files hold, the doctor check, and the cut-and-splice check
every parser gets (a damaged capture reads, or is refused with exit 2 and a hint naming it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import GpuwardenError, InputError
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import DeviceSample
from gpuwarden.types.topology import NvLinkStatus
from gpuwarden.units import MIB

DATA_ROOT = Path(__file__).resolve().parents[2] / "data"
_NOT_SAMPLES = frozenset({"SOURCES.md", "expected.json"})


def load_set(name: str) -> tuple[Path, list[dict[str, Any]]]:
    """The folder of a held-out set under tests/data and the samples its expected.json lists."""
    data = DATA_ROOT / name
    samples: list[dict[str, Any]] = json.loads((data / "expected.json").read_text())["samples"]
    return data, samples


def assert_set_is_described(data: Path, samples: list[dict[str, Any]]) -> None:
    """Every file of the set is a sample of expected.json and is named in SOURCES.md."""
    files = sorted(p.name for p in data.iterdir() if p.name not in _NOT_SAMPLES)
    assert files == sorted(sample_ids(samples))
    sources = (data / "SOURCES.md").read_text()
    assert all(name in sources for name in files)


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


def assert_reads_table_values(sample: dict[str, Any], text: str) -> None:
    """One reading whose GPUs hold the values (and driver, fan) the sample records."""
    (snap,) = parse_smi_output(text, sample["file"], 0.0)
    assert [table_values(d) for d in snap.samples] == sample["gpus"]
    assert {d.info.driver_version for d in snap.samples} == {sample["driver"]}
    if "fan_pct" in sample:
        assert [d.fan_speed_percent for d in snap.samples] == [sample["fan_pct"]]


def doctor_codes_above_info(path: Path) -> list[str]:
    """The codes of doctor's findings above info on one capture, sorted."""
    report = diagnose_captures([str(path)], DoctorOptions())
    return sorted({f.code for f in report.findings if f.severity.rank > 0})


def assert_doctor_finds(path: Path, codes: list[str] | None) -> None:
    """doctor finds exactly ``codes`` above info; ``None``: it refuses the file as bad input."""
    if codes is None:
        with pytest.raises(InputError) as caught:
            diagnose_captures([str(path)], DoctorOptions())
        assert caught.value.exit_code == 2 and caught.value.hint
        return
    assert doctor_codes_above_info(path) == sorted(codes)


def nvlink_states(status: NvLinkStatus) -> dict[str, dict[str, Any]]:
    """Per GPU index: how many links are active and which are inactive (expected.json's form)."""
    return {
        str(gpu.index): {
            "active": sum(1 for link in gpu.links if link.active),
            "inactive": [link.link for link in gpu.links if link.active is False],
        }
        for gpu in status.gpus
    }
