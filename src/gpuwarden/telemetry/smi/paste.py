"""What a terminal adds around nvidia-smi output when people paste it: the prompt and command
line before it, a bare prompt after it, and the ``^C`` that stopped ``dmon`` or ``-l``; and the
line of dots people write where they cut part of it out; the poster's labels ("output:") and
the Markdown or mail quoting a paste went through (">" quotes, a common indentation, "\\" hard
line breaks, bold around a value); the prefix a job launcher (Ray, SkyPilot) puts on each line
a remote job printed; the lines a wrapper printed above a CSV's header (a cluster shell's
"-- host" separator, an ssh banner, a script's own log); and the line breaks a web page's copy
of a default table lost.

The prompt line also says which fields a ``--query-gpu=`` / ``--query-compute-apps=`` CSV
written with ``noheader`` holds, so it is read before it is dropped. Dropped lines become empty
lines: every parser skips those, and line numbers in errors stay those of the file (but for a
table a web page joined onto one line, whose rows are counted as the lines they were).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwarden.files import TERMINAL_ESCAPE
from gpuwarden.telemetry.smi.capture import capture_sections, lines_before_banners
from gpuwarden.telemetry.smi.query_csv import parse_header
from gpuwarden.telemetry.smi.selection import GpuSelection, selection_of

# A shell prompt ("user@host:~$ ", "root@box:~# ", "[u@h dir]$ ", "(venv) $ ", "PS C:\\> ",
# "C:\\Users\\me> ", "$ ", "# "; fish/zsh themes: "user@host ~/dir [branch] $ "; Kali-style
# themes joining the venv and the brackets with a dash: "(env)-[root@host ~]$ "; zsh themes'
# glyph before the prompt character: "user@host:~ ➜ $ ") followed by the nvidia-smi command
# itself. Its blank runs are possessive (\s*+): each is followed by
# what no blank is, so the matches are the same, but the plain form shared a long blank run
# between the optional parts in every way and took time as its length cubed (10^4 blanks:
# seconds; 10^5: hours). A Windows prompt runs to its ">", taken whole; without one, a drive's
# path (with blanks: "C:\\Program Files\\NVIDIA Corporation\\NVSMI\\") runs to its last "\\",
# taken whole too: the plain forms gave back one character at a time, each a try of the
# command from there on (a line of 10^5 "C:\\" took minutes).
# A theme's glyph: a symbol outside ASCII ("➜", "❯", "»"), no letter or digit.
_THEME_GLYPH = r"[^\x00-\x7f\w\s]{1,3}+"
_PROMPT = (
    r"(?:\([^)]*\)-?\s*+)?"
    r"(?:\[[^\]]*\]\s*+|[\w.-]+@[\w.-]+(?::[^\s$#%>]*+)?(?:\s+[~/][^\s$#%>]*+)?(?:\s+\[[^\]]*\])?\s*+"
    rf"(?:{_THEME_GLYPH}\s*+)?"
    r"|PS\s+[^>]*+|[A-Za-z]:\\[^>]*+(?=>)|[A-Za-z]:\\(?:[^\\`>]*+\\)*+)?"
    r"[$#%>]?"
)
# The command written as Markdown code, alone or as a heading ("`nvidia-smi -q`", "## `nvidia-smi
# --query-gpu=... --format=csv,noheader`", or between the three backticks of a one-line fence):
# the backticks are not the command's; or as a heading without them ("### nvidia-smi nvlink -s",
# a note's label above the output). The blanks after the "#"s are left to the \s*+ after it.
# The code may end in the colon of a label ("`nvidia-smi --query-gpu=name --format=csv`:").
_MARKDOWN_CODE = r"(?:#{1,6}\s+)?`{1,3}|#{1,6}(?=[ \t])"
# nvidia-smi as a command's word, run by its path too: "./nvidia-smi.exe", "/usr/bin/nvidia-smi",
# "...\\NVSMI\\nvidia-smi"
_NVIDIA_SMI = r"(?:[^\s`/\\]*+[/\\])*+nvidia-smi(?:\.exe)?"
# nvidia-smi run in a container, the way the NVIDIA Container Toolkit's user guide checks a GPU
# container ("docker run --rm --gpus all nvidia/cuda nvidia-smi"; podman's, nerdctl's and
# `kubectl exec`'s are the same): the launcher, its options and the image come before the
# command. They are not nvidia-smi's (an `-i` there is docker's), so they stay out of it. Each
# word is taken whole (possessive), so a line that never reaches nvidia-smi is read once; and
# the words stop at the first that names nvidia-smi: the command is tried from there on once (a
# launcher line of 10^5 "nvidia-smi" words the line's end refuses took seconds, one try each).
_LAUNCHER = (
    r"(?:(?:docker|podman|nerdctl)\s++(?:container\s++)?(?:run|exec)|kubectl\s++exec)"
    rf"\s++(?:(?!{_NVIDIA_SMI}(?![^\s`]))\S++\s++)*?"
)
_COMMAND_LINE = re.compile(
    rf"^\s*+(?:{_MARKDOWN_CODE}|{_PROMPT})\s*+(?:(?:sudo\s++)?{_LAUNCHER})?"
    # watch's options, one with its interval ("watch -n 1", "watch -d -n 0.5")
    r"(?P<command>(?:sudo\s+)?(?:watch\s+(?:-\S+\s+(?:[0-9.]+\s+)?)*)?"
    rf"{_NVIDIA_SMI}(?:\s[^`]*)?)(?:`{{1,3}}:?)?\s*$"
)
# A line the poster wrote to say what follows ("output:", "command:", "nvidia-smi.exe output:"):
# a few words ending in a colon. No nvidia-smi output has such a line (a -q key with an empty
# value has the padding before its colon).
_LABEL = re.compile(r"^\s*[A-Za-z][\w.-]*(?: [\w.-]+){0,3}:\s*$")
# The poster's shell comment under a CSV query's command ("# Output", "# output:"): a few words
# after "#". No CSV of nvidia-smi's has a "#" line (dmon's and pmon's headers do: a comment is
# taken for one only under a --query-gpu / --query-compute-apps command).
_COMMENT = re.compile(r"^\s*#\s+[A-Za-z][\w.-]*(?: [\w.-]+){0,3}:?\s*$")
# A prompt with nothing after it, left at the end of a paste.
_BARE_PROMPT = re.compile(
    r"^\s*(?:\([^)]*\)-?\s*)?(?:\[[^\]]*\]|[\w.-]+@[\w.-]+(?::[^\s$#%>]*)?)\s*[$#%>]\s*$"
)
_INTERRUPT = "^C"
# A line people put where they cut lines out of a long output ("...", "....", "…", "[...]",
# "<snip>"): no tool prints it alone on a line, so it is dropped like a prompt.
_ELISION = re.compile(r"^\s*(?:\.{3,}|…+|\[(?:\.{3,}|…|snip)\]|\((?:\.{3,}|…)\)|<snip>)\s*$")


@dataclass(frozen=True, slots=True)
class QueryCommand:
    """The ``--query-gpu=`` or ``--query-compute-apps=`` field list of an nvidia-smi command."""

    kind: str  # "gpu" or "compute-apps"
    fields: tuple[str, ...]
    selection: GpuSelection | None = None  # the GPUs the command's -i / --id selects
    loops: bool = False  # it repeats its query (-l / --loop, -lms / --loop-ms): several readings


@dataclass(frozen=True, slots=True)
class Paste:
    text: str  # the output alone, prompt and ^C lines emptied
    command: str | None  # the nvidia-smi command line found before the output
    interrupted: bool  # a ^C ended it: its last row may be cut short

    def query(self) -> QueryCommand | None:
        return None if self.command is None else query_command(self.command)


# nvidia-smi's loop options ("-l 5", "-l5", "--loop=5", "-lms 500", "--loop-ms=500"): without one
# it reports "just once" (its man page, -l)
_LOOP = re.compile(r"-l(?:ms)?[0-9]*|--loop(?:-ms)?(?:=.*)?")
# "-i3", "-i0,2": the option joined to a list of indices
_JOINED_INDICES = re.compile(r"-i([0-9]{1,4}(?:,[0-9]{1,4})*)")


def _selection(words: list[str]) -> GpuSelection | None:
    """The GPUs ``words`` (nvidia-smi's arguments) select with -i / --id (see ``selection``);
    None when they select none, or when -i is given twice with different ids."""
    values: list[str] = []
    for i, word in enumerate(words):
        joined = _JOINED_INDICES.fullmatch(word)
        if word.startswith("--id="):
            values.append(word[len("--id=") :])
        elif word in ("-i", "--id") and i + 1 < len(words):
            values.append(words[i + 1])
        elif joined is not None:
            values.append(joined[1])
    return selection_of(values)


def command_selection(command: str) -> GpuSelection | None:
    """The GPUs an nvidia-smi command line selects with -i / --id."""
    return _selection(_arguments(_shell_words(command)))


def _arguments(words: list[str]) -> list[str]:
    """nvidia-smi's own arguments in a command's words (a sudo, watch or container launcher's
    before it left out). After a "--" (the end of kubectl exec's own options) the command is
    the one after it: ``kubectl exec nvidia-smi -i -- nvidia-smi -i 2`` runs in a pod named
    nvidia-smi, and its first -i is kubectl's."""
    named = [i for i, w in enumerate(words) if w.endswith(("nvidia-smi", "nvidia-smi.exe"))]
    last = named[-1] if named else -1
    end_of_options = max((i for i, w in enumerate(words) if w == "--" and i < last), default=-1)
    at = next((i for i in named if i > end_of_options), -1)
    return words[at + 1 :]


# shlex builds a word a character at a time, copying it each time (a 400 KB word took 4 s,
# growing as its length squared); a real command line is a few hundred characters: a longer one
# is split at its blanks.
SHLEX_MAX_CHARS = 4096


def _shell_words(command: str) -> list[str]:
    """``command``'s words, unquoted, as a POSIX shell reads them; its blank-separated words as
    typed when a quote does not close (shlex refuses those) or the line is too long for shlex."""
    if len(command) > SHLEX_MAX_CHARS:
        return command.split()
    try:
        return shlex.split(command, posix=True)
    except ValueError:
        return command.split()


def query_command(command: str) -> QueryCommand | None:
    """``nvidia-smi --query-gpu=index,name --format=csv`` → ("gpu", ("index", "name")); and the
    GPU ``-i 3`` selects, if it does."""
    words = _arguments(_shell_words(command))
    for i, word in enumerate(words):
        for kind in ("gpu", "compute-apps"):
            option = f"--query-{kind}"
            if word.startswith(option + "="):
                value = word[len(option) + 1 :]
            elif word == option and i + 1 < len(words):
                value = words[i + 1]
            else:
                continue
            fields = tuple(f.strip() for f in value.split(",") if f.strip())
            if not fields:
                return None
            return QueryCommand(kind, fields, _selection(words), any(map(_LOOP.fullmatch, words)))
    return None


# Markdown or mail a paste went through: a ">" quote opening every line (a quoted reply), a "\"
# hard line break ending lines written outside a code block (CommonMark), and an indentation
# common to every line (an indented code block, a list item). nvidia-smi starts some line of
# each output at column 0, and ends none with a backslash.
_QUOTE = re.compile(r"^\s*> ?")
_HARD_BREAK = re.compile(r"(?:^|\s)\\$")
# Markdown bold a poster put around a value to point at it ("**0%**", "**45C**"): nvidia-smi never
# prints two asterisks. Bounded, and only around text that starts and ends with a non-blank.
_BOLD = re.compile(r"\*\*([^\s*](?:[^*\n]{0,80}?[^\s*])?)\*\*")


# The prefix a job launcher puts on each line a remote process printed: Ray's "(pid=4150) ",
# "(RayWorker pid=81, ip=10.0.0.2) " and SkyPilot's "(task, pid=4150) ", "(worker1, rank=1,
# pid=9, ip=...) ". The launcher's own lines around them ("Job started", "Job finished") have none.
# Its parts are bounded: a line with no closing parenthesis is not searched to its end again and
# again.
_LOG_PREFIX = re.compile(r"^[ \t]{0,40}\([^()\n]{0,80}?\bpid=\d{1,10}[^()\n]{0,80}\)(?: |$)")


def _strip_log_prefixes(lines: list[str]) -> bool:
    """Take off the launcher's prefix where most lines carry one, in place; whether it did."""
    content = [i for i, line in enumerate(lines) if line.strip()]
    prefixed = [i for i in content if _LOG_PREFIX.match(lines[i])]
    if not prefixed or 2 * len(prefixed) <= len(content):
        return False
    for i in prefixed:
        lines[i] = _LOG_PREFIX.sub("", lines[i], count=1)
    return True


# The number `cat -n` puts before each line it prints (GNU coreutils cat.c: right-aligned in six
# columns, wider past 999999, then a tab), as in a paste of `nvidia-smi | cat -n`.
_LINE_NUMBER = re.compile(r"^( *+)([0-9]{1,12})\t")
_LINE_NUMBER_WIDTH = 6


def _line_number(line: str) -> int | None:
    """The number `cat -n` put before ``line``; None when it carries none."""
    found = _LINE_NUMBER.match(line)
    if found is None or len(found[1]) + len(found[2]) != max(_LINE_NUMBER_WIDTH, len(found[2])):
        return None
    return int(found[2])


def _strip_line_numbers(lines: list[str]) -> bool:
    """Take off `cat -n`'s numbers, in place, where most lines carry one and the lines that do
    are numbered one after the other (cat numbers every line it prints, empty ones too); whether
    it did. The lines without one (the command line typed above) stay."""
    content = [i for i, line in enumerate(lines) if line.strip()]
    numbered = [(i, n) for i in content if (n := _line_number(lines[i])) is not None]
    if len(numbered) < 2 or 2 * len(numbered) <= len(content):
        return False
    if any((i2 - i1, n2 - n1) != (1, 1) for (i1, n1), (i2, n2) in itertools.pairwise(numbered)):
        return False
    for i, _ in numbered:
        lines[i] = _LINE_NUMBER.sub("", lines[i], count=1)
    return True


def _unquote(lines: list[str]) -> bool:
    """Take off the markup above, in place; whether there was any."""
    changed = _strip_log_prefixes(lines)
    changed = _strip_line_numbers(lines) or changed
    content = [i for i, line in enumerate(lines) if line.strip()]
    if content and all(_QUOTE.match(lines[i]) for i in content):
        for i, line in enumerate(lines):
            lines[i] = _QUOTE.sub("", line, count=1)
        changed = True
    for i, line in enumerate(lines):
        stripped = line.rstrip()
        if _HARD_BREAK.search(stripped):
            lines[i] = stripped[:-1].rstrip()
            changed = True
    for i, line in enumerate(lines):
        if "**" in line:
            unbolded = _BOLD.sub(r"\1", line)
            changed = changed or unbolded != line
            lines[i] = unbolded
    common = len(_common_indentation(lines))
    if common:
        lines[:] = [line[common:] if line.strip() else "" for line in lines]
        changed = True
    return changed


def _common_indentation(lines: list[str]) -> str:
    """The blanks every non-empty line starts with, as typed: spaces, or a tab (CommonMark 0.31,
    "Tabs" and "Indented code blocks": a tab before a line makes it code, as four spaces do).
    Compared as typed, a tab is not taken for a number of spaces: a paste indenting some lines
    with a tab and others with spaces keeps its lines as they are."""
    indentations = (line[: len(line) - len(line.lstrip(" \t"))] for line in lines if line.strip())
    common = next(indentations, "")
    for blanks in indentations:
        if not common:
            break
        common = os.path.commonprefix([common, blanks])  # noqa: RUF071 (blanks, not paths)
    return common


# A default table a web page stored with its line breaks lost (a <pre> block turned into one
# paragraph: chegva.com/6622, a copy of a CSDN post), its lines joined by single blanks. nvidia-smi
# prints one border run per line, so a line holding two is such a copy. Each border tells how
# many columns the rows under it have (its inner "+" joints, plus one), and each row has one "|"
# more than it has columns: the "|" between two borders split back into the rows. Two borders
# with nothing between are a block's bottom and the next block's top, which nvidia-smi prints with
# an empty line between (the parsers start a block there).
_BORDER_RUN = re.compile(r"(?<!\S)[+|][-=]{3,}(?:\+[-=]{3,})*[+|](?!\S)")
_PIPE = re.compile(r"\|")


def _rows_under(border: str, text: str, last: bool) -> list[str] | None:
    """The rows of ``text``, which followed ``border`` on a joined line; None when its "|" do
    not make whole rows and more of the table follows (the line was not a joined table)."""
    columns = border.count("+", 1, len(border) - 1) + 1
    pipes = [m.start() for m in _PIPE.finditer(text)]
    if not pipes:
        return [text.strip()]
    per_row = columns + 1
    if len(pipes) % per_row and not last:
        return None
    rows = [text[: pipes[0]].strip()] if text[: pipes[0]].strip() else []
    for first in range(0, len(pipes), per_row):
        group = pipes[first : first + per_row]
        # the stored copy may end inside a row: keep what it holds
        end = group[-1] + 1 if len(group) == per_row else len(text)
        rows.append(text[group[0] : end].rstrip())
    tail = text[pipes[-1] + 1 :].strip() if len(pipes) % per_row == 0 else ""
    return [*rows, tail] if tail else rows


def _split_joined_table(line: str) -> list[str] | None:
    """The lines of a table joined onto ``line``; None when it is not one."""
    borders = list(_BORDER_RUN.finditer(line))
    if len(borders) < 2:
        return None
    before = line[: borders[0].start()].strip()
    lines = [before] if before else []
    for n, border in enumerate(borders):
        last = n + 1 == len(borders)
        following = line[border.end() : len(line) if last else borders[n + 1].start()]
        rows = _rows_under(border.group(), following, last)
        if rows is None:
            return None
        lines += [border.group(), *rows]
    return lines


def _split_joined_tables(lines: list[str]) -> bool:
    """Put back, in place, the line breaks of every table joined onto one line; whether any.
    (One new list, not an insertion per joined line: a file of many such lines stays linear.)"""
    restored: list[str] = []
    changed = False
    for line in lines:
        split = _split_joined_table(line)
        if split is None:
            restored.append(line)
        else:
            restored += split
            changed = True
    if changed:
        lines[:] = restored
    return changed


# How far below the top a CSV header is looked for, under lines some other tool printed first.
_PREAMBLE_LINES = 12


def _csv_preamble(lines: list[str], content: list[int]) -> list[int]:
    """The lines above a CSV header that are not the CSV's: the header is a row of ≥ 2 field
    names followed by a row of as many cells, and no line above it has that many cells. Empty
    when the text does not start that way (other formats have no such rows: their lines hold
    no commas between names)."""
    near = content[: _PREAMBLE_LINES + 1]
    for n, (at, following) in enumerate(itertools.pairwise(near)):
        header = parse_header(lines[at].strip())
        if header is None or len(header) < 2:
            continue
        width = len(header)
        above = near[:n]
        # a row of as many cells above it is a row of this CSV (the command line that names
        # the fields, wrapped in another tool's, is not one)
        if len(lines[following].split(",")) != width or any(
            len(lines[i].split(",")) == width and "nvidia-smi" not in lines[i] for i in above
        ):
            return []
        return above
    return []


# doctor asks each of its detectors (smi formats, topo, nvlink -s, nvlink -e, CSV, a failure)
# about one head, and each strips the same paste: the last one is kept (one, so a 64 MiB capture
# is never held beyond its own reading)
@functools.lru_cache(maxsize=1)
def strip_terminal(text: str) -> Paste:
    lines = text.splitlines()
    changed = _unquote(lines)
    changed = _split_joined_tables(lines) or changed
    command: str | None = None
    content = [i for i, line in enumerate(lines) if line.strip()]
    # leading command lines (a paste may show several, e.g. `nvidia-smi -L` then the query), and
    # the poster's labels around them ("command:", "output:")
    for i in content:
        line = lines[i].lstrip("\ufeff")
        match = _COMMAND_LINE.match(line)
        under_query = command is not None and query_command(command) is not None
        comment = under_query and _COMMENT.match(line) is not None
        if match is None and not _LABEL.match(line) and not comment:
            break
        if match is not None:
            command = match["command"].strip()
        lines[i] = ""
        changed = True
    content = [i for i in content if lines[i].strip()]
    preamble = _csv_preamble(lines, content)
    for i in preamble:
        lines[i] = ""
    elided = [i for i in content if _ELISION.match(lines[i])]
    for i in elided:
        lines[i] = ""
    # trailing bare prompts, then the ^C the terminal echoed where the cursor was
    interrupted = False
    for i in reversed(content):
        if _BARE_PROMPT.match(lines[i]):
            lines[i] = ""
            continue
        if _INTERRUPT in lines[i]:
            interrupted = True
            lines[i] = lines[i].replace(_INTERRUPT, " " * len(_INTERRUPT)).rstrip()
            if lines[i].strip():
                break
            continue
        break
    if not changed and not interrupted and not elided and not preamble:
        return Paste(text, None, False)
    return Paste("\n".join(lines) + "\n", command, interrupted)


def command_output_lines(text: str, command: re.Pattern[str]) -> list[tuple[int, str]]:
    """(line number, line) of one command's output in a paste: terminal prompts and ANSI escapes
    removed, trailing blanks cut; a capture file's section of that ``command``, or the text
    before a capture banner. A paste of several commands, each on its line above its output
    ("### nvidia-smi nvlink -s", its output, "### nvidia-smi nvlink -e", its output), gives the
    output of the commands ``command`` matches (see ``_outputs_of``); the other lines are
    emptied, so line numbers stay the file's."""
    paste = strip_terminal(text)
    sections = [s for s in capture_sections(paste.text) if s.command and command.search(s.command)]
    numbered: Sequence[tuple[int, str]]
    if sections:
        first = sections[0]
        numbered = list(enumerate(first.lines, start=first.start + 1))
    else:
        numbered = _numbered_lines(paste.text)
        if "nvidia-smi" in paste.text:  # else no command line in it: one output
            numbered = _outputs_of(numbered, paste.command, command)
    if not sections and "\x1b" not in paste.text:
        return list(numbered)  # _numbered_lines cut their trailing blanks
    return [(n, TERMINAL_ESCAPE.sub("", line).rstrip()) for n, line in numbered]


# doctor's detectors each ask for one command's output of the same paste: its lines are split
# once (the last paste's kept, as strip_terminal keeps it)
@functools.lru_cache(maxsize=1)
def _numbered_lines(text: str) -> tuple[tuple[int, str], ...]:
    """(line number, line) of ``text`` up to a capture banner; their trailing blanks cut where
    no terminal escape is in it (an escape comes off before them). A command line reads the
    same without its trailing blanks."""
    lines = lines_before_banners(text)
    if "\x1b" not in text:
        lines = [line.rstrip() for line in lines]
    return tuple(enumerate(lines, start=1))


@dataclass(frozen=True, slots=True)
class CommandOutput:
    """The lines a paste shows under one command line (``command`` None: under none, at its
    top)."""

    command: str | None
    lines: tuple[tuple[int, str], ...]


def _command_outputs(numbered: Sequence[tuple[int, str]], first: str | None) -> list[CommandOutput]:
    """The outputs of a paste, split at each nvidia-smi command line in it (``first``: the one
    ``strip_terminal`` took off its top). A command line itself belongs to no output."""
    outputs: list[tuple[str | None, list[tuple[int, str]]]] = [(first, [])]
    for number, line in numbered:
        command = _command_of(line)
        if command is not None:
            outputs.append((command, []))
        else:
            outputs[-1][1].append((number, line))
    return [CommandOutput(command, tuple(lines)) for command, lines in outputs if lines]


def _command_of(line: str) -> str | None:
    """The nvidia-smi command a line shows, with or without a prompt; None if it shows none."""
    found = _COMMAND_LINE.match(line) if "nvidia-smi" in line else None
    return None if found is None else found["command"].strip()


def command_outputs(text: str) -> list[CommandOutput]:
    """The outputs of a paste (a capture file's sections aside), each under the command line
    that printed it; line numbers are those of ``strip_terminal(text).text``."""
    paste = strip_terminal(text)
    return _command_outputs(_numbered_lines(paste.text), paste.command)


def pasted_commands(text: str) -> list[str]:
    """The nvidia-smi command lines of a paste, in order (a capture file's sections aside)."""
    return [o.command for o in command_outputs(text) if o.command is not None]


def _outputs_of(
    numbered: Sequence[tuple[int, str]], first: str | None, command: re.Pattern[str]
) -> Sequence[tuple[int, str]]:
    """``numbered`` with only the output of ``command`` left where the paste shows several
    commands: the outputs under a command line ``command`` matches; if none, the output above
    any command line; if none either, every output (the reader then says what it is not)."""
    if not any("nvidia-smi" in line for _, line in numbered):
        return numbered  # no command line in it: one output (most pastes, every long file)
    outputs = _command_outputs(numbered, first)
    if len(outputs) < 2:
        return [(n, "" if _command_of(line) else line) for n, line in numbered]
    chosen = [o for o in outputs if o.command is not None and command.search(o.command)]
    chosen = chosen or [o for o in outputs if o.command is None] or outputs
    kept = {number for output in chosen for number, _ in output.lines}
    return [(n, line if n in kept else "") for n, line in numbered]
