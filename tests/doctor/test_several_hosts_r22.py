"""`doctor --from` on several hosts' bundles: the four rough edges review r22 left, on real
captures from tests/data laid out in folders as a user would.

Measured on the code before (each test below failed on it):
- ``--from nest --from nest/`` (one folder, two spellings) with a folder deeper than doctor
  reads exited 2, "no capture within 2 levels": the second spelling found only files read
  already and was judged a bundle of nothing; ``--from nest --from nest/node-a`` likewise;
- a file name holding "#" (``capture #1.log``, as a Windows copy names a second copy) was cut
  at the "#" that marked a part of a log split by host: ``capture #1.log`` and
  ``capture #2.xml`` became one unit, and the nvidia-smi output of no stated host was put on
  the host the journal beside it states;
- the joined report took the first host's environment (node-a's driver 418.43 for node-b's
  430.26 too) and a check every host skipped gave the first host's reason alone;
- a node finding (no device: a driver branch past its end of life) carried no host in the
  JSON, so remediate could not tell which node it was about.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.doctor.node import UNKNOWN_HOST, DoctorOptions, DoctorReport, diagnose_captures
from gpuwarden.remediate.findings import doctor_findings
from gpuwarden.report.doctor import print_doctor_table
from gpuwarden.report.doctor_document import doctor_document
from tests.cli.test_fuzz_verbs import run_in_process
from tests.doctor.test_several_hosts import (
    GAMING_JOURNAL,
    GTX_1660_TI,
    HOME_DANIL_JOURNAL,
    QUADRO_P400,
    XID13_DMESG,
)

DATA = Path(__file__).resolve().parents[1] / "data"
# four Tesla K80s of an Azure VM on driver 430.26 (no CUDA version printed)
K80_430 = DATA / "smi_xml_public3" / "pai__4x-tesla-k80-azure__v10__430.26.xml"


def _copy(source: Path, folder: Path, name: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, folder / (name or source.name))


def _judged(*paths: Path | str) -> DoctorReport:
    return diagnose_captures([str(p) for p in paths], DoctorOptions())


def _json(*argv: str) -> dict[str, Any]:
    outcome = run_in_process(["doctor", *argv, "--json"])
    assert outcome.code == 0, outcome.err
    document: dict[str, Any] = json.loads(outcome.out)
    return document


def _nest(root: Path) -> Path:
    """Two hosts' folders, node-a's with a log folder deeper than doctor reads."""
    nest = root / "nest"
    _copy(GTX_1660_TI, nest / "node-a", "smi.xml")
    _copy(XID13_DMESG, nest / "node-a", "dmesg.log")
    _copy(XID13_DMESG, nest / "node-a" / "logs" / "2026" / "11", "dmesg.log")
    _copy(QUADRO_P400, nest / "node-b", "smi.xml")
    return nest


# ---- 1. one folder named twice -----------------------------------------------------------------


@pytest.mark.parametrize("again", ["{nest}/", "{nest}/.", "{nest}/../nest", "{nest}/node-a"])
def test_a_folder_named_again_adds_nothing_and_refuses_nothing(tmp_path: Path, again: str) -> None:
    nest = _nest(tmp_path)
    once = _json("--from", str(nest))
    twice = _json("--from", str(nest), "--from", again.format(nest=nest))
    assert twice == once
    assert [(d["host"], d["index"]) for d in once["devices"]] == [("node-a", 0), ("node-b", 0)]
    # the folder passed over is said once, not once per spelling
    assert [s["path"] for s in once["skipped"]] == [str(nest / "node-a" / "logs" / "2026")]


def test_a_link_to_a_folder_named_beside_it_is_the_one_folder(tmp_path: Path) -> None:
    nest = _nest(tmp_path)
    (tmp_path / "same").symlink_to(nest, target_is_directory=True)
    assert _json("--from", str(nest), "--from", str(tmp_path / "same")) == _json(
        "--from", str(nest)
    )


def test_a_folder_inside_one_named_reads_what_lies_beyond_the_outer_reach(tmp_path: Path) -> None:
    """``--from nest --from nest/node-a/logs``: the folder the outer one passed over is read
    through the inner one, node-a's still (not a host of its own), and no longer said passed
    over."""
    nest = _nest(tmp_path)
    report = _judged(nest, nest / "node-a" / "logs")
    assert report.sample_hosts == ("node-a", "node-b")
    deep = str(nest / "node-a" / "logs" / "2026" / "11" / "dmesg.log")
    assert deep in {i.source for i in report.inputs}
    assert report.skipped == ()


# ---- 2. a "#" in a file's name -----------------------------------------------------------------


def test_a_hash_in_a_file_name_ties_no_captures_together(tmp_path: Path) -> None:
    """Windows names a second copy "capture #2": the nvidia-smi output beside gaming's journal
    names no host and no journal names its GPU, so it is an unknown host's (as it is under any
    other name), not gaming's."""
    _copy(GAMING_JOURNAL, tmp_path, "capture #1.log")
    _copy(GTX_1660_TI, tmp_path, "capture #2.xml")
    _copy(HOME_DANIL_JOURNAL, tmp_path, "other.log")
    report = _judged(tmp_path)
    assert report.sample_hosts == (UNKNOWN_HOST,)
    renamed = tmp_path / "plain"
    _copy(tmp_path / "capture #1.log", renamed, "capture-1.log")
    _copy(tmp_path / "capture #2.xml", renamed, "capture-2.xml")
    _copy(tmp_path / "other.log", renamed)
    assert _judged(renamed).sample_hosts == report.sample_hosts


