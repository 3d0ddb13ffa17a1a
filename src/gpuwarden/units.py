"""Byte and rate units. Binary units (GiB) are what allocators and nvidia-smi (MiB) count in;
decimal units (GB, TB/s) are what datasheets print."""

from __future__ import annotations

from datetime import UTC, datetime

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12

_BINARY = (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB))


def gib(n_bytes: float) -> float:
    """Bytes → GiB (2**30 bytes)."""
    return n_bytes / GIB


def format_bytes(n_bytes: float, *, precision: int = 2) -> str:
    """Human binary size: ``format_bytes(3 * GIB) == '3.00 GiB'``."""
    sign = "-" if n_bytes < 0 else ""
    value = abs(n_bytes)
    for suffix, size in _BINARY:
        if value >= size:
            return f"{sign}{value / size:.{precision}f} {suffix}"
    return f"{sign}{value:.0f} B"


def format_duration(seconds: float) -> str:
    """Human duration for estimated step times."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{seconds / 60:.1f} min"


def whole_number(text: str | None, *, max_digits: int) -> int | None:
    """A run of decimal digits as printed ("1818990") → its value; None for anything else, and
    for more digits than the printer could have written (int() also refuses > 4300 digits).
    ASCII digits only: "²".isdigit() is true, but int() refuses it."""
    if not text or len(text) > max_digits or not (text.isascii() and text.isdecimal()):
        return None
    return int(text)


def iso_utc(seconds: float, *, timespec: str = "seconds", offset: str = "Z") -> str:
    """Seconds since the epoch as RFC 3339 in UTC: ``iso_utc(0) == '1970-01-01T00:00:00Z'``.

    ``timespec`` is ``datetime.isoformat``'s; ``offset`` "+00:00" keeps Python's own spelling,
    which the snapshot family of documents has always printed."""
    text = datetime.fromtimestamp(seconds, UTC).isoformat(timespec=timespec)
    return text[: -len("+00:00")] + offset
