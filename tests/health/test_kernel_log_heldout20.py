"""A twentieth held-out set of kernel logs (tests/data/xid_heldout20), sampled as the search gave
them from the GitHub threads of GPU virtualisation and passthrough (2019-2026): vgpu_unlock, Kata
Containers, LXD, Harvester, Unraid plugins and single-GPU passthrough guides. 36 searches gave 11
excerpts no earlier set holds (SOURCES.md): the frame's threads paste QEMU, libvirt and the vGPU
manager's own journal (user-space lines) far more often than kernel lines. What came: three
vGPU starts the host's nvidia-vgpu-vfio module reports failed, a Kata guest whose driver finds no
IRQ for its passed-through M40, a GPU that did not wake from D3cold after a passthrough hook so
RmInitAdapter failed, an unbind waiting for a client, vfio-pci lines of a VM's stop and of a BAR
the host's framebuffer holds, the kernel's ioremap warning for the driver's VGA ROM mapping, and
two healthy loads (the vGPU unlock hooks, a GRID driver's debug lines). Measured before any
change: every kind, finding and severity was the row's but 07's (10/11 scanner, 10/11 doctor):
the PCI core's "nvidia 0000:01:00.0: Unable to change power state from D3cold to D0, device
inaccessible" (pci_power_up reading the GPU's power-management register as all ones, the
condition the driver calls fallen off the bus) was no kind. It is now a GPU lost without an Xid,
for the nvidia driver's own devices only. The three vGPU start failures are misses the rows
record: no gpuwarden code names a vGPU that failed to start, and nvidia-vgpu-vfio's messages have
no public source to ground one."""

