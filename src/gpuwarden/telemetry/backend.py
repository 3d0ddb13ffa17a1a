"""The one protocol every telemetry source implements.

Collector, store, exporter and `snapshot` read ``Snapshot``s from a ``Backend``; none of them
knows which source it is. Backends: ``nvml`` (nvidia-ml-py), ``smi`` (nvidia-smi output),
``dcgm`` (a dcgm-exporter scrape), ``replay`` (what ``record`` stored), ``sim`` (scenarios,
always ``simulated=True``).

Every Snapshot of ``nvml``, ``smi``, ``dcgm`` and ``sim`` has passed
``telemetry.validate.validate_snapshot`` (``replay`` gives back what they recorded): no reading
is NaN, infinite or outside what a GPU can report; such a value is None, and an event says which
field, what value and why.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gpuwarden.types.telemetry import DeviceInfo, Snapshot


@runtime_checkable
class Backend(Protocol):
    name: str  # "nvml", "smi", "dcgm", "replay", "sim"
    simulated: bool

    def devices(self) -> tuple[DeviceInfo, ...]:
        """Identity of every device this backend sees (MIG devices are inside their parent)."""
        ...

    def read(self) -> Snapshot:
        """One reading of every device. A lost device is a sample with state GPU_LOST plus a
        GPU_LOST event, never an exception; only a backend-wide failure raises (a
        ``GpuwardenError``: missing library, driver mismatch, unreadable input)."""
        ...

    def close(self) -> None: ...
