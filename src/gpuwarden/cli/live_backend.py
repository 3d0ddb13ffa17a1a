"""The options and the opening of a backend that is read over time (`record`, `watch`,
`export`): the backend options of `snapshot` plus the simulator's speed, checked once."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpuwarden.cli.commands.snapshot import add_backend_options
from gpuwarden.cli.options import bounded_seconds
from gpuwarden.errors import InvalidConfigError

if TYPE_CHECKING:
    from gpuwarden.telemetry.backend import Backend


def add_live_backend_options(parser: argparse.ArgumentParser) -> None:
    add_backend_options(parser)
    parser.add_argument(
        "--sim-speed",
        type=bounded_seconds(0.01, 1000.0),
        default=1.0,
        metavar="X",
        help="sim only: simulated seconds per real second (default 1; 20 shows a fault fast; "
        "readings keep real timestamps, so a windowed verdict still needs its window of real "
        "time)",
    )


def open_live_backend(args: argparse.Namespace) -> Backend:
    """The backend the options name; --sim-speed only with --backend sim."""
    from gpuwarden.telemetry.open import open_backend

    if args.backend != "sim" and args.sim_speed != 1.0:
        raise InvalidConfigError(
            "--sim-speed only applies to --backend sim",
            reference="sim-option-without-sim",
            hint="add --backend sim, or drop --sim-speed",
        )
    return open_backend(
        args.backend,
        args.source,
        scenario=args.scenario,
        seed=args.seed,
        gpus=args.gpus,
        sim_speed=args.sim_speed,
    )
