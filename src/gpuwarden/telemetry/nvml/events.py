"""Xid events through an NVML event set, drained without blocking on every read."""

from __future__ import annotations

from typing import Any

from gpuwarden.telemetry.nvml._lib import DeviceUnusableError, Nvml

_XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError (nvml.h)
_MAX_PER_READ = 256  # bound the drain loop: a storm cannot stall a reading


class XidWatch:
    """One event set for every device that accepts XidCriticalError registration."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self.event_set = nvml.call("nvmlEventSetCreate")

    def register(self, handle: Any) -> bool:
        """May raise DeviceUnusableError."""
        if self.event_set is None:
            return False
        done = self.nvml.call("nvmlDeviceRegisterEvents", handle, _XID_CRITICAL, self.event_set)
        return done is not None or self.nvml.has("nvmlDeviceRegisterEvents")

    def drain(self) -> list[tuple[Any, int]]:
        """(device handle, Xid) of every event waiting now (timeout 0: Timeout = none)."""
        if self.event_set is None:
            return []
        out = []
        for _ in range(_MAX_PER_READ):
            try:
                data = self.nvml.call("nvmlEventSetWait_v2", self.event_set, 0)
            except DeviceUnusableError:
                # GPU_IS_LOST "if a GPU has fallen off the bus" (NVML reference): it names no
                # GPU; the device's own calls find which one
                break
            if data is None:
                break
            if int(data.eventType) & _XID_CRITICAL:
                out.append((data.device, int(data.eventData)))
        return out

    def close(self) -> None:
        if self.event_set is not None:
            self.nvml.call("nvmlEventSetFree", self.event_set)
            self.event_set = None
