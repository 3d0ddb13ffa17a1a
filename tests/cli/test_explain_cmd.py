"""`gpuwarden explain` end to end: inputs (arguments, --file, stdin), the JSON contract,
exit codes, bad input, --plan."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.commands.explain import MAX_INPUT_BYTES, decode_input
from gpuwarden.cli.main import main
from gpuwarden.errors import InputError

OOM = (
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 6.00 GiB total "
    "capacity; 4.88 GiB already allocated; 0 bytes free; 4.96 GiB reserved in total by PyTorch)"
)  # pytorch/pytorch#67971, the fixture's first example
DIAGNOSIS_KEYS = {"cause", "category", "confidence", "title", "evidence", "fixes", "references"}
OOM_KEYS = {"tried_bytes", "total_bytes", "allocated_bytes", "reserved_bytes", "free_bytes"}


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", "explain", *args],
        input=stdin,
        capture_output=True,
        check=False,
    )


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["explain", "--json", *args]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_json_document_follows_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, OOM)
    assert doc["schema"] == "gpuwarden.explain/1"
    assert doc["matched"] is True
    assert set(doc["diagnoses"][0]) >= DIAGNOSIS_KEYS
    assert doc["diagnoses"][0]["cause"] == "oom-too-big"
    assert doc["diagnoses"][0]["confidence"] in {"high", "medium", "low"}
    oom = doc["facts"]["oom"]
    assert set(oom) >= OOM_KEYS
    assert oom["total_bytes"] == 6 * (1 << 30)
    assert oom["free_bytes"] == 0
    assert doc["xid_events"] == []
    assert doc["plan"] is None and doc["screen"] is None


def test_nothing_matched_still_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "KeyError: 'labels'")
    assert doc["matched"] is False and doc["diagnoses"] == []
    assert doc["facts"]["oom"] is None
    assert any("dmesg" in step for step in doc["next_steps"])


def test_file_and_terminal_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.txt"
    log.write_text("noise\n" + OOM + "\n", encoding="utf-8")
    assert main(["explain", "--file", str(log)]) == 0
    out = capsys.readouterr().out
    assert "1. oom-too-big" in out
    assert "fix 1." in out
    assert "total 6.00 GiB" in out


def test_screen_file_terminal_form(fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = (
        fixtures
        / "nvidia-smi"
        / "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle.table.txt"
    )
    assert main(["explain", "-f", str(table)]) == 0
    out = capsys.readouterr().out
    assert "P8 at idle: normal" in out
    assert "No known GPU error" not in out


def test_stdin_with_dash_and_with_a_pipe(fixtures: Path) -> None:
    log = (fixtures / "xid" / "gpud__dmesg-with-xid-119.log").read_bytes()
    done = _run("-", "--json", stdin=log)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["xid_events"][0]["xid"] == 119
    assert doc["xid_events"][0]["count"] == 5
    piped = _run("--json", stdin=OOM.encode())
    assert piped.returncode == 0
    assert json.loads(piped.stdout)["diagnoses"][0]["cause"] == "oom-too-big"


def test_powershell_utf16_is_text() -> None:
    data = "\ufeffFailed to initialize NVML: Driver/library version mismatch\r\n".encode(
        "utf-16-le"
    )
    assert decode_input(data, "x").strip().endswith("version mismatch")


@pytest.mark.parametrize(
    ("stdin", "reference"),
    [
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64, "explain-input-binary"),
        (bytes(range(128, 256)) * 100, "explain-input-binary"),
        (b"x" * (MAX_INPUT_BYTES + 1), "explain-input-too-large"),
    ],
    ids=["elf", "not-utf8", "too-large"],
)
def test_bad_input_exits_2_with_a_reference(stdin: bytes, reference: str) -> None:
    done = _run("-", "--json", stdin=stdin)
    assert done.returncode == 2
    error = json.loads(done.stderr)
    assert error["reference"] == reference
    assert error["hint"]
    assert done.stdout == b""


def test_missing_file_and_two_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--file", str(tmp_path / "nope.log")]) == 2
    assert "explain-input-not-found" in capsys.readouterr().err
    assert main(["explain", "--file", str(tmp_path / "nope.log"), "text"]) == 2
    assert "explain-two-inputs" in capsys.readouterr().err


def test_plan_adds_the_numbers_and_fixes(capsys: pytest.CaptureFixture[str]) -> None:
    plan = "Llama-2-7b-hf --gpu 'A100 40GB' --micro-batch 8 --seq-len 4096"
    doc = _json(capsys, "--plan", plan, OOM)
    assert doc["plan"]["schema"] == "gpuwarden.plan/1"
    assert doc["plan"]["request"]["micro_batch"] == 8
    assert doc["plan"]["fits"] is False
    assert doc["plan"]["fixes"]
    assert doc["plan"]["same_gpu"] is False
    assert doc["plan_skipped"] is None


# PyTorch 2.x's wording on an A100 40GB (39.39 GiB as CUDA gives it)
OOM_A100 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
    "capacity of 39.39 GiB of which 512.00 MiB is free. Including non-PyTorch memory, this "
    "process has 38.87 GiB memory in use. Of the allocated memory 37.50 GiB is allocated by "
    "PyTorch, and 0.80 GiB is reserved by PyTorch but unallocated."
)


@pytest.mark.parametrize(
    ("plan", "disagreement"),
    [
        # a LoRA plan of 17 GiB cannot be the job that held 38.3 GiB and asked for 1 more
        ("Llama-2-7b-hf --gpu 'A100 40GB' --mode lora --seq-len 512", "fits"),
        # a job far above the GPU fails wherever the memory ends: no disagreement
        ("Llama-2-7b-hf --gpu 'A100 40GB' --seq-len 4096", None),
    ],
)
def test_a_plan_that_fits_the_gpu_that_ran_out_is_said_not_to_be_the_job(
    capsys: pytest.CaptureFixture[str], plan: str, disagreement: str | None
) -> None:
    doc = _json(capsys, "--plan", plan, OOM_A100)
    assert doc["plan"]["same_gpu"] is True
    assert doc["plan"]["disagreement"] == disagreement
    assert doc["plan"]["oom_needed_bytes"] == round((37.50 + 0.80 + 1.00) * 2**30)


def test_plan_arguments_are_plans_own(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--plan", "Llama-2-7b-hf --micro-batch eight", OOM]) == 2
    err = capsys.readouterr().err
    assert "explain-plan-invalid" in err and "--micro-batch" in err
    assert main(["explain", "--plan", "no-such-model-xyz --gpu 'A100 40GB'", OOM]) == 2
    assert "unknown-model" in capsys.readouterr().err
    assert main(["explain", "--plan", "Llama-2-7b-hf --fit", OOM]) == 2
    assert "explain-plan-invalid" in capsys.readouterr().err


def test_plan_is_skipped_for_other_errors(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(
        capsys,
        "--plan",
        "Llama-2-7b-hf --gpu 'A100 40GB'",
        "RuntimeError: CUDA error: device-side assert triggered",
    )
    assert doc["plan"] is None
    assert doc["plan_skipped"] == "the error is not an out-of-memory error"


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=512) | st.text(max_size=256).map(lambda t: t.encode("utf-16")))
def test_any_bytes_are_text_or_refused_as_binary(data: bytes) -> None:
    try:
        text = decode_input(data, "x")
    except InputError as exc:
        refused: InputError | None = exc
    else:
        refused = None
        assert isinstance(text, str)
    if refused is not None:
        assert (refused.reference, refused.exit_code) == ("explain-input-binary", 2)
        assert refused.message.startswith("x: not text (")
