"""Entry point and the one place where exceptions become exit codes."""

from __future__ import annotations

import argparse
import atexit
import difflib
import importlib
import json
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn, Protocol

from gpuwarden import __version__
from gpuwarden.cli.registry import COMMANDS
from gpuwarden.errors import GpuwardenError

EXIT_OK = 0
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in gpuwarden
EXIT_INTERRUPTED = 130


class CommandModule(Protocol):
    def register(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class ArgumentError(GpuwardenError):
    """A command line argparse refused: exit 2, with the option named and a hint."""

    exit_code = 2


class CommandParser(argparse.ArgumentParser):
    """argparse, but a refused argument is a GpuwardenError (reference, hint, ``--json``)
    instead of a usage dump on stderr; its sub-command parsers are CommandParsers too."""

    def error(self, message: str) -> NoReturn:
        raise _argument_error(self, message)


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    options: list[str] = []
    for action in parser._actions:  # argparse keeps no public list of its options
        options.extend(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            options.extend(action.choices)
    return options


def _argument_error(parser: argparse.ArgumentParser, message: str) -> ArgumentError:
    """The reference and hint for one of argparse's messages."""
    help_hint = f"run `{parser.prog} --help` for the options"
    if message.startswith("unrecognized arguments:"):
        words = message.removeprefix("unrecognized arguments:").split()
        flags = [w.split("=", 1)[0] for w in words if w.startswith("-")]
        known = _option_strings(parser)
        close = [m for f in flags for m in difflib.get_close_matches(f, known, n=1)]
        hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else help_hint
        return ArgumentError(message, reference="unknown-option", hint=hint)
    if message.startswith("argument ") and "invalid choice" in message:
        return ArgumentError(message, reference="invalid-choice", hint=help_hint)
    if "required" in message:
        return ArgumentError(message, reference="missing-argument", hint=help_hint)
    return ArgumentError(message, reference="invalid-argument", hint=help_hint)


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


def load_command(name: str) -> CommandModule:
    module: CommandModule = importlib.import_module(
        f"gpuwarden.cli.commands.{COMMANDS[name].module}"
    )
    return module


def _report_error(exc: GpuwardenError, as_json: bool) -> None:
    if as_json:
        payload = {"schema": "gpuwarden.error/1", **exc.to_dict()}
        print(json.dumps(payload, indent=2), file=sys.stderr)
        return
    lines = [f"error: {exc.reference}", f"  {exc.message}"]
    if exc.context:
        lines.append(f"  {exc.context}")
    if exc.hint:
        lines.append(f"hint: {exc.hint}")
    print("\n".join(lines), file=sys.stderr)


def _reader_went_away() -> int:
    """`gpuwarden ... | head`: the reader closed the pipe. That is a normal end; point stdout at
    /dev/null so the interpreter's last flush does not fail again (Python's documented recipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_OK


def _fill_closed_streams() -> None:
    """`gpuwarden ... <&-` or `>&-`: Python leaves sys.stdin/stdout/stderr as None when the
    descriptor was closed at start. Read a closed stdin as empty input (so '-' gets the usual
    "input is empty" error) and write to a closed stdout/stderr as to a reader that went away."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))  # noqa: SIM115


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _fill_closed_streams()
    top = _top_parser()
    try:
        ns = top.parse_args(argv)
    except GpuwardenError as exc:
        _report_error(exc, as_json="--json" in argv)
        return exc.exit_code
    if ns.command is None:
        top.print_help()
        return 2
    if ns.command not in COMMANDS:
        close = difflib.get_close_matches(ns.command, list(COMMANDS), n=1)
        unknown = ArgumentError(
            f"unknown command {ns.command!r}",
            reference="unknown-command",
            hint=f"did you mean {close[0]!r}?" if close else "run `gpuwarden --help`",
        )
        _report_error(unknown, as_json=False)
        return unknown.exit_code
    as_json = "--json" in ns.rest
    try:
        command = load_command(ns.command)
        parser = CommandParser(
            prog=f"gpuwarden {ns.command}", description=COMMANDS[ns.command].summary
        )
        command.register(parser)
        args = parser.parse_args(ns.rest)
        code = command.run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the funnel, not at exit
        return code
    except GpuwardenError as exc:
        if ns.debug:
            raise
        _report_error(exc, as_json)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _reader_went_away()
    except Exception as exc:
        if ns.debug:
            raise
        print(
            f"error: internal-error\n  {type(exc).__name__}: {exc}\n"
            "hint: this is a bug in gpuwarden; rerun with --debug and report the traceback",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def console() -> NoReturn:
    """The process's entry (the `gpuwarden` script and `python -m gpuwarden`): main, then exit."""
    leave(main())


def leave(code: int) -> NoReturn:
    """End the process with ``code``, skipping the interpreter's teardown when nothing needs it.

    Tearing down numpy and our modules costs a short command 15-20 ms of CPU (a sixth of `trace
    analyze` on a small trace). What teardown is for is done here first: the standard streams
    are flushed and the atexit handlers run (coverage's data, weakref finalizers, logging). Every
    file a verb writes is closed by a ``with`` before its run returns and the store commits its
    batches itself, so nothing else waits for teardown; a thread still running could, so then
    the exit is the usual one.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        raise SystemExit(code) from None  # let the interpreter's own exit deal with the stream
    atexit._run_exitfuncs()
    if threading.active_count() > 1:
        raise SystemExit(code)
    os._exit(code)
