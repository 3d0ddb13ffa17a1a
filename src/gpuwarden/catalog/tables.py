"""Reading the catalog's CSV data files: typed cells, and errors that name the file, row and column.

The files ship inside the package, so a bad cell is a packaging bug; it still gets a clear error
(not a ``ValueError`` from ``float()``) because users can point at their own copies in tests and
forks.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources

from gpuwarden.errors import CorruptInputError

_DATA = "gpuwarden.catalog.data"


_TALLY_DIGITS = 9  # a count in a catalog cell, far below any table's need


@dataclass(frozen=True, slots=True)
class Row:
    """One data row: ``file`` and ``line`` are for error messages."""

    file: str
    line: int
    cells: Mapping[str, str]

    def error(self, column: str, problem: str) -> CorruptInputError:
        return CorruptInputError(
            f"{self.file} line {self.line}, column {column!r}: {problem}",
            reference="catalog-data-corrupt",
            hint="the catalog data files ship with gpuwarden; reinstall it or fix the row",
        )

    def text(self, column: str) -> str:
        """A required, non-empty cell."""
        value = self.cells.get(column, "").strip()
        if not value:
            raise self.error(column, "is empty")
        return value

    def optional_text(self, column: str) -> str:
        return self.cells.get(column, "").strip()

    def number(self, column: str) -> float | None:
        """A positive finite number, or None for an empty cell ("not published / no such unit")."""
        raw = self.optional_text(column)
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise self.error(column, f"{raw!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise self.error(
                column, f"{raw!r} must be a positive number (leave it empty if unknown)"
            )
        return value

    def required_number(self, column: str) -> float:
        value = self.number(column)
        if value is None:
            raise self.error(column, "is empty")
        return value

    def count(self, column: str) -> int | None:
        value = self.number(column)
        if value is None:
            return None
        if not value.is_integer():
            raise self.error(column, f"{value!r} must be a whole number")
        return int(value)

    def tally(self, column: str) -> int | None:
        """A whole number that may be 0 ("none"), or None for an empty cell ("not known")."""
        raw = self.optional_text(column)
        if not raw:
            return None
        # ASCII digits only, and few: str.isdigit() passes "²", which int() refuses, and int()
        # refuses more than 4,300 digits
        if not (raw.isascii() and raw.isdecimal()) or len(raw) > _TALLY_DIGITS:
            raise self.error(column, f"{raw!r} must be a whole number (leave it empty if unknown)")
        return int(raw)

    def required_count(self, column: str) -> int:
        value = self.count(column)
        if value is None:
            raise self.error(column, "is empty")
        return value

    def items(self, column: str) -> tuple[str, ...]:
        """A ``;``-separated list cell."""
        return tuple(part.strip() for part in self.optional_text(column).split(";") if part.strip())


def read_rows(file_name: str, required_columns: tuple[str, ...]) -> Iterator[Row]:
    """The rows of a package data CSV, after checking its header."""
    text = resources.files(_DATA).joinpath(file_name).read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in required_columns if c not in (reader.fieldnames or ())]
    if missing:
        raise CorruptInputError(
            f"{file_name}: missing column(s) {', '.join(missing)}",
            reference="catalog-data-corrupt",
            hint="the catalog data files ship with gpuwarden; reinstall it",
        )
    for cells in reader:
        yield Row(file_name, reader.line_num, cells)
