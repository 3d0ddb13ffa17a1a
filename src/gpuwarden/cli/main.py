"""Entry point and the one place where exceptions become exit codes."""

from __future__ import annotations

import argparse
import atexit
import codecs
import contextlib
import importlib
import io
import json
import os
import re
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn, Protocol, TextIO

from gpuwarden import __version__
from gpuwarden.cli.options import ExplicitValueParser, as_typed, before_separator
from gpuwarden.cli.registry import COMMANDS
from gpuwarden.errors import GpuwardenError, quoted, shown

EXIT_OK = 0
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in gpuwarden
EXIT_INTERRUPTED = 130
# How many of the arguments no option takes an error lists
SHOWN_WORDS = 5
# A command line's words that argparse reads as options ("-x", "--x=1"; not "-", "-1", "-.5" nor
# a word holding a blank), and how many it may hold: ten times the options of the largest verb
_OPTION_LIKE = re.compile(r"-(?!\d+$|\d*\.\d+$)[^ ]+$", re.DOTALL)
MAX_OPTION_WORDS = 1000


class CommandModule(Protocol):
    def register(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class ArgumentError(GpuwardenError):
    """A command line argparse refused: exit 2, with the option named and a hint."""

    exit_code = 2


class CommandParser(ExplicitValueParser):
    """argparse, but a refused argument is a GpuwardenError (reference, hint, ``--json``)
    instead of a usage dump on stderr; its sub-command parsers are CommandParsers too."""

    def error(self, message: str) -> NoReturn:
        raise _argument_error(self, message)


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """The options and sub-commands of ``parser``, its sub-commands' options too (the unknown
    arguments of `deploy grafana` are found by `deploy`'s parser)."""
    options: list[str] = []
    for action in parser._actions:  # argparse keeps no public list of its options
        options.extend(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            options.extend(action.choices)
            for sub in action.choices.values():
                options.extend(o for o in _option_strings(sub) if o not in options)
    return options


def _help_hint(parser: argparse.ArgumentParser) -> str:
    return f"run `{parser.prog} --help` for the options"


def _argument_error(parser: argparse.ArgumentParser, message: str) -> ArgumentError:
    """The reference and hint for one of argparse's messages."""
    help_hint = _help_hint(parser)
    if message.startswith("argument ") and "invalid choice" in message:
        return ArgumentError(
            message, reference="invalid-choice", hint=_choice_hint(message, parser)
        )
    if "required" in message:
        return ArgumentError(message, reference="missing-argument", hint=help_hint)
    return ArgumentError(message, reference="invalid-argument", hint=help_hint)


# argparse's words for a refused choice: "invalid choice: 'trian' (choose from 'train', 'lora')"
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from ((?:'[^']*'(?:, )?)+)\)")


def _choice_hint(message: str, parser: argparse.ArgumentParser) -> str:
    """The choice a mistyped one was perhaps meant to be ("did you mean 'train'?"), and where
    the options are listed."""
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return _help_hint(parser)
    choices = re.findall(r"'([^']*)'", found.group(2))
    close = _close_matches(found.group(1), choices)
    if not close:
        return _help_hint(parser)
    return f"did you mean {close[0]!r}? (`{parser.prog} --help` lists the options)"


def _close_matches(word: str, choices: Sequence[str]) -> list[str]:
    """The one of ``choices`` ``word`` was perhaps meant to be, if any. difflib is imported here,
    on a refused command line only: every other run is spared its import."""
    import difflib

    return difflib.get_close_matches(word, choices, n=1)


def _unrecognized(parser: argparse.ArgumentParser, words: list[str]) -> ArgumentError:
    """The arguments no option of ``parser`` takes: the first of them (a blank one quoted), how
    many there are when they are more (a pasted file of words is no message), and the options
    the first unknown ones were perhaps meant to be."""
    flags = [w.split("=", 1)[0] for w in words if w.startswith("-")][:SHOWN_WORDS]
    known = _option_strings(parser)
    close = {m: f for f in flags for m in _close_matches(f, known)}
    listed = " ".join(_as_listed(word) for word in words[:SHOWN_WORDS])
    more = f" … ({len(words):,} in all)" if len(words) > SHOWN_WORDS else ""
    return ArgumentError(
        f"unrecognized arguments: {listed}{more}",
        reference="unknown-option",
        hint=f"did you mean {', '.join(repr(c) for c in close)}?" if close else _help_hint(parser),
    )


def _as_listed(word: str) -> str:
    """A word in a list of words: as typed, or quoted where blanks would hide it ("", "a b")
    and where it holds what is no text to print (a terminal's escape code; an undecodable byte,
    a lone surrogate no strict JSON reader takes) — repr spells those out."""
    plain = word != "" and " " not in word and word.isprintable()
    return shown(word) if plain else quoted(word)


def parse_command_line(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """``parser``'s reading of ``words``; argparse's refusal as the user reads it (as_typed)."""
    _refuse_endless_options(words)
    try:
        namespace, unknown = parser.parse_known_args(words)
    except ArgumentError as exc:
        raise ArgumentError(
            as_typed(exc.message, words), reference=exc.reference, hint=exc.hint
        ) from None
    if unknown:
        raise _unrecognized(parser, unknown)
    return namespace


def _refuse_endless_options(words: list[str]) -> None:
    """Python 3.11's argparse takes time quadratic in the option-like words before ``--`` (each
    looks for the next among all: 10,000 took 3.7 s, 100,000 five minutes). No verb has more than
    a hundred options; thousands are a text pasted unquoted (`explain $(cat log)`)."""
    count = sum(1 for word in before_separator(words) if _OPTION_LIKE.match(word))
    if count > MAX_OPTION_WORDS:
        raise ArgumentError(
            f"{count:,} words that read as options (more than {MAX_OPTION_WORDS:,}): a text "
            "pasted unquoted?",
            reference="too-many-options",
            hint="quote a pasted text as one argument or give it as a file (explain --file LOG, "
            "or '-' for standard input); a job's own options go after `--` (record -- CMD)",
        )


def _top_parser() -> argparse.ArgumentParser:
    width = max(len(name) for name in COMMANDS)
    verbs = "\n".join(f"  {name:<{width}}  {info.summary}" for name, info in COMMANDS.items())
    parser = CommandParser(
        prog="gpuwarden",
        description="The toolkit for people who run GPUs for machine learning.",
        epilog=f"commands:\n{verbs}\n\nRun `gpuwarden COMMAND --help` for a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpuwarden {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks instead of short errors"
    )
    parser.add_argument("command", nargs="?", metavar="COMMAND", help="one of the commands below")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _asks_json(words: list[str]) -> bool:
    """Whether the command line asks for --json: before `--`, after which it is a word of the
    text (`explain -- --json`) or of the job (`record -- train.py --json`)."""
    return "--json" in before_separator(words)


def load_command(name: str) -> CommandModule:
    module: CommandModule = importlib.import_module(
        f"gpuwarden.cli.commands.{COMMANDS[name].module}"
    )
    return module


def _report_error(exc: GpuwardenError, as_json: bool) -> None:
    _tell(_error_text(exc, as_json))


def _tell(text: str) -> None:
    """Print why the command failed on stderr. When stderr's reader went away (`2>&1 | head`)
    or its disk is full the text is lost, but the exit code still says the command failed and
    no traceback takes its place."""
    try:
        print(text, file=sys.stderr)
    except OSError:
        _to_devnull(sys.stderr)


def _error_text(exc: GpuwardenError, as_json: bool) -> str:
    if as_json:
        return json.dumps({"schema": "gpuwarden.error/1", **exc.to_dict()}, indent=2)
    lines = [f"error: {exc.reference}", f"  {exc.message}"]
    if exc.context:
        lines.append(f"  {exc.context}")
    if exc.hint:
        lines.append(f"hint: {exc.hint}")
    return "\n".join(lines)


def _to_devnull(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at /dev/null, so what it still holds for a reader that went
    away is dropped instead of failing every later flush (Python's documented recipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def _reader_went_away() -> int:
    """`gpuwarden ... | head`: the reader closed the pipe. That is a normal end."""
    _to_devnull(sys.stdout)
    return EXIT_OK


def _fill_closed_streams() -> None:
    """`gpuwarden ... <&-` or `>&-`: Python leaves sys.stdin/stdout/stderr as None when the
    descriptor was closed at start. Read a closed stdin as empty input (so '-' gets the usual
    "input is empty" error) and write to a closed stdout/stderr as to a reader that went away."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))  # noqa: SIM115


def _json_escape(error: UnicodeError) -> tuple[str, int]:
    """A character stdout's encoding lacks, as its JSON escape (\\u00b7; a surrogate pair past
    U+FFFF): inside a --json document it reads back as the character, in a table a person reads
    the code point. Every character outside ASCII we print sits in a JSON string."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return json.dumps(error.object[error.start : error.end])[1:-1], error.end


codecs.register_error("gpuwarden-json-escape", _json_escape)

# The typography of our own tables and lines, spelt in ASCII for a person reading them under a
# locale that cannot encode it, one character for one where a table's columns depend on it ("°"
# a blank); a --json document keeps its escapes: it must read back the same
_ASCII = {
    "·": "-", "—": "-", "–": "-", "…": "...", "→": "->", "←": "<-", "≥": ">=", "≤": "<=",
    "≈": "~", "×": "x", "°": " ", "≫": ">>", "≪": "<<", "−": "-", "µ": "u", "━": "-", "─": "-",
    "┃": "|", "│": "|", "┏": "+", "┓": "+", "┗": "+", "┛": "+", "┡": "+", "┩": "+", "└": "+",
    "┘": "+", "┳": "+", "┻": "+", "╇": "+", "┴": "+", "┬": "+", "┼": "+", "├": "+", "┤": "+",
}  # fmt: skip


def _ascii_or_escape(error: UnicodeError) -> tuple[str, int]:
    """Our own symbols in ASCII ("·" → "-", "≥" → ">=", table rules → "-", "|", "+"); any other
    character (a GPU, host or process name) as its escape, as in a --json document."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    spelt = [_ASCII.get(ch) for ch in error.object[error.start : error.end]]
    if all(s is not None for s in spelt):
        return "".join(s for s in spelt if s is not None), error.end
    return _json_escape(error)


codecs.register_error("gpuwarden-ascii", _ascii_or_escape)


def _escape_what_stdout_cannot_encode(as_json: bool) -> None:
    """A locale whose encoding is not UTF-8 (LANG=C with Python's UTF-8 mode and locale
    coercion off, ISO-8859-1, EUC-JP) cannot encode the "·", "—" and "≈" every report prints:
    escape them instead of failing. Python's defaults fail there ("strict"; "surrogateescape"
    in the C locale, which only writes back undecodable bytes); a handler the user chose
    (PYTHONIOENCODING=:replace) stays."""
    stream = sys.stdout
    if isinstance(stream, io.TextIOWrapper) and stream.errors in ("strict", "surrogateescape"):
        # a stream the caller closed: what is written fails as it would have
        with contextlib.suppress(ValueError):
            stream.reconfigure(errors="gpuwarden-json-escape" if as_json else "gpuwarden-ascii")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _fill_closed_streams()
    _escape_what_stdout_cannot_encode(as_json=_asks_json(argv))
    top = _top_parser()
    try:
        ns = parse_command_line(top, argv)
    except GpuwardenError as exc:
        _report_error(exc, as_json=_asks_json(argv))
        return exc.exit_code
    if ns.command is None:
        top.print_help()
        return 2
    if ns.command not in COMMANDS:
        close = _close_matches(ns.command, list(COMMANDS))
        unknown = ArgumentError(
            f"unknown command {quoted(ns.command)}",
            reference="unknown-command",
            hint=f"did you mean {close[0]!r}?" if close else "run `gpuwarden --help`",
        )
        _report_error(unknown, as_json=False)
        return unknown.exit_code
    as_json = _asks_json(ns.rest)
    try:
        command = load_command(ns.command)
        parser = CommandParser(
            prog=f"gpuwarden {ns.command}", description=COMMANDS[ns.command].summary
        )
        command.register(parser)
        args = parse_command_line(parser, ns.rest)
        code = command.run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the funnel, not at exit
        return code
    except GpuwardenError as exc:
        if ns.debug:
            raise
        _report_error(exc, as_json)
        return exc.exit_code
    except KeyboardInterrupt:
        _tell("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _reader_went_away()
    except Exception as exc:
        if ns.debug:
            raise
        _tell(
            f"error: internal-error\n  {type(exc).__name__}: {exc}\n"
            "hint: this is a bug in gpuwarden; rerun with --debug and report the traceback"
        )
        return EXIT_INTERNAL


def console() -> NoReturn:
    """The process's entry (the `gpuwarden` script and `python -m gpuwarden`): main, then exit."""
    leave(main())


def leave(code: int) -> NoReturn:
    """End the process with ``code``, skipping the interpreter's teardown when nothing needs it.

    Tearing down numpy and our modules costs a short command 15-20 ms of CPU (a sixth of `trace
    analyze` on a small trace). What teardown is for is done here first, in its order: the
    atexit handlers run (coverage's data, weakref finalizers, logging), then the standard streams
    are flushed (what a handler printed too). Every file a verb writes is closed by a ``with``
    before its run returns and the store commits its batches itself, so nothing else waits for
    teardown. A thread still running could: then the exit is the usual one, which waits for it
    before the handlers run.
    """
    if threading.active_count() > 1:
        raise SystemExit(code)
    atexit._run_exitfuncs()
    if not _flush_standard_streams():
        raise SystemExit(code)  # the interpreter's own exit reports the lost output (status 120)
    os._exit(code)


def _flush_standard_streams() -> bool:
    """Write what stdout and stderr hold; False when some could not be written (a full disk).
    A reader that went away (`| head` before the last write) is a normal end, as in the funnel:
    the code stays the command's, not the interpreter's 120 for an output it could not flush."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except ValueError:
            pass  # closed by the program itself: it holds nothing more to write
        except BrokenPipeError:
            _to_devnull(stream)
        except OSError:
            return False
    return True
