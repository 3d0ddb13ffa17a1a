"""The policy file: what a full policy means, every mistake named by its key (with "did you
mean" for misspellings), and a fuzz of the parser (only PolicyError ever escapes)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import InputError
from gpuwarden.remediate.model import (
    AddTaint,
    Cordon,
    Drain,
    Policy,
    Quota,
    SetAnnotations,
    SetLabels,
    Share,
    Taint,
    Webhook,
)
from gpuwarden.remediate.policy import (
    PolicyError,
    known_codes,
    load_policy,
    policy_from_document,
    policy_from_text,
)
from gpuwarden.types.health import Severity

FULL = """
rules:
  - name: memory
    match:
      code: [ecc-uncorrectable, row-remap-failure]
      severity: critical
      for: 10m
      labels: {modelName: NVIDIA H100 80GB HBM3}
      node_labels: {pool: training}
    actions:
      - cordon
      - taint: {key: nvidia.com/gpu-error, value: fatal, effect: NoExecute}
      - drain: {timeout: 15m, skip_namespaces: [kube-system, monitoring], grace_period: 30s}
      - label: {gpuwarden.io/fault: ecc, gpuwarden.io/ticket: "true"}
      - annotate: {example.com/note: "RMA pending: see ticket"}
      - webhook: {url: "https://hooks.example.com/gpu", headers: {X-Team: infra}, timeout: 5s}
  - match: {code: thermal-outlier}
    actions: [{webhook: "http://127.0.0.1:9/hook"}]
limits:
  max_unavailable: 3
  min_interval: 1h30m
  spaced_actions: [drain, webhook]
  circuit_breaker: {percentage: 25, window: 10m}
uncordon: true
opt_out_label: example.com/no-remediation=yes
scope: {node_selector: {nvidia.com/gpu.present: "true"}}
max_findings_age: 2h
state: {namespace: ops, configmap: breaker}
"""


def test_a_full_policy_means_what_it_says() -> None:
    policy = policy_from_text(FULL, "p.yml")
    first, second = policy.rules
    assert first.name == "memory" and second.name == "rules[1]"
    assert first.match.codes == {"ecc-uncorrectable", "row-remap-failure"}
    assert first.match.min_severity is Severity.CRITICAL
    assert first.match.sustained_s == 600
    assert first.match.labels == (("modelName", "NVIDIA H100 80GB HBM3"),)
    assert first.match.node_labels == (("pool", "training"),)
    assert first.actions == (
        Cordon(),
        AddTaint(Taint("nvidia.com/gpu-error", "fatal", "NoExecute")),
        Drain(timeout_s=900, skip_namespaces=("kube-system", "monitoring"), grace_period_s=30),
        SetLabels((("gpuwarden.io/fault", "ecc"), ("gpuwarden.io/ticket", "true"))),
        SetAnnotations((("example.com/note", "RMA pending: see ticket"),)),
        Webhook("https://hooks.example.com/gpu", (("X-Team", "infra"),), 5.0),
    )
    assert second.actions == (Webhook("http://127.0.0.1:9/hook"),)
    limits = policy.limits
    assert limits.max_unavailable == Share(3, Quota.COUNT)
    assert limits.min_interval_s == 5400
    assert limits.spaced_actions == {"drain", "webhook"}
    assert (limits.breaker_percent, limits.breaker_window_s) == (25.0, 600.0)
    assert policy.uncordon is True
    assert policy.opt_out == ("example.com/no-remediation", "yes")
    assert policy.scope == (("nvidia.com/gpu.present", "true"),)
    assert policy.max_findings_age_s == 7200
    assert (policy.state_namespace, policy.state_configmap) == ("ops", "breaker")


def test_the_defaults_are_the_anchors() -> None:
    policy = policy_from_text("rules: [{match: {code: gpu-lost}, actions: [cordon]}]")
    limits = policy.limits
    assert limits.max_unavailable == Share(20, Quota.PERCENT)  # Karpenter's 20 % cut-off
    assert (limits.breaker_percent, limits.breaker_window_s) == (50.0, 300.0)  # NVSentinel
    assert limits.spaced_actions == {"drain"} and limits.min_interval_s == 0
    assert policy.uncordon is False and policy.opt_out == ("gpuwarden.io/remediate", "false")
    assert Drain().skip_namespaces == ("kube-system",)


def test_a_percentage_rounds_up_as_kubernetes_max_unavailable_does() -> None:
    """Kubernetes: "Absolute number is calculated from percentage by rounding up" (a
    DaemonSet's maxUnavailable; a PodDisruptionBudget's too): README's 20 % on 4 nodes is 1."""
    share = Share(20, Quota.PERCENT)
    assert [share.of(n) for n in (1, 4, 5, 16, 1000)] == [1, 1, 1, 4, 200]
    assert Share(0, Quota.PERCENT).of(8) == 0
    assert Share(33.3, Quota.PERCENT).of(3) == 1
    assert Share(3, Quota.COUNT).of(2) == 3


