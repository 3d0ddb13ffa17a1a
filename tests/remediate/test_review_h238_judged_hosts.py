"""A host of a several-host doctor document is judged only where doctor ran checks on it: the
hosts the document lists (``environment.hosts``), each judged apart. A host that only a finding
(or a device) names, and that the list does not hold, had no check run on it. Of the hosts it
lists, doctor says which it judged (``environment.hosts[].judged``: checks ran on the host's
health readings, doctor's verdict on its captures alone would not be ``unknown``), and remediate
reads that instead of guessing from what the document lists of the host.

Measured on the code before (the first test failed on it): doctor's own document of real captures
(tests/data, a folder per host), its Xid finding edited to name "node-c", read "node-c" as a
judged node: one remediate could uncordon as "judged healthy" where no policy rule matches its
finding, though doctor judged nothing of it. And a host whose captures are a list of its GPUs'
UUIDs (`nvidia-smi --query-gpu=uuid --format=csv`, nothing of their health) was "judged" because
the document lists its devices: a node gpuwarden had quarantined was uncordoned as "judged
healthy" by a capture that judged nothing, where doctor on it alone says ``unknown`` (the next
two tests failed on the code before).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.remediate.findings import FindingsError, doctor_findings, load_findings
from gpuwarden.remediate.model import NodeGpus, Status
from gpuwarden.report.doctor_document import doctor_document, verdict_word
from tests.fakes.kube_api import FakeKubeApi
from tests.remediate.conftest import by, node, run, write_json, write_policy
from tests.remediate.test_several_hosts import (
    CORDON_ON_XID,
    GTX_1660_TI,
    GTX_UUID,
    K80_430,
    K80_UUIDS,
    XID13_DMESG,
)

DATA = Path(__file__).resolve().parents[1] / "data"
# `nvidia-smi --query-gpu=uuid --format=csv` of two GPUs, under its docker command: their UUIDs
UUID_LIST = (
    DATA
    / "smi_heldout23"
    / "csv__51cto-u15357586-3788127__uuid-only-2-gpus-under-docker-command.txt"
)


def _document(root: Path) -> dict[str, Any]:
    """doctor's --json of node-a (a GTX 1660 Ti, a dmesg of six Xid 13) and node-b (four K80s)."""
    for host, files in (("node-a", [GTX_1660_TI, XID13_DMESG]), ("node-b", [K80_430])):
        (root / host).mkdir(parents=True)
        for file in files:
            shutil.copy(file, root / host / file.name)
    report = diagnose_captures([str(root)], DoctorOptions())
    document: dict[str, Any] = json.loads(json.dumps(doctor_document(report)))
    return document


def test_a_host_no_check_ran_on_is_not_judged(tmp_path: Path) -> None:
    document = _document(tmp_path)
    assert [h["host"] for h in document["environment"]["hosts"]] == ["node-a", "node-b"]
    assert [name for name, _ in doctor_findings(document).judged] == ["node-a", "node-b"]
    xid = next(f for f in document["findings"] if f["code"] == "xid")
    xid["host"] = xid["device"]["host"] = "node-c"
    read = doctor_findings(document)
    assert [f.node for f in read.findings if f.code == "xid"] == ["node-c"]  # still acted on
    assert [name for name, _ in read.judged] == ["node-a", "node-b"]
    assert [name for name, _ in read.gpus] == ["node-a", "node-b"]


def _doctor(bundle: Path, out: Path) -> Path:
    document = doctor_document(diagnose_captures([str(bundle)], DoctorOptions()))
    return write_json(out, json.loads(json.dumps(document)))


def _bundle(root: Path, hosts: dict[str, list[Path]]) -> Path:
    for host, files in hosts.items():
        (root / host).mkdir(parents=True)
        for file in files:
            shutil.copy(file, root / host / file.name)
    return root


def test_a_host_whose_captures_judge_nothing_of_its_health_is_not_judged(tmp_path: Path) -> None:
    alone = diagnose_captures([str(UUID_LIST)], DoctorOptions())
    assert verdict_word(alone) == "unknown"  # doctor on the UUID list alone
    bundle = _bundle(tmp_path / "bundle", {"node-a": [GTX_1660_TI], "node-b": [UUID_LIST]})
    path = _doctor(bundle, tmp_path / "doctor.json")
    document = json.loads(path.read_text())
    said = [(h["host"], h["judged"]) for h in document["environment"]["hosts"]]
    assert said == [("node-a", True), ("node-b", False)]
    assert len([d for d in document["devices"] if d["host"] == "node-b"]) == 2
    read = load_findings([str(path)])
    assert dict(read.judged) == {"node-a": 1553887184.0}
    assert dict(read.gpus) == {"node-a": NodeGpus(1, frozenset({GTX_UUID}))}


def test_a_quarantined_node_is_not_uncordoned_by_a_list_of_its_gpus(
    tmp_path: Path, kube: FakeKubeApi, kubeconfig: Path
) -> None:
    kube.add_node("node-a")
    kube.add_node("node-b")
    policy = write_policy(tmp_path / "policy.yml", CORDON_ON_XID.replace("1h", "null"))
    then = _bundle(tmp_path / "then", {"node-a": [GTX_1660_TI], "node-b": [K80_430, XID13_DMESG]})
    first = run(policy, _doctor(then, tmp_path / "then.json"), kubeconfig, apply=True)
    assert by(first, "node-b", "cordon").status is Status.APPLIED
    # now node-b's capture is `--query-gpu=uuid` of its four K80s: every GPU there, no health
    uuids = tmp_path / "uuids.csv"
    uuids.write_text("uuid\n" + "\n".join(sorted(K80_UUIDS)) + "\n")
    now = _bundle(tmp_path / "now", {"node-a": [GTX_1660_TI], "node-b": [uuids]})
    second = run(policy, _doctor(now, tmp_path / "now.json"), kubeconfig, apply=True)
    assert [r.planned.action.kind for r in second.results if r.planned.node == "node-b"] == []
    assert node(kube, "node-b")["spec"].get("unschedulable") is True


def test_a_document_written_before_doctor_said_it_reads_as_it_did(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / "bundle", {"node-a": [GTX_1660_TI], "node-b": [UUID_LIST]})
    document = json.loads(_doctor(bundle, tmp_path / "doctor.json").read_text())
    for listing in document["environment"]["hosts"]:
        del listing["judged"]
    # then: a host whose GPUs were read, or with a finding above info
    assert [name for name, _ in doctor_findings(document).judged] == ["node-a", "node-b"]


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_judged_that_is_not_true_or_false_is_refused(tmp_path: Path, value: object) -> None:
    bundle = _bundle(tmp_path / "bundle", {"node-a": [GTX_1660_TI], "node-b": [UUID_LIST]})
    document = json.loads(_doctor(bundle, tmp_path / "doctor.json").read_text())
    document["environment"]["hosts"][1]["judged"] = value
    with pytest.raises(FindingsError, match=r"environment\.hosts\[1\]\.judged: must be true"):
        doctor_findings(document)
