"""explain's kernel-log reader loads the Xid catalog and doctor's Xid findings only when a paste
needs them: importing the explainer stays as light as the pastes that never name an Xid."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuwarden.health.explain.explainer import explain_text
from gpuwarden.types.health import Confidence


def _loaded_after(code: str, modules: tuple[str, ...]) -> list[bool]:
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; {code}; print([m in sys.modules for m in {modules!r}])",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [word == "True" for word in shown.stdout.strip("[]\n").split(", ")]


@pytest.mark.parametrize("module", ["gpuwarden.health.xid", "gpuwarden.catalog.xid"])
def test_importing_the_explainer_loads_no_xid_findings_or_catalog(module: str) -> None:
    assert _loaded_after("import gpuwarden.health.explain.explainer", (module,)) == [False]


def test_a_gpu_lost_by_status_still_reads_after_the_lazy_import() -> None:
    # the driver's status alone (rpc.c's "status 0x0000000f"): the vote of medium weight
    line = (
        "[  812.000001] NVRM: _issueRpcAndWait: rpcSendMessage failed with status 0x0000000f "
        "for fn 10 sequence 12303!"
    )
    first = explain_text(line).diagnoses[0]
    assert (first.cause, first.confidence) == ("gpu-fallen-off-bus", Confidence.MEDIUM)
    assert any("returned NV_ERR_GPU_IS_LOST" in said for said in first.evidence)
