"""A rich table whose string cells are text as written, not rich markup.

The tables of GPU readings print what the outside world wrote: GPU and process names, hosts, bus
ids, messages a capture carries. Rich reads "[...]" in a string cell as markup, so a name holding
"[/bold]" ended the process (MarkupError) and "[nvidia]" vanished from a check's detail."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text


class TextTable(Table):
    def add_row(self, *renderables: RenderableType | None, **kwargs: Any) -> None:
        cells = (Text(cell) if isinstance(cell, str) else cell for cell in renderables)
        super().add_row(*cells, **kwargs)
