"""An Alertmanager configuration for gpuwarden's alerts: a route, its receivers and the inhibit
rules, derived from the alert definitions (``alerts``), to merge into the cluster's own config.

The route takes every alert carrying gpuwarden's ``failure_mode`` label, groups it by the node
and the alert's ``code``, and routes it by ``severity`` to a receiver of its own (a webhook stub
to point at the pager, the chat, …). The node is named as the fleet report names it
(``fleet.queries.NODE_LABELS``): ``node`` where gpuwarden's ServiceMonitor adds it, ``Hostname``
(dcgm-exporter's, which can be its pod's name), ``hostname`` (its newest release's); a series
carries some of them.

Inhibit rules (Alertmanager's ``inhibit_rule``: while a source alert fires, the target alerts
whose ``equal`` labels hold the same values are muted, https://prometheus.io/docs/alerting/latest/
configuration/#inhibit_rule):

* a GPU out of service — its code's remedy, or its Xid's immediate action in NVIDIA's catalog,
  takes it out of service (reset, restart the node or the VM) — mutes that GPU's warnings and
  information (same ``UUID``): they follow from the failure;
* a GPU whose failure kills its job (``AlertSpec.fails_job``, doctor's failed GPUs) mutes its
  node peers' performance warnings (the throughput, bottleneck, distributed and cost groups):
  doctor says of their fake load to restart the job without the failed GPU (one rule per node
  label, so alerts from two exporters of the node match on the label they share);
* an exporter that is down, frozen or failing to read (the telemetry alerts) mutes the
  warnings and information computed from its own series (same scrape target, ``instance``).

Alertmanager applies a rule whose ``equal`` labels are missing from both alerts (an empty value
equals an empty value), so every rule also requires its ``equal`` label to be set on both sides.
Critical alerts are never muted: a second failure on a failed node still reaches someone.

The receivers' webhook URL is written into the file itself: Alertmanager reads a webhook's URL
from a file (``url_file``) only from 0.26 on (prometheus/alertmanager#3223); 0.25, Debian's and
the tests', refuses the key ("field url_file not found"), and shows the URL on its Status page
(``/api/v2/status``). A URL that carries a credential (a token in its path, as Slack's incoming
webhooks do) makes the file a secret, which the header of the output says. A bearer token needs
no such care: ``http_config.authorization.credentials_file`` (Alertmanager 0.22 on, #2499) names
the file it is read from, e.g. a Kubernetes Secret the Alertmanager pod mounts.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuwarden.catalog.xid import CRITICAL_BUCKETS, xid_catalog
from gpuwarden.deploy.alerts import AlertSpec, FailureMode
from gpuwarden.deploy.alerts.health import XID_CRITICAL_ALERT
from gpuwarden.deploy.alerts.telemetry import telemetry_alerts
from gpuwarden.deploy.alerts.xid import xids_of
from gpuwarden.deploy.knobs import DEFAULT_KNOBS
from gpuwarden.deploy.promql import GPU, alternatives, quote
from gpuwarden.deploy.rules import RuleSet
from gpuwarden.files import NAME_MAX_BYTES, PATH_MAX_BYTES
from gpuwarden.fleet.queries import NODE_LABELS
from gpuwarden.health.rules.codes import CODES
from gpuwarden.transport import split_url
from gpuwarden.types.health import Severity

# The catalog's immediate actions that take the GPU (or its node / VM) out of service; the
# other critical one, CONTACT_SUPPORT, leaves it running until support answers.
OUT_OF_SERVICE_BUCKETS = CRITICAL_BUCKETS - {"CONTACT_SUPPORT"}
SCRAPE_TARGET = "instance"
RECEIVER_PREFIX = "gpuwarden-"
# Alertmanager's own defaults (group_wait 30s, group_interval 5m, repeat_interval 4h) for
# warnings; a critical alert is sent sooner and repeated hourly, information daily.
_TIMING: Mapping[Severity, Mapping[str, str]] = {
    Severity.CRITICAL: {"group_wait": "10s", "group_interval": "5m", "repeat_interval": "1h"},
    Severity.WARNING: {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"},
    Severity.INFO: {"group_wait": "5m", "group_interval": "30m", "repeat_interval": "24h"},
}
WEBHOOK_URL_FILE_SINCE = (0, 26)  # the first Alertmanager release with webhook url_file
MERGE_NOTE = (
    "# gpuwarden's alerts in Alertmanager (gpuwarden deploy alertmanager). Valid on its own\n"
    "# (amtool check-config); to merge into your config, add route.routes[0] to your root\n"
    "# route's routes (before any catch-all), and append inhibit_rules and receivers.\n"
    "# The webhook URL is written below (url_file, which reads it from a file, needs\n"
    "# Alertmanager {}.{}): if it carries a credential, this file is a secret: keep it in a\n"
    "# Secret, never a ConfigMap, as the Prometheus Operator keeps Alertmanager's config.\n"
).format(*WEBHOOK_URL_FILE_SINCE)


# RFC 3986 section 2: a URL's characters, the rest percent-encoded. Alertmanager parses the
# webhook's url with Go's net/url, which also refuses an escape not of two hex digits, a
# control character, and in the host a percent-escape of an ASCII character (RFC 3986 section
# 3.2.2 keeps them for non-ASCII names); an IPv6 zone is escaped as %25.
_URL_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-._~:/?#[]@!$&'()*+,;=%")
_NOT_AN_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_IPV6_ZONE = re.compile(r"^\[[^%\]]*%25[^\]]*\](?::|$)")
# a host (a name, or an IPv6 address in brackets) and an optional port of digits only
_HOST_PORT = re.compile(r"(?:\[[^\]]*\]|[^:\[\]]*)(?::[0-9]*)?")
WEBHOOK_URL_HINT = (
    "write it as RFC 3986 spells a URL (a space as %20, a '%' as %25, a non-ASCII host in "
    "its xn-- form), e.g. https://alerts.example.com/hooks/gpu"
)


def webhook_url_problem(url: str) -> str | None:
    """Why Alertmanager would refuse ``url`` as a webhook's, in a few words; None when it takes
    it (``http_url_problem`` has said it is an http:// or https:// URL with a host)."""
    outside = sorted({c for c in url if c not in _URL_CHARACTERS})
    if outside:
        return f"{''.join(outside[:10])!r} is no URL character"
    if _NOT_AN_ESCAPE.search(url):
        return "a '%' not followed by two hex digits"
    host = split_url(url).netloc.rpartition("@")[2]
    if not _HOST_PORT.fullmatch(host):
        return "the port is not digits after the host"
    if "%" in host and not _IPV6_ZONE.match(host):
        return "a percent-escape in the host"
    return None


# Alertmanager opens the credentials file on each notification: a path longer than Linux opens
# (files.PATH_MAX_BYTES, NAME_MAX_BYTES) fails every one of them though the configuration loads
CREDENTIALS_FILE_HINT = (
    "give the token file's absolute path as the Alertmanager pod mounts it, e.g. "
    "/etc/alertmanager/secrets/webhook-token/token"
)


def credentials_file_problem(path: str) -> str | None:
    """Why ``path`` would fail every notification as ``credentials_file``, in a few words; None
    when Alertmanager can open it. It is read when a notification is sent, not when the
    configuration loads (amtool check-config takes an empty or a relative one): empty, no token
    is read (prometheus/common then sends the inline credentials, none); relative, it is read
    from the folder of the configuration file (prometheus/common SetDirectory), which is not
    where a Secret is mounted."""
    if not path.strip():
        return "an empty path"
    if not path.isprintable():
        return f"{path[:40]!r}: a control character in the path"
    if not path.startswith("/"):
        return f"{path[:40]!r} is relative (read from the configuration file's folder)"
    if path.endswith("/"):
        return f"{path[:40]!r} names a folder, not the token file"
    if len(path.encode("utf-8")) > PATH_MAX_BYTES or any(
        len(part.encode("utf-8")) > NAME_MAX_BYTES for part in path.split("/")
    ):
        return f"a path longer than Linux opens ({PATH_MAX_BYTES} bytes, {NAME_MAX_BYTES} a name)"
    return None


def matcher(label: str, value: str) -> str:
    """An Alertmanager matcher; a value starting with ``~`` is a regex (``=~``)."""
    if value.startswith("~"):
        return f"{label}=~{quote(value[1:])}"
    return f"{label}={quote(value)}"


def _names(specs: Iterable[AlertSpec]) -> str:
    return "~" + alternatives(sorted({s.name for s in specs}))


_SET = "~.+"  # the label is present (and not empty)
_NOT_CRITICAL = "~" + alternatives(s.value for s in Severity if s is not Severity.CRITICAL)


def out_of_service(spec: AlertSpec) -> bool:
    """The alert says the GPU is out of service now: critical, and its code's NVIDIA bucket
    resets it or restarts its node or VM (a pending reset, a warning, leaves it working)."""
    row = CODES.get(spec.code or "")
    return (
        spec.per_gpu
        and spec.severity is Severity.CRITICAL
        and row is not None
        and row.action in OUT_OF_SERVICE_BUCKETS
    )


def out_of_service_xids() -> tuple[int, ...]:
    """The critical Xids whose immediate action in NVIDIA's catalog takes the GPU out of
    service (the others hand it to support while it keeps running)."""
    catalog = xid_catalog()
    return tuple(
        x
        for x in xids_of(Severity.CRITICAL)
        if catalog[x].immediate_action in OUT_OF_SERVICE_BUCKETS
    )


def _rule(sources: Sequence[str], targets: Sequence[str], equal: str) -> dict[str, Any]:
    return {
        "source_matchers": [*sources, matcher(equal, _SET)],
        "target_matchers": [*targets, matcher(equal, _SET)],
        "equal": [equal],
    }


def inhibit_rules(specs: Sequence[AlertSpec]) -> list[dict[str, Any]]:
    """In the module docstring's order: a GPU out of service (by its code, by its Xid), a failed
    GPU's node peers (one rule per node label), an exporter's telemetry."""
    per_gpu = [s for s in specs if s.per_gpu]
    muted = [matcher("severity", _NOT_CRITICAL)]
    same_gpu = [matcher("alertname", _names(per_gpu)), *muted]
    failed = [s for s in per_gpu if out_of_service(s)]
    performance = [s for s in per_gpu if s.mode is not FailureMode.HEALTH]
    job_killers = [s for s in per_gpu if s.fails_job]
    telemetry = {s.name for s in telemetry_alerts(DEFAULT_KNOBS)}
    exporters = [s for s in specs if s.name in telemetry]
    return [
        _rule([matcher("alertname", _names(failed))], same_gpu, GPU),
        _rule(
            [
                matcher("alertname", XID_CRITICAL_ALERT),
                matcher("xid", "~" + alternatives(out_of_service_xids())),
            ],
            same_gpu,
            GPU,
        ),
        *(
            _rule(
                [matcher("alertname", _names(job_killers))],
                [matcher("alertname", _names(performance)), *muted],
                node,
            )
            for node in NODE_LABELS
        ),
        _rule([matcher("alertname", _names(exporters))], same_gpu, SCRAPE_TARGET),
    ]


_MOST_URGENT_FIRST = sorted(Severity, key=lambda s: -s.rank)


def receiver_name(severity: Severity) -> str:
    return RECEIVER_PREFIX + severity.value


def route(specs: Sequence[AlertSpec]) -> dict[str, Any]:
    """gpuwarden's subtree: its alerts by ``failure_mode``, grouped by node and code, then by
    severity (each alert carries one: its finding's own, else its definition's)."""
    modes = "~" + alternatives(sorted({s.mode.value for s in specs}))
    return {
        "receiver": receiver_name(Severity.WARNING),
        "matchers": [matcher("failure_mode", modes)],
        "group_by": [*NODE_LABELS, "code"],
        **_TIMING[Severity.WARNING],
        "routes": [
            {
                "receiver": receiver_name(severity),
                "matchers": [matcher("severity", severity.value)],
                **_TIMING[severity],
            }
            for severity in _MOST_URGENT_FIRST
        ],
    }


def webhook_config(url: str, credentials_file: str | None = None) -> dict[str, Any]:
    """A receiver's webhook; with ``credentials_file``, Alertmanager sends ``Authorization:
    Bearer`` and the token read from that file (never written into the configuration)."""
    config: dict[str, Any] = {"url": url, "send_resolved": True}
    if credentials_file is not None:
        authorization = {"type": "Bearer", "credentials_file": credentials_file}
        config["http_config"] = {"authorization": authorization}
    return config


def alertmanager_config(
    rules: RuleSet, webhook_url: str, credentials_file: str | None = None
) -> dict[str, Any]:
    """A complete configuration (valid alone), whose route's first child is gpuwarden's."""
    specs = rules.alerts
    return {
        "route": {"receiver": receiver_name(Severity.WARNING), "routes": [route(specs)]},
        "inhibit_rules": inhibit_rules(specs),
        "receivers": [
            {
                "name": receiver_name(severity),
                "webhook_configs": [webhook_config(webhook_url, credentials_file)],
            }
            for severity in _MOST_URGENT_FIRST
        ],
    }
