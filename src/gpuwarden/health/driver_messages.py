"""Findings from the driver's kernel-log messages that are not Xids: the driver could not take a
GPU (``driver-probe-failed``, diagnosis.md §1: "RmInitAdapter failed", "probe routine failed",
"No NVIDIA GPU found", "None of the NVIDIA devices were initialized", "This PCI I/O region
assigned to your NVIDIA device is invalid", "request_mem_region failed", and the kernel's own
"nvidia: probe of <bus> failed with error -1" where no NVRM line says why), and the user-space
driver is not the kernel module's version (``nvml-driver-mismatch``: "NVRM: API mismatch: the
client has the version X, but this kernel module has the version Y").

The messages carry no usable bus id in most forms, so the finding is about the node. It is
critical (a GPU the driver could not initialise runs nothing) with medium confidence: the log
says it failed when it was written, and only a reading of the GPUs now (`nvidia-smi`) says
whether it still does.

Two more from the same messages (rules/codes.py has their cause and remedy): the GSP firmware's
crash report (``gsp-firmware-crash``, critical: "GSP-CrashCat Report"; a "LibOS Task Watchdog
Report" is a timeout the driver does not count as an error, no finding), and nvidia-modeset's
display-engine timeouts (``display-engine-hang``, warning). A crash report in a log whose Xids
hold an Xid 119 or 120 is that Xid's event, already a critical ``xid`` finding with the same
remedy (reset the GPU): the report is then said as an info finding that names the Xid, so one
event raises one alarm. Likewise a probe that failed with no reason of its own ("probe routine
failed", "None of the NVIDIA devices were initialized") in a log whose driver says a GPU fell off
the bus (nv_pci_probe prints it and fails the probe with NV_ERR_GPU_IS_LOST): the gpu-lost
finding is the alarm, the probe failure an info finding that names the lost GPU. Pure.

The GSP firmware's boot failing ("Cannot initialize GSP firmware RM", "GSP-FMC reported an error
while attempting to boot GSP", "failed to prepare interface data for FWSEC", kernel_log kind
``gsp-init-failed``) is a probe failure with the GSP's own causes; the driver's GSP timeout lines
(kind ``gsp-rpc-timeout``: "Timeout waiting for RPC from GSP", the falcon core dump the timeout
path prints) in a log without the Xid 119/120 that would carry them are a critical
``gsp-firmware-crash`` finding of their own (a paste cut before the Xid line).

A kernel crash report (an oops, a soft lockup) whose RIP is in an NVIDIA module is a critical
``driver-crashed`` finding (the report's ``driver_crashes``): high confidence when the report's
header says it is a fault or a lockup, medium when the header is not in the log (a WARN()'s
registers look the same) or only the call trace's top frames are in the module. A crash in
another module with nvidia merely loaded ("Modules linked in: ... nvidia") is not one.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwarden.catalog.xid import CATALOG_URL
from gpuwarden.health.kernel_log import (
    DISPLAY_TIMEOUT_KIND,
    GPU_UNSUPPORTED_KIND,
    GSP_CRASH_KIND,
    GSP_INIT_KIND,
    GSP_TIMEOUT_KIND,
    OPEN_MODULE_UNSUPPORTED_KIND,
    PCI_BAR_UNBRIDGED_KIND,
    RESET_REQUIRED_KIND,
    SUSPEND_RESUME_KIND,
)
from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.versions import VERSION_CODES
from gpuwarden.types.health import (
    Confidence,
    DeviceRef,
    Evidence,
    Finding,
    KernelLogReport,
    Severity,
    XidGroup,
)

# GSP_INIT_KIND, GSP_TIMEOUT_KIND: kernel_log kinds of the GSP (GPU System Processor) firmware
# failing: its boot, in RmInitAdapter
# (kernel_gsp.c kgspInitRm "Cannot initialize GSP firmware RM", kgspBootstrap_GH100's "GSP-FMC
# reported an error while attempting to boot GSP", kernel_gsp_fwsec.c's "failed to prepare
# interface data for FWSEC", "Error preparing GSP-RM image"), and an RPC the firmware never
# answered (the timeout report: "Timeout waiting for RPC from GSP", "rpcRecvPoll timedout", and
# the falcon core dump kflcnCoreDumpNondestructive prints from the timeout path)

# kernel_log.NOTABLE_MESSAGES kinds that mean "the driver loaded but could not take a GPU"
PROBE_FAILED: Mapping[str, str] = {
    "rm-init-adapter-failed": "RmInitAdapter failed",
    "probe-failed": "the probe routine failed",
    "no-gpu-probed": "no NVIDIA GPU probed",
    "no-gpu-initialised": "none of the NVIDIA GPUs initialised",
    "pci-bar-invalid": "a PCI BAR of the GPU has no valid address",
    PCI_BAR_UNBRIDGED_KIND: "a 64-bit BAR above 4 GB with no bridge window to it",
    "request-mem-region-failed": "another driver holds the GPU's registers",
    GPU_UNSUPPORTED_KIND: "this driver release does not support the GPU",
    OPEN_MODULE_UNSUPPORTED_KIND: "the open kernel module does not take a GPU without a GSP",
    GSP_INIT_KIND: "the GSP firmware did not boot",
}

_CAUSE = (
    "the NVIDIA module is loaded but could not initialise a GPU: another driver owns it "
    "(nouveau), the firmware/BIOS hides its memory (Above 4G decoding, Resizable BAR), the GPU "
    "or its power is failing, or the module does not match the GPU (too old for it, or the open "
    "kernel modules on a pre-Turing GPU)"
)
_REMEDY = (
    "check `nvidia-smi` and `dmesg | grep -i nvrm` for the lines around it; blacklist nouveau "
    "and rebuild the initramfs; enable Above 4G decoding in the BIOS; install a driver that "
    "supports this GPU; if it persists on a GPU that worked, reseat it or check its power"
)
# The open kernel module refusing a GPU without a GSP (nv-pci.c: "...is not supported by open
# nvidia.ko because it does not include the required GPU System Processor (GSP)", and the driver
# README's "Open Linux Kernel Modules" chapter: Turing and later GPUs only): the same release's
# proprietary module takes it
_OPEN_MODULE_CAUSE = (
    "the open NVIDIA kernel modules run only GPUs with a GSP (GPU System Processor: Turing and "
    "newer); this GPU has none (Maxwell, Pascal or Volta), so the open nvidia.ko refuses it and "
    "every later probe fails"
)
_OPEN_MODULE_REMEDY = (
    "install the proprietary kernel modules of the driver instead of the open ones (the runfile "
    "installer's --kernel-module-type=proprietary, or the distribution's package without -open, "
    "e.g. nvidia-dkms rather than nvidia-open-dkms), on a driver branch that still supports this "
    "GPU; `modinfo nvidia | grep license` says which module is installed (Dual MIT/GPL: open)"
)
# The GSP firmware's boot failing: why, as the driver's own messages around it say
_GSP_INIT_CAUSE = (
    "the driver could not start the GPU's GSP firmware (the GPU System Processor that runs "
    "GPU initialisation for the driver on Turing and newer), so it could not initialise the GPU: "
    "a GPU left in a bad state by an earlier driver or crash ('unexpected WPR2 already up': only "
    "a reset or a power cycle clears it), a VBIOS the driver cannot boot the firmware from "
    "(FWSEC / GSP-FMC errors: laptop, eGPU or non-x86 boards), firmware files that do not match "
    "the module (/lib/firmware/nvidia/<version>/gsp_*.bin), or the host out of memory for the "
    "firmware image (NV_ERR_NO_MEMORY)"
)
_GSP_INIT_REMEDY = (
    "read the NVRM lines before 'Cannot initialize GSP firmware RM' (`dmesg | grep -i nvrm`); "
    "power-cycle the node (a warm reboot may leave the GPU's state), make sure the GSP firmware "
    "files are the module's own version, update the VBIOS / system BIOS; on Turing-Ada GPUs the "
    "proprietary module with NVreg_EnableGpuFirmware=0 runs without the GSP; if it persists on a "
    "GPU that worked, reseat it or check its power"
)
_GSP_TIMEOUT_CAUSE = (
    "the GPU's GSP firmware (GSP-RM, which manages the GPU for the driver on Turing and newer) "
    "stopped answering the driver's calls: the driver logged the timeout and dumped the GSP's "
    "state. For a call it cannot do without it reports Xid 119 (GSP RPC timeout, NVIDIA's "
    "catalog: reset the GPU) and the GPU runs nothing until it is reset; a driver bug, the "
    "GPU's power or a failing GPU"
)
_GSP_TIMEOUT_REMEDY = (
    "drain the GPU and reset it (`nvidia-smi -r`), reboot the node if the reset fails; "
    "`dmesg | grep -i xid` names the GPU (Xid 119); if it recurs, update the driver and send "
    "nvidia-bug-report.log.gz to NVIDIA"
)
# the same code as the version chain's (an nvidia-smi that says "Driver/library version
# mismatch"): one cause and remedy for it
_MISMATCH = VERSION_CODES["nvml-driver-mismatch"]

# The probe-failure kinds that give no reason of their own: nv_pci_probe (nv-pci.c) prints "The
# NVIDIA GPU <bus> (PCI ID: ...) installed in this system has fallen off the bus and is not
# responding to commands." when the GPU's boot registers read all ones, returns
# NV_ERR_GPU_IS_LOST, and nvidia_init_module then counts the probe "failed for N device(s)"
GENERIC_PROBE_FAILURES = frozenset({"probe-failed", "no-gpu-initialised"})

# The Xids of a GSP failure (Xid catalog: 119 GSP_RPC_TIMEOUT, 120 GSP_ERROR): the crash report
# goes with them (kgspHealthCheck stops every channel with GSP_ERROR), so in a log that holds one
# the report is that Xid's event, not a second one
GSP_XIDS = frozenset({119, 120})
# The driver README's chapter on the GSP (what it is, "GSP Firmware Version" in nvidia-smi -q)
GSP_README_URL = "https://download.nvidia.com/XFree86/Linux-x86_64/580.65.06/README/gsp.html"


def driver_message_findings(report: KernelLogReport, *, source: str) -> tuple[Finding, ...]:
    """``driver-probe-failed``, ``nvml-driver-mismatch``, ``gsp-firmware-crash``,
    ``display-engine-hang``, ``suspend-resume-failed``, ``recovery-action-pending`` and
    ``driver-crashed`` findings from
    the log's driver messages (one each at most), else none."""
    return (
        *_probe_failed(report, source),
        *_api_mismatch(report, source),
        *_gsp_crash(report, source),
        *_gsp_timeout(report, source),
        *_display_engine_hang(report, source),
        *_suspend_resume_failed(report, source),
        *_reset_required(report, source),
        *_driver_crashed(report, source),
    )