@pytest.mark.parametrize(
    ("text", "key", "hint"),
    [
        ("rules: [{match: {code: x}, actions: [cordon]}]\nlimts: {}", "limts", "'limits'"),
        (
            "rules: [{match: {code: ecc-uncorectable}, actions: [cordon]}]",
            "rules[0].match.code",
            "'ecc-uncorrectable'",
        ),
        (
            "rules: [{match: {code: [xid, gpu-lst]}, actions: [cordon]}]",
            "rules[0].match.code[1]",
            "'gpu-lost'",
        ),
        ("rules: [{match: {code: xid}, actions: [cordn]}]", "rules[0].actions[0]", "'cordon'"),
        (
            "rules: [{match: {code: xid}, actions: [{taint: {key: a, effect: NoSchedul}}]}]",
            "rules[0].actions[0].taint.effect",
            "'NoSchedule'",
        ),
        (
            "rules: [{match: {code: xid, sevrity: critical}, actions: [cordon]}]",
            "rules[0].match.sevrity",
            "'severity'",
        ),
        (
            "rules: [{match: {code: xid, severity: fatal}, actions: [cordon]}]",
            "rules[0].match.severity",
            "critical",
        ),
        (
            "rules: [{match: {code: xid, for: 10 minutes}, actions: [cordon]}]",
            "rules[0].match.for",
            "10m",
        ),
        (
            "rules: [{match: {code: xid}, actions: [cordon]}]\nlimits: {max_unavailable: 120%}",
            "limits.max_unavailable",
            "20%",
        ),
        (
            "rules: [{match: {code: xid}, actions: [{label: {gpuwarden.io/x: 'a b'}}]}]",
            "rules[0].actions[0].label.gpuwarden.io/x",
            "63",
        ),
        (
            "rules: [{match: {code: xid}, actions: [{annotate: {gpuwarden.io/drained-at: x}}]}]",
            "rules[0].actions[0].annotate.gpuwarden.io/drained-at",
            "another key",
        ),
        (
            "rules: [{match: {code: xid}, actions: [uncordon]}]",
            "rules[0].actions[0]",
            "uncordon: true",
        ),
        (
            "rules: [{match: {code: xid}, actions: [{webhook: {url: ftp://x}}]}]",
            "rules[0].actions[0].webhook.url",
            None,
        ),
        ("rules: []", "rules", None),
        ("rules: [{match: {}, actions: [cordon]}]", "rules[0].match", "code"),
        ("rules: [{match: {code: xid}}]", "rules[0]", None),
        (
            "rules: [{match: {code: xid}, actions: [cordon]}]\nlimits: {circuit_breaker: "
            "{percentage: 150}}",
            "limits.circuit_breaker.percentage",
            None,
        ),
        (
            "rules: [{match: {code: xid}, actions: [cordon]}]\nopt_out_label: nope",
            "opt_out_label",
            "gpuwarden.io/remediate=false",
        ),
        (
            "rules: [{match: {code: xid}, actions: [{drain: {timout: 5m}}]}]",
            "rules[0].actions[0].drain.timout",
            "'timeout'",
        ),
        ("rules:\n  - match: {code: xid\n    actions: [cordon]", "line", None),
    ],
)
def test_every_mistake_names_its_key(text: str, key: str, hint: str | None) -> None:
    with pytest.raises(PolicyError) as caught:
        policy_from_text(text)
    error = caught.value
    assert error.exit_code == 2 and error.reference == "remediation-policy-invalid"
    assert error.message.startswith(key), error.message
    if hint is not None:
        assert hint in (error.hint or ""), error.hint


