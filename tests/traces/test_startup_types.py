"""`trace analyze` creates the classes of the reports a trace calls for, not every one: a frozen
slots dataclass costs ~0.5 ms to create, and a small trace's whole run is ~0.1 s. The reports
live in modules of their own; ``gpuwarden.types.trace_insights`` still names them."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwarden.types import trace_insights
from gpuwarden.types.trace_diff import TraceDiff
from gpuwarden.types.trace_tensor_cores import TensorCoreReport

DATA = Path(__file__).resolve().parents[1] / "data"
# 2 KB, one rank, Triton kernels only: no GEMM, copy, attention, collective or DataLoader
TRITON = Path("traces", "triton_example", "triton_example.json.gz")
# one rank of an H200 MoE step: nvjet GEMMs, no attention, no collective
SCATTERMOE = DATA / "traces_public8" / "xaheli_h200_scattermoe" / "scattermoe_step2.json"

# The classes a run on TRITON has no use for
UNNEEDED = (
    "StepDataLoading",
    "DataLoadingReport",
    "H2DReport",
    "KernelTime",
    "DtypeTime",
    "GemmShape",
    "TensorCoreReport",
    "SdpaBackendUse",
    "AttentionReport",
    "CollectiveStats",
    "CommunicationReport",
    "RankStraggler",
    "StragglerReport",
    "KindDelta",
    "KernelDelta",
    "TraceDiff",
)

_RUN = """
import contextlib, dataclasses, io, json, sys
from gpuwarden.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["trace", "analyze", sys.argv[1], "--json"])
created = sorted(
    v.__name__
    for name, m in list(sys.modules.items())
    if name.startswith("gpuwarden")
    for v in list(vars(m).values())
    if isinstance(v, type) and dataclasses.is_dataclass(v)
)
print(json.dumps({"code": code, "created": created, "difflib": "difflib" in sys.modules,
                  "document": json.loads(out.getvalue())}))
"""


def _analyze_in_a_fresh_process(trace: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(trace)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_small_trace_creates_no_class_of_the_reports_it_lacks(fixtures: Path) -> None:
    run = _analyze_in_a_fresh_process(fixtures / TRITON)
    document = run["document"]
    assert run["code"] == 0
    assert isinstance(document, dict)
    rank = document["ranks"]["0"]
    assert [rank[k] for k in ("tensor_cores", "attention", "communication", "h2d")] == [None] * 4
    created = run["created"]
    assert isinstance(created, list)
    assert sorted(set(created) & set(UNNEEDED)) == []
    assert "RankInsights" in created  # what the trace does call for is there
    # difflib serves only a mistyped command line
    assert run["difflib"] is False


def test_a_trace_with_gemms_creates_the_tensor_core_report() -> None:
    run = _analyze_in_a_fresh_process(SCATTERMOE)
    document = run["document"]
    assert isinstance(document, dict)
    tensor_cores = document["ranks"]["0"]["tensor_cores"]
    assert (tensor_cores["gemm_kernels"], tensor_cores["dtypes"][0]["dtype"]) == (7, "bf16")
    created = run["created"]
    assert isinstance(created, list)
    assert {"TensorCoreReport", "KernelTime", "DtypeTime"} <= set(created)
    assert "AttentionReport" not in created


def test_trace_insights_still_names_the_reports_of_their_own_modules() -> None:
    assert trace_insights.TraceDiff is TraceDiff
    assert trace_insights.TensorCoreReport is TensorCoreReport
    assert dataclasses.is_dataclass(trace_insights.AttentionReport)
    assert all(hasattr(trace_insights, name) for name in UNNEEDED)
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchReport'"):
        _ = trace_insights.NoSuchReport  # type: ignore[attr-defined]
