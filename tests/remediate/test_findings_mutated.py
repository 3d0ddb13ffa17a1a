"""A fuzz of the findings reader over mutated real documents: a doctor document of a real
nvidia-smi -q capture and a real kernel log with Xid 119 (its devices: the GPUs it saw), and a
fleet document in report.fleet's shape (by_node with node names and GPU counts). With values
replaced and keys or entries removed (a few at once), a document is read or refused with a
GpuwardenError, never another exception."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import GpuwardenError
from gpuwarden.remediate.findings import document_findings
from gpuwarden.report.doctor_document import doctor_document
from tests.remediate.conftest import fleet_document, fleet_finding

CAPTURES = (
    "nvidia-smi/linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle.q.txt",
    "xid/gpud__dmesg-with-xid-119.log",
)
Path_ = tuple[str | int, ...]
MAX_MUTATIONS = 6  # per document: several at once reach the rarer paths sooner


@pytest.fixture(scope="module")
def documents(fixtures: Path) -> list[dict[str, Any]]:
    report = diagnose_captures([str(fixtures / c) for c in CAPTURES], DoctorOptions())
    doctor = json.loads(json.dumps(doctor_document(report)))  # exactly what --json prints
    assert doctor["devices"] and doctor["findings"]
    fleet = fleet_document(
        [
            fleet_finding("ecc-uncorrectable", "gpu-1", "GPU-a"),
            {**fleet_finding("gpu-lost", "pod-x", "GPU-b"), "node": "gpu-2"},
        ],
        ["gpu-1"],
    )
    fleet["by_node"].append({"Hostname": "pod-x", "node": "gpu-2", "gpus": 7, "gpu_hours": 1.0})
    return [doctor, fleet]


def _paths(value: Any, where: Path_ = ()) -> Iterator[Path_]:
    yield where
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*where, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*where, index))


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=12),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=4)), max_size=3),
    st.dictionaries(st.text(max_size=6), st.one_of(st.none(), st.integers()), max_size=3),
)


def _mutated(document: Any, where: Path_, value: Any, remove: bool) -> Any:
    if not where:
        return value
    copied = copy.deepcopy(document)
    parent: Any = copied
    for key in where[:-1]:
        parent = parent[key]
    if remove:
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    return copied


@settings(
    max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_a_mutated_real_document_is_read_or_refused(
    documents: list[dict[str, Any]], data: st.DataObject
) -> None:
    assert_read_or_refused(data.draw(st.sampled_from(documents)), data)


def assert_read_or_refused(document: Any, data: st.DataObject) -> None:
    """``document`` mutated up to MAX_MUTATIONS times, then read (for every node or for one):
    read, or refused with exit 2 and a hint — never another exception."""
    mutated: Any = document
    for _ in range(data.draw(st.integers(1, MAX_MUTATIONS))):
        if not isinstance(mutated, dict | list):
            break
        where = data.draw(st.sampled_from(list(_paths(mutated))))
        mutated = _mutated(mutated, where, data.draw(_VALUES), data.draw(st.booleans()))
    node = data.draw(st.sampled_from([None, "gpu-node-7"]))
    refused: GpuwardenError | None = None
    try:
        document_findings(mutated, node=node)
    except GpuwardenError as error:
        refused = error
    assert refused is None or (refused.exit_code == 2 and refused.hint)
