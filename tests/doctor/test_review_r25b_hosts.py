"""Review r25b: a fully qualified name may end in the DNS root's dot ("localhost." is the same
name as "localhost"); a folder so named is every machine's own name, of no known host, as
"localhost" is (tests/doctor/test_review_h238_folder_hosts.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.remediate.findings import doctor_findings
from gpuwarden.report.doctor_document import doctor_document
from gpuwarden.types.health import UNKNOWN_HOST
from tests.doctor.test_review_h238_folder_hosts import _judged


@pytest.mark.parametrize("folder", ["localhost.", "LOCALHOST.localdomain."])
def test_localhost_with_the_root_dot_is_of_no_known_host(tmp_path: Path, folder: str) -> None:
    report = _judged(tmp_path, folder)
    assert sorted(report.sample_hosts) == sorted([UNKNOWN_HOST, "node-b"])
    assert [name for name, _ in doctor_findings(doctor_document(report)).judged] == ["node-b"]


def test_a_host_name_with_the_root_dot_stays_a_host(tmp_path: Path) -> None:
    report = _judged(tmp_path, "gpu-node-07.cluster.local.")
    assert sorted(report.sample_hosts) == sorted(["gpu-node-07.cluster.local.", "node-b"])
