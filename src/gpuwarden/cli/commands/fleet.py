"""`gpuwarden fleet report`: GPU-hours, idle GPU-hours and what they cost, by namespace, node,
model and pod, with the GPUs that need attention — from Prometheus or VictoriaMetrics.

Exit 0 whenever a report was made (the findings are in it); 2 for bad arguments or a window with
no GPU series; 4 when the server cannot be reached or refuses the queries.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwarden.cli.options import add_json_flag, number, positive_int, prometheus_url
from gpuwarden.errors import GpuwardenError, InputError

if TYPE_CHECKING:
    from gpuwarden.fleet.model import Window
    from gpuwarden.fleet.pricing import PriceBook

MAX_PRICES_BYTES = 1024 * 1024
MAX_TOKEN_BYTES = 64 * 1024
_PRICES_HELP = (
    'contract prices: a TOML file with a [usd_per_gpu_hour] table of "GPU model" = USD (a model '
    "is a catalog key, name, or the modelName dcgm-exporter reports), and optional "
    "default_usd_per_gpu_hour and usd_per_kwh"
)


_percent = number("a percentage above 0 and at most 100", lambda v: 0 < v <= 100)
_price = number("a price in USD, 0 or more", lambda v: v >= 0)
# A day: far above any server's query timeout (Prometheus' --query.timeout defaults to 2 min);
# beyond, the socket's deadline overflows the platform's time_t.
MAX_TIMEOUT_S = 86_400.0
_seconds = number(
    f"a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}",
    lambda v: 0 < v <= MAX_TIMEOUT_S,
    noun="number of seconds",
)


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    report = sub.add_parser(
        "report",
        help="GPU-hours, idle GPU-hours and dollars by namespace, node, model and pod; findings",
        description="Read a window of dcgm-exporter's (or gpuwarden export's) metrics from "
        "Prometheus or VictoriaMetrics: GPU-hours, idle GPU-hours (below --idle-below on the "
        "1-minute grid), held by pods or unallocated, dollars and energy, by namespace, node, "
        "model and pod; and the GPUs that need attention (thermal outliers, Xid and ECC "
        "incidents, RMA candidates, stragglers, low-utilization pods).",
    )
    report.add_argument(
        "--prometheus",
        required=True,
        metavar="URL",
        help="the server's base URL, e.g. http://prometheus:9090 (VictoriaMetrics: :8428)",
    )
    when = report.add_mutually_exclusive_group(required=True)
    when.add_argument("--range", metavar="DURATION", help="the last DURATION, e.g. 24h, 7d, 90m")
    when.add_argument("--start", metavar="T", help="RFC 3339 time, date or Unix seconds")
    report.add_argument("--end", metavar="T", help="with --start (default: now)")
    price = report.add_mutually_exclusive_group()
    price.add_argument(
        "--price-per-gpu-hour", type=_price, metavar="USD", help="one flat price for every GPU"
    )
    price.add_argument("--prices", type=Path, metavar="FILE", help=_PRICES_HELP)
    report.add_argument(
        "--price-per-kwh", type=_price, metavar="USD", help="what the energy costs (default: none)"
    )
    report.add_argument(
        "--idle-below",
        type=_percent,
        default=5.0,
        metavar="PCT",
        help="a GPU minute below this utilisation is idle (default 5)",
    )
    report.add_argument(
        "--selector",
        default="",
        metavar="MATCHERS",
        help="PromQL label matchers added to every query, e.g. 'cluster=\"prod\"'",
    )
    report.add_argument(
        "--bearer-token-file", type=Path, metavar="FILE", help="send this token to the server"
    )
    report.add_argument(
        "--timeout",
        type=_seconds,
        default=120.0,
        metavar="S",
        help="seconds to wait for one answer (default 120)",
    )
    report.add_argument(
        "--parallel",
        type=positive_int,
        default=4,
        metavar="N",
        help="queries in flight at once (default 4; 1 spares a busy server)",
    )
    report.add_argument(
        "--html", type=Path, metavar="FILE", help="also write a self-contained page with plots"
    )
    report.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="write the JSON document (what `remediate --findings` reads) to FILE instead of "
        "stdout, whole or not at all",
    )
    add_json_flag(report)


def _read_small(path: Path, limit: int, option: str, reference: str) -> str:
    from gpuwarden.files import CaptureTooLargeError, read_capped

    try:
        data, _ = read_capped(str(path), limit)
    except OSError as exc:
        raise InputError(
            f"{option} {path}: cannot be read ({exc.strerror or exc})",
            reference=reference,
            hint="check the path and its permissions",
        ) from None
    except CaptureTooLargeError:
        raise InputError(
            f"{option} {path}: larger than {limit // 1024} KiB",
            reference=reference,
            hint=f"{option} takes a small text file",
        ) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(
            f"{option} {path}: not UTF-8 text",
            reference=reference,
            hint=f"{option} takes a text file",
        ) from None


def _prices(args: argparse.Namespace) -> PriceBook:
    from gpuwarden.fleet import pricing

    if args.price_per_gpu_hour is not None:
        return pricing.flat(args.price_per_gpu_hour, args.price_per_kwh)
    if args.prices is None:
        return pricing.catalog(args.price_per_kwh)
    text = _read_small(args.prices, MAX_PRICES_BYTES, "--prices", "fleet-prices-invalid")
    try:
        book = pricing.parse_prices(text)
    except GpuwardenError as exc:
        raise exc.about(f"--prices {args.prices}") from None
    if args.price_per_kwh is not None:
        book = pricing.with_energy_price(book, args.price_per_kwh)
    return book


def _token(path: Path) -> str:
    token = _read_small(path, MAX_TOKEN_BYTES, "--bearer-token-file", "fleet-token-invalid").strip()
    printable = all(" " <= c <= "~" for c in token)  # an HTTP header carries visible ASCII
    if not token or not printable:
        raise InputError(  # never print the token itself
            f"--bearer-token-file {path}: "
            + ("empty" if not token else "the token holds a character no HTTP header can carry"),
            reference="fleet-token-invalid",
            hint="the file holds the bearer token alone, on one line",
        )
    return token


def _window(args: argparse.Namespace) -> Window:
    from gpuwarden.fleet.window import make_window, parse_duration, parse_time

    if args.end is not None and args.start is None:
        raise InputError(
            "--end needs --start",
            reference="fleet-window-missing",
            hint="give --start T --end T, or --range 24h for the last 24 hours",
        )
    return make_window(
        time.time(),
        range_s=parse_duration(args.range) if args.range is not None else None,
        start_s=parse_time(args.start, "--start") if args.start is not None else None,
        end_s=parse_time(args.end, "--end") if args.end is not None else None,
    )


def run(args: argparse.Namespace) -> int:
    from gpuwarden.fleet.analyze import analyze
    from gpuwarden.fleet.collect import collect
    from gpuwarden.fleet.prometheus import PrometheusClient
    from gpuwarden.report import fleet as report

    url = prometheus_url(args.prometheus)
    window = _window(args)
    prices = _prices(args)
    if args.html is not None:
        report.check_html_path(args.html)
    if args.output is not None:
        report.check_output(args.output)
    token = _token(args.bearer_token_file) if args.bearer_token_file is not None else None
    client = PrometheusClient(
        url, timeout_s=args.timeout, bearer_token=token, on_retry=report.retry_notice
    )
    with report.query_progress() as progress:
        data = collect(
            client,
            window,
            selector=args.selector,
            idle_below_percent=args.idle_below,
            progress=progress,
            parallel=args.parallel,
        )
    result = analyze(data, prices)
    if args.output is not None:
        report.write_fleet_json(result, args.output)
        print(f"wrote {args.output}", file=sys.stderr)
    elif args.json:
        report.print_fleet_json(result)
    else:
        report.print_fleet_report(result)
    if args.html is not None:
        report.write_fleet_html(result, args.html)
        print(f"wrote {args.html}", file=sys.stderr)
    return 0
