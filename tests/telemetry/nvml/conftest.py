"""Fake NVML hosts built from the real captures (tests/fakes/fake_pynvml)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_pynvml import FakeHost
from tests.fakes.fake_pynvml import fake_host as build_host


@pytest.fixture
def fake_host(fixtures: Path) -> Callable[..., FakeHost]:
    def build(*names: str, state: str = "load", **module_kwargs: Any) -> FakeHost:
        return build_host(fixtures, *names, state=state, **module_kwargs)

    return build