def test_a_log_of_two_hosts_named_with_a_hash_keeps_its_name_and_each_hosts_lines(
    tmp_path: Path,
) -> None:
    pasted = tmp_path / "kern#1.log"
    pasted.write_text(GAMING_JOURNAL.read_text() + HOME_DANIL_JOURNAL.read_text())
    report = _judged(pasted)
    xids = sorted((f.device.host, f.count) for f in report.findings if f.code == "xid" and f.device)
    assert xids == [("gaming", 1), ("home-danil", 6)]
    assert sorted(k.source for k in report.kernel_logs) == [
        f"{pasted} (gaming)",
        f"{pasted} (home-danil)",
    ]


# ---- 3. each host's environment ----------------------------------------------------------------


def _two_drivers(root: Path) -> Path:
    _copy(GTX_1660_TI, root / "node-a", "smi.xml")  # driver 418.43, CUDA 10.1
    _copy(XID13_DMESG, root / "node-a", "dmesg.log")
    _copy(K80_430, root / "node-b", "smi.xml")  # driver 430.26
    return root


def test_hosts_on_two_drivers_each_say_their_own(tmp_path: Path) -> None:
    document = doctor_document(_judged(_two_drivers(tmp_path)))
    environment = document["environment"]
    hosts = [
        (h["host"], h["nvidia_smi"]["driver_version"], h["nvidia_smi"]["cuda_version"])
        for h in environment["hosts"]
    ]
    assert hosts == [("node-a", "418.43", "10.1"), ("node-b", "430.26", None)]
    # what they do not agree on is no one host's: unknown of the bundle, said per host
    assert environment["nvidia_smi"]["driver_version"] is None
    assert environment["nvidia_smi"]["present"] is True
    assert environment["platform"] == "linux"


def test_a_check_every_host_skipped_says_each_hosts_reason(tmp_path: Path) -> None:
    checks = {c.name: c for c in _judged(_two_drivers(tmp_path)).checks}
    count = checks["gpu-count"]
    assert count.status.value == "skip"
    assert count.detail.startswith("node-a: 1 GPU(s) reporting; ")
    assert "; node-b: 4 GPU(s) reporting; " in count.detail
    # one reason of every host: said once, of them all
    assert checks["nvlink-topology"].detail == (
        "all 2 hosts: no `nvidia-smi nvlink -s` or `topo -m` output read"
    )


def test_the_table_says_each_hosts_environment_where_they_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    print_doctor_table(_judged(_two_drivers(tmp_path)))
    rows = _environment_rows(capsys.readouterr().out)
    assert rows == [
        ["node-a", "418.43", "10.1", "–", "read"],
        ["node-b", "430.26", "–", "–", "read"],
    ]


def test_the_table_says_an_environment_all_hosts_share_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _copy(GTX_1660_TI, tmp_path / "node-a", "smi.xml")
    _copy(QUADRO_P400, tmp_path / "node-b", "smi.xml")  # 418.43 as well
    report = _judged(tmp_path)
    print_doctor_table(report)
    assert _environment_rows(capsys.readouterr().out) == [
        ["all 2 hosts", "418.43", "10.1", "–", "read"]
    ]
    environment = doctor_document(report)["environment"]
    assert environment["nvidia_smi"]["driver_version"] == "418.43"  # agreed: said


def _environment_rows(table: str) -> list[list[str]]:
    lines = table.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("environment by host")))
    rows = []
    for line in lines[start + 4 :]:
        if not line.startswith("│"):
            break
        rows.append([cell.strip() for cell in line.split("│")[1:-1]])
    return rows


# ---- 4. a node finding's host ------------------------------------------------------------------


def test_a_node_finding_of_several_hosts_names_its_host_for_remediate(tmp_path: Path) -> None:
    document = json.loads(json.dumps(doctor_document(_judged(_two_drivers(tmp_path)))))
    eol = [f for f in document["findings"] if f["code"] == "driver-branch-eol"]
    assert [(f["device"], f["host"]) for f in eol] == [(None, "node-a"), (None, "node-b")]
    read = doctor_findings(document)
    assert sorted(
        (f.node, dict(f.labels).get("Hostname"))
        for f in read.findings
        if f.code == "driver-branch-eol"
    ) == [("node-a", "node-a"), ("node-b", "node-b")]
    xid = next(f for f in read.findings if f.code == "xid")
    assert xid.node == "node-a"  # a GPU's finding: by its device's host, as before


def test_a_node_finding_of_no_known_host_names_none(tmp_path: Path) -> None:
    _copy(GAMING_JOURNAL, tmp_path)
    _copy(HOME_DANIL_JOURNAL, tmp_path)
    _copy(K80_430, tmp_path)  # whose? no host, no GPU tie: an unknown host's
    document = doctor_document(_judged(tmp_path))
    eol = [f for f in document["findings"] if f["code"] == "driver-branch-eol"]
    assert [(f["host"], f["title"].split(":", 1)[0]) for f in eol] == [(None, UNKNOWN_HOST)]
