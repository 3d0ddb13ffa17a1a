"""`remediate` on a doctor document of several hosts' captures (doctor/node.py ``_joined``): each
host is a node of its own, judged at its own newest reading with its own GPUs; the captures of
no known host judge no node (a note says so); ``--node``, which names one node, is refused.

The documents are doctor's own, of real captures from tests/data laid out a folder per host as
tests/doctor/test_several_hosts.py lays them out. Measured on the code before (each test below
but the constant's failed on it): such a document judged NO node (its top-level ``host`` is
null), so a node healthy in the bundle was never uncordoned and no node's GPUs were counted;
``--node`` put every host's findings on the one node; nothing said the unknown host's part was
left out.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.remediate.findings import load_findings
from gpuwarden.remediate.model import NodeGpus, Status
from gpuwarden.report.doctor_document import doctor_document
from gpuwarden.types.health import UNKNOWN_HOST
from tests.fakes.kube_api import FakeKubeApi
from tests.remediate.conftest import by, node, run, write_json, write_policy

DATA = Path(__file__).resolve().parents[1] / "data"
# one GTX 1660 Ti on 0000:43:00.0 (driver 418.43), read 2019-03-29
GTX_1660_TI = DATA / "smi_xml_public" / "telegraf__gtx-1660-ti__418.43.xml"
# one Quadro P400 on 0000:43:00.0 as well (driver 418.43)
QUADRO_P400 = DATA / "smi_xml_public" / "telegraf__quadro-p400__418.43.xml"
# a dmesg (no host printed) with six Xid 13 lines on 0000:43:00
XID13_DMESG = DATA / "xid_heldout3" / "02__vllm-5901__dmesg-a800-xid13-esr-burst.log"
# four Tesla K80s of an Azure VM on driver 430.26, read 2019-12-03
K80_430 = DATA / "smi_xml_public3" / "pai__4x-tesla-k80-azure__v10__430.26.xml"
# a journal of the machine "gaming" with one Xid 13 (no nvidia-smi output of it)
GAMING_JOURNAL = DATA / "xid_public" / "15__nixpkgs-539036__journal-wrapped-xid13.log"

K80_UUIDS = frozenset(
    {
        "GPU-c3b26f7a-8dcb-619c-fa1b-8029265a4db0",
        "GPU-b01b80eb-0f18-1df0-cf88-0725bd90f1e1",
        "GPU-30bc2701-3bc2-5f35-0ebd-9867a077e138",
        "GPU-3341aba2-f01d-2c1f-7dd4-e389779faec2",
    }
)
GTX_UUID = "GPU-304a277d-3545-63b8-3a36-dfde3c992989"

# an Xid (doctor: warning) quarantines the node; a node judged healthy again is uncordoned
CORDON_ON_XID = """
rules:
  - name: xid
    match: {code: xid, severity: warning}
    actions:
      - cordon
      - taint: {key: nvidia.com/gpu-error, value: xid, effect: NoSchedule}
uncordon: true
max_findings_age: 1h
limits:
  max_unavailable: 100%
  circuit_breaker: {percentage: 100, window: 5m}  # two nodes: one run after another
"""


def _copy(source: Path, folder: Path, name: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, folder / (name or source.name))


def _doctor(bundle: Path, out: Path) -> Path:
    """doctor's JSON document of ``bundle``, as `doctor --from bundle --json` writes it."""
    document = doctor_document(diagnose_captures([str(bundle)], DoctorOptions()))
    return write_json(out, json.loads(json.dumps(document)))


def _bundle(root: Path, xid_on: str) -> Path:
    """node-a: the GTX 1660 Ti, node-b: the four K80s; the dmesg of Xid 13 in ``xid_on``'s
    folder (on node-b it names no GPU of the K80s' buses: a node's Xid all the same)."""
    _copy(GTX_1660_TI, root / "node-a", "smi.xml")
    _copy(K80_430, root / "node-b", "smi.xml")
    _copy(XID13_DMESG, root / xid_on, "dmesg.log")
    return root


# ---- reading ----------------------------------------------------------------------------------


def test_each_host_is_a_judged_node_with_its_own_time_and_gpus(tmp_path: Path) -> None:
    path = _doctor(_bundle(tmp_path / "bundle", "node-a"), tmp_path / "doctor.json")
    read = load_findings([str(path)])
    assert dict(read.judged) == {"node-a": 1553887184.0, "node-b": 1575350820.0}
    assert dict(read.gpus) == {
        "node-a": NodeGpus(1, frozenset({GTX_UUID})),
        "node-b": NodeGpus(4, K80_UUIDS),
    }
    xid = [f for f in read.findings if f.code == "xid"]
    assert [(f.node, f.uuid, f.observed_s, f.node_gpus) for f in xid] == [
        ("node-a", GTX_UUID, 1553887184.0, 1)
    ]
    # a node's finding (no device) is its host's, at its host's time
    eol = sorted((f.node, f.observed_s, f.node_gpus) for f in read.findings if f.uuid is None)
    assert eol == [("node-a", 1553887184.0, 1), ("node-b", 1575350820.0, 4)]
    assert read.notes == ()


