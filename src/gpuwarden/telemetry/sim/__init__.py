"""The ``sim`` backend: named scenarios that move like real GPUs, always marked simulated.

``open_sim("thermal-throttling", seed=1)`` gives a ``Backend``; ``SCENARIOS`` maps each name to
its ``Scenario`` (``.description`` is the one-line summary).
"""

from __future__ import annotations

from gpuwarden.telemetry.sim.backend import SimBackend, open_sim
from gpuwarden.telemetry.sim.scenarios import SCENARIOS, Scenario

__all__ = ["SCENARIOS", "Scenario", "SimBackend", "open_sim"]
