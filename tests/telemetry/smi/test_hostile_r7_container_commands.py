"""Issue 13, round 7: nvidia-smi command lines run in a container (paste.py's launcher, -i / --id)
as a hostile user writes them, over the real CSVs of held-out set 23 (tests/data/smi_heldout23).

Measured before the fixes: a launcher line of 40,000 characters whose words name nvidia-smi again
and again and whose end the command refuses (a stray backtick) took 5.5 s, 21.8 s at 100,000 (each
word was tried as the command, each try scanned to the line's end); `-i 3` over the rows of two
GPUs read the second as GPU 1 (an index no row printed); `-i 3 -i 2` read GPU 3 (nvidia-smi's man
page does not say which -i counts); `kubectl exec nvidia-smi -i -- nvidia-smi -i 2` (a pod named
nvidia-smi) read GPU 0, kubectl's -i taken for nvidia-smi's. Timing every pattern of the paste
reader on lines of 10^5 characters also found a Windows prompt ("C:\\" repeated, with or without
"PS ") taking 151 s (the prompt gave back a character at a time, the command tried from each),
and a command line of one long word taking 3.9 s at 400,000 characters (shlex, which the words
of the command were split with, is quadratic in a word's length): older than this stop, in the
same reader, fixed with it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.telemetry.smi import parse_smi_output, paste
from gpuwarden.telemetry.smi.cells import SmiOutputError
from gpuwarden.telemetry.smi.paste import query_command, strip_terminal
from tests.cli.test_fuzz_verbs import problem, run_in_process

SET = Path(__file__).resolve().parents[2] / "data" / "smi_heldout23"
# the set's real outputs: two GPUs' UUIDs under a docker command, one GPU's under `-i 3`
TWO_GPUS = SET / "csv__51cto-u15357586-3788127__uuid-only-2-gpus-under-docker-command.txt"
ONE_GPU = SET / "csv__51cto-u15357586-3788127__uuid-only-gpu-3-by-index.txt"
QUERY = "--query-gpu=uuid --format=csv"


def _uuids(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("GPU-")]


def _csv(command: str, rows: list[str]) -> str:
    return "\n".join([command, "uuid", *rows]) + "\n"


def _indices(text: str) -> list[list[int]]:
    return [[d.info.index for d in r.samples] for r in parse_smi_output(text, "paste.txt", 0.0)]


def _command(line: str) -> str | None:
    return strip_terminal.__wrapped__(f"{line}\nuuid\n").command


def test_a_launcher_line_of_many_nvidia_smi_words_is_read_in_linear_time() -> None:
    """Failed before: 5.5 s for this line (the time grew as its length squared). Checked without
    a clock (a wall-clock bound fails under load): the launcher's words stop at the first that
    names nvidia-smi, so the command is tried from there once. Words that went on past it tried
    the command again from each later nvidia-smi (one try each: quadratic), and would read the
    later one where the first fails."""
    assert _command("docker exec gpu nvidia-smi -q") == "nvidia-smi -q"
    assert _command("docker exec nvidia-smi`x nvidia-smi -q") is None
    for word in ("nvidia-smi ", "sudo nvidia-smi ", "/usr/bin/nvidia-smi\t"):
        line = "docker run " + word * (40_000 // len(word)) + "`x"
        assert _command(line) is None
        # and a line the command accepts is still taken for it
        accepted = strip_terminal.__wrapped__(f"docker run img {word}{QUERY}\nuuid\n")
        assert accepted.command is not None and accepted.command.endswith(QUERY)


@pytest.mark.parametrize("prompt", ["", "PS "])
def test_a_windows_prompt_of_many_drive_paths_is_read_in_linear_time(prompt: str) -> None:
    """Failed before: 2.4 s for this line of 30,000 characters; one of 10^5 took 151 s. Checked
    without a clock (a wall-clock bound fails under load): a prompt runs to its ">", a drive's
    path without one to its last "\\", each taken whole. The plain forms gave back a character
    at a time, each a try of the command from there (quadratic), and so read a command inside
    a path that is no prompt."""
    assert _command(prompt + "C:\\tools> nvidia-smi -q") == "nvidia-smi -q"
    assert _command(prompt + "C:\\tools nvidia-smi -q") is None
    assert _command(prompt + "C:\\" * 10_000) is None
    # the prompts and paths the pattern is for are still taken off the command
    for command_line, command in [
        ("PS C:\\Users\\me> nvidia-smi -q", "nvidia-smi -q"),
        ("C:\\Users\\me>nvidia-smi -L", "nvidia-smi -L"),
        (
            f"C:\\Program Files\\NVIDIA Corporation\\NVSMI\\nvidia-smi.exe {QUERY}",
            f"nvidia-smi.exe {QUERY}",
        ),
    ]:
        assert strip_terminal.__wrapped__(f"{command_line}\nuuid\n").command == command


def test_a_command_line_of_one_long_word_is_read_in_linear_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Failed before: 3.9 s for a --query-gpu= value of 400,000 characters (shlex builds a word
    a character at a time, copying it each time). Checked without a clock (a wall-clock bound
    fails under load): shlex is given no line past SHLEX_MAX_CHARS, a longer one is split at its
    blanks, and the query is still read."""
    given: list[int] = []
    split = shlex.split

    def counting(command: str, **options: bool) -> list[str]:
        given.append(len(command))
        return split(command, **options)

    monkeypatch.setattr(paste.shlex, "split", counting)
    short = query_command("nvidia-smi --query-gpu='index,name' --format=csv")
    assert short is not None and short.fields == ("index", "name") and given  # through shlex
    for value in ("x" * 400_000, "'" + "x " * 200_000 + "'", '"' + "x" * 400_000):
        text = f"nvidia-smi --query-gpu={value} --format=csv\ntemperature.gpu\n40\n"
        strip_terminal.__wrapped__(text)
        query = query_command(text.splitlines()[0])
        assert query is not None and query.kind == "gpu"
    assert max(given) <= paste.SHLEX_MAX_CHARS


