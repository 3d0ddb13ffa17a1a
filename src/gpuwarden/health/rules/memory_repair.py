"""The R575+ repair readings: memory the GPU can no longer repair, and channel / TPC repairs that
wait for a reset.

Drivers from R575 print three flags at the end of nvidia-smi's "ECC Errors" (XML
``<ecc_errors>``): "Channel Repair Pending", "TPC Repair Pending" (NVML nvmlDeviceGetRepairStatus,
nvmlRepairStatus_v1_t.bChannelRepairPending / bTpcRepairPending) and "Unrepairable Memory"
(nvmlDeviceGetUnrepairableMemoryFlag_v1, nvmlUnrepairableMemoryStatus_v1_t.bUnrepairableMemory).
NVIDIA's memory error management guide lists "RAS Repair – GPU Memory" for Blackwell and Xid 160
("GPU memory is successfully marked for repair"); NVML's reference gives the flags no more words.
Read as the guide reads its other "pending" flag (row remapping: "will happen at the next GPU
reset"), a pending repair is carried out at the next reset; memory the driver cannot repair is
judged as a row-remap failure is (no spare left to recover with: field diagnostic, then RMA).

"No" and N/A give no finding: GeForce boards print "Unrepairable Memory: N/A", pre-Ampere boards
print none of the rows, and drivers before R575 have neither call.
"""

from __future__ import annotations

from collections.abc import Iterator

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
from gpuwarden.types.health import Evidence, Finding
from gpuwarden.types.telemetry import DeviceSample

# DeviceSample field, what is pending, where it is read
_PENDING = (
    (
        "channel_repair_pending",
        "a memory-channel repair",
        "'Channel Repair Pending: Yes' (NVML nvmlRepairStatus_v1_t.bChannelRepairPending)",
    ),
    (
        "tpc_repair_pending",
        "a TPC repair",
        "'TPC Repair Pending: Yes' (NVML nvmlRepairStatus_v1_t.bTpcRepairPending)",
    ),
)
_UNREPAIRABLE_READ_FROM = "'Unrepairable Memory: Yes' (NVML nvmlDeviceGetUnrepairableMemoryFlag_v1)"
_APPLIED_AT_RESET = "applied at the next GPU reset"


def _reports(sample: DeviceSample) -> bool:
    return answering(sample) and any(
        value is not None
        for value in (
            sample.memory_unrepairable,
            sample.channel_repair_pending,
            sample.tpc_repair_pending,
        )
    )


def _memory_errors_beside(sample: DeviceSample, ctx: Context) -> list[Evidence]:
    """The memory counters read with the flag: what the flag is not alone in saying."""
    proof = []
    for name in ("ecc_errors_uncorrected_aggregate", "remapped_rows_uncorrectable"):
        value = getattr(sample, name)
        if value:
            proof.append(evidence(ctx, name, value))
    if sample.remapped_rows_failure:
        proof.append(evidence(ctx, "remapped_rows_failure", True))
    return proof


def _unrepairable(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    if not sample.memory_unrepairable:
        return
    proof = [evidence(ctx, "memory_unrepairable", True, _UNREPAIRABLE_READ_FROM)]
    proof.extend(_memory_errors_beside(sample, ctx))
    yield make(
        Verdict(
            "memory-unrepairable",
            f"{gpu_label(sample)}: the driver flags memory it cannot repair",
            tuple(proof),
        ),
        device_ref(sample, ctx),
    )


def _pending(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    waiting = [(name, what, read) for name, what, read in _PENDING if getattr(sample, name)]
    if not waiting:
        return
    proof = tuple(
        evidence(ctx, name, True, f"{read}: {_APPLIED_AT_RESET}") for name, _what, read in waiting
    )
    what = " and ".join(what for _name, what, _read in waiting)
    yield make(
        Verdict("repair-pending", f"{gpu_label(sample)}: {what} waits for a GPU reset", proof),
        device_ref(sample, ctx),
    )


def _judge(sample: DeviceSample, ctx: Context) -> Iterator[Finding]:
    yield from _unrepairable(sample, ctx)
    yield from _pending(sample, ctx)


REPAIR = PointRule(
    reports=_reports,
    judge=_judge,
    missing="the repair flags are not reported by this capture (drivers R575 and newer print "
    "'Unrepairable Memory' and 'Channel / TPC Repair Pending'; older GPUs print N/A)",
)