def test_the_file_name_is_added_once_at_the_boundary(tmp_path: Path) -> None:
    path = tmp_path / "policy.yml"
    path.write_text("rules: [{match: {code: xid}, actions: [cordn]}]")
    with pytest.raises(PolicyError) as caught:
        load_policy(path)
    assert caught.value.message.startswith(f"{path}: rules[0].actions[0]: unknown action")
    with pytest.raises(InputError) as missing:
        load_policy(tmp_path / "nope.yml")
    assert missing.value.reference == "remediation-policy-unreadable"
    path.write_bytes(b"\xff\xfe rules")
    with pytest.raises(PolicyError, match="not UTF-8"):
        load_policy(path)


def test_known_codes_cover_the_verdicts_that_reach_remediate() -> None:
    codes = known_codes()
    for code in (
        "ecc-uncorrectable",
        "xid",
        "gpu-lost",
        "rma-candidate",
        "thermal-outlier",
        "straggler",
        "low-utilization",
        "row-remap-failure",
        "nvlink-down",
        "sram-threshold-exceeded",
        "driver-too-old",
        "gpu-missing",
    ):
        assert code in codes


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["cordon", "drain", "20%", "10m", "NoSchedule", "xid", "critical", "a=b"]),
)
# the keys a policy has, and one it has not ("x"): what the documents below are built of
_POLICY_KEYS = (
    "rules",
    "match",
    "actions",
    "code",
    "severity",
    "for",
    "labels",
    "limits",
    "max_unavailable",
    "min_interval",
    "circuit_breaker",
    "percentage",
    "window",
    "taint",
    "key",
    "value",
    "effect",
    "drain",
    "timeout",
    "webhook",
    "url",
    "label",
    "uncordon",
    "scope",
    "node_selector",
    "state",
    "namespace",
    "x",
)
_KEYS = st.sampled_from(_POLICY_KEYS)
_TREES = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(_KEYS, children, max_size=5)
    ),
    max_leaves=25,
)


def _outcome(parse: Callable[[], Policy]) -> Policy | PolicyError:
    try:
        return parse()
    except PolicyError as exc:
        return exc


# an error names the key it is about (top-level keys too, not built above)
_FIRST_KEYS = {*_POLICY_KEYS, "max_findings_age", "opt_out_label"}


@settings(max_examples=200, deadline=None)
@given(_TREES)
def test_any_document_is_a_policy_or_an_error_naming_a_key(document: Any) -> None:
    outcome = _outcome(lambda: policy_from_document(document))
    if isinstance(outcome, PolicyError):
        assert outcome.exit_code == 2 and outcome.hint
        first = outcome.message.split(":")[0].split(".")[0].split("[")[0]
        assert first in _FIRST_KEYS or outcome.message in (
            "must be a mapping of names to values",
        ), outcome.message


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_a_policy_or_a_policy_error(text: str) -> None:
    outcome = _outcome(lambda: policy_from_text(text))
    assert isinstance(outcome, PolicyError | Policy)


@settings(max_examples=100, deadline=None)
@given(_TREES)
def test_yaml_of_any_tree_round_trips_into_the_same_verdict(document: Any) -> None:
    """What the file says is what the dictionary says: YAML adds nothing."""
    text = yaml.safe_dump({"rules": [{"match": {"code": "xid"}, "actions": [document]}]})
    from_text = _outcome(lambda: policy_from_text(text))
    from_tree = _outcome(lambda: policy_from_document(yaml.safe_load(text)))
    assert repr(from_text) == repr(from_tree)