# what each confidence of kernel_log's crash kinds rests on, in words
_CRASH_READ = {
    Confidence.HIGH: "the crash report's RIP is in the module",
    Confidence.MEDIUM: "the RIP is in the module; the report's header (oops, lockup) is not in "
    "the log",
}


def _driver_crashed(report: KernelLogReport, source: str) -> tuple[Finding, ...]:
    """``driver-crashed`` when the log holds a crash report in an NVIDIA module: one finding,
    at the confidence of its surest crash (the report lists it first), each place its evidence."""
    crashes = report.driver_crashes
    if not crashes:
        return ()
    info = CODES["driver-crashed"]
    first = crashes[0]
    count = sum(crash.count for crash in crashes)
    times = f", ×{count} crash reports" if count > 1 else ""
    at = "top frame" if first.frame else "RIP"
    return (
        Finding(
            code="driver-crashed",
            severity=info.severity,
            title=f"the kernel caught a crash in the NVIDIA module {first.module} ({at} "
            f"{first.where}{times})",
            cause=info.cause,
            remedy=info.remedy,
            evidence=tuple(
                Evidence(
                    "kernel-log",
                    crash.rip_line,
                    source,
                    f"top frame {crash.frame}" if crash.frame else _CRASH_READ[crash.confidence],
                )
                for crash in crashes[:8]
            ),
            confidence=first.confidence,
            count=count,
        ),
    )


