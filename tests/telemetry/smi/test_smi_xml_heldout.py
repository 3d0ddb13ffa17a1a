"""Held-out ``nvidia-smi -q -x`` captures from public repositories' test data
(tests/data/smi_xml_public/: SOURCES.md says where each comes from, expected.json holds the values
read off each file by hand). Every file reads to the values printed in it, ``snapshot --json``
prints the same values, and ``doctor`` gives exactly the findings above info that the file shows:
none for a healthy GPU.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import DeviceSample
from tests.telemetry.smi.heldout import (
    assert_doctor_finds,
    assert_reads_or_refused_clearly,
    assert_set_is_described,
    key_values,
    load_set,
    mib,
    sample_ids,
)

DATA, SAMPLES = load_set("smi_xml_public")
IDS = sample_ids(SAMPLES)
_DOCTYPE = re.compile(r'<!DOCTYPE nvidia_smi_log SYSTEM "(nvsmi_device_v\d+)\.dtd">')


def _text(sample: dict[str, Any]) -> str:
    return (DATA / sample["file"]).read_text()


def _reading(device: DeviceSample) -> dict[str, Any]:
    """The per-GPU values expected.json holds, as read."""
    return key_values(device)


def _extra(device: DeviceSample) -> dict[str, Any]:
    return {
        "fan_pct": device.fan_speed_percent,
        "thermal_violation_ns": device.thermal_violation_ns_total,
        "mig_devices": len(device.mig_devices or ()),
        "processes": None if device.processes is None else len(device.processes),
        "temp_margin_c": device.temperature_margin_celsius,
        "slowdown_c": device.temperature_slowdown_celsius,
        "shutdown_c": device.temperature_shutdown_celsius,
    }


def test_the_set_is_the_one_described() -> None:
    assert_set_is_described(DATA, SAMPLES)


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_the_file_is_a_complete_capture_of_its_schema(sample: dict[str, Any]) -> None:
    text = _text(sample)
    assert text.rstrip().endswith("</nvidia_smi_log>")
    declared = _DOCTYPE.search(text)
    assert (declared.group(1) if declared else None) == sample["schema"]


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    (snap,) = parse_smi_output(_text(sample), sample["file"], 0.0)
    assert [_reading(d) for d in snap.samples] == sample["gpus"]
    assert {d.info.driver_version for d in snap.samples} == {sample["driver"]}
    for device in snap.samples:
        seen = _extra(device)
        assert {key: seen[key] for key in sample["extra"]} == sample["extra"]


def _snapshot_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["snapshot", "--backend", "smi", "--from", str(path), "--json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, document
    return document


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_snapshot_json_prints_the_same_values(
    sample: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    printed = _snapshot_json(DATA / sample["file"], capsys)["devices"]
    for device, expected in zip(printed, sample["gpus"], strict=True):
        assert device["index"] == expected["index"]
        assert device["name"] == expected["name"]
        assert mib(device["memory_total_bytes"]) == expected["mem_total_mib"]
        assert mib(device["memory_used_bytes"]) == expected["mem_used_mib"]
        assert device["temperature_gpu_celsius"] == expected["temp_c"]
        assert device["power_draw_watts"] == expected["power_w"]
        assert device["power_limit_watts"] == expected["power_limit_w"]
        assert device["gpu_utilization_percent"] == expected["util_pct"]
        assert device["driver_version"] == sample["driver"]


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_doctor_finds_what_the_file_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    assert_doctor_finds(DATA / sample["file"], sample["doctor_codes"])


@settings(max_examples=60, deadline=None)
@given(sample=st.sampled_from(SAMPLES), cut=st.floats(0.0, 1.0), noise=st.text(max_size=30))
def test_a_cut_or_spliced_capture_reads_or_is_refused_clearly(
    sample: dict[str, Any], cut: float, noise: str
) -> None:
    assert_reads_or_refused_clearly(
        lambda text: parse_smi_output(text, sample["file"], 0.0), _text(sample), cut, noise
    )
