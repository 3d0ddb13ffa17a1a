"""Review r26d of kernel_log's GPU-lost groups (``_record_lost``, shared by the driver's "fallen
off the bus" / "GPU is lost" lines and the PCI core's "device inaccessible" line): a GPU named by
both kinds of line is one group holding both lines, in log order; either kind of line opens at
most ``_MAX_NAMES`` groups (fuzz input names many devices), a GPU already lost still counts."""

from __future__ import annotations

from gpuwarden.health.kernel_log import _MAX_NAMES, scan_kernel_log

INACCESSIBLE = "nvidia {bus}: Unable to change power state from D3cold to D0, device inaccessible"


def test_both_kinds_of_line_on_one_gpu_make_one_group() -> None:
    text = (
        "[  100.000001] "
        + INACCESSIBLE.format(bus="0000:01:00.0")
        + "\n[  200.000002] NVRM: GPU at PCI:0000:01:00: GPU-0f1e2d3c-aaaa-bbbb-cccc-0123456789ab\n"
        "[  200.000003] NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.\n"
    )
    (lost,) = scan_kernel_log(text).fallen_off_bus
    assert (lost.pci_bus_id, lost.count) == ("0000:01:00.0", 2)
    assert [line.split("] ", 1)[1][:24] for line in lost.lines] == [
        "nvidia 0000:01:00.0: Una",
        "NVRM: GPU 0000:01:00.0: ",
    ]


def test_the_pci_cores_lines_open_at_most_max_names_groups() -> None:
    buses = [f"{domain:04x}:01:00.0" for domain in range(_MAX_NAMES + 1)]
    lines = [INACCESSIBLE.format(bus=bus) for bus in buses]
    lines.append(INACCESSIBLE.format(bus=buses[0]))  # a GPU already lost, again
    groups = scan_kernel_log("\n".join(lines) + "\n").fallen_off_bus
    assert len(groups) == _MAX_NAMES
    assert buses[-1] not in {g.pci_bus_id for g in groups}
    (first,) = (g for g in groups if g.pci_bus_id == buses[0])
    assert first.count == 2


def test_the_drivers_fallen_off_lines_open_at_most_max_names_groups() -> None:
    """Before, only the PCI core's lines were bounded: a log naming 4,097 buses "fallen off the
    bus" made 4,097 groups (input of a million such lines, a million)."""
    buses = [f"{domain:04x}:01:00.0" for domain in range(_MAX_NAMES + 1)]
    lines = [f"NVRM: GPU {bus}: GPU has fallen off the bus." for bus in buses]
    lines.append(f"NVRM: GPU {buses[0]}: GPU has fallen off the bus.")  # lost already, again
    groups = scan_kernel_log("\n".join(lines) + "\n").fallen_off_bus
    assert len(groups) == _MAX_NAMES
    assert buses[-1] not in {g.pci_bus_id for g in groups}
    (first,) = (g for g in groups if g.pci_bus_id == buses[0])
    assert first.count == 2
