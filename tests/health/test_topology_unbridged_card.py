"""`topo -m` of PCIe cards in bridged pairs beside one card without a bridge (five RTX 3090s: a
bridge joins two cards, so one of an odd number has none). Every bonded GPU bonds to exactly one
peer, so the fifth GPU's PCIe-only row is a card built without a bridge (or a bridge not seated):
an info finding, not the lost-link warning a board's mesh or NVSwitch GPU without links gets.

The matrix is a real one (topo_public2's four RTX 3090s in two NV4 pairs, aikitoria ogkm#18)
with a fifth GPU's row and column added as nvidia-smi prints them (PHB / NODE to the others)."""

from __future__ import annotations

from pathlib import Path

from gpuwarden.health.topology import topology_findings
from gpuwarden.telemetry.smi import parse_topology
from gpuwarden.types.health import Severity

PAIRS = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "topo_public2"
    / "topo__aikitoria-ogkm-18__4x-rtx-3090-nv4-bridged-pairs.txt"
)


def _with_a_fifth_gpu(text: str, to_fifth: dict[str, str]) -> str:
    lines = []
    for printed in text.splitlines():
        line = printed
        if line.startswith("        GPU0"):
            line = line.replace("GPU3    CPU", "GPU3    GPU4    CPU")
        elif line.startswith("GPU") and line[3].isdigit():
            label = line.split()[0]
            line = line.replace("0-23", f"{to_fifth[label]:<8}0-23", 1)
        lines.append(line)
        if line.startswith("GPU3 "):
            cells = "    ".join(to_fifth[f"GPU{i}"] for i in range(4))
            lines.append(f"GPU4    {cells}     X      0-23    0               N/A")
    return "\n".join(lines) + "\n"


def _findings(text: str) -> list[tuple[str, Severity, str]]:
    findings, _ = topology_findings([parse_topology(text, "topo.txt")], [])
    return [(f.code, f.severity, f.title) for f in findings]


def test_a_card_without_a_bridge_beside_bridged_pairs_is_info_not_a_lost_link() -> None:
    text = _with_a_fifth_gpu(
        PAIRS.read_text(), {"GPU0": "PHB ", "GPU1": "PHB ", "GPU2": "NODE", "GPU3": "NODE"}
    )
    found = _findings(text)
    assert [(code, severity) for code, severity, _ in found] == [("nvlink-down", Severity.INFO)]
    assert found[0][2].startswith("GPU4: no NVLink, beside bridged pairs of 4 links")


def test_the_four_bridged_cards_alone_still_read_no_finding() -> None:
    assert _findings(PAIRS.read_text()) == []
