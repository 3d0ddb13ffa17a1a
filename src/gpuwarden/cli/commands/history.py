"""`gpuwarden history`: read back what `gpuwarden record` stored."""

from __future__ import annotations

import argparse
import math
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwarden.cli.options import ASCII_DIGITS, positive_int
from gpuwarden.errors import InputError, quoted
from gpuwarden.types.telemetry import DeviceInfo

if TYPE_CHECKING:
    from gpuwarden.telemetry.store import RunRecord

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# Python 3.11's fromisoformat takes any one character between the date and the time, so
# "2026-07-14+05:00" would read as 05:00 local time: a date with only a zone is that day's
# midnight in the zone, and a separator other than ISO-8601's "T" (or a blank) is no time.
_DATE_WITH_ZONE = re.compile(r"^(\d{4}-\d{2}-\d{2})(Z|[+-]\d{2}(?::?\d{2})?)$", re.IGNORECASE)
_DATE_THEN_SEPARATOR = re.compile(r"^\d{4}-\d{2}-\d{2}(.)")
_TIME_SEPARATORS = ("T", "t", " ")
WHEN_HELP = (
    "10m, 2h, 1d (ago), ISO-8601 (2026-07-14T08:00, local time unless it has a zone) "
    "or Unix seconds"
)
# The times a date can name (years 1 to 9999, as ISO-8601 and Python's datetime have them).
_EARLIEST_S = datetime(1, 1, 1, tzinfo=UTC).timestamp()
_LATEST_S = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


def _invalid_time(option: str, text: str, why: str) -> InputError:
    return InputError(
        f"{option} {quoted(text)} {why}",
        reference="invalid-time",
        hint=f"use {WHEN_HELP}",
    )


def _moment(value: str, *, now_s: float) -> float | None:
    """Unix seconds for a relative time, Unix seconds or ISO-8601; None for anything else."""
    relative = _RELATIVE.match(value)
    if relative:
        return now_s - float(relative[1]) * _UNIT_S[relative[2]]
    try:
        return float(value)
    except ValueError:
        pass
    dated = _DATE_WITH_ZONE.match(value)
    if dated:
        value = f"{dated[1]}T00:00{dated[2]}"
    separator = _DATE_THEN_SEPARATOR.match(value)
    if separator and separator[1] not in _TIME_SEPARATORS:
        return None
    try:
        moment = datetime.fromisoformat(re.sub("[Zz]$", "+00:00", value))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # naive = the machine's local time, as `date` prints it
    return moment.timestamp()


def parse_when(text: str, *, now_s: float, option: str) -> float:
    """A point in time as Unix seconds: relative to ``now_s``, ISO-8601 or Unix seconds,
    within the years 1-9999 (``inf``, ``nan``, ``1e400`` and ``99999999999999999999d`` are
    InputError ``invalid-time``, not a time the store is asked about). Its digits are ASCII,
    as every number on our command line (cli/options.ascii_number_text): float() and re's \\d
    also read "١٠m" as 10 minutes."""
    if not text.isascii():
        raise _invalid_time(option, text, f"is not a time: {ASCII_DIGITS}")
    try:
        seconds = _moment(text.strip(), now_s=now_s)
    except (ValueError, OverflowError):
        # a naive time on the calendar's first or last day: Python finds the local offset by
        # stepping a day out of the calendar, and fails
        raise _invalid_time(
            option, text, "is a local time at the calendar's end: give its zone (e.g. Z)"
        ) from None
    if seconds is None:
        raise _invalid_time(option, text, "is not a time")
    if math.isnan(seconds):
        raise _invalid_time(option, text, "is not a number")
    if not _EARLIEST_S <= seconds <= _LATEST_S:
        raise _invalid_time(option, text, "is out of range (years 1 to 9999)")
    return seconds


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        type=Path,
        metavar="FILE",
        help="telemetry store (default: $GPUWARDEN_DB, else "
        "$XDG_DATA_HOME/gpuwarden/telemetry.db or ~/.local/share/gpuwarden/telemetry.db)",
    )
    parser.add_argument("--since", metavar="WHEN", help=f"from this time: {WHEN_HELP}")
    parser.add_argument("--until", metavar="WHEN", help="up to this time (same forms)")
    parser.add_argument(
        "--gpu",
        action="append",
        metavar="INDEX|UUID",
        help="only this GPU (repeatable): its index or UUID",
    )
    parser.add_argument(
        "--run",
        type=positive_int,
        metavar="ID",
        help="only the readings of this `record` run (its id is printed when it ends; the "
        "table's run column); raw readings only",
    )
    parser.add_argument(
        "--resolution",
        choices=["raw", "1m", "1h"],
        default="raw",
        help="raw readings, or 1-minute / 1-hour rollups over every run (default: raw)",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json", action="store_true", help="print JSON (schema gpuwarden.history/1)"
    )
    output.add_argument("--csv", action="store_true", help="print CSV, one row per sample")


