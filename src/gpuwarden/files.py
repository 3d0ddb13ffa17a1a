"""Reading a file the user names (or stdin for "-") up to a size limit: captures, configs,
policies, thresholds, web configs. One reader for all of them.

A stream that never ends (``/dev/zero``, a pipe from a program that loops) is cut at the limit,
never read to its end first; the caller turns ``CaptureTooLargeError`` (and ``OSError``) into its
own error, naming the input, once, at its boundary.

And what a copy of a terminal leaves in the text read (``TERMINAL_ESCAPE``), for every reader
that strips it.
"""

from __future__ import annotations

import codecs
import os
import re
import sys
import time

# The limit `doctor` keeps for captures and the dcgm scrape fetcher for an answer: one node's
# `nvidia-smi -q -x` or dcgm-exporter page is well under 1 MiB, so 64 MiB is only ever reached by
# a long log or by something that is no capture at all.
MAX_CAPTURE_BYTES = 64 << 20

# Linux's NAME_MAX and PATH_MAX (without its NUL): the longest file name and path, in bytes, open
# and mkdir take (ENAMETOOLONG beyond them)
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4095

# The control sequences a terminal copy keeps (`dmesg --color=always`, journalctl, `script`
# logs, coloured nvidia-smi wrappers), as ECMA-48 §5.4 defines them: CSI = ESC [, parameter
# bytes 0x30-0x3F (digits, ";", and the "?" of private modes), intermediate bytes 0x20-0x2F and
# one final byte 0x40-0x7E; OSC = ESC ], a string, and BEL or ST (ESC \) (window titles,
# hyperlinks). The OSC string stops at the next ESC, so an unterminated one costs one scan.
# A line's indent in a MULTILINE pattern ("^" + this): blanks that stay on their line. "^\s*"
# runs on through every blank line below, so a search over a run of blank lines rescans the rest
# of the run at each of them (quadratic: seconds on 64 KiB of blank lines).
LINE_INDENT = r"^[^\S\n]*"
TERMINAL_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def without_terminal_escapes(text: str) -> str:
    """``text`` without a terminal's colour and title codes (the search only where an ESC is)."""
    return TERMINAL_ESCAPE.sub("", text) if "\x1b" in text else text


class CaptureTooLargeError(Exception):
    """The input holds more than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"larger than {limit >> 20} MiB")
        self.limit = limit


# Windows PowerShell 5.1's `>` and Out-File write UTF-16LE with a byte-order mark: a capture
# saved there (`nvidia-smi -q > smi.txt`) is text, not binary
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def decode_text(raw: bytes) -> str:
    """A capture's text: UTF-16 where a byte-order mark says so, else UTF-8; bytes that do not
    decode become U+FFFD, never an error."""
    if raw.startswith(UTF16_BOMS):
        return raw.decode("utf-16", errors="replace")
    return raw.decode("utf-8", errors="replace")


def read_capped(source: str, limit: int | None = None) -> tuple[bytes, float]:
    """The bytes of ``source`` ("-" = stdin) and the time they were written (now, for stdin).

    Raises OSError as ``open`` does, CaptureTooLargeError past ``limit`` bytes (default
    MAX_CAPTURE_BYTES)."""
    limit = MAX_CAPTURE_BYTES if limit is None else limit
    if source == "-":
        stream = getattr(sys.stdin, "buffer", None)  # a test's StringIO has none
        raw = stream.read(limit + 1) if stream is not None else sys.stdin.read(limit + 1).encode()
        written = time.time()
    else:
        with open(source, "rb") as handle:
            raw = handle.read(limit + 1)
            written = os.fstat(handle.fileno()).st_mtime
    if len(raw) > limit:
        raise CaptureTooLargeError(limit)
    return raw, written
