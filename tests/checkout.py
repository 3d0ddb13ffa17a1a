"""The environment a test's child process needs to import this checkout's gpuwarden."""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT_SRC = Path(__file__).resolve().parents[1] / "src"


def child_env() -> dict[str, str]:
    """The environment with this checkout's sources first on the child's path: a child run in a
    temporary folder would read a relative PYTHONPATH ("src:.", as the suite is run) as naming
    nothing and test whichever gpuwarden is installed instead."""
    inherited = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(CHECKOUT_SRC), inherited) if p),
    }
