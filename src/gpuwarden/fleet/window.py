"""The report's window from ``--range`` or ``--start``/``--end``: parsing and the bucket grid.

Both ends fall on whole minutes (the 1-minute grid). A window ending "now" ends a minute early:
the newest scrape may not be in yet, and VictoriaMetrics hides the last 30 s by default
(``-search.latencyOffset``, fleet.md §6), so both servers see the same data.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from gpuwarden.errors import InputError
from gpuwarden.fleet.model import GRID_S, Window
from gpuwarden.units import iso_utc

SETTLE_S = 60  # leave the newest minute out (see the module's docstring)
MAX_BUCKETS = 168  # a week of hours; longer windows get longer buckets
BUCKET_UNIT_S = 3600
MAX_WINDOW_S = 400 * 86400  # beyond a year the question is a different report
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
# A number starts after a non-digit: a run of digits no unit ends is then tried once, not from
# each of its digits (quadratic). A start inside a run only ever matched where its start did.
_DURATION = re.compile(r"(?<!\d)(\d+)(ms|s|m|h|d|w|y)")
_RANGE_HINT = "a duration like 24h, 90m, 7d or 1d12h (units ms, s, m, h, d, w, y)"
_TIME_HINT = (
    "an RFC 3339 time (2024-05-01T08:00:00Z, 2024-05-01T10:00:00+02:00), a date (2024-05-01, "
    "UTC midnight) or Unix seconds"
)


def parse_duration(text: str) -> int:
    """``24h``, ``1d12h``, ``90m`` → seconds (Prometheus' duration syntax)."""
    cleaned = text.strip()
    if not cleaned or _DURATION.sub("", cleaned):
        raise InputError(
            f"--range {text!r} is not a duration",
            reference="fleet-range-invalid",
            hint=f"give {_RANGE_HINT}",
        )
    seconds = sum(int(n) * _UNITS[unit] for n, unit in _DURATION.findall(cleaned))
    return math.floor(seconds)


def parse_time(text: str, option: str) -> int:
    """RFC 3339, a date, or Unix seconds → Unix seconds (a time without offset is UTC)."""
    cleaned = text.strip()
    try:
        value = float(cleaned)
    except ValueError:
        pass
    else:
        if math.isfinite(value) and 0 <= value < 1e11:
            return math.floor(value)
    try:
        when = datetime.fromisoformat(cleaned.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InputError(
            f"{option} {text!r} is not a time",
            reference="fleet-time-invalid",
            hint=f"give {_TIME_HINT}",
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        utc = when.astimezone(UTC)  # the report shows it in UTC: it must have a UTC date
    except OverflowError:  # 9999-12-31T23:00:00-02:00 is in the year 10000 UTC
        raise InputError(
            f"{option} {text!r} falls outside the years 1-9999 in UTC",
            reference="fleet-time-invalid",
            hint=f"give {_TIME_HINT}",
        ) from None
    return math.floor(utc.timestamp())


def bucket_for(window_s: int) -> int:
    """Hours, or more hours when the window holds more than ``MAX_BUCKETS`` of them."""
    if window_s <= BUCKET_UNIT_S:
        return window_s
    return BUCKET_UNIT_S * math.ceil(window_s / (MAX_BUCKETS * BUCKET_UNIT_S))


def make_window(
    now_s: float,
    *,
    range_s: int | None = None,
    start_s: int | None = None,
    end_s: int | None = None,
) -> Window:
    """The window a report covers; ``now_s`` is passed in (no clock here)."""
    end = end_s if end_s is not None else math.floor(now_s) - SETTLE_S
    end -= end % GRID_S
    if start_s is not None:
        start = start_s - start_s % GRID_S
    elif range_s is not None:
        start = end - range_s + range_s % GRID_S
    else:
        raise InputError(
            "no window given",
            reference="fleet-window-missing",
            hint="give --range 24h, or --start T (and --end T)",
        )
    if end <= start:
        raise InputError(
            f"the window is empty: it would start at {_iso(start)} and end at {_iso(end)}",
            reference="fleet-window-empty",
            hint="--start must be at least a minute before --end (or now), --range at least 1m",
        )
    if end - start > MAX_WINDOW_S:
        raise InputError(
            f"the window is {(end - start) / 86400:.0f} days long",
            reference="fleet-window-too-long",
            hint=f"report at most {MAX_WINDOW_S // 86400} days at a time",
        )
    return Window(start, end, bucket_for(end - start))


def span_text(window: Window) -> str:
    """The window in words: its first and last instants, UTC."""
    return f"{_iso(window.start_s)} to {_iso(window.end_s)}"


def _iso(seconds: int) -> str:
    return iso_utc(seconds, timespec="auto")
