"""What an action changes on a node (pure): any Node JSON reads without error, an action done is
never done twice (the patch, applied, leaves nothing to change: idempotence at its root), and
uncordon undoes exactly what gpuwarden added."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.remediate import changes
from gpuwarden.remediate.model import (
    CORDONED_BY_LABEL,
    AddTaint,
    Cordon,
    NodeState,
    Reason,
    SetAnnotations,
    SetLabels,
    Taint,
    Uncordon,
)
from gpuwarden.types.health import Severity
from gpuwarden.units import iso_utc

NOW = 1_800_000_000.0
REASON = Reason("xid", "GPU-1", Severity.CRITICAL, "fatal")

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
)
_JSON = st.recursive(
    _VALUES,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "metadata",
                    "spec",
                    "status",
                    "name",
                    "labels",
                    "annotations",
                    "taints",
                    "key",
                    "value",
                    "effect",
                    "unschedulable",
                    "conditions",
                    "type",
                    "resourceVersion",
                ]
            ),
            children,
            max_size=5,
        ),
    ),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["metadata", "spec", "status", "kind"]), _JSON))
def test_any_node_json_reads(obj: dict[str, Any]) -> None:
    state = changes.node_state(obj)
    assert isinstance(state.unschedulable, bool)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in state.labels.items())
    changes.unavailable(state)  # and the marks read as unknown, never an error
    changes.quarantined_at(state)
    changes.our_taints(state)
    changes.notified(state)


_KEYS = st.sampled_from(["a", "b", "example.com/x", "gpuwarden.io/fault"])
_TAINTS = st.builds(
    Taint,
    st.sampled_from(["nvidia.com/gpu-error", "dedicated", "nvidia.com/gpu"]),
    st.sampled_from(["", "fatal", "present"]),
    st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
)
_NODES = st.builds(
    NodeState,
    name=st.just("n1"),
    labels=st.dictionaries(
        st.sampled_from(["a", "b", CORDONED_BY_LABEL]), st.sampled_from(["1", "gpuwarden"])
    ),
    annotations=st.dictionaries(
        st.sampled_from(["gpuwarden.io/taints", "gpuwarden.io/quarantined-at", "x"]),
        st.sampled_from(
            ["[]", '["nvidia.com/gpu-error:NoSchedule"]', "garbage", "2026-01-01T00:00:00Z"]
        ),
    ),
    unschedulable=st.booleans(),
    taints=st.lists(_TAINTS, max_size=3, unique_by=lambda t: (t.key, t.effect)).map(tuple),
    ready=st.sampled_from([True, False, None]),
)
_ACTIONS = st.one_of(
    st.just(Cordon()),
    st.just(Uncordon()),
    st.builds(AddTaint, _TAINTS),
    st.builds(
        SetLabels,
        st.lists(
            st.tuples(_KEYS, st.sampled_from(["1", "2"])),
            min_size=1,
            max_size=2,
            unique_by=lambda kv: kv[0],
        ).map(tuple),
    ),
    st.builds(
        SetAnnotations,
        st.lists(
            st.tuples(_KEYS, st.text(max_size=5)),
            min_size=1,
            max_size=2,
            unique_by=lambda kv: kv[0],
        ).map(tuple),
    ),
)


@settings(max_examples=300, deadline=None)
@given(_NODES, _ACTIONS)
def test_an_action_done_needs_nothing_more(node: NodeState, action: Any) -> None:
    change = changes.change_for(node, action, REASON, NOW)
    if change.patch is None:
        assert change.why_not and change.detail
        return
    after = changes.patched(node, change.patch)
    again = changes.change_for(after, action, REASON, NOW)
    assert again.patch is None, (change.patch, again.patch)


@settings(max_examples=200, deadline=None)
@given(_NODES, st.lists(st.builds(AddTaint, _TAINTS), max_size=3))
def test_uncordon_undoes_exactly_what_gpuwarden_added(
    node: NodeState, taints: list[AddTaint]
) -> None:
    labels = {k: v for k, v in node.labels.items() if k != CORDONED_BY_LABEL}
    clean = replace(node, labels=labels, annotations={}, unschedulable=False)
    quarantined = clean
    added: set[tuple[str, str]] = set()  # the taints gpuwarden put there (not already so)
    for action in (Cordon(), *taints):
        change = changes.change_for(quarantined, action, REASON, NOW)
        if change.patch is not None:
            quarantined = changes.patched(quarantined, change.patch)
            if isinstance(action, AddTaint):
                added.add((action.taint.key, action.taint.effect))
    undo = changes.change_for(quarantined, Uncordon(), None, NOW)
    assert undo.patch is not None
    restored = changes.patched(quarantined, undo.patch)
    assert restored.unschedulable is False
    assert dict(restored.labels) == dict(clean.labels)
    assert dict(restored.annotations) == {}
    before = {(t.key, t.effect): t for t in clean.taints}
    # taints of others stay unless gpuwarden replaced one of the same key and effect
    assert {(t.key, t.effect) for t in restored.taints} == set(before) - added


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.sampled_from(["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+00:01"]),
        st.datetimes(timezones=st.timezones()).map(lambda when: when.isoformat()),
    )
)
def test_a_mark_a_person_edited_is_a_time_iso_shows_or_unknown(text: str) -> None:
    # the breaker's tripped-at and the nodes' marks are shown again (plan details, the report)
    seconds = changes.parse_iso(text)
    if seconds is not None:
        assert changes.parse_iso(iso_utc(seconds)) == math.floor(seconds)
