"""A saved tensor's label is display text only: the recipes pick tensors by their typed role, so
renaming every label changes no byte of any plan (every family of the exact-trace test, in every
mode it runs)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.planner import families, plan_memory
from gpuwarden.planner.tensors import Saved
from tests.planner.test_formula_vs_exact import MODES, SMALL, make_request


def _relabelled(what: str, *args: Any, **kwargs: Any) -> Saved:
    return Saved(f"renamed: {what[::-1]}", *args, **kwargs)


@pytest.mark.parametrize("family", sorted(SMALL))
def test_renaming_every_label_changes_no_byte(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    requests = [make_request(family, mode, 2, 48) for mode in MODES]
    before = [dict(phase.bytes_by_component) for r in requests for phase in plan_memory(r).phases]
    monkeypatch.setattr(families, "Saved", _relabelled)
    monkeypatch.setattr(families, "_MEMO", {})  # the recipes are memoised per model and context
    after = [dict(phase.bytes_by_component) for r in requests for phase in plan_memory(r).phases]
    assert after == before
