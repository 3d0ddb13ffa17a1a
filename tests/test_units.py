"""units.whole_number: the one reader of a count as a tool prints it (kernel-log Xids and PIDs,
numbers in pasted errors, cron fields)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.units import whole_number


@pytest.mark.parametrize(
    ("text", "digits", "value"),
    [
        ("79", 10, 79),
        ("0", 10, 0),
        ("4294967295", 10, 4294967295),
        ("42949672950", 10, None),  # past the printer's width
        ("9" * 5000, 20, None),  # int() would refuse it
        ("²", 10, None),  # isdigit() says yes, int() says no
        ("٣", 10, None),  # a decimal digit, but no driver prints it
        ("-1", 10, None),
        (" 7", 10, None),
        ("", 10, None),
        (None, 10, None),
    ],
)
def test_whole_numbers(text: str | None, digits: int, value: int | None) -> None:
    assert whole_number(text, max_digits=digits) == value


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.integers(1, 30))
def test_any_text_is_a_number_or_none(text: str, digits: int) -> None:
    value = whole_number(text, max_digits=digits)
    assert value is None or (str(value) == text.lstrip("0") or value == 0)
