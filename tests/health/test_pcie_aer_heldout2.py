"""PCIe AER held-out set 2 (tests/data/pcie_aer_public2): 13 real excerpts read per device and
severity, judged as ``pcie-errors`` on an NVIDIA GPU's link only — a flattened dmesg -T paste of an
RTX 5060 Ti, Xid 79 next to root-port records, a fatal root-port record above a GPU passed to a VM,
and look-alikes (NVMe, Wi-Fi, Thunderbolt/xHCI, a RAID controller, an AMD GPU, a DPC containment,
root ports alone)."""

from __future__ import annotations

from gpuwarden.health.pcie_aer import AER_MARKERS
from tests.health.kernel_log_sets import (
    ExcerptSet,
    assert_no_line_of_earlier_sets,
    doctor_check,
)
from tests.health.pcie_aer_sets import (
    chunks_check,
    gpu_link_findings_check,
    groups_check,
    sources_check,
    spliced_check,
)

FOLDER = "pcie_aer_public2"
EXCERPTS = ExcerptSet(FOLDER)
TEXTS = EXCERPTS.texts()

test_groups_are_the_rows = groups_check(EXCERPTS)
test_findings_only_on_a_gpus_link = gpu_link_findings_check(EXCERPTS)
test_doctor_reads_the_excerpt = doctor_check(EXCERPTS)
test_no_source_is_held_elsewhere = sources_check(
    EXCERPTS, FOLDER, cited=lambda source: source.split(" (")[0]
)  # a URL, or "find_string file id N" without the description after it
test_fed_in_chunks_reads_as_whole = chunks_check(TEXTS)
test_spliced_excerpts_never_fail = spliced_check(TEXTS)


def test_the_set_names_its_sources() -> None:
    EXCERPTS.assert_names_its_sources()


def test_no_aer_line_of_the_first_set() -> None:
    assert_no_line_of_earlier_sets(TEXTS, ["pcie_aer_public", "xid_heldout6"], AER_MARKERS)
