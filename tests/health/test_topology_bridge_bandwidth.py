"""A lone bridge-linked PCIe card (`nvidia-smi nvlink -s -i N`, no peer listed) is judged by its
own lines; its `<inactive>` links are lost unless its active links already carry the NVLink
bandwidth its datasheet gives the bridge (an H100 PCIe's three bridges wire 12 of the chip's 18
links). The datasheet only clears a card, never accuses one: a card short of it stays critical."""

from __future__ import annotations

from pathlib import Path

from gpuwarden.health.topology import topology_findings
from gpuwarden.telemetry.smi import parse_nvlink_status

H100_PCIE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "nvlink_counters_public3"
    / "01__gpu-notes-md__h100-pcie-status-i-0-five-inactive-link-17-not-printed.txt"
)


def _codes(text: str) -> list[tuple[str, str]]:
    findings, _ = topology_findings([], [parse_nvlink_status(text, "nvlink.txt")])
    return [(f.code, f.severity.value) for f in findings]


def test_a_lone_h100_pcie_with_its_twelve_bridged_links_up_is_healthy() -> None:
    assert _codes(H100_PCIE.read_text()) == []


def test_a_lone_h100_pcie_one_bridged_link_short_is_still_a_lost_link() -> None:
    text = H100_PCIE.read_text().replace("Link 14: 26.562 GB/s", "Link 14: <inactive>")
    assert _codes(text) == [("nvlink-down", "critical")]


def test_a_card_the_catalog_does_not_know_is_judged_by_its_listing_as_before() -> None:
    text = H100_PCIE.read_text().replace("NVIDIA H100 PCIe", "NVIDIA Unknown Board")
    assert _codes(text) == [("nvlink-down", "critical")]
