"""`gpuwarden watch`: every GPU live, judged by the health rules over a sliding window."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from gpuwarden.cli.live_backend import add_live_backend_options, open_live_backend
from gpuwarden.cli.options import add_json_flag, bounded_seconds, positive_int

if TYPE_CHECKING:
    from gpuwarden.doctor.watch import Judge
    from gpuwarden.types.telemetry import Snapshot

MIN_INTERVAL_S = 0.1
MAX_WINDOW_S = 3600.0


def register(parser: argparse.ArgumentParser) -> None:
    add_live_backend_options(parser)
    parser.add_argument(
        "--interval",
        type=bounded_seconds(MIN_INTERVAL_S, 3600.0),
        default=1.0,
        metavar="SECONDS",
        help="time between readings (default 1)",
    )
    parser.add_argument(
        "--window",
        type=bounded_seconds(1.0, MAX_WINDOW_S),
        default=60.0,
        metavar="SECONDS",
        help="how much history the windowed verdicts (low utilization, fake load, data "
        "starvation, stragglers, ...) judge (default 60)",
    )
    parser.add_argument(
        "--thresholds",
        metavar="FILE",
        help="a TOML file overriding health thresholds (README: verdict codes, health thresholds)",
    )
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument(
        "--once", action="store_true", help="one reading, one frame, then exit (for scripts)"
    )
    stop.add_argument("--count", type=positive_int, metavar="N", help="stop after N readings")
    stop.add_argument(
        "--duration",
        type=bounded_seconds(MIN_INTERVAL_S, 10 * 365 * 86400.0),
        metavar="SECONDS",
        help="stop after this long (default: until Ctrl-C)",
    )
    add_json_flag(parser)


def _judge(thresholds_path: str | None) -> Judge:
    from gpuwarden.doctor.thresholds import load_thresholds
    from gpuwarden.doctor.watch import health_judge

    return health_judge(load_thresholds(thresholds_path))


def run(args: argparse.Namespace) -> int:
    from gpuwarden.doctor.watch import Watcher
    from gpuwarden.report.watch import WatchView
    from gpuwarden.telemetry.collector import Collector

    watcher = Watcher(_judge(args.thresholds), window_s=args.window)
    backend = open_live_backend(args)
    try:
        collector = Collector(backend, interval_s=args.interval)
        first = collector.poll()  # a backend that cannot start fails here, before the view
        with WatchView(as_json=args.json, live=False if args.once else None) as view:
            view.show(watcher.update(first))
            if args.once:
                return 0
            readings = [1]
            deadline = None if args.duration is None else time.monotonic() + args.duration

            def done() -> bool:
                if args.count is not None and readings[0] >= args.count:
                    return True
                return deadline is not None and time.monotonic() >= deadline

            def sink(snapshot: Snapshot) -> None:
                readings[0] += 1
                view.show(watcher.update(snapshot))

            try:
                collector.run(until=done, sink=sink)
            except KeyboardInterrupt:
                return 0  # Ctrl-C is how a live view ends
    finally:
        backend.close()
    return 0
