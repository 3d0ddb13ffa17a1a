"""`gpuwarden trace analyze|diff` end to end on real traces: exit codes, warnings, JSON schema."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.commands.trace import _rank_list
from gpuwarden.cli.main import main
from gpuwarden.report.trace_json import plain
from gpuwarden.report.trace_status import loading_progress
from gpuwarden.traces.hta import hta_report
from gpuwarden.traces.load import load_traces
from tests.telemetry.store.unprivileged import cli_without_privileges, open_dir, run_cli

MEGATRON = "astra_megatron_tp8_a100"
CONTROL = "trace_diff/control/control.json.gz"
TEST = "trace_diff/test/test.json.gz"
AMD = "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
CPU_ONLY = "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = _run(capsys, *args, "--json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


@pytest.fixture
def three_good_one_truncated(fixtures: Path, tmp_path: Path) -> Path:
    """Ranks 0-2 of the Megatron job, plus rank 3's file cut in half (a crashed copy)."""
    src = fixtures / "traces" / MEGATRON
    for rank in range(3):
        shutil.copy(src / f"megatron_kineto_{rank}.json.gz", tmp_path)
    raw = gzip.decompress((src / "megatron_kineto_3.json.gz").read_bytes())
    (tmp_path / "megatron_kineto_3.json").write_bytes(raw[: len(raw) // 2])
    return tmp_path


def test_json_has_the_schema_keys_and_htas_own_rows(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fixtures / "traces" / MEGATRON
    doc = _json(capsys, "trace", "analyze", str(path))
    assert doc["schema"] == "gpuwarden.trace/1"
    assert {"ranks", "verdict", "hta", "files", "skipped", "warnings", "stragglers"} <= set(doc)
    assert list(doc["ranks"]) == [str(r) for r in range(8)]
    assert {"kind", "summary", "evidence", "fix"} <= set(doc["verdict"])
    assert doc["verdict"]["kind"] == "straggler-bound"
    # Each hta table is exactly hta_report's rows, with HTA's column names.
    expected = hta_report(load_traces([path]))
    for key, rows in (
        ("temporal_breakdown", expected.temporal_breakdown),
        ("idle_time_breakdown", expected.idle_time_breakdown),
        ("comm_comp_overlap", expected.comm_comp_overlap),
        ("kernel_type_breakdown", expected.kernel_type_breakdown),
    ):
        assert doc["hta"][key] == [plain(r.to_row()) for r in rows], key
    assert set(doc["hta"]["temporal_breakdown"][0]) == {
        "rank",
        "idle_time(us)",
        "compute_time(us)",
        "non_compute_time(us)",
        "kernel_time(us)",
        "idle_time_pctg",
        "compute_time_pctg",
        "non_compute_time_pctg",
    }
    rank0 = doc["ranks"]["0"]
    assert rank0["rank"] == 0
    assert rank0["device_name"] == "NVIDIA A100-SXM4-80GB"
    assert {k["kind"] for k in rank0["kinds"]} >= {"gemm", "comm_allreduce"}
    assert doc["files"][0]["device"] == "NVIDIA A100-SXM4-80GB"
    assert doc["skipped"] == []


def test_json_has_no_nan(fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The AMD trace has no communication: HTA's overlap is NaN there, JSON must say null.
    code, out, _ = _run(capsys, "trace", "analyze", str(fixtures / "traces" / AMD), "--json")
    assert code == 0
    assert "NaN" not in out
    doc = json.loads(out)
    assert doc["hta"]["comm_comp_overlap"] == [{"rank": 0, "comp_comm_overlap_pctg": None}]


def test_cpu_only_steps_have_wall_time_and_null_gpu_fields(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fixtures / "traces" / CPU_ONLY
    with gzip.open(path, "rt") as f:
        (event,) = (
            e for e in json.load(f)["traceEvents"] if str(e.get("name")).startswith("ProfilerStep#")
        )
    (step,) = _json(capsys, "trace", "analyze", str(path))["ranks"]["34"]["steps"]
    assert (step["step"], step["start_us"], step["wall_us"]) == (551, event["ts"], event["dur"])
    gpu_keys = set(step) - {"step", "start_us", "wall_us"}
    assert "gpu_busy_us" in gpu_keys and {step[k] for k in gpu_keys} == {None}
    code, out, err = _run(capsys, "trace", "analyze", str(path))
    assert code == 0, err
    cells = next(
        [c.strip() for c in line.split("│")] for line in out.splitlines() if "210.11" in line
    )
    assert cells[1:5] == ["34", "0", "1", "210.11"]  # rank, GPU events, steps, median step ms


def test_human_output_starts_with_the_verdict(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "trace", "analyze", str(fixtures / "traces" / CONTROL))
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith("memory-bound-kernels: ")
    assert out.index("fix:") < out.index("HTA temporal breakdown (%")


def test_hta_tables_without_rows_are_named_not_drawn(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CPU-only trace gives HTA no GPU rows: one line names the empty tables (the warnings
    say why), no empty box is drawn; a table with rows is drawn as before."""
    code, out, err = _run(capsys, "trace", "analyze", str(fixtures / "traces" / CPU_ONLY))
    assert code == 0, err
    assert "HTA temporal breakdown (%" not in out and "HTA idle-time breakdown (" not in out
    line = next(x for x in out.splitlines() if x.startswith("HTA: no rows for the "))
    assert "temporal breakdown" in line and "idle-time breakdown" in line
    assert "no GPU activity in this trace" in err
    code, out, _ = _run(capsys, "trace", "analyze", str(fixtures / "traces" / CONTROL))
    assert "HTA temporal breakdown (%" in out and "HTA: no rows" not in out


def test_one_truncated_rank_is_skipped_and_the_others_analysed(
    three_good_one_truncated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "trace", "analyze", str(three_good_one_truncated), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc["ranks"]) == ["0", "1", "2"]
    (skipped,) = doc["skipped"]
    assert skipped["path"].endswith("megatron_kineto_3.json")
    warnings = [line for line in err.splitlines() if line.startswith("warning: skipped")]
    assert len(warnings) == 1
    assert "megatron_kineto_3.json" in warnings[0]


def test_a_lone_corrupt_file_exits_2_naming_it(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truncated = tmp_path / "rank-0.pt.trace.json.gz"
    data = (fixtures / "traces" / AMD).read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    code, out, err = _run(capsys, "trace", "analyze", str(truncated))
    assert code == 2
    assert out == ""
    assert str(truncated) in err
    assert "Traceback" not in err
    not_a_trace = tmp_path / "notes.json"
    not_a_trace.write_text('{"hello": "world"}')
    code, _, err = _run(capsys, "trace", "analyze", str(not_a_trace))
    assert code == 2
    assert str(not_a_trace) in err


def test_unknown_rank_exits_2(fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(
        capsys, "trace", "analyze", str(fixtures / "traces" / AMD), "--ranks", "0,9"
    )
    assert code == 2
    assert "trace-unknown-rank" in err
    assert "--ranks 9: not among the loaded ranks (0)" in err


def test_ranks_option_keeps_only_those_ranks(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _json(capsys, "trace", "analyze", str(fixtures / "traces" / MEGATRON), "--ranks", "2,5")
    assert list(doc["ranks"]) == ["2", "5"]
    assert [row["rank"] for row in doc["hta"]["temporal_breakdown"]] == [2, 5]


def test_html_option_writes_the_page_and_says_where(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "report.html"
    code, _, err = _run(
        capsys, "trace", "analyze", str(fixtures / "traces" / AMD), "--html", str(page)
    )
    assert code == 0
    assert f"wrote {page}" in err
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    code, _, err = _run(
        capsys, "trace", "analyze", str(fixtures / "traces" / AMD), "--html", str(tmp_path)
    )
    assert code == 2
    assert "is a directory" in err


def test_diff_json(fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = fixtures / "traces" / CONTROL, fixtures / "traces" / TEST
    doc = _json(capsys, "trace", "diff", str(a), str(b))
    assert doc["schema"] == "gpuwarden.trace-diff/1"
    assert doc["before"] == str(a)
    assert doc["after"] == str(b)
    assert doc["per_step"] is True  # both traces have six ProfilerSteps (SOURCES.md)
    for kind in doc["kinds"]:
        assert kind["delta_us"] == pytest.approx(kind["after_us"] - kind["before_us"])


def test_diff_human(fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two small traces of different jobs: the human form still reads as a comparison.
    a = fixtures / "traces" / AMD
    b = fixtures / "traces" / "triton_example" / "triton_example.json.gz"
    code, out, err = _run(capsys, "trace", "diff", str(a), str(b))
    assert code == 0, err
    # said first: an AMD GPU against an NVIDIA one
    first, second = out.splitlines()[:2]
    assert first.startswith("warning: different GPUs: before ran on AMD Radeon Graphics, after ")
    assert second.startswith(f"before {a}")
    assert "GPU time by kernel kind" in out


def test_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    with loading_progress() as progress:
        assert progress is None  # pytest's stderr is not a TTY
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with loading_progress() as progress:
        assert progress is not None
        progress("rank-0.json", 1, 2)
        progress("rank-1.json", 2, 2)


@pytest.mark.slow
def test_subprocess_end_to_end_quiet_stderr(fixtures: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwarden", "trace", "analyze", str(fixtures / "traces" / AMD)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("cpu-launch-bound: ")
    assert proc.stderr == ""  # no progress bar and no warnings when piped


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_rank_list_parses_or_rejects_with_argparse_error(text: str) -> None:
    try:
        ranks = _rank_list(text)
    except argparse.ArgumentTypeError as exc:
        message = str(exc)
        assert repr(text) in message
        return
    assert ranks
    assert all(r >= 0 for r in ranks)
    assert ranks == tuple(int(part) for part in text.split(",") if part.strip())


def test_rank_list_examples() -> None:
    assert _rank_list("0,1, 5") == (0, 1, 5)
    for bad in ("", "a", "1,-2", ","):
        with pytest.raises(argparse.ArgumentTypeError):
            _rank_list(bad)


@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("4", "4")])
def test_trace_keeps_openblas_to_one_thread_unless_told(
    fixtures: Path, given: str | None, expected: str
) -> None:
    # the analyses never call BLAS: OpenBLAS's threads would only spin; a user's setting wins
    trace = fixtures / "traces" / "call_stack" / "backward_thread.json"
    code = (
        "import os, sys\n"
        "from gpuwarden.cli.main import main\n"
        f"main(['trace', 'analyze', {str(trace)!r}, '--json'])\n"
        "import numpy\n"
        "print('OPENBLAS', os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert f"OPENBLAS {expected}" in proc.stderr


@pytest.mark.parametrize(
    "rel",
    [
        "triton_example/triton_example.json.gz",
        "call_stack/backward_thread.json",
        "critical_path/cuda_event_sync/event_sync_trace.json.gz",
    ],
)
def test_a_handful_of_gpu_events_is_not_enough_data(
    fixtures: Path, capsys: pytest.CaptureFixture[str], rel: str
) -> None:
    """Real traces of 1-5 GPU events: no bottleneck is named, the verdict says what is missing."""
    path = fixtures / "traces" / rel
    doc = _json(capsys, "trace", "analyze", str(path))
    verdict = doc["verdict"]
    events = sum(r["gpu_events"] for r in doc["ranks"].values())
    assert 0 < events < 10
    assert verdict["kind"] == "not-enough-data"
    assert f"{events} GPU event(s), a verdict needs at least 10" in verdict["summary"]
    assert verdict["evidence"][1] == (
        f"missing: at least {10 - events} more GPU events, best whole training steps "
        "(ProfilerStep annotations)"
    )
    assert "prof.step()" in verdict["fix"]


def _spoiled_trace(fixtures: Path, tmp_path: Path) -> Path:
    raw = gzip.decompress((fixtures / "traces" / SIMPLE_ADD).read_bytes())
    document = json.loads(raw)
    kernels = [e for e in document["traceEvents"] if e.get("cat") == "kernel"]
    for kernel in kernels[:4]:
        kernel["dur"] = "x"
    kernels[4]["args"]["stream"] = "seven"
    path = tmp_path / "rank-0.pt.trace.json"
    path.write_text(json.dumps(document))
    return path


SIMPLE_ADD = "critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"


def test_skipped_events_are_reported_in_json_and_on_the_terminal(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _spoiled_trace(fixtures, tmp_path)
    expected = {"dur-not-a-number": 4, "gpu-event-without-stream": 1}
    doc = _json(capsys, "trace", "analyze", str(path))
    assert doc["skipped_events"] == expected
    assert doc["files"][0]["skipped_events"] == expected
    assert doc["ranks"]["0"]["gpu_events"] == 98 - 4  # by category: the stream-less one too
    hta_kernels = doc["hta"]["kernel_type_breakdown"]
    clean_kernels = _json(capsys, "trace", "analyze", str(fixtures / "traces" / SIMPLE_ADD))["hta"]
    assert hta_kernels != clean_kernels["kernel_type_breakdown"]  # HTA's tables left 5 out
    code, _, err = _run(capsys, "trace", "analyze", str(path))
    assert code == 0
    assert (
        "warning: rank 0: 5 event(s) left out of the analyses: 4 × dur is not a finite number: "
        "the event is dropped; 1 × a kernel, memcpy or memset whose args.stream is missing or "
        "not an integer" in " ".join(err.split())
    )
    clean = _json(capsys, "trace", "analyze", str(fixtures / "traces" / SIMPLE_ADD))
    assert clean["skipped_events"] == {} and clean["files"][0]["skipped_events"] == {}


def test_names_too_long_are_exit_2(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = tmp_path / ("x" * 300)
    code, _, err = _run(capsys, "trace", "analyze", str(long / "t.json"), "--json")
    assert code == 2 and json.loads(err)["reference"] == "trace-unreadable"
    assert "File name too long" in json.loads(err)["message"]
    good = str(fixtures / "traces" / AMD)
    for html in (
        long / "report.html",
        tmp_path / ("y" * 300 + ".html"),
        tmp_path / "no" / "r.html",
    ):
        code, out, err = _run(capsys, "trace", "analyze", good, "--html", str(html), "--json")
        assert code == 2 and out == ""  # refused before the analysis
        assert json.loads(err)["reference"] == "trace-html-path"
    code, _, err = _run(capsys, "trace", "diff", str(long), good, "--json")
    assert code == 2 and json.loads(err)["reference"] == "trace-unreadable"


def test_an_unreadable_directory_is_exit_2(fixtures: Path) -> None:
    with open_dir() as shared:
        folder = shared / "traces"
        shutil.copytree(fixtures / "traces" / "amd_trace", folder)
        argv = ["trace", "analyze", f"{folder}/", "--json"]
        assert run_cli(argv)[0] == 0  # readable: works (and imports what the child will need)
        for mode in (0o000, 0o311):  # nothing allowed; enter but not list
            folder.chmod(mode)
            code, out, err = cli_without_privileges(argv, read_anything=False)
            assert code == 2 and out == ""
            error = json.loads(err)
            assert error["reference"] == "trace-unreadable"
            assert "Permission denied" in error["message"]


def test_diff_says_first_what_cannot_be_compared(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    control = fixtures / "traces" / CONTROL
    test = fixtures / "traces" / TEST
    doc = _json(capsys, "trace", "diff", str(control), str(test))
    assert doc["warnings"] == [
        "different GPUs: before ran on NVIDIA A100-PG509-200, after on Tesla V100-SXM2-16GB: "
        "kernel times change with the hardware, not only with the change under test",
        "different job sizes: before is rank 3 of 8, after is rank 1 of 2: communication and "
        "the work per rank change with the number of ranks",
    ]
    same = _json(capsys, "trace", "diff", str(control), str(control))
    assert same["warnings"] == []
    code, out, _ = _run(capsys, "trace", "diff", str(control), str(test))
    assert code == 0
    assert [line.split(" ")[0] for line in out.splitlines()[:3]] == [
        "warning:",
        "warning:",
        "before",
    ]
