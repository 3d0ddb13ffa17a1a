"""Readings a board without the sensor still reports as a number, for every backend alike."""

from __future__ import annotations


def sensor_celsius(value: float | None) -> float | None:
    """0 °C is a missing sensor (vGPU guests print ``0 C``; DCGM publishes 0 for GDDR memory on
    T4/Ada): no powered GPU reads 0 °C, so it is "not reported", like N/A."""
    return None if value == 0 else value
