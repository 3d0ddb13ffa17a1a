"""nvidia_gpu_exporter capture files (fixtures/nvidia-smi/captures/): several commands' outputs,
each after a banner block naming the command ("# $ nvidia-smi -q")."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

BANNER = re.compile(r"^#{20,}\s*$")


@dataclass(frozen=True, slots=True)
class CaptureSection:
    """One command's output in an nvidia_gpu_exporter capture."""

    command: str | None  # the "# $ ..." line of its banner
    start: int  # index (0-based) of the body's first line in the file
    lines: list[str]


def capture_sections(text: str) -> list[CaptureSection]:
    """The sections of a capture file, in file order; [] for a text without banners."""
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


def before_banners(text: str) -> str:
    """The text up to a capture banner: one command's output cut from a capture file keeps the
    next section's banner and body after it (fixtures/topo, the R610 nvlink-s file)."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if BANNER.match(line)), len(lines))
    return "\n".join(lines[:first])
