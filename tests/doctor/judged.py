"""The check every damaged-input fuzz of doctor makes: a verdict with strict JSON, or an error of
the tree (exit 2, with a reference and a hint), never another exception (exit 70)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import GpuwardenError
from gpuwarden.report.doctor_document import doctor_document


def assert_judged_or_refused(text: str, name: str) -> None:
    """``text`` saved as a file called ``name`` and given to ``doctor --from``."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text)
        try:
            report = diagnose_captures([str(path)], DoctorOptions())
        except GpuwardenError as exc:
            refused: GpuwardenError | None = exc
        else:
            refused = None
            document = json.loads(json.dumps(doctor_document(report), allow_nan=False))
            assert document["verdict"] in {"healthy", "unknown", "warning", "critical"}
    if refused is not None:
        assert (refused.exit_code, bool(refused.reference), bool(refused.hint)) == (2, True, True)
