"""Findings from the driver's kernel-log messages that are not Xids: the driver could not take a
GPU (``driver-probe-failed``, diagnosis.md §1: "RmInitAdapter failed", "probe routine failed",
"No NVIDIA GPU found").

The messages carry no usable bus id in most forms, so the finding is about the node. It is
critical (a GPU the driver could not initialise runs nothing) with medium confidence: the log
says it failed when it was written, and only a reading of the GPUs now (`nvidia-smi`) says
whether it still does. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwarden.types.health import Confidence, Evidence, Finding, KernelLogReport, Severity

# kernel_log.NOTABLE_MESSAGES kinds that mean "the driver loaded but could not take a GPU"
PROBE_FAILED: Mapping[str, str] = {
    "rm-init-adapter-failed": "RmInitAdapter failed",
    "probe-failed": "the probe routine failed",
    "no-gpu-probed": "no NVIDIA GPU probed",
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


def driver_message_findings(report: KernelLogReport, *, source: str) -> tuple[Finding, ...]:
    """One ``driver-probe-failed`` finding when the log holds such a message, else none."""
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