from __future__ import annotations

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from tests.health.kernel_log_sets import (
    ExcerptSet,
    line_count,
    sampled_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout20")
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(20)
# the excerpts whose only driver lines are the vGPU host module's "[nvidia-vgpu-vfio] <uuid>: ..."
VGPU_HOST_MODULE = ("01", "04", "10")
# the excerpts whose kernel lines show no GPU or driver fault (the kernel's and vfio-pci's lines
# about an NVIDIA GPU, the module's own taint lines)
NO_DRIVER_MESSAGE = ("03", "05", "06", "09")


# the frame's threads gave eleven excerpts, six of them without a fault
(
    test_the_set_is_new_sampled_and_names_its_sources,
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
    test_an_excerpt_fed_in_chunks_reads_as_it_does_whole,
) = sampled_set_checks(SET, EARLIER_SETS, 8)


def _no_finding(prefix: str) -> bool:
    """Whether the excerpt's report gives neither an Xid nor a driver-message finding."""
    report = scan_kernel_log(EXCERPT[prefix])
    source = f"kernel-log:{prefix}"
    return (
        xid_findings(report, source=source) == () == driver_message_findings(report, source=source)
    )


def test_the_vgpu_host_modules_lines_are_read_as_no_driver_message() -> None:
    """01, 04, 10: every '[nvidia-vgpu-vfio] <mdev uuid>: start failed. status: 0x..' line (and
    10's ERESTARTSYS and 'vGPU migration disabled' lines) is read and names no kind: the module
    is not in open-gpu-kernel-modules and nothing public says what its statuses mean, so the
    failed starts are misses the rows record, not findings made up."""
    for prefix in VGPU_HOST_MODULE:
        report = scan_kernel_log(EXCERPT[prefix])
        assert report.lines_scanned == line_count(EXCERPT[prefix]), prefix
        assert report.other == () and report.groups == () and report.fallen_off_bus == (), prefix
        assert report.driver_crashes == (), prefix
        assert _no_finding(prefix), prefix


def test_a_kata_guest_without_an_irq_for_its_gpu_is_one_probe_failure() -> None:
    """02: 'NVRM: Can't find an IRQ for your NVIDIA card!' and its BIOS advice, the kernel's
    'nvidia: probe of 0000:00:05.0 failed with error -1', 'The NVIDIA probe routine failed for 1
    device(s)' and 'None of the NVIDIA devices were initialized' are one critical
    driver-probe-failed finding; the NVLink core's lines are no kind."""
    report = scan_kernel_log(EXCERPT["02"])
    assert report.lines_scanned == 16
    assert report.other == (("no-gpu-initialised", 1), ("probe-failed", 1))
    (finding,) = driver_message_findings(report, source="kernel-log:02")
    assert (finding.code, finding.severity.value, finding.count) == (
        "driver-probe-failed",
        "critical",
        2,
    )


def test_a_gpu_that_did_not_wake_from_d3cold_is_lost_and_fails_rm_init_adapter() -> None:
    """07 (failed before: the PCI core's lines were no kind, no GPU lost): the four 'nvidia
    0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible' lines are
    one GPU lost without an Xid at 0000:01:00.0 (lines 5-14, dated by their uptimes), a critical
    high-confidence gpu-lost finding that names the PCI core; 'RmInitAdapter failed!
    (0x22:0x56:667)' and nv.c's 'rm_init_adapter failed' three times are three failures, one
    critical driver-probe-failed finding; the 'not ready ... after resume' lines are no kind."""
    report = scan_kernel_log(EXCERPT["07"])
    assert report.lines_scanned == 14
    assert report.other == (("rm-init-adapter-failed", 3),) and report.groups == ()
    (lost,) = report.fallen_off_bus
    assert (lost.pci_bus_id, lost.count, lost.first_line, lost.last_line) == (
        "0000:01:00.0",
        4,
        5,
        14,
    )
    assert (lost.first_uptime_s, lost.last_uptime_s) == (87.412759, 87.474025)
    (gone,) = xid_findings(report, source="kernel-log:07")
    assert (gone.code, gone.severity.value, gone.confidence.value) == (
        "gpu-lost",
        "critical",
        "high",
    )
    assert "did not power up" in gone.title and "PCI core" in gone.cause
    (failed,) = driver_message_findings(report, source="kernel-log:07")
    assert (failed.code, failed.severity.value, failed.count) == (
        "driver-probe-failed",
        "critical",
        3,
    )


# The same PCI-core line for devices that are not the nvidia driver's GPU, as pci_power_up prints
# them: the kernel's driver of a GPU board's USB-C controller (printed for boards without one),
# vfio-pci (no vendor named), another vendor's GPU, a PCIe port; and the words in prose
INACCESSIBLE_LOOK_ALIKES = (
    "[ 9426.768449] nvidia-gpu 0000:0b:00.3: Unable to change power state from D3hot to D0, "
    "device inaccessible",
    "Jul 23 18:05:40 pve kernel: vfio-pci 0000:84:00.0: Unable to change power state from D3cold "
    "to D0, device inaccessible",
    "[200584.544050] amdgpu 0000:0a:00.0: Unable to change power state from D3hot to D0, device "
    "inaccessible",
    "[ 1089.373036] pcieport 0000:01:00.0: Unable to change power state from D3cold to D0, device "
    "inaccessible",
    "after the hook ran the device inaccessible message came back",
)


def test_the_pci_cores_line_for_other_devices_is_no_lost_gpu() -> None:
    """Only the nvidia driver's own device is a GPU lost by the PCI core's 'device inaccessible':
    each look-alike is read, loses no GPU and gives no finding."""
    for line in INACCESSIBLE_LOOK_ALIKES:
        report = scan_kernel_log(line + "\n")
        assert report.fallen_off_bus == () and report.other == (), line
        assert xid_findings(report, source="kernel-log") == (), line


def test_vfio_and_the_kernels_own_lines_about_a_gpu_are_no_fault() -> None:
    """03, 05, 06, 09: vfio-pci's VGA-arbitration and BAR-reservation lines, the kernel's
    'resource sanity check' / 'caller _nv000908rm+0x1bf/0x1f0 [nvidia] mapping multiple BARs'
    warning (a RIP-less mention of the module, not a crash) and the module's taint and unlock-hook
    lines: every line read, no kind, no finding."""
    for prefix in NO_DRIVER_MESSAGE:
        report = scan_kernel_log(EXCERPT[prefix])
        assert report.lines_scanned == line_count(EXCERPT[prefix]), prefix
        assert report.other == () and report.groups == () and report.fallen_off_bus == (), prefix
        assert report.driver_crashes == () and report.pcie_errors == (), prefix
        assert _no_finding(prefix), prefix


def test_an_unbind_waiting_for_a_client_is_no_fault() -> None:
    """08: nv-pci.c's 'NVRM: Attempting to remove device 0000:07:00.0 with non-zero usage
    count!' pasted without a stamp (a passthrough hook unbinding the GPU while a client holds it)
    is read, names no kind and gives no finding, as xid_heldout18 row 03 reads it."""
    report = scan_kernel_log(EXCERPT["08"])
    assert report.lines_scanned == 1
    assert report.other == () and report.fallen_off_bus == ()
    assert _no_finding("08")


def test_a_grid_drivers_debug_lines_are_a_healthy_load() -> None:
    """11: the 460.73.01 loading banner is the driver-loaded kind; the debug build's 'NVRM:
    nvidia_open...', 'nvidia_ctl_open' and 'nvidia_close on GPU with minor number 255' lines, the
    vgaarb, nvidia-modeset and nvidia-drm lines are no kind; nothing is found."""
    report = scan_kernel_log(EXCERPT["11"])
    assert report.lines_scanned == 14
    assert report.other == (("driver-loaded", 1),)
    assert _no_finding("11")
