"""The remediation policy file (YAML, diagnosis.md §3) → ``Policy``.

```yaml
rules:
  - name: ecc                                   # optional; default rules[N]
    match: {code: ecc-uncorrectable, severity: critical, for: 10m,
            labels: {modelName: ...}, node_labels: {pool: training}}
    actions:
      - cordon
      - taint: {key: nvidia.com/gpu-error, value: fatal, effect: NoSchedule}
      - drain: {timeout: 10m, skip_namespaces: [kube-system], grace_period: 30s}
      - label: {gpuwarden.io/fault: ecc}
      - annotate: {example.com/ticket: pending}
      - webhook: {url: https://hooks.example.com/gpu, headers: {X-Team: infra}}
limits:
  max_unavailable: 20%          # or a count; of the nodes in scope, cordoned ones included
  min_interval: 10m             # between two drains (spaced_actions)
  spaced_actions: [drain]
  circuit_breaker: {percentage: 50, window: 5m}
uncordon: false                 # opt-in: undo our quarantine once the findings say healthy
opt_out_label: gpuwarden.io/remediate=false
scope: {node_selector: {nvidia.com/gpu.present: "true"}}
max_findings_age: 1h
state: {namespace: gpuwarden, configmap: gpuwarden-remediate}
```

Every problem is an ``InputError`` (exit 2, reference ``remediation-policy-invalid``) naming the
key (``rules[0].match.code``) and, for a misspelt key or code, the closest known ones. A code
no gpuwarden verdict emits is refused: a typo would match nothing and so remediate nothing.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuwarden.documents import DocumentError, load_yaml_text
from gpuwarden.errors import InputError, MissingExtraError
from gpuwarden.files import CaptureTooLargeError, read_capped
from gpuwarden.remediate.model import (
    ACTION_KINDS,
    DEFAULT_OPT_OUT,
    MARKS,
    TAINT_EFFECTS,
    Action,
    AddTaint,
    Cordon,
    Drain,
    Limits,
    Match,
    Policy,
    Quota,
    Rule,
    SetAnnotations,
    SetLabels,
    Share,
    Taint,
    Webhook,
)
from gpuwarden.types.health import Severity

MAX_POLICY_BYTES = 1 << 20  # a policy is a few dozen lines
REFERENCE = "remediation-policy-invalid"
_HINT = "see docs/remediate.md, the policy"

# Codes gpuwarden's verdicts emit beyond the health rules' table, the versions' table and
# explain's causes (health.xid, doctor.node).
_OTHER_CODES = frozenset({"xid", "rma-candidate", "gpu-missing"})
_TOP_KEYS = (
    "rules",
    "limits",
    "uncordon",
    "opt_out_label",
    "scope",
    "max_findings_age",
    "state",
)
_RULE_KEYS = ("name", "match", "actions")
_MATCH_KEYS = ("code", "severity", "for", "labels", "node_labels")
_LIMIT_KEYS = ("max_unavailable", "min_interval", "spaced_actions", "circuit_breaker")
_BREAKER_KEYS = ("percentage", "window")
_DRAIN_KEYS = ("timeout", "skip_namespaces", "grace_period", "force")
_TAINT_KEYS = ("key", "value", "effect")
_WEBHOOK_KEYS = ("url", "headers", "timeout")
_SCOPE_KEYS = ("node_selector",)
_STATE_KEYS = ("namespace", "configmap")

# Kubernetes' syntax (apimachinery validation): a qualified name (optional DNS-subdomain prefix
# and "/"), a label value, a DNS-1123 label for names.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_QUALIFIED = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_NAME})?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_SHARE = re.compile(r"^\s*(\d+(\.\d+)?)\s*%\s*$")


class PolicyError(InputError):
    """A policy problem; ``message`` starts with the key (the caller adds the file)."""

    reference = REFERENCE


def _problem(where: str, text: str, hint: str | None = None) -> PolicyError:
    return PolicyError(f"{where}: {text}" if where else text, hint=hint or _HINT)


def _did_you_mean(word: str, known: Sequence[str]) -> str | None:
    close = difflib.get_close_matches(word, list(known), n=3, cutoff=0.6)
    return f"did you mean {', '.join(repr(c) for c in close)}?" if close else None


def known_codes() -> frozenset[str]:
    """Every finding and cause code a gpuwarden verdict can carry (diagnosis.md §1-2)."""
    from gpuwarden.health.explain.causes import BY_CODE
    from gpuwarden.health.rules.codes import CODES
    from gpuwarden.health.versions import VERSION_CODES

    return frozenset(CODES) | frozenset(BY_CODE) | frozenset(VERSION_CODES) | _OTHER_CODES


# --- value checkers: each takes (value, where) and raises naming `where`


def _mapping(value: object, where: str, keys: Sequence[str] | None = None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _problem(where, "must be a mapping of names to values")
    if keys is not None:
        for key in value:
            if key not in keys:
                name = f"{where}.{key}" if where else key
                known = ", ".join(keys)
                raise _problem(
                    name, "unknown key", _did_you_mean(key, keys) or f"the keys are {known}"
                )
    return value


def _text(value: object, where: str) -> str:
    """A scalar as text: YAML reads ``true`` and ``3`` as bool and int, Kubernetes wants
    strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if not isinstance(value, str):
        raise _problem(where, "must be a string")
    return value


