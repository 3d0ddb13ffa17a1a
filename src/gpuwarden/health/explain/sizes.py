"""Numbers as error messages print them: byte sizes (``4.96 GiB``, ``731.17 MiB``, ``0 bytes``,
``14.44GiB``), counts and PIDs.

PyTorch, TensorFlow, XLA and vLLM print binary units (``format_size``: KiB/MiB/GiB); a unit
without the ``i`` (``GB``) is taken as written, decimal. Users' pastes keep typos such as
``GibB``: the unit is read from its first letter and whether an ``i`` follows.

A paste is any text: a number with thousands of digits is noise, not a reading (and ``int()``
refuses more than 4300 digits), so these readers return None for it rather than raise.
"""

from __future__ import annotations

import math
import re

from gpuwarden import units
from gpuwarden.units import format_bytes

# The number, then the unit; "," as a thousands separator ("1,024.00 MiB").
SIZE = r"-?\d[\d,]*(?:\.\d+)?\s*(?:[KMGTP]i?b?B|[KMGTP]iB|bytes?|B)\b"
_PARTS = re.compile(r"(?P<number>-?\d[\d,]*(?:\.\d+)?)\s*(?P<unit>[A-Za-z]+)")
_POWERS = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
# No count, PID, shape dimension or byte size a message prints has more digits (2**64 has 20).
MAX_DIGITS = 20


def whole_number(text: str | None) -> int | None:
    """``"1818990"`` → 1818990; None when ``text`` is not a run of at most MAX_DIGITS digits."""
    return units.whole_number(text, max_digits=MAX_DIGITS)


def decimal_number(text: str) -> float | None:
    """``"79.15"`` → 79.15; None when ``text`` is not a finite number ("1.2.3", 400 nines)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_size(text: str) -> int | None:
    """``"4.96 GiB"`` → 5325759447; None when ``text`` is not a size."""
    match = _PARTS.fullmatch(text.strip())
    if match is None:
        return None
    number = decimal_number(match["number"].replace(",", ""))
    if number is None:
        return None
    unit = match["unit"]
    if unit.lower() in {"b", "byte", "bytes"}:
        return round(number)
    power = _POWERS.get(unit[0].upper())
    if power is None:
        return None
    binary = len(unit) > 1 and unit[1] in "iI"
    scaled = number * float((1024 if binary else 1000) ** power)
    return round(scaled) if math.isfinite(scaled) else None


def parse_binary_size(text: str) -> int | None:
    """A size whose writer divided by powers of 1024 whatever its label says: ``"6.04 GB"`` →
    6485400617 (PyTorch's MPS allocator printed its binary sizes as KB/MB/GB before it switched
    to KiB/MiB/GiB)."""
    match = _PARTS.fullmatch(text.strip())
    if match is None:
        return None
    unit = match["unit"]
    if unit[0].upper() in _POWERS and not (len(unit) > 1 and unit[1] in "iI"):
        unit = f"{unit[0]}i{unit[1:]}"
    return parse_size(f"{match['number']} {unit}")


def size(n_bytes: int | float) -> str:
    """Bytes as the messages print them (binary units), for evidence lines."""
    return format_bytes(n_bytes)
