"""`gpuwarden history`: read back what `gpuwarden record` stored."""

from __future__ import annotations

import argparse
import re
import time
from datetime import datetime
from pathlib import Path

from gpuwarden.errors import InputError
from gpuwarden.types.telemetry import DeviceInfo

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
WHEN_HELP = (
    "10m, 2h, 1d (ago), ISO-8601 (2026-07-14T08:00, local time unless it has a zone) "
    "or Unix seconds"
)


def parse_when(text: str, *, now_s: float, option: str) -> float:
    """A point in time as Unix seconds: relative to ``now_s``, ISO-8601 or Unix seconds."""
    value = text.strip()
    relative = _RELATIVE.match(value)
    if relative:
        return now_s - float(relative[1]) * _UNIT_S[relative[2]]
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"{option} {text!r} is not a time",
            reference="invalid-time",
            hint=f"use {WHEN_HELP}",
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # naive = the machine's local time, as `date` prints it
    return moment.timestamp()


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
        "--resolution",
        choices=["raw", "1m", "1h"],
        default="raw",
        help="raw readings, or 1-minute / 1-hour rollups (default: raw)",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json", action="store_true", help="print JSON (schema gpuwarden.history/1)"
    )
    output.add_argument("--csv", action="store_true", help="print CSV, one row per sample")


def _select_uuids(wanted: list[str], devices: tuple[DeviceInfo, ...]) -> list[str]:
    """UUIDs for --gpu values: a recorded UUID, or every recorded device with that index."""
    uuids: list[str] = []
    for item in wanted:
        key = item.strip()
        matches = [d.uuid for d in devices if d.uuid.lower() == key.lower()]
        if not matches and key.isdecimal():
            matches = [d.uuid for d in devices if d.index == int(key)]
        if not matches:
            known = ", ".join(sorted({f"{d.index} ({d.uuid})" for d in devices})) or "none"
            raise InputError(
                f"--gpu {item!r}: no such GPU in the store",
                reference="gpu-not-recorded",
                hint=f"recorded GPUs: {known}",
            )
        uuids.extend(u for u in matches if u not in uuids)
    return uuids


def run(args: argparse.Namespace) -> int:
    from gpuwarden.report import history as report
    from gpuwarden.telemetry.store import Store, default_db_path

    now_s = time.time()
    since_s = None if args.since is None else parse_when(args.since, now_s=now_s, option="--since")
    until_s = None if args.until is None else parse_when(args.until, now_s=now_s, option="--until")
    path = args.db if args.db is not None else default_db_path()
    with Store.open(path, readonly=True) as store:
        uuids = _select_uuids(args.gpu, store.devices()) if args.gpu else None
        if args.json or args.csv:
            rows = store.iter_stored_samples(since_s, until_s, uuids, args.resolution)
            if args.json:
                report.print_history_json(rows, db=str(path), resolution=args.resolution)
            else:
                report.print_history_csv(rows)
            return 0
        # The table shows the newest TABLE_ROWS: count the range in SQLite, decode only those
        # (an hour of 8 GPUs: ~1 s to decode every sample, ~0.1 s for the shown 2000).
        total = store.count(since_s, until_s, uuids, args.resolution)
        shown = store.iter_stored_samples(
            since_s, until_s, uuids, args.resolution, last=report.TABLE_ROWS
        )
        report.print_history_table(shown, total=total, db=str(path), resolution=args.resolution)
    return 0
