"""Shared test fixtures. Real data lives in ../shared/fixtures (relative to the project root)."""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = PROJECT_ROOT.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(
            f"real-data fixtures not found at {FIXTURES} (CI keeps shared/ beside the repo)"
        )
    return FIXTURES
