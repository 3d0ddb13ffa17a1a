"""Findings documents → node findings: a real doctor document (the kernel log of a real node in
../shared/fixtures/xid, judged by `doctor`), fleet documents by diagnosis.md §3's shape, bad
files named, and a fuzz of the reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import InputError
from gpuwarden.remediate.findings import (
    FindingsError,
    document_findings,
    load_findings,
)
from gpuwarden.remediate.model import NodeGpus
from gpuwarden.report.doctor_document import doctor_document
from gpuwarden.types.health import Severity
from gpuwarden.types.schemas import DOCTOR_SCHEMA
from tests.remediate.conftest import fleet_document, fleet_finding, write_json

XID_LOG = "xid/gpud__dmesg-with-xid-119.log"


@pytest.fixture(scope="module")
def real_doctor(fixtures: Path) -> dict[str, Any]:
    """`gpuwarden doctor --from <a real dmesg with Xid 119> --json`, in process."""
    report = diagnose_captures([str(fixtures / XID_LOG)], DoctorOptions())
    document = doctor_document(report)
    return json.loads(json.dumps(document))  # exactly what --json prints


def test_a_real_doctor_document_names_the_gpu_and_when(real_doctor: dict[str, Any]) -> None:
    assert real_doctor["host"] is None  # a saved kernel log does not say which host
    read = document_findings(real_doctor, node="gpu-node-7")
    xid = [f for f in read.findings if f.code == "xid"]
    assert len(xid) == 1
    finding = xid[0]
    assert finding.severity is Severity.CRITICAL
    assert finding.node == "gpu-node-7"
    assert finding.uuid == "GPU-509665ad-b600-ac93-3616-d754b23d636d"
    assert finding.first_seen_s == 1740327858.0  # the first Xid 119 line of the log
    labels = dict(finding.labels)
    assert labels["Hostname"] == "gpu-node-7" and labels["pci_bus_id"] == "0000:9b:00.0"
    assert read.judged == (("gpu-node-7", None),)  # judged, at no known time (no device reading)
    without = document_findings(real_doctor)
    assert {f.node for f in without.findings} == {None} and without.judged == ()


def test_a_fleet_document_names_nodes_by_hostname(tmp_path: Path) -> None:
    document = fleet_document(
        [
            fleet_finding("ecc-uncorrectable", "gpu-1", "GPU-a", first_seen_s=1_700_000_000),
            fleet_finding("thermal-outlier", "gpu-2", "GPU-b", severity="warning", gpu="5"),
        ],
        ["gpu-1", "gpu-2", "gpu-3"],
        end_s=1_700_003_600,
    )
    read = load_findings([str(write_json(tmp_path / "fleet.json", document))])
    first, second = read.findings
    assert (first.code, first.node, first.uuid) == ("ecc-uncorrectable", "gpu-1", "GPU-a")
    assert first.first_seen_s == 1_700_000_000 and first.observed_s == 1_700_003_600
    assert dict(second.labels)["gpu"] == "5" and second.severity is Severity.WARNING
    assert dict(read.judged) == dict.fromkeys(("gpu-1", "gpu-2", "gpu-3"), 1_700_003_600)
    assert first.source == str(tmp_path / "fleet.json")


def test_a_node_label_names_the_node_before_hostname(tmp_path: Path) -> None:
    """gpuwarden's ServiceMonitor labels each series with the scraped pod's node; dcgm-exporter
    before PR #129 put its own pod's name in Hostname."""
    pod = "nvidia-dcgm-exporter-7x2kq"
    finding = {**fleet_finding("xid", pod, "GPU-a"), "node": "gpu-1"}
    document = fleet_document([finding], [])
    document["by_node"] = [{"Hostname": pod, "node": "gpu-1", "gpus": 8}]
    read = load_findings([str(write_json(tmp_path / "fleet.json", document))])
    (only,) = read.findings
    assert only.node == "gpu-1" and dict(only.labels)["Hostname"] == pod
    assert only.node_gpus == 8
    assert list(read.judged) == ["gpu-1"]


