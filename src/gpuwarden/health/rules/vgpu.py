"""vGPU guest licensing: an unlicensed guest is restricted once its grace period ends.

The license state is NVML's nvmlGridLicenseState_t as nvidia-smi prints it ("License Status"):
licensed, unlicensed, unlicensed-restricted (the driver caps the guest now), unlicensed-
unrestricted (the 20-minute grace period runs: full speed until it ends, unless a license comes).
Drivers before the restricted/unrestricted split print "Unlicensed" for both, and NVML's and
DCGM's guest readings say only licensed or unlicensed. Bare metal,
pass-through GPUs and hypervisor hosts report no state (N/A): nothing to judge.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpuwarden.health.judgement import Judgement
from gpuwarden.health.rules.common import (
    Context,
    PointRule,
    Verdict,
    answering,
    device_ref,
    evidence,
    gpu_label,
    make,
)
from gpuwarden.types.health import Confidence, Finding, Severity
from gpuwarden.types.telemetry import DeviceSample

# What each unlicensed state means (DCGM's ConvertNvmlGridLicenseStateToString names the same
# four states). Licensed, and any word this table does not know, give no finding.
_UNLICENSED: dict[str, Judgement] = {
    "unlicensed-restricted": Judgement(
        Severity.WARNING, Confidence.HIGH, "restricted now (the grace period is over)"
    ),
    # the driver cannot say here whether the grace period is over: restricted or soon to be
    "unlicensed": Judgement(
        Severity.WARNING,
        Confidence.MEDIUM,
        "restricted once its 20-minute grace period is over",
    ),
    # full speed until the grace period ends; a guest that just booted is still asking for one
    "unlicensed-unrestricted": Judgement(
        Severity.INFO,
        Confidence.MEDIUM,
        "grace period running: full speed until it ends, restricted after unless licensed",
    ),
}


# where each backend reads the state (the evidence's source names the backend)
_READ_FROM = (
    "the guest's license state: nvidia-smi -q 'License Status', NVML's licensable feature "
    "state, DCGM field 526"
)


def _license(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    state = sample.vgpu_license_status
    judgement = _UNLICENSED.get(state or "")
    if judgement is None:
        return
    title = f"{gpu_label(sample)}: vGPU unlicensed, {judgement.said}"
    proof = (
        evidence(ctx, "vgpu_license_status", state, _READ_FROM),
        evidence(ctx, "name", sample.info.name or None, "the vGPU profile"),
    )
    verdict = Verdict(
        "vgpu-unlicensed",
        title,
        proof,
        severity=judgement.severity,
        confidence=judgement.confidence,
    )
    yield make(verdict, device_ref(sample, ctx))


LICENSE = PointRule(
    reports=lambda s: answering(s) and s.vgpu_license_status is not None,
    judge=_license,
    missing="no vGPU license state reported (bare metal, pass-through or a hypervisor host)",
)
