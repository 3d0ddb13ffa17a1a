"""What the store gives back besides DeviceSamples: runs and where a reading came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpuwarden.types.telemetry import DeviceInfo, DeviceSample

Resolution = Literal["raw", "1m", "1h"]
RESOLUTIONS: tuple[Resolution, ...] = ("raw", "1m", "1h")


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a snapshot came from (one row of ``origins``, shared by many snapshots)."""

    host: str
    backend: str
    simulated: bool
    source: str | None


@dataclass(frozen=True, slots=True)
class StoredSample:
    """A DeviceSample read back with its origin (`history` labels simulated data as such) and
    the `record` run that stored it (None: a rollup, or a snapshot written outside a run)."""

    sample: DeviceSample
    origin: Origin
    run_id: int | None = None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One `gpuwarden record` invocation."""

    id: int
    command: tuple[str, ...]
    pid: int | None
    host: str
    backend: str
    simulated: bool
    started_s: float
    ended_s: float | None  # None while running, or when the recorder was killed
    exit_code: int | None


@dataclass(frozen=True, slots=True, eq=False)
class DeviceSeries:
    """One device's readings of a few fields as columns: ``values[field][k]`` was read at
    ``timestamps_s[k]`` (oldest first). What plots and tables need, without DeviceSamples."""

    info: DeviceInfo
    timestamps_s: tuple[float, ...]
    values: Mapping[str, tuple[Any, ...]]