def test_the_gpus_each_document_saw_on_a_node(real_doctor: dict[str, Any], tmp_path: Path) -> None:
    """A fleet report counts a node's GPUs (by_node.gpus); doctor lists them with their UUIDs."""
    fleet = fleet_document([fleet_finding("xid", "gpu-1", "GPU-a")], ["gpu-1", "gpu-2"])
    fleet["by_node"][1]["gpus"] = 7
    read = load_findings([str(write_json(tmp_path / "fleet.json", fleet))])
    assert {n: (g.count, g.uuids) for n, g in read.gpus.items()} == {
        "gpu-1": (8, None),
        "gpu-2": (7, None),
    }
    assert read.findings[0].node_gpus == 8
    # a diagnosis of a saved kernel log read no device: it says nothing of the node's GPUs
    assert real_doctor["devices"] == []
    assert document_findings(real_doctor, node="gpu-node-7").gpus == (
        ("gpu-node-7", NodeGpus(None)),
    )
    devices = [{"uuid": f"GPU-{i}", "index": i, "timestamp_s": 1.0} for i in range(3)]
    live = {"schema": DOCTOR_SCHEMA, "host": "n1", "verdict": "healthy", "devices": devices}
    assert document_findings(live).gpus == (
        ("n1", NodeGpus(3, frozenset({"GPU-0", "GPU-1", "GPU-2"}))),
    )
    devices[1] = {"index": 1, "timestamp_s": 1.0}  # a device without its UUID
    assert document_findings(live).gpus == (("n1", NodeGpus(3, None)),)


def test_a_simulated_doctor_document_is_marked_and_judges_nothing(tmp_path: Path) -> None:
    document = {
        "schema": "gpuwarden.doctor/1",
        "verdict": "critical",
        "host": "sim-ecc-double-bit",
        "simulated": True,
        "devices": [{"timestamp_s": 1_700_000_000.0}],
        "findings": [
            {
                "code": "ecc-uncorrectable",
                "severity": "critical",
                "device": {"index": 0, "uuid": "GPU-s", "host": "sim-ecc-double-bit"},
            }
        ],
    }
    read = load_findings([str(write_json(tmp_path / "sim.json", document))])
    assert read.findings[0].simulated and read.judged == {}
    assert read.findings[0].observed_s == 1_700_000_000.0


@pytest.mark.parametrize(
    ("document", "where"),
    [
        ({"schema": "gpuwarden.explain/1"}, "schema"),
        ([1, 2], "not a gpuwarden JSON document"),
        ({"schema": "gpuwarden.fleet/1", "findings": {"code": "x"}}, "findings"),
        (
            {"schema": "gpuwarden.fleet/1", "findings": [{"severity": "critical"}]},
            "findings[0].code",
        ),
        (
            {"schema": "gpuwarden.fleet/1", "findings": [{"code": "xid", "severity": "fatal"}]},
            "findings[0].severity",
        ),
        (
            {
                "schema": "gpuwarden.fleet/1",
                "findings": [{"code": "xid", "severity": "critical", "first_seen": "yesterday"}],
            },
            "findings[0].first_seen",
        ),
        (
            {"schema": "gpuwarden.doctor/1", "devices": [{"timestamp_s": "now"}]},
            "devices[0].timestamp_s",
        ),
    ],
)
def test_malformed_documents_name_the_entry(document: Any, where: str, tmp_path: Path) -> None:
    path = write_json(tmp_path / "bad.json", document)
    with pytest.raises(FindingsError) as caught:
        load_findings([str(path)])
    assert caught.value.message.startswith(f"{path}: {where}"), caught.value.message
    assert caught.value.exit_code == 2 and caught.value.reference == "findings-invalid"


def test_unreadable_and_non_json_files(tmp_path: Path) -> None:
    with pytest.raises(InputError) as missing:
        load_findings([str(tmp_path / "absent.json")])
    assert missing.value.reference == "findings-unreadable"
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"schema": "gpuwarden.fleet/1", "findings": [')
    with pytest.raises(FindingsError, match="not valid JSON"):
        load_findings([str(garbage)])


_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=10),
        st.sampled_from(["critical", "xid", "gpu-1", "2024-05-01T08:00:00Z", "healthy"]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "code",
                    "severity",
                    "Hostname",
                    "UUID",
                    "gpu",
                    "first_seen",
                    "first_seen_s",
                    "device",
                    "host",
                    "uuid",
                    "index",
                    "findings",
                    "by_node",
                    "window",
                    "end_s",
                    "end",
                    "devices",
                    "timestamp_s",
                    "verdict",
                    "simulated",
                    "title",
                ]
            ),
            children,
            max_size=6,
        ),
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["gpuwarden.fleet/1", "gpuwarden.doctor/1"]), _JSON)
def test_any_document_reads_or_fails_naming_the_entry(schema: str, body: Any) -> None:
    document = {**body, "schema": schema} if isinstance(body, dict) else {"schema": schema}
    try:
        read = document_findings(document)
    except FindingsError as exc:
        error: FindingsError | None = exc
    else:
        error = None
        for finding in read.findings:
            assert finding.code and isinstance(finding.severity, Severity)
    assert error is None or (error.exit_code == 2 and error.hint)
