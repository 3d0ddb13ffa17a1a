"""The per-rank table's tensor-core cell says "–" when no GEMM kernel's name tells tensor core
or not (MIOpen's convolutions): "0.0" read as "no tensor cores" for an fp16 Winograd run."""

from __future__ import annotations

from pathlib import Path

from gpuwarden.report.trace import rank_rows
from gpuwarden.traces.analyze import analyze
from gpuwarden.traces.load import load_traces

ROOT = Path(__file__).resolve().parents[1] / "data"


def test_silent_kernel_names_give_no_tensor_core_share() -> None:
    trace = ROOT / "traces_public12" / "hpctraining_mi300x_conv_replay" / "replay_trace.json"
    [row] = rank_rows(analyze(load_traces([trace])))
    assert row["TC % GEMM"] == "–" and row["GEMM dtype %"].startswith("fp16")


def test_named_kernels_keep_their_share(fixtures: Path) -> None:
    """A V100 trace whose GEMMs are all volta_sgemm_* (FP32 SIMT): 0.0 % is a reading there."""
    trace = ROOT / "traces_public" / "kineto_tb_plugin_v100"
    rows = rank_rows(analyze(load_traces([trace])))
    assert rows and all(row["TC % GEMM"] != "–" for row in rows)
