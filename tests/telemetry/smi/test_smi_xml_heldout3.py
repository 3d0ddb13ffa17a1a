"""Held-out ``nvidia-smi -q -x`` captures, set 3 (tests/data/smi_xml_public3/: SOURCES.md says
where each comes from, expected.json holds the values read off each file by hand): Microsoft
OpenPAI's, Guance DataKit's, vertex's, llamaland's and an nvidia_smi_exporter's test data — DTD
v9 to v12 and a file with no declaration, drivers 384 to 575, Kepler to Ampere, a six-GPU mining
rig on x1 risers, Azure K80s with retired pages, a DGX-2 V100 with a pending retirement. Every
file reads to the values printed in it, ``snapshot --json`` prints the same values, and
``doctor`` gives exactly the findings above info that the file shows: none for a healthy GPU.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import DeviceSample
from tests.telemetry.smi.heldout import (
    load_set,
    sample_ids,
    sample_text,
    xml_set_checks,
)

DATA, SAMPLES = load_set("smi_xml_public3")
IDS = sample_ids(SAMPLES)
_DOCTYPE = re.compile(r'<!DOCTYPE nvidia_smi_log SYSTEM "(nvsmi_device_v\d+)\.dtd">')


def _declared_schema(text: str) -> str | None:
    found = _DOCTYPE.search(text)
    return found.group(1) if found else None


def _extra(device: DeviceSample) -> dict[str, Any]:
    """The further values expected.json may record, as read (the same for every GPU)."""
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
        "retired_pending": device.retired_pages_pending,
        "retired_pages": [device.retired_pages_single_bit, device.retired_pages_double_bit],
        "ecc_uncorrected": [
            device.ecc_errors_uncorrected_volatile,
            device.ecc_errors_uncorrected_aggregate,
        ],
    }


(
    test_the_set_is_the_one_described,
    test_the_file_is_a_complete_capture_of_its_schema,
    test_reads_the_printed_values,
    test_snapshot_json_prints_the_same_values,
    test_doctor_finds_what_the_file_shows_and_nothing_else,
    test_a_cut_or_spliced_capture_reads_or_is_refused_clearly,
) = xml_set_checks(DATA, SAMPLES, _declared_schema, _extra)


def _sample(file: str) -> dict[str, Any]:
    (found,) = [s for s in SAMPLES if s["file"] == file]
    return found


@pytest.mark.parametrize("printed", ["Not Found", "N/A", "XXX.XX"])
def test_a_cuda_version_that_is_no_version_number_is_not_reported(printed: str) -> None:
    """nvidia-smi prints "Not Found" as the CUDA version when it finds no CUDA driver library
    (the Azure K80 capture); the -q and table readers already read a version only where one is
    printed, and the XML reader reads it alike instead of reporting the words as a version."""
    sample = _sample("pai__4x-tesla-k80-azure__v10__430.26.xml")
    text = sample_text(DATA, sample)
    old = "<cuda_version>Not Found</cuda_version>"
    assert text.count(old) == 1
    spelt = text.replace(old, f"<cuda_version>{printed}</cuda_version>")
    gpus = parse_smi_output(spelt, sample["file"], 0.0)[0].samples
    assert {d.info.cuda_driver_version for d in gpus} == {None}


def test_the_cuda_version_r615_prints_as_cuda_umd_version_is_read_after_not_found() -> None:
    """Where <cuda_version> holds no version, the R615 spelling <cuda_umd_version> is read."""
    sample = _sample("pai__4x-tesla-k80-azure__v10__430.26.xml")
    text = sample_text(DATA, sample).replace(
        "<cuda_version>Not Found</cuda_version>",
        "<cuda_version>Not Found</cuda_version>\n    <cuda_umd_version>10.2</cuda_umd_version>",
    )
    gpus = parse_smi_output(text, sample["file"], 0.0)[0].samples
    assert {d.info.cuda_driver_version for d in gpus} == {"10.2"}