@settings(max_examples=200, deadline=None)
@given(st.text(" ab,'\"\\\t\n=-", max_size=16))
def test_a_command_s_words_are_the_shell_s(typed: str) -> None:
    """The fields a --query-gpu= value names are shlex's reading of it (a quote that does not
    close: the words as typed)."""
    line = f"nvidia-smi -i 1 --query-gpu=index,{typed} --format=csv"
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    value = next(w for w in words if w.startswith("--query-gpu="))[len("--query-gpu=") :]
    fields = tuple(f.strip() for f in value.split(",") if f.strip())
    command = query_command(line)
    assert command is not None and command.fields == fields


def test_the_rows_of_two_gpus_under_a_command_that_selects_one_are_refused() -> None:
    """Failed before: the second GPU read as index 1, an index no row printed."""
    text = _csv(f"nvidia-smi -i 3 {QUERY}", _uuids(TWO_GPUS))
    with pytest.raises(SmiOutputError) as refused:
        parse_smi_output(text, "paste.txt", 0.0)
    assert str(refused.value).startswith("paste.txt, line 4: a second GPU (uuid 'GPU-16a23983")
    assert "(-i 3)" in str(refused.value)


def test_a_loop_of_the_selected_gpu_is_each_reading_of_it() -> None:
    [uuid] = _uuids(ONE_GPU)
    assert _indices(_csv(f"nvidia-smi -i 3 -l 1 {QUERY}", [uuid] * 3)) == [[3], [3], [3]]


