"""nvidia_gpu_exporter capture files (fixtures/nvidia-smi/captures/): several commands' outputs,
each after a banner block naming the command ("# $ nvidia-smi -q")."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

BANNER = re.compile(r"^#{20,}\s*$")
# What every banner line holds: a text without it has none, and is not split to look for one.
_BANNER_RUN = "#" * 20


@dataclass(frozen=True, slots=True)
class CaptureSection:
    """One command's output in an nvidia_gpu_exporter capture."""

    command: str | None  # the "# $ ..." line of its banner
    start: int  # index (0-based) of the body's first line in the file
    lines: list[str]


def capture_sections(text: str) -> list[CaptureSection]:
    """The sections of a capture file, in file order; [] for a text without banners."""
    if _BANNER_RUN not in text:
        return []
    lines = text.splitlines()
    banners = [i for i, line in enumerate(lines) if BANNER.match(line)]
    sections = []
    # A section is: banner, "# title", "# $ command", banner, body up to the next banner.
    for opening, closing in itertools.pairwise(banners):
        header = lines[opening + 1 : closing]
        if not any(h.startswith("# ") for h in header):
            continue  # a body between two sections, not a header
        command = next((h[len("# $ ") :].strip() for h in header if h.startswith("# $ ")), None)
        following = [b for b in banners if b > closing]
        end = following[0] if following else len(lines)
        sections.append(CaptureSection(command, closing + 1, lines[closing + 1 : end]))
    return sections


def lines_before_banners(text: str) -> list[str]:
    """The lines of ``text`` up to a capture banner, but for a last empty one: one command's
    output cut from a capture file keeps the next section's banner and body after it
    (fixtures/topo, the R610 nvlink-s file)."""
    lines = text.splitlines()
    if _BANNER_RUN in text:
        first = next((i for i, line in enumerate(lines) if BANNER.match(line)), len(lines))
        lines = lines[:first]
    return lines[:-1] if lines and not lines[-1] else lines
