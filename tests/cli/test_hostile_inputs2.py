"""Issue 13's promise, second sweep: the kinds of hostile input the first harness
(test_fuzz_verbs.py) did not make — integers past Python's 4300-digit ``int()`` limit, documents
nested past the parsers' recursion, closed standard streams, pipes named as files — through the
verbs as a user runs them, in this process, with a fixed seed.

The promise checked (``problem`` of the first harness): never exit 70 nor a traceback; with
--json a strict JSON document, the error with its reference and hint.
"""

from __future__ import annotations

import io
import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from gpuwarden.telemetry.store import Store
from tests.cli.test_fuzz_verbs import Outcome, problem, run_in_process
from tests.telemetry.store import captures

SEED = 24
# int() refuses decimal strings past 4300 digits (CPython's default int_max_str_digits)
PAST_INT_LIMIT = (4301, 6000)
H100 = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"


def _huge_integer(rng: random.Random) -> str:
    return str(rng.randint(1, 9)) + "".join(
        rng.choice("0123456789") for _ in range(rng.randint(*PAST_INT_LIMIT) - 1)
    )


def _nested(rng: random.Random) -> str:
    depth = rng.randint(5_000, 60_000)
    return "[" * depth + "]" * depth


MAKERS: dict[str, Callable[[random.Random], str]] = {"huge-int": _huge_integer, "deep": _nested}

PRICES = '[usd_per_gpu_hour]\n"H100" = 3.0\n'
WEB_CONFIG = "http_server_config:\n  http2: true\n"
POLICY = "rules:\n  - match: {code: ecc-uncorrectable}\n    actions: [cordon]\n"


def _with_value(document: str, key: str, value: str) -> str:
    return f"{document}{key} {value}\n"


def _run(argv: list[str]) -> tuple[Outcome, dict[str, str] | None]:
    outcome = run_in_process(argv)
    assert problem(outcome) is None, problem(outcome)
    error = json.loads(outcome.err) if "--json" in argv and outcome.code else None
    return outcome, error


@pytest.mark.parametrize("make", sorted(MAKERS))
@pytest.mark.parametrize("case", range(3))
def test_a_prices_file_past_the_parser_is_refused(tmp_path: Path, make: str, case: int) -> None:
    value = MAKERS[make](random.Random(f"{SEED}-prices-{make}-{case}"))
    path = tmp_path / "prices.toml"
    path.write_text(_with_value(PRICES, '"A100" =', value))
    # the prices are read before the server is asked: port 1 is never reached
    argv = ["fleet", "report", "--prometheus", "http://127.0.0.1:1", "--range", "1h"]
    outcome, error = _run([*argv, "--prices", str(path), "--timeout", "1", "--json"])
    assert outcome.code == 2 and error is not None
    assert error["reference"] == "fleet-prices-invalid" and str(path) in error["message"]


@pytest.mark.parametrize("make", sorted(MAKERS))
@pytest.mark.parametrize("case", range(3))
def test_a_web_config_past_the_parser_is_refused(tmp_path: Path, make: str, case: int) -> None:
    value = MAKERS[make](random.Random(f"{SEED}-web-{make}-{case}"))
    path = tmp_path / "web.yml"
    path.write_text(_with_value(WEB_CONFIG, "basic_auth_users:", value))
    outcome, _ = _run(["export", "--backend", "sim", "--once", "--web-config-file", str(path)])
    assert outcome.code == 2
    assert outcome.err.startswith("error: web-config-invalid") and str(path) in outcome.err


@pytest.mark.parametrize("make", sorted(MAKERS))
@pytest.mark.parametrize("case", range(3))
def test_a_policy_past_the_parser_is_refused(tmp_path: Path, make: str, case: int) -> None:
    value = MAKERS[make](random.Random(f"{SEED}-policy-{make}-{case}"))
    policy = tmp_path / "policy.yml"
    policy.write_text(_with_value(POLICY, "limits:\n  max_unavailable:", value))
    findings = tmp_path / "doctor.json"
    findings.write_text('{"schema": "gpuwarden.doctor/1"}')
    argv = ["remediate", "--policy", str(policy), "--findings", str(findings), "--json"]
    outcome, error = _run(argv)
    assert outcome.code == 2 and error is not None
    assert error["reference"] == "remediation-policy-invalid" and str(policy) in error["message"]


@pytest.mark.parametrize("case", range(3))
def test_a_gpu_index_past_the_int_limit_is_no_recorded_gpu(
    tmp_path: Path, fixtures: Path, case: int
) -> None:
    row = captures.query_gpu_rows(fixtures / f"{captures.H100_LOAD}.query-gpu.csv")[0]
    t0 = captures.capture_timestamp(row)
    db = tmp_path / "t.db"
    with Store.open(db) as store:
        store.write(captures.snapshot(captures.h100_samples(fixtures, 1, t0), t0))
    index = _huge_integer(random.Random(f"{SEED}-gpu-{case}"))
    outcome, error = _run(["history", "--db", str(db), "--gpu", index, "--json"])
    assert outcome.code == 2 and error is not None and error["reference"] == "gpu-not-recorded"
    assert len(error["message"]) < 200  # the value is named, not echoed 5,000 digits long
    # the recorded GPU 0 is still found by its index
    found, _ = _run(["history", "--db", str(db), "--gpu", "0", "--json"])
    assert found.code == 0 and json.loads(found.out)["samples"]


