"""Every benchmark script imports against the package as it is now.

The benchmarks run outside the suite (each takes minutes), so a rename in the package broke
benchmarks/remediate.py unseen: it imported ``iso`` from remediate.changes after that became
``units.iso_utc`` (ImportError on its first line). Importing each script is cheap and catches
that; running them stays the benchmarks' own job.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py"))


@pytest.fixture
def benchmarks_on_path() -> Iterator[None]:
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import each other as their own folder
    try:
        yield
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_the_scripts_are_found() -> None:
    assert {"planner_accuracy", "remediate", "trace", "fleet"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.usefixtures("benchmarks_on_path")
def test_a_benchmark_script_imports(script: str) -> None:
    importlib.import_module(script)