# kernel_log.RESET_REQUIRED_KIND: the driver says a GPU must be reset ("NV_ERR_RESET_REQUIRED"
# returned from an RM call, "needs to be reset", "marked for reset")
# Xid 154 (GPU recovery action changed) already names the reset, as a finding of its own
_RECOVERY_XID = 154


def _reset_required(report: KernelLogReport, source: str) -> tuple[Finding, ...]:
    """``recovery-action-pending`` when the driver's own words ask for a reset and no Xid 154
    of the log already says it."""
    count = _count(report, RESET_REQUIRED_KIND)
    if not count or any(g.xid == _RECOVERY_XID for g in report.groups):
        return ()
    info = CODES["recovery-action-pending"]
    return (
        Finding(
            code="recovery-action-pending",
            severity=info.severity,
            title=f"the driver says a GPU must be reset (×{count}: NV_ERR_RESET_REQUIRED or "
            "'marked for reset')",
            cause=info.cause,
            remedy="drain the GPU and reset it (`nvidia-smi -r`), reboot the node if the reset "
            "fails; `nvidia-smi -q` 'GPU Recovery Action' says whether it is still asked",
            evidence=(Evidence("kernel-log", f"reset required ×{count}", source),),
            # the log says it was asked when it was written; a reset since would have cleared it
            confidence=Confidence.MEDIUM,
            references=(CATALOG_URL,),
            count=count,
        ),
    )


