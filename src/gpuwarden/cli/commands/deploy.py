"""`gpuwarden deploy prometheus-rules|alertmanager|dcgm-counters|grafana|k8s|remediate`: what a
fleet loads to watch its GPUs — alert and recording rules, Alertmanager's routing and inhibition
of them, the dcgm-exporter counters they read, Grafana dashboards by failure mode (files or the
sidecar's ConfigMaps), the exporter's Kubernetes manifests — and to act on what it sees:
remediation as a CronJob with its RBAC. Each writes to stdout, or to --output."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuwarden.cli.options import bounded_seconds
from gpuwarden.errors import EnvironmentProblemError


def register(parser: argparse.ArgumentParser) -> None:
    what = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    rules = what.add_parser("prometheus-rules", help="alerting and recording rules")
    rules.add_argument(
        "--format",
        choices=["rules", "prometheusrule"],
        default="rules",
        help="a Prometheus rule file (default), or the Prometheus Operator's PrometheusRule",
    )
    rules.add_argument(
        "--namespace",
        default="monitoring",
        type=_namespace,
        help="prometheusrule: its namespace (default monitoring)",
    )
    rules.add_argument(
        "--label",
        action="append",
        default=[],
        type=_label,
        metavar="KEY=VALUE",
        help="prometheusrule: a label the Operator's ruleSelector matches (kube-prometheus-stack: "
        "release=<its Helm release>); repeatable",
    )
    rules.add_argument(
        "--thresholds",
        metavar="FILE",
        help="a TOML file overriding health thresholds (the same file `watch` and `export` read)",
    )
    rules.add_argument(
        "--runbook-url",
        type=_runbook_url,
        metavar="PATTERN",
        help="each alert's runbook_url where no public page has one (the Xid alerts keep NVIDIA's "
        "catalog): your runbooks' URL with {alert}, {alert_lower}, {code} or {group} filled in, "
        "e.g. https://wiki.example.com/gpu/{alert_lower}",
    )
    rules.add_argument(
        "--tests",
        metavar="FILE",
        help="also write promtool unit tests of every alert (`promtool test rules FILE`); the "
        "rule file is --output, which it then needs",
    )
    _output(rules, "FILE")
    _register_alertmanager(what)
    _register_dcgm_counters(what)
    _register_grafana(what)

    k8s = what.add_parser("k8s", help="DaemonSet, Service, ServiceMonitor and ServiceAccount")
    k8s.add_argument(
        "--namespace", default="gpuwarden", type=_namespace, help="(default gpuwarden)"
    )
    k8s.add_argument(
        "--image", type=_image, help="the exporter's image (default gpuwarden:<version>)"
    )
    k8s.add_argument(
        "--backend", choices=["nvml", "smi"], default="nvml", help="how it reads the GPUs"
    )
    k8s.add_argument(
        "--no-pod-labels",
        action="store_true",
        help="no namespace/pod/container labels: the pod then runs as a non-root user, without "
        "the kubelet's pod-resources socket",
    )
    k8s.add_argument(
        "--runtime-class",
        default="nvidia",
        type=_runtime_class,
        metavar="NAME",
        help="the pod's runtimeClassName (default nvidia; 'none' where nvidia is the default "
        "runtime)",
    )
    k8s.add_argument(
        "--service-monitor-label",
        action="append",
        default=[],
        type=_label,
        metavar="KEY=VALUE",
        help="a label the Operator's serviceMonitorSelector matches; repeatable",
    )
    k8s.add_argument(
        "--no-service-monitor",
        action="store_true",
        help="no ServiceMonitor: without the Prometheus Operator its kind is unknown and "
        "`kubectl apply` fails (scrape the headless Service's pods yourself)",
    )
    _output(k8s, "FILE")
    _register_remediate(what)


def _register_remediate(what: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    remediate = what.add_parser(
        "remediate",
        help="`gpuwarden remediate` as a CronJob, with exactly the RBAC it needs",
        description="A CronJob (concurrencyPolicy: Forbid) whose pod runs `gpuwarden fleet "
        "report --json` for the last --range, then `gpuwarden remediate` on it under --policy; "
        "its ServiceAccount, ClusterRole (nodes get/list/patch, pods get/list, pods/eviction "
        "create), Roles (the circuit breaker's ConfigMap and Lease; events create in default, for "
        "the Event on each node it acts on), the policy as a Secret, and the Namespaces first. "
        "Without --apply every run is a dry run (each write sent with dryRun=All, nothing "
        "stored): read its output (`kubectl logs job/...`) before you deploy again with --apply.",
    )
    remediate.add_argument(
        "--policy", required=True, metavar="FILE", help="the YAML policy (docs/remediate.md)"
    )
    remediate.add_argument(
        "--prometheus",
        required=True,
        metavar="URL",
        help="the Prometheus the fleet report reads, as the pod reaches it, e.g. "
        "http://prometheus-operated.monitoring:9090",
    )
    remediate.add_argument(
        "--namespace", default="gpuwarden", type=_namespace, help="(default gpuwarden)"
    )
    remediate.add_argument(
        "--image", type=_image, help="gpuwarden's image (default gpuwarden:<version>)"
    )
    remediate.add_argument(
        "--schedule",
        default="*/10 * * * *",
        metavar="CRON",
        help="when to run, in UTC: five cron fields or a macro like @hourly (default every 10 "
        "minutes)",
    )
    remediate.add_argument(
        "--range",
        default="1h",
        metavar="DURATION",
        help="the window each run's fleet report reads (default 1h)",
    )
    remediate.add_argument(
        "--apply",
        action="store_true",
        help="act; without it the CronJob only dry-runs (deploy again with --apply to opt in)",
    )
    remediate.add_argument(
        "--audit-claim",
        type=_object_name,
        metavar="PVC",
        help="a PersistentVolumeClaim to append the audit log to (default: the container's "
        "stderr, which the cluster's log collection keeps)",
    )
    remediate.add_argument(
        "--run-deadline",
        type=bounded_seconds(60, 7 * 86_400),
        metavar="SECONDS",
        help="how long one run may take before Kubernetes stops it (default: the policy's "
        "longest drain + 600 s, at least an hour); a run drains nodes one after another, so "
        "allow max_unavailable × the drain timeout on a large cluster",
    )
    _output(remediate, "FILE")


def _register_alertmanager(what: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    alertmanager = what.add_parser(
        "alertmanager",
        help="Alertmanager route, receivers and inhibit rules for gpuwarden's alerts",
        description="An Alertmanager configuration (valid alone: amtool check-config) to merge "
        "into yours: a route taking gpuwarden's alerts (failure_mode label), grouped by node and "
        "code, one receiver per severity; inhibit rules derived from the alerts: a GPU out of "
        "service mutes its own warnings, a lost GPU or an uncorrectable ECC error its node "
        "peers' performance warnings, a down, frozen or failing exporter the warnings computed "
        "from its series. Critical alerts are never muted.",
    )
    alertmanager.add_argument(
        "--webhook-url",
        required=True,
        type=_webhook_url,
        metavar="URL",
        help="where the receivers send (a webhook stub: replace them with your pager or chat "
        "receivers when you merge)",
    )
    alertmanager.add_argument(
        "--webhook-credentials-file",
        type=_credentials_file,
        metavar="PATH",
        help="the file, as the Alertmanager pod sees it (a mounted Secret), holding the "
        "receivers' bearer token: sent as 'Authorization: Bearer', never written into the "
        "configuration (Alertmanager >= 0.22)",
    )
    _output(alertmanager, "FILE")


def _register_grafana(what: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    grafana = what.add_parser(
        "grafana",
        help="dashboards by failure mode, plus an overview",
        description="Grafana dashboards as JSON files (--output DIR), or as ConfigMaps that the "
        "grafana Helm chart's dashboard sidecar loads (kube-prometheus-stack runs it): labelled "
        "grafana_dashboard=1, one dashboard each.",
    )
    grafana.add_argument(
        "--format",
        choices=["json", "configmap"],
        default="json",
        help="dashboard JSON (default), or ConfigMaps for Grafana's dashboard sidecar",
    )
    grafana.add_argument(
        "--namespace",
        default="monitoring",
        type=_namespace,
        help="configmap: the namespace (default monitoring; the sidecar searches Grafana's own "
        "unless its searchNamespace is ALL)",
    )
    grafana.add_argument(
        "--label",
        action="append",
        default=[],
        type=_label,
        metavar="KEY=VALUE",
        help="configmap: the label the sidecar selects (default grafana_dashboard=1: the chart's "
        "sidecar.dashboards.label); repeatable",
    )
    grafana.add_argument(
        "--folder",
        type=_folder,
        metavar="NAME",
        help="configmap: the Grafana folder, as an annotation (needs the chart's "
        "sidecar.dashboards.provider.foldersFromFilesStructure)",
    )
    grafana.add_argument(
        "--folder-annotation",
        type=_annotation_key,
        metavar="KEY",
        help="configmap: the annotation --folder is written to (default the sidecar's own; "
        "the chart's sidecar.dashboards.folderAnnotation where you set it)",
    )
    grafana.add_argument(
        "--output",
        "-o",
        metavar="DIR|FILE",
        help="json: a directory for the files; configmap: a file (default: stdout)",
    )


def _register_dcgm_counters(what: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    counters = what.add_parser(
        "dcgm-counters",
        help="dcgm-exporter's counters CSV with every field the rules read",
        description="dcgm-exporter's default counters plus every DCGM field an alerting or "
        "recording rule reads (its default leaves out row-remap pending, retired pages, the "
        "recovery action, the fabric manager, the PCIe link and the power limit: their alerts "
        "never fire without them). --format configmap: a ConfigMap for gpu-operator "
        "(--set dcgmExporter.config.name=<its name>).",
    )
    counters.add_argument(
        "--format",
        choices=["csv", "configmap"],
        default="csv",
        help="the CSV (dcgm-exporter -f FILE; default), or gpu-operator's ConfigMap holding it",
    )
    counters.add_argument(
        "--name", default="gpuwarden-dcgm-metrics", type=_object_name, help="configmap: its name"
    )
    counters.add_argument(
        "--namespace",
        default="gpu-operator",
        type=_namespace,
        help="configmap: gpu-operator's namespace (default gpu-operator)",
    )
    _output(counters, "FILE")


def _output(parser: argparse.ArgumentParser, metavar: str) -> None:
    parser.add_argument("--output", "-o", metavar=metavar, help="write here instead of stdout")


def _checked(problem: str | None, hint: str) -> None:
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem}: {hint}")


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def _label(text: str) -> tuple[str, str]:
    """A label of a manifest: Kubernetes refuses a key or value out of its syntax."""
    from gpuwarden.remediate import policy

    key, value = _key_value(text)
    _checked(policy.label_key_problem(key), policy.LABEL_KEY_HINT)
    _checked(policy.label_value_problem(value), policy.LABEL_VALUE_HINT)
    return key, value


def _runbook_url(text: str) -> str:
    from gpuwarden.deploy.rules import RUNBOOK_HINT, runbook_url_problem

    _checked(runbook_url_problem(text), RUNBOOK_HINT)
    return text


def _webhook_url(text: str) -> str:
    """A URL Alertmanager parses (Go's net/url) as gpuwarden wrote it: a config it refuses to
    load, or reads another URL from, is worse than a refusal here."""
    from gpuwarden.deploy.alertmanager import WEBHOOK_URL_HINT, webhook_url_problem
    from gpuwarden.transport import http_url_problem

    _checked(http_url_problem(text), "e.g. https://alerts.example.com/hooks/gpu")
    _checked(webhook_url_problem(text), WEBHOOK_URL_HINT)
    return text


def _credentials_file(text: str) -> str:
    """A token file Alertmanager can open when it sends (it is not opened when it loads)."""
    from gpuwarden.deploy.alertmanager import CREDENTIALS_FILE_HINT, credentials_file_problem

    _checked(credentials_file_problem(text), CREDENTIALS_FILE_HINT)
    return text


def _annotation_key(text: str) -> str:
    """An annotation key has a label key's syntax (a qualified name, an optional DNS prefix)."""
    from gpuwarden.remediate import policy

    _checked(policy.label_key_problem(text), policy.LABEL_KEY_HINT)
    return text


def _folder(text: str) -> str:
    """A folder the sidecar makes a directory of: one path segment, no control character, a
    name the file system holds (mkdir fails with ENAMETOOLONG beyond it, and the dashboards
    never load)."""
    from gpuwarden.files import NAME_MAX_BYTES

    if (
        not text.strip()
        or "/" in text
        or text in (".", "..")
        or not text.isprintable()
        or len(text.encode("utf-8")) > NAME_MAX_BYTES
    ):
        raise argparse.ArgumentTypeError(
            f"{text!r} is no folder name: one segment, no '/', at most "
            f"{NAME_MAX_BYTES} bytes, e.g. GPU"
        )
    return text


def _namespace(text: str) -> str:
    from gpuwarden.remediate import policy

    _checked(policy.dns_label_problem(text), policy.DNS_LABEL_HINT)
    return text


def _object_name(text: str) -> str:
    """A RuntimeClass or PersistentVolumeClaim name (a DNS subdomain)."""
    from gpuwarden.remediate import policy

    _checked(policy.dns_subdomain_problem(text), policy.DNS_SUBDOMAIN_HINT)
    return text


def _runtime_class(text: str) -> str:
    return text if text == "" else _object_name(text)  # "" as "none": no runtimeClassName


def _image(text: str) -> str:
    """A container image reference: the API server refuses surrounding white space, and the
    reference grammar (distribution/reference) has no white space or control character."""
    if not text or any(c.isspace() or not c.isprintable() for c in text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an image reference: e.g. registry.example.com/gpuwarden:0.1.0"
        )
    return text


def _write(text: str, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    path = Path(output)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise EnvironmentProblemError(
            f"cannot write {path}: {exc.strerror or exc}",
            reference="output-unwritable",
            hint="choose a writable path with --output, or leave it out for stdout",
        ) from None


def _rules(args: argparse.Namespace) -> None:
    from gpuwarden.deploy.rule_tests import rule_tests_document
    from gpuwarden.deploy.rules import prometheus_rule, rule_set, rules_document
    from gpuwarden.deploy.yaml_text import to_yaml
    from gpuwarden.doctor.thresholds import load_thresholds
    from gpuwarden.errors import InvalidConfigError

    if args.tests is not None and (args.output is None or args.format != "rules"):
        raise InvalidConfigError(
            "--tests needs the rule file written with --output (and --format rules)",
            reference="rule-tests-need-output",
            hint="add --output rules.yml, or drop --tests",
        )
    rules = rule_set(load_thresholds(args.thresholds), runbook_url_pattern=args.runbook_url)
    if args.format == "prometheusrule":
        document = prometheus_rule(rules, namespace=args.namespace, labels=args.label)
    else:
        document = rules_document(rules)
    _write(to_yaml(document), args.output)
    if args.tests is not None:
        rule_file = Path(args.output).resolve()
        tests = rule_tests_document(rules, str(rule_file))
        _write(to_yaml(tests), args.tests)


def dcgm_catalog() -> dict[str, tuple[str, str]]:
    """(metric type, help) of every DCGM field gpuwarden's exporter knows, by CSV name."""
    from gpuwarden.export import fields

    published = (*fields.DCGM_FIELDS, fields.XID_LAST, fields.FABRIC_MANAGER_STATUS)
    rows = [(f.name, f.kind.value, f.help) for f in published]
    rows += [(name, p.kind.value, p.help) for name, p in fields.PASSTHROUGH_FIELDS.items()]
    return {name: (kind, text) for name, kind, text in rows}


def _dcgm_counters(args: argparse.Namespace) -> None:
    from gpuwarden.deploy.counters import counters_configmap, counters_csv
    from gpuwarden.deploy.rules import rule_set
    from gpuwarden.deploy.yaml_text import to_yaml

    text = counters_csv(rule_set(), dcgm_catalog())
    if args.format == "configmap":
        configmap = counters_configmap(text, name=args.name, namespace=args.namespace)
        text = to_yaml(configmap)
    _write(text, args.output)


def _alertmanager(args: argparse.Namespace) -> None:
    from gpuwarden.deploy.alertmanager import MERGE_NOTE, alertmanager_config
    from gpuwarden.deploy.rules import rule_set
    from gpuwarden.deploy.yaml_text import to_yaml

    config = alertmanager_config(rule_set(), args.webhook_url, args.webhook_credentials_file)
    _write(MERGE_NOTE + to_yaml(config), args.output)


def _grafana(args: argparse.Namespace) -> None:
    from gpuwarden.deploy.grafana import (
        SIDECAR_FOLDER_ANNOTATION,
        SIDECAR_LABEL,
        dashboard_configmaps,
        dashboards,
    )
    from gpuwarden.report.output import json_text

    if args.format == "configmap":
        from gpuwarden.deploy.yaml_text import to_yaml_stream

        configmaps = dashboard_configmaps(
            namespace=args.namespace,
            labels=args.label or [SIDECAR_LABEL],
            folder=args.folder,
            folder_annotation=args.folder_annotation or SIDECAR_FOLDER_ANNOTATION,
        )
        _write(to_yaml_stream(configmaps), args.output)
        return
    documents = dashboards()
    if args.output is None:
        _write(json_text(documents, indent=2) + "\n", None)
        return
    directory = Path(args.output)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentProblemError(
            f"cannot create {directory}: {exc.strerror or exc}",
            reference="output-unwritable",
            hint="choose a writable directory with --output",
        ) from None
    for name, document in documents.items():
        _write(json_text(document, indent=2) + "\n", str(directory / name))
    from gpuwarden.report.deploy import print_written

    print_written(directory, sorted(documents))


def _k8s(args: argparse.Namespace) -> None:
    from gpuwarden.deploy.k8s import K8sOptions, manifests
    from gpuwarden.deploy.yaml_text import to_yaml_stream

    defaults = K8sOptions()
    options = K8sOptions(
        namespace=args.namespace,
        image=args.image or defaults.image,
        backend=args.backend,
        kubernetes=not args.no_pod_labels,
        runtime_class=None if args.runtime_class in ("", "none") else args.runtime_class,
        service_monitor_labels=tuple(args.service_monitor_label),
        service_monitor=not args.no_service_monitor,
    )
    _write(to_yaml_stream(manifests(options)), args.output)


def _remediate(args: argparse.Namespace) -> None:
    from gpuwarden.cli.options import prometheus_url
    from gpuwarden.deploy.remediate_k8s import (
        RemediateK8sOptions,
        check_schedule,
        manifests,
        run_deadline_s,
    )
    from gpuwarden.deploy.yaml_text import to_yaml_stream
    from gpuwarden.remediate.policy import longest_drain_s, read_policy

    text, policy = read_policy(args.policy)
    defaults = RemediateK8sOptions(prometheus_url="", policy_text="")
    options = RemediateK8sOptions(
        prometheus_url=prometheus_url(args.prometheus),
        policy_text=text,
        state_namespace=policy.state_namespace,
        state_config_map=policy.state_configmap,
        namespace=args.namespace,
        image=args.image or defaults.image,
        schedule=check_schedule(args.schedule),
        window=_check_window(args.range),
        apply=args.apply,
        audit_claim=args.audit_claim,
        run_deadline_s=(
            round(args.run_deadline)
            if args.run_deadline
            else run_deadline_s(longest_drain_s(policy))
        ),
    )
    _write(to_yaml_stream(manifests(options)), args.output)


def _check_window(text: str) -> str:
    """The window each run's `fleet report --range` reads: refused now, with the error `fleet
    report` would give, rather than at every run."""
    import time

    from gpuwarden.fleet.window import make_window, parse_duration

    make_window(time.time(), range_s=parse_duration(text))
    return text


def run(args: argparse.Namespace) -> int:
    commands = {
        "prometheus-rules": _rules,
        "alertmanager": _alertmanager,
        "dcgm-counters": _dcgm_counters,
        "grafana": _grafana,
        "k8s": _k8s,
        "remediate": _remediate,
    }
    commands[args.what](args)
    return 0