# --- closed standard streams (`gpuwarden ... <&-`, `>&-`): Python sets them to None ------------


def _main_with_closed(monkeypatch: pytest.MonkeyPatch, stream: str, argv: list[str]) -> int:
    monkeypatch.setattr(sys, stream, None)
    try:
        return main(argv)
    finally:
        getattr(sys, stream).close()  # the /dev/null main put in its place


@pytest.mark.parametrize(
    ("argv", "reference"),
    [
        (["snapshot", "--backend", "smi", "--from", "-", "--json"], "smi-output-unreadable"),
        # explain: an empty text is nothing to explain (issue 13, r5), not "nothing matched"
        (["explain", "-", "--json"], "explain-input-empty"),
        (["explain", "--file", "-", "--json"], "explain-input-empty"),
    ],
)
def test_a_closed_stdin_reads_as_empty_input(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    reference: str,
) -> None:
    code = _main_with_closed(monkeypatch, "stdin", argv)
    _, err = capsys.readouterr()
    assert code == 2 and json.loads(err)["reference"] == reference


def test_a_closed_stdout_is_a_reader_that_went_away(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    code = _main_with_closed(monkeypatch, "stdout", ["snapshot", "--backend", "sim", "--json"])
    assert code == 0 and err.getvalue() == ""


# --- failures the sweep found in the parsers of other layers (fixed there) ----------------------


def _nvlink_with_huge_counter(fixtures: Path, path: Path) -> None:
    text = (fixtures / "topo" / f"{H100}.nvlink-s.txt").read_text()
    path.write_text(text.replace("Link 0:", f"Link {_huge_integer(random.Random(SEED))}:", 1))


def test_an_nvlink_status_with_a_huge_number_is_refused(tmp_path: Path, fixtures: Path) -> None:
    path = tmp_path / "nvlink-s.txt"
    _nvlink_with_huge_counter(fixtures, path)
    outcome, _ = _run(["doctor", "--from", str(path), "--json"])
    assert outcome.code in (0, 2)


def test_a_config_with_a_huge_integer_is_refused(tmp_path: Path, fixtures: Path) -> None:
    config = (fixtures / "models" / "Llama-3.1-8B.json").read_text()
    path = tmp_path / "config.json"
    path.write_text(config.replace("4096", _huge_integer(random.Random(SEED)), 1))
    outcome, _ = _run(["plan", str(path), "--json"])
    assert outcome.code == 2


def test_a_thresholds_file_nested_deep_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "thresholds.toml"
    path.write_text(f"a = {_nested(random.Random(SEED))}\n")
    outcome, _ = _run(["doctor", "--backend", "sim", "--thresholds", str(path), "--json"])
    assert outcome.code == 2


def test_a_trace_path_in_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    outcome, _ = _run(["trace", "analyze", str(tmp_path / "a"), "--json"])
    assert outcome.code == 2


def test_a_capture_from_a_pipe_is_read_once(fixtures: Path) -> None:
    text = (fixtures / f"{captures.H100_LOAD}.q.txt").read_bytes()
    read, write = os.pipe()
    try:
        assert len(text) < 60_000  # fits the pipe's buffer: written whole before the read
        os.write(write, text)
        os.close(write)
        outcome, _ = _run(["doctor", "--from", f"/dev/fd/{read}", "--json"])
    finally:
        os.close(read)
    assert outcome.code == 0


def test_a_device_that_never_ends_is_refused_at_its_first_chunk() -> None:
    """/dev/urandom reports no size: the whole-file decoder refused it only at the memory limit."""
    outcome, _ = _run(["trace", "analyze", "/dev/urandom", "--json"])
    assert outcome.code == 2


def test_a_fifo_in_a_capture_directory_is_passed_over(tmp_path: Path, fixtures: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "smi.txt").write_bytes((fixtures / f"{captures.H100_LOAD}.q.txt").read_bytes())
    fifo = bundle / "pipe"
    os.mkfifo(fifo)  # nothing writes to it: opening it to read blocks until a writer comes
    opened: list[bool] = []

    def writer_after_a_while() -> None:
        # unblocks a reader that should not be there, so a regression fails instead of hanging
        time.sleep(10)
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader, as it should be
            return
        opened.append(True)
        os.close(fd)

    guard = threading.Thread(target=writer_after_a_while, daemon=True)
    guard.start()
    outcome, _ = _run(["doctor", "--from", str(bundle), "--json"])
    assert outcome.code == 0 and not opened


def test_findings_with_a_huge_number_are_refused_in_our_words(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    findings = tmp_path / "doctor.json"
    huge = _huge_integer(random.Random(f"{SEED}-findings"))
    findings.write_text(f'{{"schema": "gpuwarden.doctor/1", "n": {huge}}}')
    argv = ["remediate", "--policy", str(policy), "--findings", str(findings), "--json"]
    outcome, error = _run(argv)
    assert outcome.code == 2 and error is not None and str(findings) in error["message"]
    assert "sys.set_int_max_str_digits" not in error["message"]
