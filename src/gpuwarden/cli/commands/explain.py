"""`gpuwarden explain [TEXT] [--file F | -]`: a pasted error, log excerpt or nvidia-smi screen →
what it means and what to do, most likely cause first.

Exit 0 whenever a text was read (the verdict is in the output, also "nothing matched"); 2 for
input that is not text, too large, or a job under --plan that `gpuwarden plan` would refuse.
"""

from __future__ import annotations

import argparse
import codecs
import sys
import time
from typing import TYPE_CHECKING, BinaryIO, NoReturn

from gpuwarden.cli.options import add_json_flag

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


def _input_error(message: str, reference: str, hint: str) -> Exception:
    from gpuwarden.errors import InputError

    return InputError(message, reference=reference, hint=hint)


def _bounded(data: bytes, name: str) -> bytes:
    if len(data) > MAX_INPUT_BYTES:
        raise _input_error(
            f"{name}: more than {MAX_INPUT_BYTES // (1024 * 1024)} MiB",
            "explain-input-too-large",
            "paste the error and the lines around it, e.g. the end of a log: `tail -n 500 LOG`",
        )
    return data


def _read_bounded(stream: BinaryIO, name: str) -> bytes:
    return _bounded(stream.read(MAX_INPUT_BYTES + 1), name)


def _read_file(path: str) -> bytes:
    if path == "-":
        return _read_bounded(sys.stdin.buffer, "standard input")
    try:
        with open(path, "rb") as stream:
            return _read_bounded(stream, path)
    except FileNotFoundError:
        raise _input_error(
            f"{path}: no such file",
            "explain-input-not-found",
            "pass the path of a saved log, or the text itself, or '-' for standard input",
        ) from None
    except OSError as exc:
        raise _input_error(
            f"{path}: cannot be read ({exc.strerror or exc})",
            "explain-input-not-found",
            "check the path and its permissions",
        ) from None


def _binary(name: str, why: str) -> Exception:
    return _input_error(
        f"{name}: not text ({why})",
        "explain-input-binary",
        "explain reads text: an error message, a log, nvidia-smi output (a core dump or an "
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
    controls = sum(1 for c in text if c < " " and c not in _ALLOWED_CONTROLS)
    if controls > MAX_CONTROL_SHARE * max(len(text), 1):
        raise _binary(name, "it is mostly control characters")
    return text


def read_input(args: argparse.Namespace) -> str:
    if args.file is not None and args.text:
        raise _input_error(
            "both TEXT and --file given",
            "explain-two-inputs",
            "give the text as arguments, or --file F, or '-' for standard input",
        )
    if args.file is not None:
        return decode_input(_read_file(args.file), args.file)
    if args.text == ["-"]:
        return decode_input(_read_file("-"), "standard input")
    if args.text:
        # argv holds undecodable bytes as surrogates: back to bytes, then the one decoder
        data = " ".join(args.text).encode("utf-8", errors="surrogateescape")
        return decode_input(_bounded(data, "TEXT"), "TEXT")
    if not sys.stdin.isatty():
        return decode_input(_read_file("-"), "standard input")
    raise _input_error(
        "nothing to explain",
        "explain-no-input",
        "paste the error as an argument (quoted), or --file LOG, or pipe it: "
        "`dmesg | gpuwarden explain -`",
    )


class _PlanArguments(argparse.ArgumentParser):
    """`gpuwarden plan`'s parser, raising instead of exiting (its errors are --plan's)."""

    def error(self, message: str) -> NoReturn:
        raise _input_error(
            f"--plan: {message}",
            "explain-plan-invalid",
            "give --plan the arguments of `gpuwarden plan` as one quoted string, e.g. "
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
        parser.error(f"cannot split {spec!r}: {exc}")
    args = parser.parse_args(words)
    if args.fit or args.exact:
        parser.error("--fit and --exact are for `gpuwarden plan`; explain plans the job as given")
    return plan_command.build_request(args)


def run(args: argparse.Namespace) -> int:
    text = read_input(args)
    request = parse_plan(args.plan) if args.plan else None
    from gpuwarden.doctor.explain import explain
    from gpuwarden.report import explain as report

    result = explain(text, plan_request=request, now_s=time.time())
    if args.json:
        report.print_explain_json(result)
    else:
        report.print_explain(result)
    return 0
