"""The state of each device: lost or answering, persistence mode, MIG set up, memory left, and
the recovery action the driver asks for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from gpuwarden.catalog.nvml_enums import (
    DEVICE_HANDLE_UNKNOWN,
    GPU_REQUIRES_RESET,
    INSUFFICIENT_PERMISSIONS,
)
from gpuwarden.catalog.xid import recovery_action_verdict
from gpuwarden.health.checks import DEVICE_NOT_READ
from gpuwarden.health.rules.common import (
    Context,
    PointRule,
    Verdict,
    answering,
    compared_fractions,
    device_ref,
    evidence,
    gpu_label,
    make,
)
from gpuwarden.types.health import Confidence, Finding, Severity
from gpuwarden.types.telemetry import DeviceSample, DeviceState, MigDeviceSample
from gpuwarden.units import GIB

# --- devices: lost or answering


def _state(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    error = sample.error or ""
    if sample.state is DeviceState.ERROR and _RESET_REQUIRED in error.lower():
        yield _reset_required(sample, ctx)
    elif sample.state is DeviceState.ERROR and _unopened(error):
        yield _access_denied(sample, ctx) if _refused(error) else _unanswered(sample, ctx)
    if sample.state is not DeviceState.GPU_LOST:
        return
    proof = [evidence(ctx, "state", sample.state.value, sample.error or "")]
    if sample.xid_last is not None:
        proof.append(evidence(ctx, "xid_last", sample.xid_last))
    title = f"{gpu_label(sample)} is lost: it stopped answering (fallen off the bus)"
    yield make(Verdict("gpu-lost", title, tuple(proof)), device_ref(sample, ctx))


# NVML_ERROR_RESET_REQUIRED ("The GPU requires a reset before it can be used again", nvml.h)
# answers every query of the GPU; nvidia-smi prints "[GPU requires reset]" for its values, and
# the smi readers and the NVML backend write the GPU's error with the same words
_RESET_REQUIRED = GPU_REQUIRES_RESET.lower()


def _reset_required(sample: DeviceSample, ctx: Context) -> Finding:
    """A GPU NVML refuses to read until it is reset: the driver asks for a reset as it does
    through the recovery action, so the same verdict (severity and bucket of "reset")."""
    severity, bucket = recovery_action_verdict("reset")
    verdict = Verdict(
        "recovery-action-pending",
        f"{gpu_label(sample)} requires a reset: NVML answers 'GPU requires reset' for it",
        (evidence(ctx, "state", sample.state.value, sample.error or ""),),
        severity=severity,
        action=bucket,
        no_action=bucket is None,
        remedy=f"the driver asks for {_ASKS['reset']}; then check the kernel log for the Xid "
        "behind it",
    )
    return make(verdict, device_ref(sample, ctx))


def _unopened(error: str) -> bool:
    """NVML could not open the GPU (nvidia-smi's "Unable to determine the device handle")."""
    return error.startswith(DEVICE_HANDLE_UNKNOWN)


def _refused(error: str) -> bool:
    """NVML refused this user or container (NVML_ERROR_NO_PERMISSION): the GPU answered; its
    device node's access is the matter."""
    return INSUFFICIENT_PERMISSIONS in error


def _access_denied(sample: DeviceSample, ctx: Context) -> Finding:
    """A GPU NVML may not open for this user or container: information, not a fault; none of
    its readings were taken, so the devices check does not pass as if it had been read."""
    verdict = Verdict(
        DEVICE_NOT_READ,
        f"{gpu_label(sample)} was not read: NVML refused this user or container access to it",
        (evidence(ctx, "state", sample.state.value, sample.error or ""),),
    )
    return make(verdict, device_ref(sample, ctx))


def _unanswered(sample: DeviceSample, ctx: Context) -> Finding:
    """A GPU the driver lists but NVML cannot open (diagnosis.md's gpu-lost evidence "Unable to
    determine the device handle"): medium, since NVML's "Unknown Error" does not say lost, and a
    container handed a device node without its GPU prints the same line."""
    verdict = Verdict(
        "gpu-lost",
        f"{gpu_label(sample)} does not answer: NVML cannot open it",
        (evidence(ctx, "state", sample.state.value, sample.error or ""),),
        confidence=Confidence.MEDIUM,
        cause="the driver lists the GPU but NVML cannot open it: fallen off the bus or failed to "
        "initialise (Xid 79 or RmInitAdapter in the kernel log decides); inside a container, a "
        "GPU's device node mounted without access to the GPU prints the same line",
    )
    return make(verdict, device_ref(sample, ctx))


DEVICES = PointRule(reports=lambda _: True, judge=_state, missing="no device reported")


# --- persistence mode (Linux; Windows/WDDM reports it N/A, i.e. None, so it is never judged)


def _persistence(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    if sample.persistence_mode is False:
        yield make(
            Verdict(
                "persistence-off",
                f"{gpu_label(sample)}: persistence mode off",
                (evidence(ctx, "persistence_mode", False),),
            ),
            device_ref(sample, ctx),
        )


PERSISTENCE = PointRule(
    reports=lambda s: answering(s) and s.persistence_mode is not None,
    judge=_persistence,
    missing="persistence mode not reported (N/A on Windows/WDDM; the dmon format omits it)",
)


# --- MIG


def _mig_reports(sample: DeviceSample) -> bool:
    # MIG on with no instance information cannot be judged: "none listed" is not "none exist".
    return answering(sample) and (
        sample.mig_mode is False or (sample.mig_mode is True and sample.mig_devices is not None)
    )


def _mig(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    if sample.mig_mode is True and sample.mig_devices == ():
        yield make(
            Verdict(
                "mig-no-instances",
                f"{gpu_label(sample)}: MIG enabled with no GPU instance",
                (
                    evidence(ctx, "mig_mode", True),
                    evidence(ctx, "mig_devices", 0, "no GPU instance listed"),
                ),
            ),
            device_ref(sample, ctx),
        )


MIG = PointRule(
    reports=_mig_reports,
    judge=_mig,
    missing="MIG mode not reported by this capture (or MIG on without instance information)",
)


# --- memory


@dataclass(frozen=True, slots=True)
class _Usage:
    used_bytes: int
    total_bytes: int

    @property
    def ratio(self) -> float:
        return self.used_bytes / self.total_bytes


def _usage(sample: DeviceSample) -> _Usage | None:
    used = sample.memory_used_bytes
    total = sample.info.memory_total_bytes
    if total is None and used is not None and sample.memory_free_bytes is not None:
        total = used + sample.memory_free_bytes + (sample.memory_reserved_bytes or 0)
    if used is None or not total or total <= 0:
        return None
    return _Usage(used, total)


def _mig_usage(mig: MigDeviceSample) -> _Usage | None:
    used, total = mig.memory_used_bytes, mig.memory_total_bytes
    if used is None or not total or total <= 0:
        return None
    return _Usage(used, total)


def _memory_verdict(what: str, usage: _Usage, ctx: Context) -> Verdict:
    limit = ctx.thresholds.memory_used_max_ratio
    total_gib = usage.total_bytes / GIB
    used_text, limit_text = compared_fractions(usage.ratio, limit)
    detail = f"{used_text} > {limit_text} of {total_gib:.1f} GiB"
    title = (
        f"{what}: memory {usage.used_bytes / GIB:.1f}/{usage.total_bytes / GIB:.1f} GiB used "
        f"({used_text})"
    )
    return Verdict(
        "memory-nearly-full", title, (evidence(ctx, "memory_used_bytes", usage.used_bytes, detail),)
    )


# A GPU in an idle performance state (P8 and deeper) doing no work: memory held there is a pool
# allocated up front (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static, JAX/TF
# preallocation) or a process that should have ended, not a job about to run out of it
_IDLE_PSTATE = 8


def _idle(sample: DeviceSample) -> bool:
    pstate = sample.pstate or ""
    return (
        sample.gpu_utilization_percent == 0
        and pstate[:1] == "P"
        and pstate[1:].isdigit()
        and int(pstate[1:]) >= _IDLE_PSTATE
    )


def _held_while_idle(verdict: Verdict, sample: DeviceSample) -> Verdict:
    return dataclasses.replace(
        verdict,
        title=f"{verdict.title} while the GPU is idle ({sample.pstate}, 0 % busy)",
        severity=Severity.INFO,
        cause="memory held by a process on an idle GPU: a serving engine's pool allocated up "
        "front (vLLM gpu_memory_utilization, SGLang mem_fraction_static, JAX/TensorFlow "
        "preallocation) or a process that should have ended; no job here is short of it",
        remedy="if no engine should hold it, find the process (`nvidia-smi "
        "--query-compute-apps=pid,process_name,used_memory --format=csv`) and end it",
    )


def _memory(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    limit = ctx.thresholds.memory_used_max_ratio
    usage = _usage(sample)
    if usage is not None and usage.ratio > limit:
        verdict = _memory_verdict(gpu_label(sample), usage, ctx)
        if _idle(sample):
            verdict = _held_while_idle(verdict, sample)
        yield make(verdict, device_ref(sample, ctx))
    for mig in sample.mig_devices or ():
        part = _mig_usage(mig)
        if part is not None and part.ratio > limit:
            what = f"{gpu_label(sample)} MIG {mig.profile or '?'} (GI {mig.gpu_instance_id})"
            yield make(_memory_verdict(what, part, ctx), device_ref(sample, ctx, mig))


MEMORY = PointRule(
    reports=lambda s: answering(s) and _usage(s) is not None,
    judge=_memory,
    missing="memory use not reported by this capture",
)


# --- recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, Xid 154)


# What the driver asks for, in words (nvmlDeviceGpuRecoveryAction_t, NVIDIA's "GPU Memory Error
# Management"); its severity and bucket are the catalog's (the same for Xid 154).
_ASKS = {
    "reset": "a GPU reset: stop every process on it, `nvidia-smi -r`, then it can be used again",
    "reboot": "a node reboot: the fault may have left the OS inconsistent",
    "drain-p2p": "draining peer-to-peer traffic: stop the processes that use P2P (NCCL over "
    "NVLink/PCIe) on this GPU",
    "drain-and-reset": "draining peer-to-peer traffic, then a GPU reset",
    "bus-reset": "a reset of the GPU's PCIe bus",
    "system-reboot": "a reboot of the system",
}


def _recovery(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    asked = (sample.recovery_action or "").strip().lower()
    if asked in ("", "none"):
        return
    severity, bucket = recovery_action_verdict(asked)
    wants = _ASKS.get(asked, f"the recovery action {asked!r}")
    verdict = Verdict(
        "recovery-action-pending",
        f"{gpu_label(sample)}: the driver asks for {asked.replace('-', ' ')}",
        (
            evidence(
                ctx, "recovery_action", sample.recovery_action, "anything but 'none' is a request"
            ),
        ),
        severity=severity,
        action=bucket,
        no_action=bucket is None,
        remedy=f"the driver asks for {wants}; then check the kernel log for the Xid behind it",
    )
    yield make(verdict, device_ref(sample, ctx))


RECOVERY_ACTION = PointRule(
    reports=lambda s: answering(s) and s.recovery_action is not None,
    judge=_recovery,
    missing="GPU recovery action not reported by this capture (recent drivers report it)",
)
