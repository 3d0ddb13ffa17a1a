"""Every `gpuwarden` command of a fenced `sh` block of README.md and docs/*.md works as shown.

A reader copies these commands first, so each one is checked where it stands:

- every command must parse: its verb exists and every flag and choice is one the CLI has (a
  renamed flag fails here, even in a command that needs a GPU);
- a command whose inputs are all in the repository, and that needs no GPU, network or server, runs
  in-process through `gpuwarden.cli.main.main`: no exit 70 (a bug), the exit code the text gives
  ("exit N" in its comment, else 0), and a valid JSON document with `--json`;
- a command that needs what a test machine lacks is named in `NEEDS_WHAT_TESTS_LACK` with why;
  a command whose input file is only an example name (`smi.txt`, `policy.yml`) is parsed only.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuwarden.cli.main import CommandParser, load_command, main, parse_command_line
from gpuwarden.errors import GpuwardenError

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)
# `<registry>`, `<the last job>`: a value the reader fills in
PLACEHOLDER = re.compile(r"<[A-Za-z][^<>|\n]*>")
EXIT_IN_COMMENT = re.compile(r"#.*\bexit (\d+)\b")
# words a shell treats as control, not arguments
SEPARATORS = {"|", "&&", "||", ";"}
REDIRECTS = {">", ">>", "<", "2>"}
# options whose value is a file the command writes: left relative, so it lands in the test's
# working directory
WRITES = {"-o", "--output", "--html", "--tests", "--audit-log", "--db"}
# options whose value has a slash and is not a file
NAMES_NOT_FILES = {"--image"}
PATH_SUFFIXES = (
    ".txt", ".xml", ".json", ".jsonl", ".csv", ".log", ".gz", ".toml", ".yml", ".yaml", ".prom",
    ".html", ".py",
)  # fmt: skip

NO_GPU = "needs an NVIDIA GPU and its driver (NVML or nvidia-smi on this machine)"
NEEDS_WHAT_TESTS_LACK = {
    "gpuwarden snapshot": NO_GPU,
    "gpuwarden record --interval 1 --price-kwh 0.12 -- python train.py": NO_GPU,
    "gpuwarden record --json -- python train.py": NO_GPU,
    "gpuwarden record --pid 4242 --duration 600": "needs a running job's PID and a GPU",
    "gpuwarden history --since 1h --gpu 0 --json": "reads the store `record` wrote on this machine",
    "gpuwarden doctor": NO_GPU,
    "gpuwarden doctor --expect-gpus 8 --fail-on critical": NO_GPU,
    "gpuwarden doctor --readings 31 --interval 1": NO_GPU,
    "gpuwarden doctor --json": NO_GPU,
    "gpuwarden doctor --from -": "reads this host's kernel log (dmesg) on stdin",
    "gpuwarden snapshot --backend smi --from -": "reads a live nvidia-smi on stdin",
    "gpuwarden explain -": "reads a live nvidia-smi screen on stdin",
    "gpuwarden watch": NO_GPU,
    "gpuwarden watch --once --json": NO_GPU,
    "gpuwarden watch --count 60 --json": NO_GPU,
    "gpuwarden watch --duration 3600": NO_GPU,
    "gpuwarden watch --backend sim --scenario thermal-throttling --sim-speed 20": (
        "runs until Ctrl-C"
    ),
    "gpuwarden watch --backend sim --scenario ecc-double-bit --sim-speed 20": "runs until Ctrl-C",
    "gpuwarden export --listen 0.0.0.0:9400": "a server; needs a GPU",
    "gpuwarden export --kubernetes": "a server; needs a GPU and the kubelet's socket",
    "gpuwarden export --backend sim --scenario gpu-fallen-off-bus --listen 127.0.0.1:9400": (
        "a server that runs until stopped"
    ),
    "gpuwarden snapshot --backend dcgm --from http://node:9400/metrics": (
        "needs a dcgm-exporter on the network"
    ),
    "gpuwarden fleet report --prometheus http://prometheus:9090 --range 24h": (
        "needs a Prometheus server"
    ),
    "gpuwarden fleet report --prometheus http://prometheus:9090 --range 7d "
    '--selector cluster="prod" --json': "needs a Prometheus server",
    "gpuwarden fleet report --prometheus http://prometheus:9090 --range 1h --json": (
        "needs a Prometheus server"
    ),
    "gpuwarden plan Llama-2-7b-hf --exact --precision bf16 --seq-len 2048": (
        "the torch extra's trace takes 13 s; tests/planner runs exact mode"
    ),
}


@dataclass(frozen=True)
class Shown:
    """One `gpuwarden ...` command as a document shows it."""

    document: str
    text: str  # the words as shown, joined: the key of NEEDS_WHAT_TESTS_LACK
    argv: tuple[str, ...]  # what follows `gpuwarden`, placeholders filled in
    piped_in: bool  # another program's output is its standard input
    exit_code: int

    def __str__(self) -> str:
        return f"{self.document}: {self.text}"


def _words(line: str) -> list[str]:
    lexer = shlex.shlex(PLACEHOLDER.sub("x", line), posix=True, punctuation_chars="|&;<>")
    lexer.whitespace_split = True
    return list(lexer)


def _optional_brackets_opened(words: list[str]) -> list[str]:
    """`[--json]` and `[--range 1h]` are optional words the text offers: take them."""
    return [w.removeprefix("[").removesuffix("]") for w in words if w not in ("[", "]")]


def _commands_of(line: str, document: str) -> list[Shown]:
    expected = EXIT_IN_COMMENT.search(line)
    words = _words(line)
    shown: list[Shown] = []
    segment: list[str] = []
    piped_in = False
    skip_next = False
    for word in [*words, ";"]:
        if skip_next:
            skip_next = False
        elif word in REDIRECTS:
            skip_next = True  # the file a redirection names is the shell's, not the command's
        elif word in SEPARATORS:
            if segment[:1] == ["gpuwarden"]:
                argv = tuple(
                    "x" if w == "..." else w for w in _optional_brackets_opened(segment[1:])
                )
                shown.append(
                    Shown(
                        document=document,
                        text=" ".join(segment),
                        argv=argv,
                        piped_in=piped_in,
                        exit_code=int(expected[1]) if expected else 0,
                    )
                )
            piped_in = word == "|"
            segment = []
        else:
            segment.append(word)
    return shown


def shown_commands() -> list[Shown]:
    found: list[Shown] = []
    for document in DOCUMENTS:
        for block in SH_BLOCK.findall(document.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                found += _commands_of(line, document.relative_to(REPO).as_posix())
    return found


SHOWN = shown_commands()
# the same command shown twice (front page and its docs page) runs once
SHOWN_ONCE = list({command.text: command for command in reversed(SHOWN)}.values())[::-1]


def _path_like(word: str) -> bool:
    return (
        not word.startswith("-")
        and "://" not in word
        and ("/" in word or word.endswith(PATH_SUFFIXES))
    )


def _in_repository(argv: tuple[str, ...]) -> tuple[str, ...] | None:
    """The arguments with each input file made absolute, or None when one is not in the repo."""
    resolved: list[str] = []
    job_words = False  # after `--`: the job `record` runs, its words are the job's own
    for i, word in enumerate(argv):
        job_words = job_words or word == "--"
        not_an_input = i > 0 and argv[i - 1] in WRITES | NAMES_NOT_FILES
        if not _path_like(word) or not_an_input:
            resolved.append(word)
        elif not (REPO / word).exists():
            return None  # an example name (smi.txt, train.py): the reader's own file
        else:
            resolved.append(word if job_words else str(REPO / word))
    return tuple(resolved)


def _parse(argv: tuple[str, ...]) -> None:
    verb, *rest = argv
    parser = CommandParser(prog=f"gpuwarden {verb}")
    load_command(verb).register(parser)
    parse_command_line(parser, rest)


def test_the_documents_show_commands_and_the_skip_table_names_only_shown_ones() -> None:
    assert len(SHOWN) >= 60, "the sh blocks were not found: did the fence style change?"
    texts = {command.text for command in SHOWN}
    assert sorted(set(NEEDS_WHAT_TESTS_LACK) - texts) == []


@pytest.mark.parametrize("command", SHOWN, ids=str)
def test_every_shown_command_parses(command: Shown) -> None:
    try:
        _parse(command.argv)
    except GpuwardenError as exc:
        pytest.fail(f"{command}\n  {exc.reference}: {exc}")


RUNNABLE = [
    command
    for command in SHOWN_ONCE
    if command.text not in NEEDS_WHAT_TESTS_LACK
    and not command.piped_in
    and _in_repository(command.argv) is not None
]


def test_the_runnable_commands_include_each_verb_with_a_repository_input() -> None:
    verbs = {command.argv[0] for command in RUNNABLE}
    assert {
        "plan",
        "catalog",
        "snapshot",
        "record",
        "doctor",
        "explain",
        "watch",
        "export",
    } <= verbs
    assert {"deploy", "trace"} <= verbs


@pytest.mark.parametrize("command", RUNNABLE, ids=str)
def test_every_runnable_command_exits_as_documented(
    command: Shown,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUWARDEN_DB", str(tmp_path / "telemetry.db"))
    monkeypatch.setenv("GPUWARDEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = _in_repository(command.argv)
    assert argv is not None
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code != 70, f"{command}: a bug\n{err}"
    assert code == command.exit_code, f"{command}: exit {code}\n{err[-2000:]}"
    if "--json" in argv:
        documents = _json_documents(out)
        assert documents and all("schema" in document for document in documents), command


def _json_documents(out: str) -> list[dict[str, object]]:
    """One JSON document, or one per line (`watch --json`)."""
    try:
        return [json.loads(out)]
    except json.JSONDecodeError:
        return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_the_error_example_is_what_plan_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """The first example a reader sees of an error ("Errors and exit codes") is printed today."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Errors and exit codes") :]
    example = re.search(r"^```\n(error: unknown-model\n.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert example is not None
    model = re.search(r"unknown model '([^']+)'", example[1])
    assert model is not None
    assert main(["plan", model[1]]) == 2
    assert capsys.readouterr().err == example[1]
