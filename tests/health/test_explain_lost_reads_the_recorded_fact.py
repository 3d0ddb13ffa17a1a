"""explain's vote on a lost GPU reads the scanner's recorded fact (``XidGroup.lost_by_status``)
itself: it no longer imports doctor's Xid findings module (gpuwarden.health.xid) for a wrapper
around that field, so a paste of a lost GPU loads no more than the scan needs."""

from __future__ import annotations

import subprocess
import sys

_STATUS_ONLY = (
    "[  812.000001] NVRM: _issueRpcAndWait: rpcSendMessage failed with status 0x0000000f "
    "for fn 10 sequence 12303!"
)


def test_a_gpu_lost_by_status_is_explained_without_doctors_xid_findings() -> None:
    code = (
        "import sys; from gpuwarden.health.explain.explainer import explain_text; "
        f"first = explain_text({_STATUS_ONLY!r}).diagnoses[0]; "
        "print(first.cause, first.confidence.value, 'gpuwarden.health.xid' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.split() == ["gpu-fallen-off-bus", "medium", "False"]
