"""Fake NVML hosts built from the real captures (tests/fakes/fake_pynvml)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.fakes.fake_pynvml import FakeClock, FakeGpu, fake_gpus, make_fake_pynvml
from tests.fakes.fake_pynvml.captures import CapturedGpu, load_capture


@dataclass
class FakeHost:
    module: ModuleType
    gpus: list[FakeGpu]
    captures: list[CapturedGpu]
    clock: FakeClock


@pytest.fixture
def fake_host(fixtures: Path) -> Callable[..., FakeHost]:
    def build(*names: str, state: str = "load", **module_kwargs: Any) -> FakeHost:
        clock = FakeClock()
        captures = [load_capture(fixtures, name, state) for name in names]
        gpus = fake_gpus(captures, clock=clock, facts=fixtures / "nvml" / "go-nvml-mock-facts.json")
        module = make_fake_pynvml(gpus, clock=clock, **module_kwargs)
        return FakeHost(module, gpus, captures, clock)

    return build
