"""Tables of numbers that fit the terminal: a number cut short is worse than none ("14…" of
1410 MHz), so a narrow terminal drops whole columns, least needed first, and lets only the words
fold; nvidia-smi keeps its fixed columns whole and nvitop switches to a compact layout likewise.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.table import Table
from rich.text import Text

Cell = str | Text
# what rich draws around and between the cells of a row: "│ " before each cell, " " after it,
# and the closing "│"
_PER_COLUMN = 3
_BORDER = 1
# the narrowest a folding word column is given (a finding code folds onto a few lines)
_WORDS_MIN = 8


def _width(cell: Cell) -> int:
    return len(cell.plain if isinstance(cell, Text) else cell)


def _needs(header: str, cells: Sequence[Cell], words: bool) -> int:
    """A column's width: its heading and widest cell whole (a column that never wraps wraps its
    heading neither), or for words the narrowest they may fold to (never wider than they are)."""
    whole = max(len(header), *(_width(cell) for cell in cells)) if cells else len(header)
    if words:
        longest_word = max((len(word) for word in header.split()), default=1)
        return min(whole, max(longest_word, _WORDS_MIN))
    return whole


def fitting_columns(
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    width: int,
    *,
    words: Collection[str],
    drop_first: Sequence[str],
) -> list[int]:
    """The indices of the columns to show in ``width`` characters: all of them if they fit,
    else without ``drop_first``'s columns, in that order, until they do (the others stay)."""
    columns = [[row[i] for row in rows] for i in range(len(headers))]
    needs = [_needs(h, cells, h in words) for h, cells in zip(headers, columns, strict=True)]
    shown = list(range(len(headers)))
    for name in drop_first:
        if sum(needs[i] + _PER_COLUMN for i in shown) + _BORDER <= width:
            break
        if name in headers:
            shown.remove(headers.index(name))
    return shown


def numbers_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    width: int,
    *,
    words: Collection[str],
    drop_first: Sequence[str],
    labels: Collection[str] = (),
    title: str | None = None,
) -> Table:
    """A table whose number columns (right-aligned) and ``labels`` (left-aligned: a GPU's name)
    keep their width, never wrapped or cut, and whose ``words`` columns (left-aligned) fold;
    columns that do not fit ``width`` are left out, ``drop_first`` first."""
    shown = fitting_columns(headers, rows, width, words=words, drop_first=drop_first)
    table = Table(title=title, expand=False)
    for i in shown:
        header = headers[i]
        is_words = header in words
        table.add_column(
            header,
            justify="left" if is_words or header in labels else "right",
            no_wrap=not is_words,
            min_width=_needs(header, [row[i] for row in rows], is_words),
            overflow="fold",
        )
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    return table
