"""A device's DCGM profiling readings that contradict its own utilization in the same scrape.

DCGM documents DCGM_FI_DEV_GPU_UTIL (field 203, NVML's utilization) as the share of the sample
period during which one or more kernels executed, and DCGM_FI_PROF_GR_ENGINE_ACTIVE (field 1001)
as the share of time a graphics/compute context was bound and its pipe busy: a kernel executing
keeps that engine busy. A GPU whose kernels ran through nearly the whole period cannot have had
its engine idle throughout, so an engine activity of exactly 0 beside it is no measurement but
the profiling module's failure, which DCGM exports as 0 (after an Xid 31, nv-hostengine's
PerfWorks sampling returns -37 and every DCGM_FI_PROF_* field of that GPU stays 0 until DCGM is
restarted, while field 203 goes on: DCGM issue 303). Such zeros are left out, each said, so no
rule reads a busy GPU as idle.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from gpuwarden.telemetry.dcgm.fields import FIELDS
from gpuwarden.telemetry.validate import rejection
from gpuwarden.types.telemetry import DeviceEvent

# Utilization (%) from which kernels ran through nearly the whole sample period; the two fields
# are averaged over periods that need not coincide (NVML: 1/6 s to 1 s; profiling: 1 s), so
# only a nearly saturated one is taken as proof that the engine was busy.
BUSY_UTILIZATION_MIN_PERCENT = 95.0

_UTILIZATION = FIELDS["DCGM_FI_DEV_GPU_UTIL"][0]
_ENGINE_ACTIVE = FIELDS["DCGM_FI_PROF_GR_ENGINE_ACTIVE"][0]
# The activity ratios DCGM's profiling module (DCP) samples together: one failure zeroes them all.
PROFILING_RATIOS: dict[str, str] = {
    target: name
    for name, (target, _) in FIELDS.items()
    if name.startswith("DCGM_FI_PROF_") and target.endswith("_ratio")
}


def stale_profiling(
    values: MutableMapping[str, Any], stamp: float, uuid: str, index: int | None
) -> list[DeviceEvent]:
    """Take out of ``values`` (one device's readings) the profiling ratios of exactly 0 when
    its utilization says its engine was busy and its engine activity reads 0; an event each.
    A list, not a generator: the readings are taken out whether or not the events are read."""
    utilization = values.get(_UTILIZATION)
    if utilization is None or utilization < BUSY_UTILIZATION_MIN_PERCENT:
        return []
    if values.get(_ENGINE_ACTIVE) != 0:
        return []
    why = (
        f"while DCGM_FI_DEV_GPU_UTIL = {utilization:g} %: a busy GPU's engine cannot be idle, "
        "so DCGM's profiling sample failed (restart nv-hostengine to resume it)"
    )
    events: list[DeviceEvent] = []
    for target, name in PROFILING_RATIOS.items():
        if values.get(target) == 0:
            del values[target]
            events.append(rejection(stamp, uuid, index, name, 0, why))
    return events
