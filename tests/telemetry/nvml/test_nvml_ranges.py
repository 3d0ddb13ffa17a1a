"""The NVML backend's readings pass the same range check as every backend's: a driver that
answers with an impossible number (a wrapped unsigned, a broken counter) gives null and an
event, and the rest of the reading."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpuwarden.telemetry.nvml import NvmlBackend
from gpuwarden.types.telemetry import EventKind
from tests.fakes.fake_pynvml import fake_host
from tests.fakes.fake_pynvml.captures import H100, load_capture


def test_impossible_nvml_answers_are_null_with_an_event(fixtures: Path) -> None:
    real = load_capture(fixtures, H100)
    odd = dataclasses.replace(real, util_gpu=1000, temp_gpu=2**32 - 300, fan_percent=None)
    host = fake_host(fixtures, odd)
    snapshot = NvmlBackend(host.module, clock=host.clock).read()
    (sample,) = snapshot.samples
    assert sample.gpu_utilization_percent is None and sample.temperature_gpu_celsius is None
    assert sample.power_draw_watts == real.power_draw_w  # the rest is read as captured
    said = sorted(e.message.split(" = ")[0] for e in snapshot.events)
    assert said == ["gpu_utilization_percent", "temperature_gpu_celsius"]
    assert all(e.kind is EventKind.BACKEND_ERROR and e.index == 0 for e in snapshot.events)
