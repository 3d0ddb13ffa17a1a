"""`gpuwarden catalog models|gpus|instances`: what gpuwarden knows."""

from __future__ import annotations

import argparse

from gpuwarden.cli.options import add_json_flag, naming


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "what", choices=["gpus", "instances", "models"], help="which catalog to list"
    )
    parser.add_argument(
        "--gpu",
        type=naming("GPU", "e.g. 'H100', 'A100 80GB'"),
        metavar="NAME",
        help="only this GPU (gpus) or instances carrying it (instances); e.g. 'H100', 'A100 80GB'",
    )
    add_json_flag(parser)


def run(args: argparse.Namespace) -> int:
    from gpuwarden import catalog
    from gpuwarden.report import catalog as report

    if args.what == "models":
        specs = [catalog.resolve_model(name) for name in catalog.model_names()]
        (report.print_models_json if args.json else report.print_models_table)(specs)
    elif args.what == "gpus":
        gpus = [catalog.resolve_gpu(args.gpu)] if args.gpu is not None else catalog.gpu_catalog()
        (report.print_gpus_json if args.json else report.print_gpus_table)(gpus)
    else:
        instances = (
            catalog.instances_for_gpu(args.gpu)
            if args.gpu is not None
            else catalog.instance_catalog()
        )
        (report.print_instances_json if args.json else report.print_instances_table)(instances)
    return 0
