"""`gpuwarden doctor`: is this node healthy? Live, or from saved captures."""

from __future__ import annotations

import argparse

from gpuwarden.cli.options import add_json_flag, bounded_seconds, naming, positive_int
from gpuwarden.errors import InvalidConfigError

EXIT_FAILED_CHECK = 1  # --fail-on: a finding reached the severity (cron jobs, probes)


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from",
        dest="sources",
        action="append",
        type=naming("file or directory"),
        metavar="FILE|DIR",
        help="judge saved outputs instead of this node: nvidia-smi (-q, -q -x, --query-gpu CSV, "
        "dmon, the table), saved dcgm-exporter scrapes, `nvidia-smi topo -m`, "
        "`nvidia-smi nvlink -s` / `nvlink -e` (two -e readings in order: their growth), "
        "`dcgmi diag`, nvidia-bug-report logs, kernel logs (dmesg, journalctl -k, kern.log), "
        "/proc/driver/nvidia/version; a directory is searched two levels deep; repeatable",
    )
    parser.add_argument(
        "--backend",
        choices=("nvml", "smi", "sim"),
        help="live only: where GPU readings come from (default: NVML, else nvidia-smi); "
        "sim simulates a node (labelled SIMULATED)",
    )
    parser.add_argument(
        "--scenario", metavar="NAME", help="with --backend sim: the scenario to simulate"
    )
    parser.add_argument(
        "--readings",
        type=positive_int,
        default=1,
        metavar="N",
        help="live only: take N readings --interval apart and judge them as a window "
        "(utilization verdicts need a series; default 1)",
    )
    parser.add_argument(
        "--interval",
        type=bounded_seconds(0.05, 3600.0),
        default=1.0,
        metavar="SECONDS",
        help="between --readings",
    )
    parser.add_argument(
        "--expect-gpus", type=positive_int, metavar="N", help="the GPUs this node should have"
    )
    parser.add_argument("--thresholds", metavar="FILE", help="TOML overriding health thresholds")
    parser.add_argument(
        "--show-thresholds",
        action="store_true",
        help="print every health threshold (with --thresholds: the values in effect), its "
        "default and where it comes from, then exit",
    )
    parser.add_argument(
        "--no-kernel-log",
        action="store_true",
        help="live only: do not read dmesg / journalctl -k",
    )
    parser.add_argument(
        "--fail-on",
        choices=("warning", "critical"),
        help="exit 1 when a finding reaches this severity (cron jobs, Kubernetes probes)",
    )
    add_json_flag(parser)


def _check_args(args: argparse.Namespace) -> None:
    live_only = [
        name
        for name, given in (
            ("--backend", args.backend is not None),
            ("--readings", args.readings != 1),
            ("--no-kernel-log", args.no_kernel_log),
        )
        if given
    ]
    if args.sources and live_only:
        raise InvalidConfigError(
            f"{', '.join(live_only)} apply to a live check, not to --from captures",
            reference="doctor-live-option-with-captures",
            hint="drop them, or drop --from to check this node",
        )
    if args.scenario is not None and args.backend != "sim":
        raise InvalidConfigError(
            "--scenario needs --backend sim",
            reference="sim-option-without-sim",
            hint="add --backend sim, or drop --scenario",
        )


def run(args: argparse.Namespace) -> int:
    from gpuwarden.doctor.node import DoctorOptions, diagnose_captures, diagnose_live
    from gpuwarden.doctor.thresholds import load_thresholds
    from gpuwarden.types.health import Severity

    _check_args(args)
    thresholds = load_thresholds(args.thresholds)
    if args.show_thresholds:
        from gpuwarden.report.doctor import print_thresholds

        print_thresholds(thresholds, as_json=args.json)
        return 0
    options = DoctorOptions(
        expect_gpus=args.expect_gpus,
        thresholds=thresholds,
        read_kernel_log=not args.no_kernel_log,
    )
    if args.sources:
        result = diagnose_captures(args.sources, options)
    else:
        result = diagnose_live(
            options,
            backend_name=args.backend,
            scenario=args.scenario,
            readings=args.readings,
            interval_s=args.interval,
        )
    # the JSON document's module does not import rich: only the tables need it
    if args.json:
        from gpuwarden.report.doctor_document import print_doctor_json

        print_doctor_json(result)
    else:
        from gpuwarden.report.doctor import print_doctor_table

        print_doctor_table(result)
    if args.fail_on is not None:
        wanted = Severity(args.fail_on).rank
        # a node whose GPUs could not be read at all fails a probe: no evidence is no pass
        if not result.judged or (result.verdict is not None and result.verdict.rank >= wanted):
            return EXIT_FAILED_CHECK
    return 0
