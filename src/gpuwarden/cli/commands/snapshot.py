"""`gpuwarden snapshot`: one reading of every GPU, from NVML, nvidia-smi, dcgm-exporter or sim,
judged by the health rules (a saved series — an nvidia-smi `-l` log, dmon — is judged as a
window, so the windowed verdicts see all of it)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from gpuwarden.cli.options import add_json_flag, integer, positive_int, real

if TYPE_CHECKING:
    from gpuwarden.telemetry.backend import Backend
    from gpuwarden.types.telemetry import Snapshot

SIM_DEFAULT_AT_S = 45.0
SIM_MAX_AT_S = 365 * 86_400.0  # the simulated clock reads now + --at: keep it a real date


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    """--backend/--from/--scenario/--seed/--gpus, shared with `record`."""
    from gpuwarden.telemetry.open import BACKENDS

    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        help="where readings come from (default: nvml if it initialises, else nvidia-smi)",
    )
    parser.add_argument(
        "--from",
        dest="source",
        metavar="FILE|URL",
        help="smi: a saved nvidia-smi output ('-' = stdin); dcgm: a dcgm-exporter URL or saved "
        "scrape; replay: a recorded database",
    )
    parser.add_argument(
        "--scenario",
        metavar="NAME",
        help="sim only: the scenario to simulate (default healthy-training); "
        "`gpuwarden snapshot --backend sim --scenario list` names them all",
    )
    parser.add_argument("--seed", type=integer, default=0, help="sim only: random seed (default 0)")
    parser.add_argument(
        "--gpus", type=positive_int, metavar="N", help="sim only: number of simulated GPUs"
    )


def register(parser: argparse.ArgumentParser) -> None:
    add_backend_options(parser)
    parser.add_argument(
        "--at",
        type=real,
        default=SIM_DEFAULT_AT_S,
        metavar="SECONDS",
        help=f"sim only: read the scenario this far into its run (default {SIM_DEFAULT_AT_S:g}: "
        "most scenarios' faults have happened by then)",
    )
    parser.add_argument(
        "--query-fields",
        type=field_list,
        metavar="A,B,C",
        help="smi only: the columns of a CSV saved with --format=csv,noheader, i.e. the names "
        "given to nvidia-smi's --query-gpu= (or --query-compute-apps=)",
    )
    parser.add_argument(
        "--thresholds",
        metavar="FILE",
        help="a TOML file overriding health thresholds (README: verdict codes, health thresholds)",
    )
    add_json_flag(parser)


def field_list(text: str) -> tuple[str, ...]:
    fields = tuple(f.strip() for f in text.split(",") if f.strip())
    if not fields:
        raise argparse.ArgumentTypeError("expected comma-separated field names")
    return fields


def offset_clock(start: float, offset_s: float) -> Callable[[], float]:
    """A clock that says ``start`` once (when the simulator opens), then ``start + offset_s``."""
    calls = [0]

    def clock() -> float:
        calls[0] += 1
        return start if calls[0] == 1 else start + offset_s

    return clock


@runtime_checkable
class HoldsSeries(Protocol):
    """A backend over a saved series (an nvidia-smi `-l` log, dmon) that can give its newest."""

    def latest(self) -> Snapshot: ...


@runtime_checkable
class SavedSeries(Protocol):
    """A backend over a saved file that can give every reading in it, oldest first."""

    def snapshots(self) -> tuple[Snapshot, ...]: ...


@runtime_checkable
class NamesHosts(Protocol):
    """A backend whose input names each GPU's host (a dcgm scrape of several nodes)."""

    def device_hosts(self) -> dict[str, str]: ...


def _newest_reading(backend: Backend) -> Snapshot:
    """A snapshot of a saved series is its newest reading, not its first."""
    if isinstance(backend, HoldsSeries):
        return backend.latest()
    return backend.read()


def _readings(backend: Backend) -> tuple[Snapshot, ...]:
    """Every reading of a saved series (the newest last), else the one newest reading."""
    if isinstance(backend, SavedSeries) and backend.snapshots():
        return backend.snapshots()
    return (_newest_reading(backend),)


def run(args: argparse.Namespace) -> int:
    from gpuwarden.doctor.thresholds import load_thresholds
    from gpuwarden.errors import InvalidConfigError
    from gpuwarden.health.evaluate import evaluate_readings
    from gpuwarden.telemetry.open import open_backend

    if args.backend == "sim" and args.scenario == "list":
        from gpuwarden.report.snapshot import print_scenarios
        from gpuwarden.telemetry.sim import SCENARIOS

        print_scenarios(SCENARIOS, as_json=args.json)
        return 0
    if args.backend != "sim" and args.at != SIM_DEFAULT_AT_S:
        raise InvalidConfigError(
            "--at only applies to --backend sim",
            reference="sim-option-without-sim",
            hint="add --backend sim, or drop --at",
        )
    if not 0 <= args.at <= SIM_MAX_AT_S:  # NaN fails this too
        raise InvalidConfigError(
            f"--at {args.at:.10g}: a time into the scenario is 0 to {SIM_MAX_AT_S:,.0f} seconds",
            reference="invalid-sim-time",
            hint=f"pass --at between 0 and {SIM_MAX_AT_S:.0f} (a year; every scenario's faults "
            "happen in its first minutes)",
        )
    thresholds = load_thresholds(args.thresholds)
    backend = open_backend(
        args.backend,
        args.source,
        scenario=args.scenario,
        seed=args.seed,
        gpus=args.gpus,
        clock=offset_clock(time.time(), args.at),
        query_fields=args.query_fields,
    )
    try:
        readings = _readings(backend)
        hosts = backend.device_hosts() if isinstance(backend, NamesHosts) else None
    finally:
        backend.close()
    health = evaluate_readings(readings, thresholds=thresholds)
    # the JSON document's module does not import rich: only the tables need it
    if args.json:
        from gpuwarden.report.snapshot_document import print_snapshot_json

        print_snapshot_json(readings[-1], health, hosts)
    else:
        from gpuwarden.report.snapshot import print_snapshot_table

        print_snapshot_table(readings[-1], health, hosts)
    return 0
