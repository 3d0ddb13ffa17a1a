"""What a terminal adds around nvidia-smi output when people paste it: the prompt and command
line before it, a bare prompt after it, and the ``^C`` that stopped ``dmon`` or ``-l``; and the
line of dots people write where they cut part of it out.

The prompt line also says which fields a ``--query-gpu=`` / ``--query-compute-apps=`` CSV
written with ``noheader`` holds, so it is read before it is dropped. Dropped lines become empty
lines: every parser skips those, and line numbers in errors stay those of the file.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# A shell prompt ("user@host:~$ ", "root@box:~# ", "[u@h dir]$ ", "(venv) $ ", "PS C:\\> ",
# "C:\\Users\\me> ", "$ ", "# ") followed by the nvidia-smi command itself.
_PROMPT = (
    r"(?:\([^)]*\)\s*)?"
    r"(?:\[[^\]]*\]\s*|[\w.-]+@[\w.-]+(?::[^\s$#%>]*)?\s*|PS\s+[^>]*|[A-Za-z]:\\[^>]*)?"
    r"[$#%>]?"
)
_COMMAND_LINE = re.compile(
    rf"^\s*{_PROMPT}\s*(?P<command>(?:sudo\s+)?(?:watch\s+(?:-\S+\s+)*)?"
    r"nvidia-smi(?:\.exe)?(?:\s.*)?)$"
)
# A prompt with nothing after it, left at the end of a paste.
_BARE_PROMPT = re.compile(
    r"^\s*(?:\([^)]*\)\s*)?(?:\[[^\]]*\]|[\w.-]+@[\w.-]+(?::[^\s$#%>]*)?)\s*[$#%>]\s*$"
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


@dataclass(frozen=True, slots=True)
class Paste:
    text: str  # the output alone, prompt and ^C lines emptied
    command: str | None  # the nvidia-smi command line found before the output
    interrupted: bool  # a ^C ended it: its last row may be cut short

    def query(self) -> QueryCommand | None:
        return None if self.command is None else query_command(self.command)


def query_command(command: str) -> QueryCommand | None:
    """``nvidia-smi --query-gpu=index,name --format=csv`` → ("gpu", ("index", "name"))."""
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        words = command.split()
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
            return QueryCommand(kind, fields) if fields else None
    return None


def strip_terminal(text: str) -> Paste:
    lines = text.splitlines()
    command: str | None = None
    content = [i for i, line in enumerate(lines) if line.strip()]
    # leading command lines (a paste may show several, e.g. `nvidia-smi -L` then the query)
    for i in content:
        match = _COMMAND_LINE.match(lines[i].lstrip("\ufeff"))
        if match is None:
            break
        command = match["command"].strip()
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
    if command is None and not interrupted and not elided:
        return Paste(text, None, False)
    return Paste("\n".join(lines) + "\n", command, interrupted)
