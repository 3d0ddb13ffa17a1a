"""The fuzz of test_findings_mutated over a doctor document of several hosts' captures (its
``environment.hosts``, each finding's ``host``: remediate/findings.py reads it apart), of real
captures a folder per host. Mutated, it is read or refused with a GpuwardenError, never another
exception."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.report.doctor_document import doctor_document
from tests.remediate.test_findings_mutated import assert_read_or_refused

DATA = Path(__file__).resolve().parents[1] / "data"
# test_several_hosts.py's real captures: a GTX 1660 Ti; a Quadro P400 (the same bus id) with a
# dmesg of six Xid 13s; and a journal of the machine "gaming" (one Xid 13) in no host's folder
CAPTURES_BY_HOST = {
    "node-a": ("smi_xml_public/telegraf__gtx-1660-ti__418.43.xml",),
    "node-b": (
        "smi_xml_public/telegraf__quadro-p400__418.43.xml",
        "xid_heldout3/02__vllm-5901__dmesg-a800-xid13-esr-burst.log",
    ),
    "": ("xid_public/15__nixpkgs-539036__journal-wrapped-xid13.log",),
}


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    bundle = tmp_path_factory.mktemp("bundle")
    for host, captures in CAPTURES_BY_HOST.items():
        (bundle / host).mkdir(exist_ok=True)
        for capture in captures:
            shutil.copy(DATA / capture, bundle / host)
    report = diagnose_captures([str(bundle)], DoctorOptions())
    doctor = json.loads(json.dumps(doctor_document(report)))  # exactly what --json prints
    assert [h["host"] for h in doctor["environment"]["hosts"]] == ["gaming", "node-a", "node-b"]
    assert {f["host"] for f in doctor["findings"] if f["code"] == "xid"} == {"node-b", "gaming"}
    return doctor


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_a_mutated_several_hosts_document_is_read_or_refused(
    document: dict[str, Any], data: st.DataObject
) -> None:
    assert_read_or_refused(document, data)
