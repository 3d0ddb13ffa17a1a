"""Every verdict code gpuwarden can give is documented: diagnosis.md §1-2 (the shared vocabulary)
or README's "Verdict codes" table (the codes gpuwarden added) — a new code without its row is
a word no user can look up."""

from __future__ import annotations

import re
from pathlib import Path

from gpuwarden.health.explain.causes import BY_CODE
from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.versions import VERSION_CODES
from tests.conftest import PROJECT_ROOT


def _documented(fixtures: Path) -> set[str]:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    diagnosis = (fixtures.parent / "reference" / "diagnosis.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `([a-z0-9-]+)` \|", readme, re.MULTILINE))
    return table | set(re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)*)`", diagnosis))


def test_every_finding_code_is_documented(fixtures: Path) -> None:
    assert sorted((set(CODES) | set(VERSION_CODES)) - _documented(fixtures)) == []


def test_every_explain_cause_is_documented(fixtures: Path) -> None:
    assert sorted(set(BY_CODE) - _documented(fixtures)) == []
