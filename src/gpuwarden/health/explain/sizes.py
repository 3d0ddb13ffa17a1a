"""Byte sizes as error messages print them: ``4.96 GiB``, ``731.17 MiB``, ``0 bytes``, ``14.44GiB``.

PyTorch, TensorFlow, XLA and vLLM print binary units (``format_size``: KiB/MiB/GiB); a unit
without the ``i`` (``GB``) is taken as written, decimal. Users' pastes keep typos such as
``GibB``: the unit is read from its first letter and whether an ``i`` follows.
"""

from __future__ import annotations

import re

from gpuwarden.units import format_bytes

# The number, then the unit; "," as a thousands separator ("1,024.00 MiB").
SIZE = r"-?\d[\d,]*(?:\.\d+)?\s*(?:[KMGTP]i?b?B|[KMGTP]iB|bytes?|B)\b"
_PARTS = re.compile(r"(?P<number>-?\d[\d,]*(?:\.\d+)?)\s*(?P<unit>[A-Za-z]+)")
_POWERS = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5}


def parse_size(text: str) -> int | None:
    """``"4.96 GiB"`` → 5325759447; None when ``text`` is not a size."""
    match = _PARTS.fullmatch(text.strip())
    if match is None:
        return None
    try:
        number = float(match["number"].replace(",", ""))
    except ValueError:
        return None
    unit = match["unit"]
    if unit.lower() in {"b", "byte", "bytes"}:
        return round(number)
    power = _POWERS.get(unit[0].upper())
    if power is None:
        return None
    binary = len(unit) > 1 and unit[1] in "iI"
    scale = float((1024 if binary else 1000) ** power)
    return round(number * scale)


def size(n_bytes: int | float) -> str:
    """Bytes as the messages print them (binary units), for evidence lines."""
    return format_bytes(n_bytes)
