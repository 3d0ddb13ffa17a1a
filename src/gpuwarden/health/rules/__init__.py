"""The health rules, one module per family; ``FAMILIES`` lists them in doctor's check order.

Each family is one doctor check (stable kebab-case name): point rules judge the newest reading of
each device, windowed rules judge a series of readings.
"""

from __future__ import annotations

from gpuwarden.health.rules import (
    device_state,
    links,
    memory_errors,
    memory_repair,
    thermal_power,
    vgpu,
)
from gpuwarden.health.rules.common import Family
from gpuwarden.health.rules.peers import peers
from gpuwarden.health.rules.utilization import utilization

FAMILIES: tuple[Family, ...] = (
    Family("devices", point=device_state.DEVICES),
    Family("recovery-action", point=device_state.RECOVERY_ACTION),
    Family("ecc", point=memory_errors.ECC, window=memory_errors.correctable_storm),
    Family("retired-pages", point=memory_errors.RETIRED_PAGES),
    Family("row-remap", point=memory_errors.ROW_REMAP),
    Family("sram", point=memory_errors.SRAM),
    Family("memory-repair", point=memory_repair.REPAIR),
    Family("clock-events", point=thermal_power.CLOCK_EVENTS),
    Family("temperature", point=thermal_power.TEMPERATURE),
    Family("power", point=thermal_power.POWER),
    Family("pcie", point=links.PCIE, window=links.pcie_replays),
    Family("nvlink", point=links.NVLINK, window=links.nvlink_errors),
    Family("fabric", point=links.FABRIC),
    Family("persistence", point=device_state.PERSISTENCE),
    Family("mig", point=device_state.MIG),
    Family("vgpu-license", point=vgpu.LICENSE),
    Family("memory", point=device_state.MEMORY),
    Family("utilization", window=utilization),
    Family("peers", window=peers),
)

CHECK_NAMES: tuple[str, ...] = tuple(f.check for f in FAMILIES)

__all__ = ["CHECK_NAMES", "FAMILIES"]