def _nonempty(value: object, where: str) -> str:
    text = _text(value, where).strip()
    if not text:
        raise _problem(where, "must not be empty")
    return text


# --- Kubernetes' name syntax, as text: the policy's keys and `deploy`'s options

LABEL_KEY_HINT = (
    "a name of at most 63 letters, digits, '-', '_' or '.', with an optional DNS prefix: "
    "nvidia.com/gpu-error"
)
LABEL_VALUE_HINT = (
    "at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
)
DNS_LABEL_HINT = "at most 63 lower-case letters, digits or '-', starting and ending alphanumeric"
DNS_SUBDOMAIN_HINT = "at most 253 lower-case letters, digits, '-' or '.', e.g. nvidia"


def label_key_problem(name: str) -> str | None:
    """Why ``name`` is no label or taint key (a qualified name), or None."""
    prefix, _, last = name.rpartition("/")
    if not _QUALIFIED.match(name) or len(last) > 63 or len(prefix) > 253:
        return f"{name!r} is not a Kubernetes label/taint key"
    return None


def label_value_problem(text: str) -> str | None:
    if len(text) > 63 or not _LABEL_VALUE.match(text):
        return f"{text!r} is not a Kubernetes label value"
    return None


def dns_label_problem(name: str) -> str | None:
    """Why ``name`` is no name of a namespace or ConfigMap (an RFC 1123 label), or None."""
    if not _DNS_LABEL.match(name):
        return f"{name!r} is not a Kubernetes name (lower-case DNS label)"
    return None


def dns_subdomain_problem(name: str) -> str | None:
    """Why ``name`` is no name of a RuntimeClass or PersistentVolumeClaim, or None."""
    if len(name) > 253 or not re.fullmatch(_PREFIX, name):
        return f"{name!r} is not a Kubernetes object name (lower-case DNS subdomain)"
    return None


def _qualified_name(value: object, where: str) -> str:
    name = _nonempty(value, where)
    problem = label_key_problem(name)
    if problem is not None:
        raise _problem(where, problem, LABEL_KEY_HINT)
    return name


def _label_value(value: object, where: str) -> str:
    text = _text(value, where)
    problem = label_value_problem(text)
    if problem is not None:
        raise _problem(where, problem, f'{LABEL_VALUE_HINT} (quote it in YAML: "true")')
    return text


def _labels(value: object, where: str) -> tuple[tuple[str, str], ...]:
    table = _mapping(value, where)
    return tuple(
        (_qualified_name(k, f"{where}.{k}"), _label_value(v, f"{where}.{k}"))
        for k, v in table.items()
    )


def _string_pairs(value: object, where: str) -> tuple[tuple[str, str], ...]:
    table = _mapping(value, where)
    return tuple((k, _text(v, f"{where}.{k}")) for k, v in table.items())


def duration_s(value: object, where: str) -> float:
    """``10m``, ``1h30m``, ``90s`` (Prometheus' syntax) or a number of seconds."""
    from gpuwarden.fleet.window import parse_duration

    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = float(parse_duration(value))
        except InputError:
            raise _problem(
                where,
                f"{value!r} is not a duration",
                "a duration like 30s, 10m, 1h30m (units ms, s, m, h, d, w) or seconds",
            ) from None
    else:
        raise _problem(where, "must be a duration like 10m or a number of seconds")
    if not 0 <= seconds < 10 * 365 * 86400:  # also refuses nan
        raise _problem(where, f"{seconds:g} s is not a duration from 0 to ten years")
    return seconds