def _count(report: KernelLogReport, kind: str) -> int:
    return sum(n for seen, n in report.other if seen == kind)


def _gsp_crash(report: KernelLogReport, source: str) -> tuple[Finding, ...]:
    count = _count(report, GSP_CRASH_KIND)
    if not count:
        return ()
    info = CODES["gsp-firmware-crash"]
    said = Evidence("kernel-log", f"GSP firmware crash report ×{count}", source)
    xids = [g for g in report.groups if g.xid in GSP_XIDS]
    if xids:
        return (_gsp_crash_of_xids(xids, count, said, info.cause),)
    return (
        Finding(
            code="gsp-firmware-crash",
            severity=info.severity,
            title=f"the GSP firmware crashed (crash report ×{count}, no Xid 119/120 line in "
            "the log)",
            cause=info.cause,
            remedy=info.remedy,
            evidence=(said,),
            action=info.action,
            # the log says it happened when it was written; a reset since would have cured it
            confidence=Confidence.MEDIUM,
            references=(GSP_README_URL, CATALOG_URL),
            count=count,
        ),
    )


def _gsp_timeout(report: KernelLogReport, source: str) -> tuple[Finding, ...]:
    """The GSP timeout report in a log without its Xid 119/120 line (a paste cut before it):
    critical, as Xid 119 is. With the Xid, the Xid finding is the event and this says nothing;
    with a crash report, the gsp-firmware-crash finding already stands."""
    count = _count(report, GSP_TIMEOUT_KIND)
    gsp_xids = any(g.xid in GSP_XIDS for g in report.groups)
    if not count or gsp_xids or _count(report, GSP_CRASH_KIND):
        return ()
    info = CODES["gsp-firmware-crash"]
    return (
        Finding(
            code="gsp-firmware-crash",
            severity=Severity.CRITICAL,
            title=f"the GSP firmware stopped answering the driver (GSP timeout lines ×{count}, "
            "no Xid 119/120 line in the log)",
            cause=_GSP_TIMEOUT_CAUSE,
            remedy=_GSP_TIMEOUT_REMEDY,
            evidence=(Evidence("kernel-log", f"GSP timeout lines ×{count}", source),),
            action=info.action,
            # the log says it happened when it was written; a reset since would have cured it
            confidence=Confidence.MEDIUM,
            references=(GSP_README_URL, CATALOG_URL),
            count=count,
        ),
    )


def _gsp_crash_of_xids(xids: list[XidGroup], count: int, said: Evidence, cause: str) -> Finding:
    """The crash report of a log whose Xid 119/120 findings already say the GSP failed: an
    info finding that ties it to them (the Xid finding carries the alarm and the remedy)."""
    named = ", ".join(f"Xid {g.xid} (GPU {g.pci_bus_id or 'unnamed'})" for g in xids)
    gpus = {(g.uuid, g.pci_bus_id) for g in xids}
    device = None
    if len(gpus) == 1:
        [(uuid, bus)] = gpus
        device = DeviceRef(uuid=uuid, pci_bus_id=bus)
    return Finding(
        code="gsp-firmware-crash",
        severity=Severity.INFO,
        title=f"the GSP firmware's crash report (×{count}) is the event of the {named} finding",
        cause=cause,
        remedy=f"see the {named} finding: reset the GPU; the crash report is for NVIDIA "
        "(send it with an nvidia-bug-report.log.gz if it happens again)",
        device=device,
        evidence=(said, *(Evidence("xid", g.xid, said.source, f"×{g.count}") for g in xids)),
        confidence=Confidence.MEDIUM,
        references=(GSP_README_URL, CATALOG_URL),
        count=count,
    )


def _display_engine_hang(report: KernelLogReport, source: str) -> tuple[Finding, ...]:
    # NVKMS names the GPU by its own index ("GPU:0"), not a bus: a node finding
    return _node_message_finding(
        report,
        source,
        DISPLAY_TIMEOUT_KIND,
        "display-engine-hang",
        "the GPU's display engine hung (nvidia-modeset timeouts ×{count})",
        "display-engine timeouts ×{count}",
    )