@pytest.mark.parametrize(
    ("selection", "index"),
    [
        ("-i 3 -i 2", 0),  # two ids: which one nvidia-smi took is not known (failed before: 3)
        ("-i 3 --id=3", 3),  # the same one twice
        ("-i 99999", 0),  # five digits: no index
        ("-i -1", 0),
        ("--id=", 0),
        ("-i GPU-18a3e86f-4c0e-cd9f-59c3-55488c4b0c24", 0),  # a UUID names no index
        # "-i 0,3" (several GPUs) over this one row read GPU 0; since h188 it is refused (two
        # GPUs selected, one printed): test_smi_selection.py
        ("-i " + "7" * 5000, 0),
        ("-i 3 --loop='1", 3),  # a quote that does not close: the words as typed
        ("-i3", 3),
    ],
)
def test_the_gpu_a_selection_names(selection: str, index: int) -> None:
    [uuid] = _uuids(ONE_GPU)
    assert _indices(_csv(f"$ nvidia-smi {selection} {QUERY}", [uuid])) == [[index]]


@pytest.mark.parametrize("watch", ["watch -n 1", "watch -d -n 0.5", "sudo watch -n1"])
def test_a_command_under_watch_with_its_interval_is_read(watch: str) -> None:
    """Failed before: "watch -n 1 nvidia-smi ..." was no command line (only option words without
    a value were taken), so the CSV under it was refused as not recognised."""
    [uuid] = _uuids(ONE_GPU)
    assert _indices(_csv(f"$ {watch} nvidia-smi -i 3 {QUERY}", [uuid])) == [[3]]


@pytest.mark.parametrize(
    "launcher",
    [
        "kubectl exec nvidia-smi -i --",  # failed before: kubectl's -i was taken, GPU 0 read
        "kubectl exec -it nvidia-smi --",
        "sudo docker exec -i box kubectl exec pod -c main --",
        "docker run -i --name nvidia-smi nvidia/cuda",
    ],
)
def test_the_launcher_s_words_are_not_nvidia_smi_s(launcher: str) -> None:
    [uuid] = _uuids(ONE_GPU)
    assert _indices(_csv(f"{launcher} nvidia-smi -i 2 {QUERY}", [uuid])) == [[2]]


# launcher options, names (one is nvidia-smi, as a pod or container may be), quotes, numbers
_WORDS = st.sampled_from(
    [
        *("-i", "-it", "--rm", "--gpus", "all", "-e", "NVIDIA_VISIBLE_DEVICES=1,2", "--"),
        *("'", '"', "`", "nvidia/cuda", "pod", "-c", "box", "0", "--id=7", "nvidia-smi"),
        *("-n", "ns", "-i9"),
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    launcher=st.sampled_from(["docker run", "podman exec", "nerdctl run", "kubectl exec"]),
    options=st.lists(_WORDS, max_size=12),
    gpu=st.integers(0, 9999),
)
def test_a_launcher_s_options_never_change_the_gpu_of_the_command_after_it(
    launcher: str, options: list[str], gpu: int
) -> None:
    """Whatever the launcher's options, the GPU read is nvidia-smi's own -i or none (where its
    words make the command unclear): never a number of the launcher's; never a traceback."""
    line = f"{launcher} {' '.join(options)} -- nvidia-smi -i {gpu} {QUERY}"
    command = query_command(line)
    assert command is not None
    assert command.selection is None or command.selection.indices in ((gpu,), None)
    try:
        readings = _indices(_csv(line, _uuids(ONE_GPU)))
    except SmiOutputError:
        return  # a line whose quotes hide the command: refused plainly
    assert readings in ([[gpu]], [[0]])


def test_the_cli_names_the_file_and_exits_2_for_a_selection_the_rows_contradict(
    tmp_path: Path,
) -> None:
    paste = tmp_path / "two-gpus.txt"
    paste.write_text(_csv(f"docker exec box nvidia-smi -i 3 {QUERY}", _uuids(TWO_GPUS)))
    for argv in (
        ["snapshot", "--backend", "smi", "--from", str(paste), "--json"],
        ["doctor", "--from", str(paste), "--json"],
    ):
        outcome = run_in_process(argv)
        assert problem(outcome) is None
        assert outcome.code == 2
        assert outcome.err.count("two-gpus.txt") == 1
