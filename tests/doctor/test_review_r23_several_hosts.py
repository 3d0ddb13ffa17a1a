"""Review r23 of doctor's several-host join (doctor/node.py ``_joined_checks``), on real
captures from tests/data laid out as one folder per host.

Measured on the code before (the test below failed on it): a check one host ran and another
skipped said only the host that ran it — ``xid`` read "warn — node-a: Xid 13 ×6 in …" and
nothing of node-b, whose kernel log was never among the captures, so a reader took node-b's
Xids as checked. Each host is judged apart; another host's result is not this one's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.remediate.findings import doctor_findings
from gpuwarden.report.doctor_document import doctor_document
from gpuwarden.types.health import UNKNOWN_HOST, CheckStatus
from tests.doctor.test_several_hosts import GTX_1660_TI, QUADRO_P400, XID13_DMESG


def _bundle(root: Path, hosts: dict[str, list[Path]]) -> Path:
    for host, files in hosts.items():
        (root / host).mkdir(parents=True)
        for file in files:
            shutil.copy(file, root / host / file.name)
    return root


def _check(root: Path, name: str) -> tuple[CheckStatus, str]:
    report = diagnose_captures([str(root)], DoctorOptions())
    check = next(c for c in report.checks if c.name == name)
    return check.status, check.detail


def test_a_check_one_host_skipped_says_so_beside_the_host_that_ran_it(tmp_path: Path) -> None:
    root = _bundle(tmp_path, {"node-a": [GTX_1660_TI, XID13_DMESG], "node-b": [QUADRO_P400]})
    status, detail = _check(root, "xid")
    assert status is CheckStatus.WARN  # node-a's Xid 13 burst: the worst status stands
    ran, not_run = detail.split("; not checked on ")
    assert ran.startswith("node-a: Xid 13 ×6 in ")
    assert not_run.startswith("node-b: no kernel log among the captures")


def test_a_check_every_host_ran_or_every_host_skipped_reads_as_before(tmp_path: Path) -> None:
    both_logs = _bundle(
        tmp_path / "logs",
        {"node-a": [GTX_1660_TI, XID13_DMESG], "node-b": [QUADRO_P400, XID13_DMESG]},
    )
    status, detail = _check(both_logs, "xid")
    assert status is CheckStatus.WARN
    assert "not checked" not in detail
    assert detail.startswith("node-a: Xid 13 ×6") and "; node-b: Xid 13 ×6" in detail
    no_logs = _bundle(tmp_path / "none", {"node-a": [GTX_1660_TI], "node-b": [QUADRO_P400]})
    status, detail = _check(no_logs, "xid")
    assert status is CheckStatus.SKIP
    assert detail.startswith("all 2 hosts: no kernel log among the captures")


# ---- a folder whose name is no host's ----------------------------------------------------------
# Measured before: a folder named " " (only a blank) in a bundle of one folder per host was the
# host " " — findings titled " : Xid 13 …", and remediate judged (and would act on) a node " ".
# A folder named "host unknown" was a host spelled as doctor spells the captures of no known
# host: judged as one more host apart from those captures.


@pytest.mark.parametrize("folder", [" ", "\t", UNKNOWN_HOST])
def test_a_folder_named_by_no_host_name_is_of_no_known_host(tmp_path: Path, folder: str) -> None:
    root = _bundle(tmp_path, {folder: [GTX_1660_TI, XID13_DMESG], "node-b": [QUADRO_P400]})
    report = diagnose_captures([str(root)], DoctorOptions())
    assert report.sample_hosts == (UNKNOWN_HOST, "node-b")
    assert report.environment is not None
    assert any("name no host and their folder does not tell" in n for n in report.environment.notes)
    document = doctor_document(report)
    xid = next(f for f in document["findings"] if f["code"] == "xid")
    assert xid["host"] is None and xid["title"].startswith(f"{UNKNOWN_HOST}: Xid 13")
    judged = doctor_findings(document)
    assert [name for name, _ in judged.judged] == ["node-b"]  # no node " " to act on
    assert [n.split(":")[0] for n in judged.notes] == ["unjudged-host"]
