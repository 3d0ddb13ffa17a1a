"""The thermal-limit arithmetic, for every backend alike.

On Ada and newer GPUs the temperature thresholds are printed relative to T.Limit instead of in
degrees; NVML, DCGM and nvidia-smi all give the T.Limit margin. DeviceSample carries absolute
limits (types/telemetry.py); this module is where a margin and the thresholds relative to it
become them. The enum vocabularies (recovery action, fabric state) are catalog.nvml_enums.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuwarden.telemetry.validate import possible

__all__ = ["TLimitThresholds"]


@dataclass(frozen=True, slots=True)
class TLimitThresholds:
    """Thresholds printed relative to T.Limit, as the margin at which the GPU acts.

    Ada and newer GPUs print "GPU Slowdown T.Limit Temp : -2 C" (XML
    ``gpu_temp_slow_tlimit_threshold``, NVML field NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT)
    instead of an absolute slowdown temperature: slowdown starts when the margin to the max
    operating temperature falls to -2 °C, i.e. 2 °C above it. These are never degrees Celsius.
    """

    slowdown_celsius: float | None = None  # margin at which hardware slowdown starts
    shutdown_celsius: float | None = None  # margin at which the GPU shuts down

    def absolute(
        self, temperature_gpu_celsius: float | None, margin_celsius: float | None
    ) -> dict[str, float]:
        """The absolute limits these imply, as DeviceSample fields, where they can be derived.

        The margin is max operating temperature − temperature, so max = temperature + margin,
        and a threshold at margin m sits at max − m. The margin is measured on the GPU's hottest
        sensor while "GPU Current Temp" is another one, so the result is the limit on the scale
        of the current temperature at this reading (the H100 capture: 41 + 46 = 87 °C idle,
        59 + 26 = 85 °C under load); comparing a reading with these limits is comparing its
        margin with the thresholds. Callers keep an absolute value the device printed instead.
        """
        if temperature_gpu_celsius is None or margin_celsius is None:
            return {}
        maximum = temperature_gpu_celsius + margin_celsius
        out = {"temperature_gpu_max_celsius": maximum}
        if self.slowdown_celsius is not None:
            out["temperature_slowdown_celsius"] = maximum - self.slowdown_celsius
        if self.shutdown_celsius is not None:
            out["temperature_shutdown_celsius"] = maximum - self.shutdown_celsius
        return out

    def filled(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` (DeviceSample fields by name) with the limits ``absolute`` derives from
        its temperature and margin where it has none: a limit the device reported in degrees
        wins. A temperature or margin no GPU can report derives nothing (validate.possible):
        the range check says it once, not again through what was computed from it."""
        derived = self.absolute(
            possible("temperature_gpu_celsius", values.get("temperature_gpu_celsius")),
            possible("temperature_margin_celsius", values.get("temperature_margin_celsius")),
        )
        out = dict(values)
        for name, value in derived.items():
            if out.get(name) is None:
                out[name] = value
        return out
