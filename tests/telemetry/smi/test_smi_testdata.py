"""Held-out nvidia-smi outputs that other monitoring projects keep as test data, captured on real
machines (tests/data/smi_testdata/, where SOURCES.md says where each one comes from and
expected.json holds the values read off each sample by hand). Every sample reads without a
traceback to the values printed in it, and `doctor` gives no finding above info for these
healthy GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import DeviceSample
from tests.telemetry.smi.heldout import (
    assert_doctor_finds,
    assert_reads_or_refused_clearly,
    assert_set_is_described,
    load_set,
    sample_ids,
    table_values,
)

DATA, SAMPLES = load_set("smi_testdata")


def _text(sample: dict[str, Any]) -> str:
    return (DATA / str(sample["file"])).read_text()


def _reasons(device: DeviceSample) -> list[str] | None:
    reasons = device.clock_event_reasons
    return None if reasons is None else list(reasons)


# the optional per-sample keys of expected.json and what each one is read from
OPTIONAL: dict[str, Callable[[DeviceSample], Any]] = {
    "fan_pct": lambda d: d.fan_speed_percent,
    "pstate": lambda d: d.pstate,
    "power_limit_w": lambda d: d.power_limit_watts,
    "clock_event_reasons": _reasons,
    "temp_margin_c": lambda d: d.temperature_margin_celsius,
    "memory_temp_c": lambda d: d.temperature_memory_celsius,
    "temp_slowdown_c": lambda d: d.temperature_slowdown_celsius,
    "temp_shutdown_c": lambda d: d.temperature_shutdown_celsius,
    "mig_devices": lambda d: None if d.mig_devices is None else len(d.mig_devices),
    "processes": lambda d: None if d.processes is None else len(d.processes),
}


def test_the_set_is_the_one_described() -> None:
    assert_set_is_described(DATA, SAMPLES)
    assert all(
        set(s) - {"file", "format", "reads", "driver", "fault", "doctor_codes", "readings", "gpus"}
        <= set(OPTIONAL)
        for s in SAMPLES
    )


@pytest.mark.parametrize("sample", SAMPLES, ids=sample_ids(SAMPLES))
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    readings = parse_smi_output(_text(sample), sample["file"], 0.0)
    assert len(readings) == sample["readings"]
    last = readings[-1]
    assert [table_values(d) for d in last.samples] == sample["gpus"]
    assert {d.info.driver_version for d in last.samples} == {sample["driver"]}
    for key, read in OPTIONAL.items():
        if key in sample:
            assert [read(d) for d in last.samples] == [sample[key]], key


@pytest.mark.parametrize("sample", SAMPLES, ids=sample_ids(SAMPLES))
def test_doctor_finds_what_the_sample_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    assert_doctor_finds(DATA / sample["file"], sample["doctor_codes"])


@settings(max_examples=60, deadline=None)
@given(
    sample=st.sampled_from(SAMPLES),
    cut=st.floats(0.0, 1.0),
    noise=st.text(max_size=30),
)
def test_a_cut_or_spliced_sample_reads_or_is_refused_clearly(
    sample: dict[str, Any], cut: float, noise: str
) -> None:
    assert_reads_or_refused_clearly(
        lambda text: parse_smi_output(text, sample["file"], 0.0), _text(sample), cut, noise
    )