def _strings(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not value:
        raise _problem(where, "must be a name or a non-empty list of names")
    return tuple(_nonempty(v, f"{where}[{i}]") for i, v in enumerate(value))


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise _problem(where, "must be true or false")
    return value


# --- the parts of a policy


def _codes(value: object, where: str) -> frozenset[str]:
    codes = _strings(value, where)
    known = known_codes()
    for i, code in enumerate(codes):
        if code not in known:
            at = where if isinstance(value, str) else f"{where}[{i}]"
            raise _problem(
                at,
                f"unknown finding code {code!r}",
                _did_you_mean(code, sorted(known))
                or "the codes are in README (verdict codes) and diagnosis.md §2",
            )
    return frozenset(codes)


def _severity(value: object, where: str) -> Severity:
    text = _nonempty(value, where).lower()
    try:
        return Severity(text)
    except ValueError:
        raise _problem(
            where, f"unknown severity {text!r}", "one of info, warning, critical (the least)"
        ) from None


def _match(value: object, where: str) -> Match:
    table = _mapping(value, where, _MATCH_KEYS)
    if not table:
        raise _problem(
            where,
            "a rule must match something (code, severity or labels)",
            "e.g. match: {code: ecc-uncorrectable}",
        )
    return Match(
        codes=_codes(table["code"], f"{where}.code") if "code" in table else None,
        min_severity=_severity(table["severity"], f"{where}.severity")
        if "severity" in table
        else None,
        sustained_s=duration_s(table["for"], f"{where}.for") if "for" in table else None,
        labels=_string_pairs(table.get("labels"), f"{where}.labels"),
        node_labels=_labels(table.get("node_labels"), f"{where}.node_labels"),
    )


def _drain(value: object, where: str) -> Drain:
    table = _mapping(value, where, _DRAIN_KEYS)
    default = Drain()
    timeout = default.timeout_s
    if "timeout" in table:
        timeout = duration_s(table["timeout"], f"{where}.timeout")
        if timeout <= 0:
            raise _problem(f"{where}.timeout", "must be longer than 0 s")
    skip = default.skip_namespaces
    if "skip_namespaces" in table:
        listed = table["skip_namespaces"]
        skip = () if listed in (None, []) else _strings(listed, f"{where}.skip_namespaces")
    grace = table.get("grace_period")
    return Drain(
        timeout_s=timeout,
        skip_namespaces=skip,
        grace_period_s=None if grace is None else int(duration_s(grace, f"{where}.grace_period")),
        force=_bool(table["force"], f"{where}.force") if "force" in table else False,
    )


def _taint(value: object, where: str) -> AddTaint:
    table = _mapping(value, where, _TAINT_KEYS)
    if "key" not in table or "effect" not in table:
        raise _problem(
            where,
            "a taint needs key and effect (value is optional)",
            "e.g. taint: {key: nvidia.com/gpu-error, value: fatal, effect: NoSchedule}",
        )
    effect = _nonempty(table["effect"], f"{where}.effect")
    if effect not in TAINT_EFFECTS:
        raise _problem(
            f"{where}.effect",
            f"unknown taint effect {effect!r}",
            _did_you_mean(effect, TAINT_EFFECTS) or f"one of {', '.join(TAINT_EFFECTS)}",
        )
    return AddTaint(
        Taint(
            _qualified_name(table["key"], f"{where}.key"),
            _label_value(table.get("value", ""), f"{where}.value"),
            effect,
        )
    )


def _webhook(value: object, where: str) -> Webhook:
    if isinstance(value, str):
        value = {"url": value}
    table = _mapping(value, where, _WEBHOOK_KEYS)
    url = _nonempty(table.get("url"), f"{where}.url") if "url" in table else None
    if url is None or not re.match(r"^https?://[^/\s]+", url):
        raise _problem(f"{where}.url", "needs an http:// or https:// URL")
    timeout = Webhook(url).timeout_s
    if "timeout" in table:
        timeout = duration_s(table["timeout"], f"{where}.timeout")
        if timeout <= 0:
            raise _problem(f"{where}.timeout", "must be longer than 0 s")
    return Webhook(url, _string_pairs(table.get("headers"), f"{where}.headers"), timeout)


def _kv_action(value: object, where: str, make: Callable[..., Action], labels: bool) -> Action:
    pairs = _labels(value, where) if labels else _annotations(value, where)
    if not pairs:
        raise _problem(where, "needs at least one key: value")
    for key, _ in pairs:
        if key in MARKS:
            raise _problem(
                f"{where}.{key}",
                "is gpuwarden's own mark (idempotence, the circuit breaker, uncordon read it)",
                "choose another key",
            )
    return make(pairs)


def _annotations(value: object, where: str) -> tuple[tuple[str, str], ...]:
    table = _mapping(value, where)
    return tuple(
        (_qualified_name(k, f"{where}.{k}"), _text(v, f"{where}.{k}")) for k, v in table.items()
    )


def _action(value: object, where: str) -> Action:
    if isinstance(value, str):
        kind, params = value.strip(), None
    elif isinstance(value, dict) and len(value) == 1 and isinstance(next(iter(value)), str):
        kind, params = next(iter(value.items()))
    else:
        raise _problem(
            where,
            "an action is a name (cordon, drain) or one name with its settings",
            "e.g. - cordon, - taint: {key: ..., effect: NoSchedule}",
        )
    at = f"{where}.{kind}"
    match kind:
        case "cordon":
            if params is not None:
                raise _problem(at, "cordon takes no settings")
            return Cordon()
        case "drain":
            return _drain(params, at)
        case "taint":
            return _taint(params, at)
        case "label":
            return _kv_action(params, at, SetLabels, labels=True)
        case "annotate":
            return _kv_action(params, at, SetAnnotations, labels=False)
        case "webhook":
            return _webhook(params, at)
        case "uncordon":
            raise _problem(
                where,
                "uncordon is not a rule's action: it undoes a quarantine once a node is healthy",
                "set `uncordon: true` at the top of the policy",
            )
    raise _problem(
        where,
        f"unknown action {kind!r}",
        _did_you_mean(kind, ACTION_KINDS) or f"the actions are {', '.join(ACTION_KINDS)}",
    )


def _rule(value: object, index: int) -> Rule:
    where = f"rules[{index}]"
    table = _mapping(value, where, _RULE_KEYS)
    for required in ("match", "actions"):
        if required not in table:
            raise _problem(where, f"needs {required}")
    actions = table["actions"]
    if isinstance(actions, str | dict):
        actions = [actions]
    if not isinstance(actions, list) or not actions:
        raise _problem(f"{where}.actions", "must be a non-empty list of actions")
    name = _nonempty(table["name"], f"{where}.name") if "name" in table else where
    return Rule(
        name=name,
        match=_match(table["match"], f"{where}.match"),
        actions=tuple(_action(a, f"{where}.actions[{i}]") for i, a in enumerate(actions)),
    )


def _share(value: object, where: str) -> Share | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return Share(value, Quota.COUNT)
    if isinstance(value, str):
        found = _SHARE.match(value)
        if found and float(found.group(1)) <= 100:
            return Share(float(found.group(1)), Quota.PERCENT)
        if value.strip().isdigit():
            return Share(int(value), Quota.COUNT)
    raise _problem(where, f"{value!r} is neither a count of nodes nor a percentage", "20% or 3")


def _breaker(value: object, where: str, limits: Limits) -> tuple[float | None, float]:
    if value is None or value is False:
        return None, limits.breaker_window_s
    table = _mapping(value, where, _BREAKER_KEYS)
    percent = table.get("percentage", limits.breaker_percent)
    if isinstance(percent, str):
        percent = percent.strip().rstrip("%").strip()
        try:
            percent = float(percent)
        except ValueError:
            raise _problem(f"{where}.percentage", "must be a number from 0 to 100") from None
    if not isinstance(percent, int | float) or isinstance(percent, bool):
        raise _problem(f"{where}.percentage", "must be a number from 0 to 100")
    if not 0 <= percent <= 100:
        raise _problem(f"{where}.percentage", f"{percent:g} is not from 0 to 100")
    window = duration_s(table["window"], f"{where}.window") if "window" in table else None
    if window is not None and window <= 0:
        raise _problem(f"{where}.window", "must be longer than 0 s")
    return float(percent), limits.breaker_window_s if window is None else window


def _limits(value: object) -> Limits:
    table = _mapping(value, "limits", _LIMIT_KEYS)
    default = Limits()
    percent, window = _breaker(table.get("circuit_breaker", {}), "limits.circuit_breaker", default)
    spaced = default.spaced_actions
    if "spaced_actions" in table:
        names = _strings(table["spaced_actions"], "limits.spaced_actions")
        for i, name in enumerate(names):
            if name not in ACTION_KINDS:
                raise _problem(
                    f"limits.spaced_actions[{i}]",
                    f"unknown action {name!r}",
                    _did_you_mean(name, ACTION_KINDS),
                )
        spaced = frozenset(names)
    return Limits(
        max_unavailable=_share(table["max_unavailable"], "limits.max_unavailable")
        if "max_unavailable" in table
        else default.max_unavailable,
        min_interval_s=duration_s(table["min_interval"], "limits.min_interval")
        if "min_interval" in table
        else default.min_interval_s,
        spaced_actions=spaced,
        breaker_percent=percent,
        breaker_window_s=window,
    )


def _opt_out(value: object) -> tuple[str, str]:
    text = _nonempty(value, "opt_out_label")
    key, sep, label_value = text.partition("=")
    if not sep:
        raise _problem(
            "opt_out_label", f"{text!r} is not KEY=VALUE", f"e.g. {'='.join(DEFAULT_OPT_OUT)}"
        )
    return _qualified_name(key, "opt_out_label"), _label_value(label_value, "opt_out_label")


def policy_from_document(document: object, source: str = "") -> Policy:
    """A parsed YAML document → ``Policy``; raises ``PolicyError`` naming the key."""
    table = _mapping(document, "", _TOP_KEYS)
    if "rules" not in table:
        raise _problem(
            "rules",
            "the policy has no rules",
            "e.g. rules: [{match: {code: ecc-uncorrectable}, actions: [cordon, drain]}]",
        )
    rules = table["rules"]
    if not isinstance(rules, list) or not rules:
        raise _problem("rules", "must be a non-empty list of rules")
    parsed = tuple(_rule(r, i) for i, r in enumerate(rules))
    names = [r.name for r in parsed]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise _problem(f"rules[{i}].name", f"{name!r} names two rules")
    scope = _mapping(table.get("scope"), "scope", _SCOPE_KEYS)
    state = _mapping(table.get("state"), "state", _STATE_KEYS)
    default = Policy(rules=parsed)
    age = table.get("max_findings_age", default.max_findings_age_s)
    return Policy(
        rules=parsed,
        limits=_limits(table.get("limits")),
        uncordon=_bool(table["uncordon"], "uncordon") if "uncordon" in table else False,
        opt_out=_opt_out(table["opt_out_label"]) if "opt_out_label" in table else DEFAULT_OPT_OUT,
        scope=_labels(scope.get("node_selector"), "scope.node_selector"),
        max_findings_age_s=None if age is None else duration_s(age, "max_findings_age"),
        state_namespace=_dns_label(
            state.get("namespace", default.state_namespace), "state.namespace"
        ),
        state_configmap=_dns_label(
            state.get("configmap", default.state_configmap), "state.configmap"
        ),
        source=source,
    )


def _dns_label(value: object, where: str) -> str:
    name = _nonempty(value, where)
    problem = dns_label_problem(name)
    if problem is not None:
        raise _problem(where, problem)
    return name


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML comes with the kubernetes client
        raise MissingExtraError("remediate --policy", "k8s", "pyyaml") from None
    return yaml


def policy_from_text(text: str, source: str = "") -> Policy:
    try:
        document = load_yaml_text(text, _yaml())
    except DocumentError as exc:  # the place leads, as a key does in the other messages
        problem = f"not valid YAML ({exc.problem})" if exc.place else str(exc)
        raise _problem(exc.place, problem) from None
    if document is None:
        raise _problem(
            "",
            "the policy file is empty",
            "e.g. rules: [{match: {code: ecc-uncorrectable}, actions: [cordon]}]",
        )
    return policy_from_document(document, source)


def load_policy(path: str | Path) -> Policy:
    """The policy in the YAML file at ``path``; errors name the file and the key."""
    return read_policy(path)[1]


def read_policy(path: str | Path) -> tuple[str, Policy]:
    """The policy file's text and the policy it holds (what `deploy remediate` ships)."""
    name = str(path)
    try:
        raw, _ = read_capped(name, MAX_POLICY_BYTES)
    except OSError as exc:
        raise InputError(
            f"cannot read the policy file {name!r}: {exc.strerror or exc}",
            reference="remediation-policy-unreadable",
            hint="pass a readable YAML file to --policy",
        ) from None
    except CaptureTooLargeError:
        raise PolicyError(
            f"{name}: larger than {MAX_POLICY_BYTES >> 20} MiB",
            hint="a policy is a few dozen lines",
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(f"{name}: not UTF-8 text", hint=_HINT) from None
    try:
        policy = policy_from_text(text, name)
    except PolicyError as exc:
        raise exc.about(name) from None
    return text, replace(policy, sha256=hashlib.sha256(raw).hexdigest())


def longest_drain_s(policy: Policy) -> float:
    """The longest drain timeout of the policy's rules (0 without a drain)."""
    drains = (a.timeout_s for r in policy.rules for a in r.actions if isinstance(a, Drain))
    return max(drains, default=0.0)