def _node_message_finding(
    report: KernelLogReport, source: str, kind: str, code: str, title: str, said: str
) -> tuple[Finding, ...]:
    """The finding of a driver message that names no GPU, at medium confidence (the log says
    it happened when it was written; a reset or reboot since would have cured it); ``title`` and
    ``said`` name the message's ``{count}``."""
    count = _count(report, kind)
    if not count:
        return ()
    info = CODES[code]
    return (
        Finding(
            code=code,
            severity=info.severity,
            title=title.format(count=count),
            cause=info.cause,
            remedy=info.remedy,
            evidence=(Evidence("kernel-log", said.format(count=count), source),),
            confidence=Confidence.MEDIUM,
            count=count,
        ),
    )


def _api_mismatch(report: KernelLogReport, source: str) -> tuple[Finding, ...]:
    count = _count(report, "api-mismatch")
    if not count:
        return ()
    return (
        Finding(
            code="nvml-driver-mismatch",
            severity=_MISMATCH.severity,
            title=f"the kernel module refused a driver client of another version (NVRM: API "
            f"mismatch ×{count})",
            cause=_MISMATCH.cause,
            remedy=_MISMATCH.remedy,
            evidence=(Evidence("kernel-log", f"API mismatch ×{count}", source),),
            # the log says it happened when it was written; a reboot since would have cured it
            confidence=Confidence.MEDIUM,
            count=count,
        ),
    )


def _probe_failed(report: KernelLogReport, source: str) -> tuple[Finding, ...]:
    counted = [(kind, count) for kind, count in report.other if kind in PROBE_FAILED and count]
    if not counted:
        return ()
    said = ", ".join(f"{PROBE_FAILED[kind]} ×{count}" for kind, count in counted)
    total = sum(count for _, count in counted)
    if _probe_failed_for_a_lost_gpu(report, counted):
        return (_probe_failure_of_lost_gpus(report, said, total, source),)
    kinds = {kind for kind, _ in counted}
    cause, remedy = (
        (_GSP_INIT_CAUSE, _GSP_INIT_REMEDY)
        if GSP_INIT_KIND in kinds
        else (_OPEN_MODULE_CAUSE, _OPEN_MODULE_REMEDY)
        if OPEN_MODULE_UNSUPPORTED_KIND in kinds
        else (_CAUSE, _REMEDY)
    )
    return (
        Finding(
            code="driver-probe-failed",
            severity=Severity.CRITICAL,
            title=f"the driver could not take a GPU ({said})",
            cause=cause,
            remedy=remedy,
            evidence=tuple(
                Evidence("kernel-log", f"{PROBE_FAILED[kind]} ×{count}", source)
                for kind, count in counted
            ),
            confidence=Confidence.MEDIUM,
            count=total,
        ),
    )


def _probe_failed_for_a_lost_gpu(report: KernelLogReport, counted: list[tuple[str, int]]) -> bool:
    """The probe failed with no reason but a GPU the log says fell off the bus: that GPU's
    gpu-lost finding is the event (and its remedy, not a driver or BIOS one, is the right one)."""
    return bool(report.fallen_off_bus) and {kind for kind, _ in counted} <= GENERIC_PROBE_FAILURES


def _probe_failure_of_lost_gpus(
    report: KernelLogReport, said: str, count: int, source: str
) -> Finding:
    """An info finding that ties the probe failure to the gpu-lost finding(s), so one event
    raises one alarm."""
    buses = ", ".join(str(g.pci_bus_id or "unnamed") for g in report.fallen_off_bus)
    return Finding(
        code="driver-probe-failed",
        severity=Severity.INFO,
        title=f"the driver could not take a GPU ({said}): the GPU {buses} fell off the bus "
        "(see the gpu-lost finding)",
        cause="the driver's probe found the GPU not answering (its registers read all ones) and "
        "gave up on it: the probe failure is the lost GPU's, not a driver or firmware setting",
        remedy="see the gpu-lost finding: drain the node and reboot it; reseat the GPU or check "
        "its power if it happens again",
        evidence=(
            Evidence("kernel-log", said, source),
            *(Evidence("fallen-off-bus", str(g.pci_bus_id), source) for g in report.fallen_off_bus),
        ),
        confidence=Confidence.MEDIUM,
        count=count,
    )


def _suspend_resume_failed(report: KernelLogReport, source: str) -> tuple[Finding, ...]:
    # mem_mgr's refusal names no GPU: a node finding
    return _node_message_finding(
        report,
        source,
        SUSPEND_RESUME_KIND,
        "suspend-resume-failed",
        "the driver refused to resume a GPU after a failed suspend (×{count})",
        "resume refused ×{count}",
    )
