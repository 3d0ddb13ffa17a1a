"""PCIe AER held-out set 3 (tests/data/pcie_aer_public3): 10 real excerpts sampled as the searches
gave them, read per device and severity, judged as ``pcie-errors`` on an NVIDIA GPU's link only.
None names an NVIDIA device: root ports reporting themselves (a wiki's Debian syslog, a dmesg -H
paste above a GPU nvidia-smi lost, a boot burst, a CI log with printk caller ids) and kernel commit
messages whose log lines the author wrapped or indented - a no-false-alarm set."""

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

FOLDER = "pcie_aer_public3"
EXCERPTS = ExcerptSet(FOLDER)
TEXTS = EXCERPTS.texts()

test_groups_are_the_rows = groups_check(EXCERPTS)
test_findings_only_on_a_gpus_link = gpu_link_findings_check(EXCERPTS)
test_doctor_reads_the_excerpt = doctor_check(EXCERPTS)
test_no_source_is_held_elsewhere = sources_check(EXCERPTS, FOLDER)
test_fed_in_chunks_reads_as_whole = chunks_check(TEXTS)
test_spliced_excerpts_never_fail = spliced_check(TEXTS)


def test_the_set_names_its_sources() -> None:
    EXCERPTS.assert_names_its_sources()


def test_no_aer_line_of_the_earlier_sets() -> None:
    assert_no_line_of_earlier_sets(
        TEXTS, ["pcie_aer_public", "pcie_aer_public2", "xid_heldout6"], AER_MARKERS
    )


def test_a_message_naming_another_port_counts_there_not_at_the_printer() -> None:
    """08: port 00:1c.7 prints 'Corrected error received: id=00e5' ('can't find device of
    ID00e5'): the requester id names 00:1c.5 (bus << 8 | device << 3 | function), so the
    messages count there; the record counts at the device before its colon."""
    (row,) = [row for row in EXCERPTS.rows if row["prefix"] == "08"]
    groups = {g.pci_bus_id: (g.records, g.messages) for g in EXCERPTS.scan(row).pcie_errors}
    assert groups == {"0000:00:1c.7": (1, 0), "0000:00:1c.5": (0, 2)}