def test_a_host_of_logs_alone_is_judged_by_its_xid_and_counts_no_gpus(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / "bundle", "node-a")
    _copy(GAMING_JOURNAL, bundle)  # it states its host: "gaming"
    read = load_findings([str(_doctor(bundle, tmp_path / "doctor.json"))])
    assert dict(read.judged)["gaming"] is None  # no reading of its GPUs: no time of its own
    assert read.gpus["gaming"] == NodeGpus(None)
    assert [f.node for f in read.findings if f.code == "xid"] == ["node-a", "gaming"]


def test_the_captures_of_no_known_host_judge_no_node_and_a_note_says_so(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / "bundle", "node-a")
    _copy(QUADRO_P400, bundle, "loose.xml")  # beside the folders: no host stated
    path = _doctor(bundle, tmp_path / "doctor.json")
    document = json.loads(path.read_text())
    assert UNKNOWN_HOST in {d["host"] for d in document["devices"]}
    read = load_findings([str(path)])
    assert set(read.judged) == {"node-a", "node-b"}
    loose = [f for f in read.findings if f.node is None]
    assert sorted(f.code for f in loose) == ["driver-branch-eol", "persistence-off"]
    assert [f.node_gpus for f in loose] == [1, 1]  # the unknown host's one GPU
    assert read.notes == (
        f"{path}: unjudged-host: the captures of no known host (1 GPU(s), 2 finding(s)) judge "
        "no node; put each host's captures in a folder of its name (or have them state it) and "
        "run doctor again",
    )


# ---- acting -----------------------------------------------------------------------------------


def test_the_node_with_the_xid_is_cordoned_and_the_one_healthy_again_uncordoned(
    tmp_path: Path, kube: FakeKubeApi, kubeconfig: Path
) -> None:
    kube.add_node("node-a")
    kube.add_node("node-b")
    # the captures are of 2019, node-a's nine months older than node-b's: no age limit
    policy = write_policy(tmp_path / "policy.yml", CORDON_ON_XID.replace("1h", "null"))
    # first the Xid was node-b's: node-b quarantined
    before = _doctor(_bundle(tmp_path / "then", "node-b"), tmp_path / "then.json")
    first = run(policy, before, kubeconfig, apply=True)
    assert by(first, "node-b", "cordon").status is Status.APPLIED
    assert node(kube, "node-b")["spec"].get("unschedulable") is True
    # now node-a's: node-a quarantined, node-b (all four K80s seen, no Xid) cleared
    after = _doctor(_bundle(tmp_path / "now", "node-a"), tmp_path / "now.json")
    second = run(policy, after, kubeconfig, apply=True)
    assert by(second, "node-a", "cordon").status is Status.APPLIED
    assert by(second, "node-b", "uncordon").status is Status.APPLIED
    assert node(kube, "node-a")["spec"].get("unschedulable") is True
    assert not node(kube, "node-b")["spec"].get("unschedulable")
    assert [t["key"] for t in node(kube, "node-b")["spec"].get("taints") or []] == []


def test_the_note_reaches_the_json_output(
    tmp_path: Path, kube: FakeKubeApi, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube.add_node("node-a")
    kube.add_node("node-b")
    bundle = _bundle(tmp_path / "bundle", "node-a")
    _copy(QUADRO_P400, bundle, "loose.xml")
    path = _doctor(bundle, tmp_path / "doctor.json")
    policy = write_policy(tmp_path / "policy.yml", CORDON_ON_XID.replace("1h", "null"))
    argv = ["remediate", "--policy", str(policy), "--findings", str(path)]
    assert main([*argv, "--kubeconfig", str(kubeconfig), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    unjudged = [n for n in document["notes"] if "unjudged-host" in n]
    assert len(unjudged) == 1 and unjudged[0].startswith(f"{path}: ")
    cordons = [(a["node"], a["status"]) for a in document["actions"] if a["action"] == "cordon"]
    assert cordons == [("node-a", "planned")]


def test_node_with_a_document_of_several_hosts_is_refused(
    tmp_path: Path, kube: FakeKubeApi, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _doctor(_bundle(tmp_path / "bundle", "node-a"), tmp_path / "doctor.json")
    policy = write_policy(tmp_path / "policy.yml", CORDON_ON_XID)
    argv = ["remediate", "--policy", str(policy), "--findings", str(path)]
    code = main([*argv, "--kubeconfig", str(kubeconfig), "--node", "gpu-7", "--json"])
    assert code == 2
    error = json.loads(capsys.readouterr().err)
    assert error["reference"] == "node-of-several-hosts"
    assert error["message"].startswith(f"{path}: --node 'gpu-7' names one node")
    assert "drop --node" in error["hint"]
