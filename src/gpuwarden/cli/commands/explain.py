"""`gpuwarden explain [TEXT] [--file F | -]`: a pasted error, log excerpt or nvidia-smi screen →
what it means and what to do, most likely cause first.

Exit 0 whenever a text was read (the verdict is in the output, also "nothing matched"); 2 for
no text (none given; empty, blank or only a terminal's escape codes), input that is not text,
too large, or a job under --plan that `gpuwarden plan` would refuse.
"""

from __future__ import annotations

import argparse
import codecs
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from gpuwarden.cli.options import ExplicitValueParser, add_json_flag, as_typed
from gpuwarden.errors import InputError, quoted
from gpuwarden.files import CaptureTooLargeError, read_capped, without_terminal_escapes

if TYPE_CHECKING:
    from gpuwarden.types.plan import PlanRequest

MAX_INPUT_BYTES = 8 * 1024 * 1024  # a paste, or the tail of a log; not a whole log archive
# text decoded with a few stray bytes (a Latin-1 "°") is still text; beyond this share it is not
MAX_UNDECODABLE_SHARE = 0.01
MAX_CONTROL_SHARE = 0.05
_ALLOWED_CONTROLS = frozenset("\t\n\r\f\v\x1b")
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),  # PowerShell's `>` writes UTF-16 with a BOM
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_STDIN = "standard input"
# how to give explain its text
_HOW = (
    "paste the error as an argument (quoted), or --file LOG, or pipe it: "
    "`dmesg | gpuwarden explain -`"
)


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "text",
        nargs="*",
        metavar="TEXT",
        help="the error text (quote it); '-' reads standard input",
    )
    parser.add_argument(
        "--file",
        "-f",
        metavar="F",
        help="read the text from a file ('-' = standard input)",
    )
    parser.add_argument(
        "--plan",
        metavar='"MODEL --gpu G ..."',
        help="the job, as `gpuwarden plan` takes it (one quoted string): for an out-of-memory "
        "error, its memory plan and fixes follow the diagnosis",
    )
    add_json_flag(parser)


def _too_large(name: str) -> InputError:
    return InputError(
        f"{name}: more than {MAX_INPUT_BYTES // (1024 * 1024)} MiB",
        reference="explain-input-too-large",
        hint="paste the error and the lines around it, e.g. the end of a log: `tail -n 500 LOG`",
    )


def _read_file(path: str) -> bytes:
    """The bytes of ``path`` ("-" = standard input), at most MAX_INPUT_BYTES."""
    name = _STDIN if path == "-" else path
    if not path:
        raise InputError(
            "--file '' names no file (an unset shell variable?)",
            reference="explain-input-not-found",
            hint="pass the path of a saved log, or the text itself, or '-' for standard input",
        )
    try:
        data, _ = read_capped(path, MAX_INPUT_BYTES)
    except CaptureTooLargeError:
        raise _too_large(name) from None
    except FileNotFoundError:
        raise InputError(
            f"{path}: no such file",
            reference="explain-input-not-found",
            hint="pass the path of a saved log, or the text itself, or '-' for standard input",
        ) from None
    except OSError as exc:
        raise InputError(
            f"{name}: cannot be read ({exc.strerror or exc})",
            reference="explain-input-not-found",
            hint="check the path and its permissions",
        ) from None
    return data


def _binary(name: str, why: str) -> InputError:
    return InputError(
        f"{name}: not text ({why})",
        reference="explain-input-binary",
        hint="explain reads text: an error message, a log, nvidia-smi output (a core dump or an "
        "archive is not one)",
    )


def decode_input(data: bytes, name: str) -> str:
    """Bytes → text: UTF-8 (or UTF-16 with its BOM, as PowerShell writes it); binary → error."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                raise _binary(name, f"invalid {encoding} after its byte-order mark") from None
    if b"\x00" in data:
        raise _binary(name, "it contains NUL bytes")
    text = data.decode("utf-8", errors="replace")
    if text.count("\ufffd") > MAX_UNDECODABLE_SHARE * max(len(text), 1):
        raise _binary(name, "most of it is not UTF-8")
    # a terminal's escape codes are text (a coloured log; a title's OSC ends in BEL): the
    # controls counted are the others, over the whole text
    controls = sum(
        1 for c in without_terminal_escapes(text) if c < " " and c not in _ALLOWED_CONTROLS
    )
    if controls > MAX_CONTROL_SHARE * max(len(text), 1):
        raise _binary(name, "it is mostly control characters")
    return text


def read_input(args: argparse.Namespace) -> str:
    """The text to explain; InputError when there is none (no input, or an input holding
    nothing to read: empty, blanks, a terminal's escape codes), as when none was given."""
    name, data = _input_bytes(args)
    text = decode_input(data, name)
    if not without_terminal_escapes(text).strip():
        what = "empty" if not text else "only blanks or terminal escape codes"
        raise InputError(
            f"{name}: nothing to explain ({what})", reference="explain-input-empty", hint=_HOW
        )
    return text


def _input_bytes(args: argparse.Namespace) -> tuple[str, bytes]:
    """The name of the input given and its bytes."""
    if args.file is not None and args.text:
        raise InputError(
            "both TEXT and --file given",
            reference="explain-two-inputs",
            hint="give the text as arguments, or --file F, or '-' for standard input",
        )
    if args.file is not None:
        return args.file, _read_file(args.file)
    if args.text == ["-"] or (not args.text and not sys.stdin.isatty()):
        return _STDIN, _read_file("-")
    if args.text:
        # argv holds undecodable bytes as surrogates: back to bytes, then the one decoder
        data = " ".join(args.text).encode("utf-8", errors="surrogateescape")
        if len(data) > MAX_INPUT_BYTES:
            raise _too_large("TEXT")
        return "TEXT", data
    raise InputError("nothing to explain", reference="explain-no-input", hint=_HOW)


class _PlanArguments(ExplicitValueParser):
    """`gpuwarden plan`'s parser, raising instead of exiting (its errors are --plan's)."""

    words: Sequence[str] = ()  # what it reads, for its errors to name as typed

    def error(self, message: str) -> NoReturn:
        raise InputError(
            f"--plan: {as_typed(message, self.words)}",
            reference="explain-plan-invalid",
            hint="give --plan the arguments of `gpuwarden plan` as one quoted string, e.g. "
            "--plan \"Llama-2-7b-hf --gpu 'A100 40GB' --micro-batch 8 --seq-len 4096\"",
        )


def parse_plan(spec: str) -> PlanRequest:
    """The job of ``--plan``, read with `gpuwarden plan`'s own options."""
    import shlex

    from gpuwarden.cli.commands import plan as plan_command

    parser = _PlanArguments(prog="gpuwarden explain --plan", add_help=False)
    plan_command.register(parser)
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        parser.error(f"cannot split {quoted(spec)}: {exc}")
    parser.words = words
    args = parser.parse_args(words)
    if args.fit or args.exact:
        parser.error("--fit and --exact are for `gpuwarden plan`; explain plans the job as given")
    return plan_command.build_request(args)


def run(args: argparse.Namespace) -> int:
    text = read_input(args)
    request = parse_plan(args.plan) if args.plan is not None else None
    from gpuwarden.doctor.explain import explain
    from gpuwarden.report import explain as report

    result = explain(text, plan_request=request, now_s=time.time())
    if args.json:
        report.print_explain_json(result)
    else:
        report.print_explain(result)
    return 0
