"""`gpuwarden remediate`: findings → actions on Kubernetes nodes (cordon, drain, taint, label,
annotate, webhook) by a YAML policy, inside its limits. A dry run unless --apply.

Exit 0 when nothing failed; 1 when a person must look: an action failed, the circuit breaker is
open, the limits deferred every quarantine (a note starting ``all-deferred:``), or a finding names
a node the cluster does not have (``unknown-node:``) — one code, as README's exit table gives 1
to "not caused by the input", and the note says which; 2 bad input (policy, findings,
kubeconfig); 4 the cluster cannot be reached or refuses the reads the plan needs."""

from __future__ import annotations

import argparse

from gpuwarden.cli.options import add_json_flag, bounded_seconds

EXIT_NEEDS_A_PERSON = 1


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy", required=True, metavar="FILE", help="the YAML policy (docs/remediate.md)"
    )
    parser.add_argument(
        "--findings",
        required=True,
        action="append",
        metavar="FILE",
        help="a `gpuwarden fleet report --json` or `gpuwarden doctor --json` document; repeatable",
    )
    parser.add_argument("--kubeconfig", metavar="FILE", help="default: $KUBECONFIG, ~/.kube/config")
    parser.add_argument("--context", metavar="NAME", help="a context of the kubeconfig")
    parser.add_argument(
        "--apply",
        action="store_true",
        help="act; without it, a dry run: every write is sent with dryRun=All (the server "
        "validates it and stores nothing) and webhooks are not sent",
    )
    parser.add_argument(
        "--audit-log",
        metavar="FILE",
        help="append every API write, every action and its outcome as JSON lines",
    )
    parser.add_argument(
        "--node",
        metavar="NAME",
        help="the Kubernetes node of doctor documents (in a pod, doctor's host is the pod's "
        "name: pass the downward API's spec.nodeName)",
    )
    parser.add_argument(
        "--allow-simulated",
        action="store_true",
        help="also act on findings of simulated documents (doctor --backend sim): demos only",
    )
    parser.add_argument(
        "--request-timeout",
        type=bounded_seconds(1, 600),
        default=30.0,
        metavar="SECONDS",
        help="per API request (default 30)",
    )
    add_json_flag(parser)


def run(args: argparse.Namespace) -> int:
    from gpuwarden.remediate.run import RemediateOptions, remediate
    from gpuwarden.report import remediate as report

    options = RemediateOptions(
        policy=args.policy,
        findings=tuple(args.findings),
        kubeconfig=args.kubeconfig,
        context=args.context,
        apply=args.apply,
        audit_log=args.audit_log,
        node=args.node,
        allow_simulated=args.allow_simulated,
        request_timeout_s=args.request_timeout,
    )
    progress = None if args.json else report.progress_printer()
    result = remediate(options, progress=progress)
    (report.print_remediation_json if args.json else report.print_remediation_table)(result)
    return EXIT_NEEDS_A_PERSON if result.needs_a_person else 0