# An index longer than this is no GPU's (and int() refuses strings past 4300 digits).
_INDEX_DIGITS = 9


# A --gpu value an error repeats whole: any GPU's id (a MIG device's "MIG-GPU-<uuid>/1/0" too).
_GPU_ID_CHARS = 60


def _select_uuids(wanted: list[str], devices: tuple[DeviceInfo, ...]) -> list[str]:
    """UUIDs for --gpu values: a recorded UUID, or every recorded device with that index."""
    uuids: list[str] = []
    for item in wanted:
        key = item.strip()
        matches = [d.uuid for d in devices if d.uuid.lower() == key.lower()]
        if not matches and key.isascii() and key.isdecimal() and len(key) <= _INDEX_DIGITS:
            matches = [d.uuid for d in devices if d.index == int(key)]
        if not matches:
            known = ", ".join(sorted({f"{d.index} ({d.uuid})" for d in devices})) or "none"
            raise InputError(
                f"--gpu {quoted(item, _GPU_ID_CHARS)}: no such GPU in the store",
                reference="gpu-not-recorded",
                hint=f"recorded GPUs: {known}",
            )
        uuids.extend(u for u in matches if u not in uuids)
    return uuids


def _check_run(run: int, runs: list[RunRecord]) -> None:
    if any(r.id == run for r in runs):
        return
    recent = ", ".join(str(r.id) for r in runs[-10:]) or "none"
    raise InputError(
        f"--run {run}: no such run in the store",
        reference="run-not-recorded",
        hint=f"recorded runs (the last 10): {recent}",
    )


def run(args: argparse.Namespace) -> int:
    from gpuwarden.report import history as report
    from gpuwarden.telemetry.store import Store, default_db_path

    now_s = time.time()
    since_s = None if args.since is None else parse_when(args.since, now_s=now_s, option="--since")
    until_s = None if args.until is None else parse_when(args.until, now_s=now_s, option="--until")
    path = args.db if args.db is not None else default_db_path()
    with Store.open(path, readonly=True) as store:
        uuids = _select_uuids(args.gpu, store.devices()) if args.gpu else None
        if args.run is not None:
            _check_run(args.run, store.runs())
        selection = (since_s, until_s, uuids, args.resolution)
        if args.json or args.csv:
            rows = store.iter_stored_samples(*selection, run=args.run)
            if args.json:
                report.print_history_json(rows, db=str(path), resolution=args.resolution)
            else:
                report.print_history_csv(rows)
            return 0
        # The table shows the newest TABLE_ROWS: count the range in SQLite, decode only those
        # (an hour of 8 GPUs: ~1 s to decode every sample, ~0.1 s for the shown 2000).
        total = store.count(*selection, run=args.run)
        shown = store.iter_stored_samples(*selection, last=report.TABLE_ROWS, run=args.run)
        report.print_history_table(shown, total=total, db=str(path), resolution=args.resolution)
    return 0
