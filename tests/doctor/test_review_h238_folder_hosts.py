"""A folder of a bundle of one folder per host names its captures' host only where its name names
one machine, by the rule of a host name a capture states (doctor.hosts._host_name): letters,
digits, '.', '-' and '_', starting with a letter or digit; not "localhost", a loopback or
unspecified address (every machine's name for itself) or a masked name ("xxxx"). Another
folder's captures are of no known host, the rule a blank folder name already had, with a note
that names the folder and says why. A node named by its address (10.0.0.5, a valid Kubernetes
node name) or with an underscore (a Slurm node name) stays a host: its captures would
otherwise be merged with every other unnamed host's.

Real captures from tests/data, laid out as tests/doctor/test_several_hosts.py lays them out.
Measured on the code before (the first test failed on it for localhost, its FQDN, 127.0.0.1,
0.0.0.0 and the masked name): each was a host remediate would judge and act on.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuwarden.doctor.node import DoctorOptions, DoctorReport, diagnose_captures
from gpuwarden.remediate.findings import doctor_findings
from gpuwarden.report.doctor_document import doctor_document
from gpuwarden.types.health import UNKNOWN_HOST
from tests.doctor.test_several_hosts import GTX_1660_TI, QUADRO_P400, XID13_DMESG


def _judged(root: Path, folder: str) -> DoctorReport:
    """``folder``: the GTX 1660 Ti's -q -x and a dmesg of six Xid 13; node-b: the Quadro P400."""
    for name, files in ((folder, [GTX_1660_TI, XID13_DMESG]), ("node-b", [QUADRO_P400])):
        (root / name).mkdir(parents=True)
        for file in files:
            shutil.copy(file, root / name / file.name)
    return diagnose_captures([str(root)], DoctorOptions())


def _notes(report: DoctorReport) -> tuple[str, ...]:
    assert report.environment is not None
    return report.environment.notes


@pytest.mark.parametrize(
    "folder",
    [
        "localhost",
        "LOCALHOST.localdomain",
        "127.0.0.1",
        "127.0.1.1",
        "0.0.0.0",
        "xxxx-xxxx",
        "node a",
        "-node-a",
    ],
)
def test_a_folder_whose_name_is_no_host_name_is_of_no_known_host(
    tmp_path: Path, folder: str
) -> None:
    report = _judged(tmp_path, folder)
    assert sorted(report.sample_hosts) == sorted([UNKNOWN_HOST, "node-b"])
    document = doctor_document(report)
    xid = next(f for f in document["findings"] if f["code"] == "xid")
    assert xid["host"] is None and xid["title"].startswith(f"{UNKNOWN_HOST}: Xid 13 ")
    assert [name for name, _ in doctor_findings(document).judged] == ["node-b"]
    said = [n for n in _notes(report) if n.startswith("folder ")]
    assert said == [
        f"folder {folder!r} names no one machine (a host name is letters, digits, '.', '-' and "
        "'_', not localhost, a loopback address or a masked name): its captures are of no "
        "known host"
    ]


@pytest.mark.parametrize(
    "folder",
    ["node-a", "gpu-node-07.cluster.local", "NODE-A", "7", "ip-10-0-0-5", "10.0.0.5", "gpu_node_1"],
)
def test_a_folder_named_as_a_host_names_its_captures_host(tmp_path: Path, folder: str) -> None:
    report = _judged(tmp_path, folder)
    assert sorted(report.sample_hosts) == sorted([folder, "node-b"])
    assert not [n for n in _notes(report) if n.startswith("folder ")]
    document = doctor_document(report)
    assert sorted(name for name, _ in doctor_findings(document).judged) == sorted(
        [folder, "node-b"]
    )
