"""`gpuwarden catalog models|gpus|instances`: what gpuwarden knows."""

from __future__ import annotations

import argparse

from gpuwarden.cli.options import add_json_flag


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=["models"], help="which catalog to list")
    add_json_flag(parser)


def run(args: argparse.Namespace) -> int:
    from gpuwarden.catalog import model_names, resolve_model
    from gpuwarden.report import catalog as report

    specs = [resolve_model(name) for name in model_names()]
    if args.json:
        report.print_models_json(specs)
    else:
        report.print_models_table(specs)
    return 0
