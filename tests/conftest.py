"""Shared test fixtures. Real data lives in ../shared/fixtures (relative to the project root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Every property test draws the same examples on every run (seeded by the test's name), so a red
# suite is a change, never the luck of the draw; GPUWARDEN_HYPOTHESIS=explore draws new ones (and
# keeps the failures it finds in .hypothesis/) to look for bugs outside the suite.
settings.register_profile("fixed", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("GPUWARDEN_HYPOTHESIS", "fixed"))

# One xdist worker per core already keeps the cores busy: each worker's torch (OpenMP) and numpy
# (OpenBLAS) threads on top of it would oversubscribe them, and OpenMP's threads spin while they
# wait (a real CPU step of tests/planner/test_moe_backward.py: 54 s with two threads per worker,
# 35 s with one, on 2 cores). Read when those libraries load, which no test module does before this.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = PROJECT_ROOT.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(
            f"real-data fixtures not found at {FIXTURES} (CI keeps shared/ beside the repo)"
        )
    return FIXTURES


@pytest.fixture(autouse=True)
def _default_report_width() -> None:
    """Piped reports are as wide as an exported COLUMNS says; the tests read them at their
    default width, whatever the shell exports (pytest-xdist's workers export COLUMNS=80) and
    whatever the test run sets in the process's own environment (importing readline — pdb,
    the REPL — runs GNU readline's initialisation, which writes LINES and COLUMNS there,
    unseen by os.environ: rl_change_environment; children inherit it)."""
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
        os.unsetenv(name)
