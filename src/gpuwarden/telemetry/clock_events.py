"""Clock-event (throttle) reasons: NVML's bitmask and the names DeviceSample uses.

One table for every backend: NVML returns the mask, DCGM exports the same bits (field 112,
DCGM_FI_DEV_CLOCKS_EVENT_REASONS), nvidia-smi prints it as a hex string.
"""

from __future__ import annotations

# nvmlClocksEventReason* bits (nvml.h; telemetry.md §2.3), in bit order.
CLOCK_EVENT_BITS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


def decode_clock_events(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in CLOCK_EVENT_BITS if mask & bit)
