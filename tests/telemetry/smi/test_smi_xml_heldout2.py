"""Held-out ``nvidia-smi -q -x`` captures, set 2 (tests/data/smi_xml_public2/: SOURCES.md says
where each comes from, expected.json holds the values read off each file by hand): netdata's,
rai-project's, a0s's and lampaa's test data — DTD v7 to v12 and an inline DTD (`--dtd`), drivers
352 to 580, Kepler to Blackwell, a trimmed file, N/A blocks. Every file reads to the values
printed in it, ``snapshot --json`` prints the same values, and ``doctor`` gives exactly the
findings above info that the file shows: none for a healthy GPU.
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
    CUT,
    NOISE,
    assert_doctor_finds,
    assert_set_is_described,
    assert_smi_sample_reads_or_refused_clearly,
    key_values,
    load_set,
    mib,
    sample_ids,
    sample_text,
)

DATA, SAMPLES = load_set("smi_xml_public2")
IDS = sample_ids(SAMPLES)
# a DTD named by reference, or by the comment heading the inline copy `nvidia-smi --dtd` prints
_DOCTYPE = re.compile(
    r"<!DOCTYPE nvidia_smi_log "
    r'(?:SYSTEM "(nvsmi_device_v\d+)\.dtd"|\[\s*<!-- (nvsmi_device_v\d+)\.dtd -->)'
)


def _declared_schema(text: str) -> str | None:
    found = _DOCTYPE.search(text)
    return (found.group(1) or found.group(2)) if found else None


def _extra(device: DeviceSample) -> dict[str, Any]:
    """The further values expected.json may record per GPU, as read."""
    reasons = device.clock_event_reasons
    return {
        "fan_pct": device.fan_speed_percent,
        "processes": None if device.processes is None else len(device.processes),
        "slowdown_c": device.temperature_slowdown_celsius,
        "shutdown_c": device.temperature_shutdown_celsius,
        "temp_margin_c": device.temperature_margin_celsius,
        "clock_event_reasons": None if reasons is None else list(reasons),
        "replay_total": device.pcie_replay_total,
        "link_width": [device.pcie_link_width_current, device.pcie_link_width_max],
        "fabric": [device.fabric_state, device.fabric_status, device.fabric_health_summary],
    }


def test_the_set_is_the_one_described() -> None:
    assert_set_is_described(DATA, SAMPLES)


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_the_file_is_a_complete_capture_of_its_schema(sample: dict[str, Any]) -> None:
    text = sample_text(DATA, sample)
    assert text.rstrip().endswith("</nvidia_smi_log>")
    assert _declared_schema(text) == sample["schema"]


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    (snap,) = parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)
    assert [key_values(d) for d in snap.samples] == sample["gpus"]
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
    seen = [
        {
            "index": device["index"],
            "name": device["name"],
            "mem_total_mib": mib(device["memory_total_bytes"]),
            "mem_used_mib": mib(device["memory_used_bytes"]),
            "temp_c": device["temperature_gpu_celsius"],
            "power_w": device["power_draw_watts"],
            "power_limit_w": device["power_limit_watts"],
            "util_pct": device["gpu_utilization_percent"],
        }
        for device in printed
    ]
    assert seen == sample["gpus"]
    assert {device["driver_version"] for device in printed} == {sample["driver"]}


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_doctor_finds_what_the_file_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    assert_doctor_finds(DATA / sample["file"], sample["doctor_codes"])
    assert bool(sample["doctor_codes"]) == (sample["fault"] != "none")


@settings(max_examples=60, deadline=None)
@given(sample=st.sampled_from(SAMPLES), cut=CUT, noise=NOISE)
def test_a_cut_or_spliced_capture_reads_or_is_refused_clearly(
    sample: dict[str, Any], cut: float, noise: str
) -> None:
    assert_smi_sample_reads_or_refused_clearly(sample, sample_text(DATA, sample), cut, noise)


def _sample(file: str) -> dict[str, Any]:
    (found,) = [s for s in SAMPLES if s["file"] == file]
    return found


def test_a_report_naming_its_driver_only_by_kmd_version_reads_the_same_versions() -> None:
    """R615 prints kmd_version / cuda_umd_version beside driver_version / cuda_version and says
    the old two go away with CUDA 14.0; the GB200 capture spelt the new way reads alike."""
    sample = _sample("k8s-test-infra__4x-gb200-nvl__v13__580.173.02.xml")
    text = sample_text(DATA, sample)
    renamed = text.replace("<driver_version>580.173.02</driver_version>", "").replace(
        "<cuda_version>13.0</cuda_version>",
        "<kmd_version>580.173.02</kmd_version>\n\t<cuda_umd_version>13.0</cuda_umd_version>",
    )
    assert renamed.count("kmd_version") == 2 and "driver_version" not in renamed
    (snap,) = parse_smi_output(renamed, sample["file"], 0.0)
    versions = {(d.info.driver_version, d.info.cuda_driver_version) for d in snap.samples}
    assert versions == {("580.173.02", "13.0")}


@pytest.mark.parametrize(("printed", "pending"), [("No", False), ("Yes", True), ("N/A", None)])
def test_pending_blacklist_is_the_pending_retirement_flag(
    printed: str, pending: bool | None
) -> None:
    """R418-R440 drivers print the pending-retirement flag as pending_blacklist, the GTX 1050's
    WDDM driver only that one (N/A there); the 1050 Ti capture spelt that way reads the flag."""
    sample = _sample("lampaa__gtx-1050-ti-plex__v10__418.56.xml")
    text = sample_text(DATA, sample)
    old = "<pending_retirement>N/A</pending_retirement>"
    assert text.count(old) == 1
    spelt = text.replace(old, f"<pending_blacklist>{printed}</pending_blacklist>")
    (snap,) = parse_smi_output(spelt, sample["file"], 0.0)
    assert [d.retired_pages_pending for d in snap.samples] == [pending]
