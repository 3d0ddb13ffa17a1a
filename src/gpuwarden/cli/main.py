"""Entry point and the one place where exceptions become exit codes."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Protocol

from gpuwarden import __version__
from gpuwarden.cli.registry import COMMANDS
from gpuwarden.errors import GpuwardenError

EXIT_OK = 0
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in gpuwarden
EXIT_INTERRUPTED = 130


class CommandModule(Protocol):
    def register(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _top_parser() -> argparse.ArgumentParser:
    width = max(len(name) for name in COMMANDS)
    verbs = "\n".join(f"  {name:<{width}}  {info.summary}" for name, info in COMMANDS.items())
    parser = argparse.ArgumentParser(
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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = _top_parser()
    ns = top.parse_args(argv)
    if ns.command is None:
        top.print_help()
        return 2
    if ns.command not in COMMANDS:
        import difflib

        close = difflib.get_close_matches(ns.command, list(COMMANDS), n=1)
        exc = GpuwardenError(
            f"unknown command {ns.command!r}",
            reference="unknown-command",
            hint=f"did you mean {close[0]!r}?" if close else "run `gpuwarden --help`",
        )
        exc.exit_code = 2
        _report_error(exc, as_json=False)
        return 2
    as_json = "--json" in ns.rest
    try:
        command = load_command(ns.command)
        parser = argparse.ArgumentParser(
            prog=f"gpuwarden {ns.command}", description=COMMANDS[ns.command].summary
        )
        command.register(parser)
        args = parser.parse_args(ns.rest)
        return command.run(args)
    except GpuwardenError as exc:
        if ns.debug:
            raise
        _report_error(exc, as_json)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`gpuwarden ... | head`): nothing left to say to it.
        sys.stderr.close()
        return EXIT_OK
    except Exception as exc:
        if ns.debug:
            raise
        print(
            f"error: internal-error\n  {type(exc).__name__}: {exc}\n"
            "hint: this is a bug in gpuwarden; rerun with --debug and report the traceback",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
