"""Library versions as typed on the command line (planner/versions.py)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpuwarden.planner.versions import DEEPSPEED_ONE_RANK_PATH, release


@pytest.mark.parametrize(
    ("version", "parts"),
    [
        ("0.8.3", (0, 8, 3)),
        ("v0.9", (0, 9, 0)),
        ("0.9.0+cu118", (0, 9, 0)),
        ("0.10.0rc1", (0, 10, 0)),
        (" 1 ", (1, 0, 0)),
        ("0.8.3.post1", (0, 8, 3)),
        ("latest", None),
        ("", None),
        ("0..1", None),
    ],
)
def test_release(version: str, parts: tuple[int, int, int] | None) -> None:
    assert release(version) == parts


def test_release_orders_the_deepspeed_cut() -> None:
    # DeepSpeed 0.9.0 added the one-rank ZeRO-3 path: 0.8.x before it, 0.9 and 0.10 after
    parts = [release(v) for v in ("0.8.3", "0.9.0", "0.10.0", "0.9")]
    assert DEEPSPEED_ONE_RANK_PATH == (0, 9, 0)
    assert [p is not None and p < DEEPSPEED_ONE_RANK_PATH for p in parts] == [
        True,
        False,
        False,
        False,
    ]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
@example("²")
@example("0.9.²")
def test_release_never_raises(version: str) -> None:
    parts = release(version)
    assert parts is None or (len(parts) == 3 and all(p >= 0 for p in parts))
