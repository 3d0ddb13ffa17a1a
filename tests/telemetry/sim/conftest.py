"""A simulator driven by a clock the test moves."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuwarden.telemetry.sim import SimBackend, open_sim
from gpuwarden.types.telemetry import Snapshot

T0 = 1_800_000_000.0  # any Unix time: the simulator only looks at differences


class ManualClock:
    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class Driven:
    """A sim backend plus its clock: ``at(t)`` reads the scenario t seconds after it opened."""

    def __init__(self, backend: SimBackend, clock: ManualClock) -> None:
        self.backend = backend
        self.clock = clock

    def at(self, t: float) -> Snapshot:
        self.clock.now = T0 + t
        return self.backend.read()

    def series(self, times: list[float]) -> list[Snapshot]:
        return [self.at(t) for t in times]


@pytest.fixture
def sim() -> Callable[..., Driven]:
    def make(scenario: str, *, gpus: int | None = None, seed: int = 7) -> Driven:
        clock = ManualClock()
        return Driven(open_sim(scenario, gpus=gpus, seed=seed, clock=clock), clock)

    return make
