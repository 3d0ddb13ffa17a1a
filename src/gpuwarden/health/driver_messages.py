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
whether it still does. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwarden.health.versions import VERSION_CODES
from gpuwarden.types.health import Confidence, Evidence, Finding, KernelLogReport, Severity

# kernel_log.NOTABLE_MESSAGES kinds that mean "the driver loaded but could not take a GPU"
PROBE_FAILED: Mapping[str, str] = {
    "rm-init-adapter-failed": "RmInitAdapter failed",
    "probe-failed": "the probe routine failed",
    "no-gpu-probed": "no NVIDIA GPU probed",
    "no-gpu-initialised": "none of the NVIDIA GPUs initialised",
    "pci-bar-invalid": "a PCI BAR of the GPU has no valid address",
    "request-mem-region-failed": "another driver holds the GPU's registers",
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
# the same code as the version chain's (an nvidia-smi that says "Driver/library version
# mismatch"): one cause and remedy for it
_MISMATCH = VERSION_CODES["nvml-driver-mismatch"]


def driver_message_findings(report: KernelLogReport, *, source: str) -> tuple[Finding, ...]:
    """``driver-probe-failed`` and ``nvml-driver-mismatch`` findings from the log's driver
    messages (one each at most), else none."""
    return (*_probe_failed(report, source), *_api_mismatch(report, source))


def _api_mismatch(report: KernelLogReport, source: str) -> tuple[Finding, ...]:
    count = sum(n for kind, n in report.other if kind == "api-mismatch")
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
    return (
        Finding(
            code="driver-probe-failed",
            severity=Severity.CRITICAL,
            title=f"the driver could not take a GPU ({said})",
            cause=_CAUSE,
            remedy=_REMEDY,
            evidence=tuple(
                Evidence("kernel-log", f"{PROBE_FAILED[kind]} ×{count}", source)
                for kind, count in counted
            ),
            confidence=Confidence.MEDIUM,
            count=sum(count for _, count in counted),
        ),
    )
