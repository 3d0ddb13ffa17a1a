"""Every verb's text output prints the data it was given as written. rich reads "[...]" in a string
as markup: a GPU name, a kernel name, a file path, a host or pod label holding "[/bold]" ended the
process (MarkupError, exit 70) and one holding "[nvidia]" or "[red]x[/red]" lost those characters
without a word. Each test runs the real CLI on a real input whose printed fields were changed to
carry such text, and looks for the exact text in what it printed."""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main

CLOSING = "[/bold]"
TAG = "[nvidia]"
STYLED = "[red]x[/red]"
MARKED = f"{STYLED} {TAG} {CLOSING}"
# a file or directory name cannot hold "/": "[red]" opens a style that no tag closes; ":x:" is
# an emoji code to rich
NAME_MARKED = f"{TAG} :x: [red]y"

AMD_TRACE = "traces/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
Q_TEXT = "nvidia-smi/linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle.q.txt"
GPU_NAME = "NVIDIA GeForce RTX 2080 SUPER"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _assert_literal(out: str, *texts: str) -> None:
    missing = [t for t in texts if t not in out]
    assert not missing, f"{missing} not printed as written in:\n{out}"


def _trace(fixtures: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(gzip.decompress((fixtures / AMD_TRACE).read_bytes()))
    return document


def _write_trace(document: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def _rename_devices(document: dict[str, Any]) -> None:
    for device in document["deviceProperties"]:
        assert device["name"] == "AMD Radeon Graphics"
        device["name"] = f"AMD {MARKED}"


def _kernels(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in document["traceEvents"] if e.get("cat") == "kernel"]


# --- trace ---------------------------------------------------------------------------------------


def test_trace_analyze_prints_the_file_and_device_names_as_written(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _trace(fixtures)
    _rename_devices(document)
    path = _write_trace(document, tmp_path / f"{NAME_MARKED}.json")
    out = _run(capsys, "trace", "analyze", str(path))
    _assert_literal(out, f"{NAME_MARKED}.json", f"AMD {MARKED}")


def test_trace_diff_prints_kernel_names_and_paths_as_written(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _trace(fixtures)
    after = _trace(fixtures)
    for event in _kernels(after):
        event["name"] = f"{MARKED} {event['name']}"
    a = _write_trace(before, tmp_path / f"before {NAME_MARKED}" / "trace.json")
    b = _write_trace(after, tmp_path / f"after {NAME_MARKED}" / "trace.json")
    out = _run(capsys, "trace", "diff", str(a), str(b))
    # the renamed kernels are new in "after": the kernels table lists them by name
    _assert_literal(out, str(a), str(b), MARKED)


def test_trace_json_keeps_the_names_unchanged(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _trace(fixtures)
    _rename_devices(document)
    path = _write_trace(document, tmp_path / f"{NAME_MARKED}.json")
    printed = json.loads(_run(capsys, "trace", "analyze", str(path), "--json"))
    assert printed["files"][0]["device"] == f"AMD {MARKED}"
    assert printed["files"][0]["path"] == str(path)


# --- plan ----------------------------------------------------------------------------------------


@pytest.fixture
def marked_config(fixtures: Path, tmp_path: Path) -> Path:
    """A real config.json in a directory whose name carries markup (the plan's title is the
    model's name: the directory of a config.json)."""
    directory = tmp_path / NAME_MARKED
    directory.mkdir()
    path = directory / "config.json"
    path.write_text((fixtures / "models" / "Llama-3.2-1B.json").read_text())
    return path


def test_plan_prints_the_model_name_as_written(
    marked_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run(capsys, "plan", str(marked_config), "--gpu", "H100")
    _assert_literal(out, NAME_MARKED)
    document = json.loads(_run(capsys, "plan", str(marked_config), "--gpu", "H100", "--json"))
    assert NAME_MARKED in json.dumps(document, ensure_ascii=False)


def test_plan_fit_prints_the_model_name_as_written(
    marked_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run(capsys, "plan", str(marked_config), "--fit", "--gpu", "H100", "--gpu", "L4")
    _assert_literal(out, NAME_MARKED)


# --- explain -------------------------------------------------------------------------------------


@pytest.fixture
def marked_q(fixtures: Path, tmp_path: Path) -> Path:
    text = (fixtures / Q_TEXT).read_text()
    assert GPU_NAME in text
    path = tmp_path / "q.txt"
    path.write_text(text.replace(GPU_NAME, f"NVIDIA {MARKED}"))
    return path


def test_explain_prints_a_pasted_screens_gpu_name_as_written(
    marked_q: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run(capsys, "explain", "--file", str(marked_q))
    _assert_literal(out, f"NVIDIA {MARKED}")


def test_explain_prints_a_pasted_errors_text_as_written(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a real TensorFlow OOM (fixtures/errors): its text quotes shapes and nodes in brackets
    examples = (fixtures / "errors" / "examples.jsonl").read_text().splitlines()
    error = next(json.loads(line) for line in examples if '"oom-tf-textclass-4"' in line)
    text = error["error_text"].replace("Initializer/zeros", f"Initializer/{MARKED}")
    paste = tmp_path / "error.txt"
    paste.write_text(text)
    out = _run(capsys, "explain", "--file", str(paste))
    _assert_literal(out, "[563354,256]")


# --- doctor --------------------------------------------------------------------------------------


def test_doctor_prints_a_kernel_log_line_and_its_path_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # tests/data/driver_crash/09's Xid 109 line (open-gpu-kernel-modules PR 1031), its process
    # name changed
    log = tmp_path / NAME_MARKED / "kern.log"
    log.parent.mkdir()
    log.write_text(
        "Feb 20 01:34:30 localhost kernel: NVRM: Xid (PCI:0000:2d:00): 109, pid=619, "
        f"name={MARKED}, channel 0x00000001, errorString CTX SWITCH TIMEOUT, Info 0x4000\n"
    )
    out = _run(capsys, "doctor", "--from", str(log))
    _assert_literal(out, NAME_MARKED, f"name={STYLED} {TAG}")


# --- fleet and remediate -------------------------------------------------------------------------


def test_fleet_report_prints_host_model_and_pod_labels_as_written(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.fleet import synth
    from tests.fleet.servers import have, prometheus_with

    if not (have("prometheus") and have("promtool")):
        pytest.skip("Debian's prometheus package is not installed (scripts/install installs it)")
    scrape = (fixtures / "dcgm" / "datadog-integrations-core__tesla-t4__metrics.prom").read_text()
    host, model = f"node-{STYLED}", f"Tesla {TAG} {CLOSING}"
    marked = scrape.replace('Hostname="424773df46e0"', f'Hostname="{host}"').replace(
        'modelName="Tesla T4"',
        f'modelName="{model}",namespace="ml-{TAG}",pod="train-{CLOSING}"',
    )
    assert marked.count(host) > 10
    times = synth.sample_times(synth.BASE - 600, synth.BASE + 2 * 3600 + 600)
    with prometheus_with(synth.replayed_scrape(marked, times), tmp_path / "prometheus") as url:
        window = ["--start", "2024-01-01T00:00:00Z", "--end", "2024-01-01T02:00:00Z"]
        out = _run(capsys, "fleet", "report", "--prometheus", url, *window)
    _assert_literal(out, host, model, f"ml-{TAG}", f"train-{CLOSING}")


def test_remediate_prints_a_findings_gpu_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.fakes.kube_api import FakeKubeApi
    from tests.remediate.conftest import (
        CORDON_DRAIN,
        fleet_document,
        fleet_finding,
        write_json,
        write_policy,
    )

    uuid = f"GPU-{TAG}{CLOSING}"
    findings = [fleet_finding("ecc-uncorrectable", "gpu-1", uuid)]
    with FakeKubeApi() as kube:
        for i in range(4):
            kube.add_node(f"gpu-{i}")
        out = _run(
            capsys,
            "remediate",
            "--policy",
            str(write_policy(tmp_path / "policy.yml", CORDON_DRAIN)),
            "--findings",
            str(write_json(tmp_path / "fleet.json", fleet_document(findings, []))),
            "--kubeconfig",
            str(kube.write_kubeconfig(tmp_path / "kubeconfig")),
        )
    _assert_literal(out, uuid)


# --- catalog and the error funnel ----------------------------------------------------------------


def test_catalog_names_an_unknown_gpu_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "gpus", "--gpu", MARKED]) == 2
    _assert_literal(capsys.readouterr().err, MARKED)


def test_an_error_names_the_missing_file_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / NAME_MARKED / "q.txt"
    assert main(["doctor", "--from", str(missing)]) == 2
    _assert_literal(capsys.readouterr().err, str(missing))


# --- record and the progress bar -----------------------------------------------------------------


def test_record_names_its_store_as_written(tmp_path: Path) -> None:
    db = tmp_path / NAME_MARKED / "t.db"
    db.parent.mkdir()
    record = ["record", "--backend", "sim", "--interval", "0.05", "--db", str(db)]
    done = subprocess.run(
        [sys.executable, "-m", "gpuwarden", *record, "--", sys.executable, "-c", "pass"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    _assert_literal(done.stderr, f"telemetry stored in {db} (run 1)")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_names_a_file_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwarden.report.progress import stderr_progress

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with stderr_progress("loading traces") as advance:
        assert advance is not None
        advance(1, 2, f"{MARKED}.json")
    _assert_literal(terminal.getvalue(), f"{MARKED}.json")


# --- our own styles stay styles ------------------------------------------------------------------

STYLE_TAG = re.compile(r"\[/?(bold|dim|red|green|yellow|cyan)( [a-z]+)*\]")


@pytest.mark.parametrize(
    "argv",
    [
        ("explain", "--file", "{paste}", "--plan", "Llama-3.2-1B --gpu T4"),
        ("plan", "{fixtures}/models/Llama-3.2-1B.json", "--gpu", "T4"),
        ("plan", "{fixtures}/models/Llama-3.2-1B.json", "--fit", "--gpu", "L4", "--top", "2"),
        ("trace", "analyze", "{fixtures}/" + AMD_TRACE),
        ("trace", "diff", "{fixtures}/" + AMD_TRACE, "{fixtures}/" + AMD_TRACE),
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_no_style_tag_is_printed_as_text(
    argv: tuple[str, ...], fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the labels we style ("fix:", "warning:", a verdict) are Text spans: with a console that
    # reads no markup, a tag left in a string would be printed as it is
    examples = (fixtures / "errors" / "examples.jsonl").read_text().splitlines()
    error = next(json.loads(line) for line in examples if '"oom-pytorch-67971"' in line)
    paste = tmp_path / "error.txt"
    paste.write_text(error["error_text"])
    filled = [a.format(fixtures=fixtures, paste=paste) for a in argv]
    out = _run(capsys, *filled)
    assert not STYLE_TAG.search(out), STYLE_TAG.search(out)
