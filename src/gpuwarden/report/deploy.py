"""What `gpuwarden deploy grafana --output DIR` tells the person who ran it (on stderr, so
stdout stays the documents' when there is no --output)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path


def print_written(directory: Path, names: Sequence[str]) -> None:
    lines = [f"wrote {len(names)} dashboards to {directory}:"]
    lines += [f"  {name}" for name in names]
    lines.append("import them in Grafana (Dashboards → New → Import) or provision the directory")
    sys.stderr.write("\n".join(lines) + "\n")
