"""NvmlBackend: every local GPU through NVML (nvidia-ml-py), one Snapshot per read().

Identity, link count and GPM support are read once at open; each read() takes the per-device
fields, MIG devices, processes, GPM metrics since the previous read, and drains Xid events.
A GPU that is lost (at open or mid-run) becomes a GPU_LOST sample plus one GPU_LOST event, and
the others keep reporting (DESIGN.md, Data model).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from gpuwarden.catalog.nvml_enums import DEVICE_HANDLE_UNKNOWN, GPU_IS_LOST, GPU_REQUIRES_RESET
from gpuwarden.telemetry.health_readings import TLimitThresholds
from gpuwarden.telemetry.nvml._lib import (
    DeviceResetRequiredError,
    DeviceUnusableError,
    Nvml,
    load_pynvml,
    text,
)
from gpuwarden.telemetry.nvml.classic import ClassicFields, classic_link_count
from gpuwarden.telemetry.nvml.construct import builder
from gpuwarden.telemetry.nvml.events import XidWatch
from gpuwarden.telemetry.nvml.fields import FieldSet, nvlink_count
from gpuwarden.telemetry.nvml.gpm import EXTRA, GpmReader, MigGpmReaders
from gpuwarden.telemetry.nvml.health import health_fields, tlimit_thresholds
from gpuwarden.telemetry.nvml.identity import read_identity, system_versions
from gpuwarden.telemetry.nvml.mig import mig_handles, mig_mode, read_mig
from gpuwarden.telemetry.nvml.processes import ProcessReader
from gpuwarden.telemetry.nvml.readings import device_fields, setting_fields
from gpuwarden.telemetry.nvml.scalars import MarginReader, MemoryReader, ScalarReader
from gpuwarden.telemetry.validate import validate_snapshot
from gpuwarden.types.telemetry import (
    DeviceEvent,
    DeviceInfo,
    DeviceSample,
    DeviceState,
    EventKind,
    Snapshot,
)

_sample = builder(DeviceSample)  # DeviceSample(**values) at a fraction of the CPU
LOST_MESSAGE = f"{GPU_IS_LOST} (NVML_ERROR_GPU_IS_LOST): fell off the bus; Xid 79 in the kernel log"
RESET_MESSAGE = (
    f"{GPU_REQUIRES_RESET} (NVML_ERROR_RESET_REQUIRED): NVML reads nothing until it is reset"
)


def _unusable(exc: DeviceUnusableError) -> tuple[DeviceState, str]:
    if isinstance(exc, DeviceResetRequiredError):
        return DeviceState.ERROR, RESET_MESSAGE
    return DeviceState.GPU_LOST, LOST_MESSAGE


@dataclass
class _Readers:
    """What an opened device is read through (built once, at open)."""

    handle: Any
    fields: FieldSet
    scalars: ScalarReader
    memory: MemoryReader
    margin: MarginReader
    gpm: GpmReader
    processes: ProcessReader
    mig_gpm: MigGpmReaders


@dataclass
class _Device:
    info: DeviceInfo
    readers: _Readers | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # with the slow health fields
    tlimits: TLimitThresholds = field(default_factory=TLimitThresholds)
    settings_at: float | None = None
    state: DeviceState = DeviceState.OK
    error: str | None = None
    xid_last: int | None = None
    lost_reported: bool = False


class NvmlBackend:
    """The ``nvml`` backend. ``library`` is pynvml or a module with its surface (tests inject a
    fake); None imports nvidia-ml-py (MissingExtraError naming the ``nvml`` extra without it)."""

    name = "nvml"
    simulated = False

    def __init__(
        self,
        library: ModuleType | None = None,
        *,
        clock: Callable[[], float] = time.time,
        host: str | None = None,
        settings_every_s: float = 30.0,
    ) -> None:
        self._nvml = Nvml(library if library is not None else load_pynvml())
        self._nvml.init()
        self._clock = clock
        self._settings_every_s = settings_every_s
        self._host = host or socket.gethostname()
        self._driver, self._cuda = system_versions(self._nvml)
        self._xids = XidWatch(self._nvml)
        self._names: dict[int, str | None] = {}  # pid -> process name (nvmlSystemGetProcessName)
        count = self._nvml.call("nvmlDeviceGetCount") or 0
        self._devices = [self._open(index) for index in range(int(count))]

    def _open(self, index: int) -> _Device:
        nvml = self._nvml
        placeholder = DeviceInfo(
            index=index,
            uuid=f"nvml-index-{index}",
            name="unknown NVIDIA GPU",
            driver_version=self._driver,
            cuda_driver_version=self._cuda,
        )
        try:
            handle, reason = nvml.open_by_index(index)
            if handle is None:
                # what nvidia-smi prints for it, so the rules read both alike
                unopened = f"{DEVICE_HANDLE_UNKNOWN} for GPU {index}: {reason}"
                return _Device(placeholder, state=DeviceState.ERROR, error=unopened)
            info = read_identity(nvml, handle, index, self._driver, self._cuda)
            links = nvlink_count(nvml, handle)
            if links is None:  # old driver (no field values) or the entry failed
                links = classic_link_count(nvml, handle)
            fields = FieldSet(nvml, links, ClassicFields(nvml, handle))
            gpm = GpmReader(nvml, handle)
            readers = _Readers(
                handle,
                fields,
                ScalarReader(nvml, handle),
                MemoryReader(nvml, handle),
                MarginReader(nvml, handle),
                gpm,
                ProcessReader(nvml, handle),
                MigGpmReaders(nvml, handle, supported=gpm.supported),
            )
            device = _Device(info, readers)
            self._xids.register(handle)
        except DeviceUnusableError as exc:
            state, error = _unusable(exc)
            return _Device(placeholder, state=state, error=error)
        return device

    def devices(self) -> tuple[DeviceInfo, ...]:
        return tuple(d.info for d in self._devices)

    def _read_device(self, device: _Device, readers: _Readers, now: float) -> DeviceSample:
        nvml, handle = self._nvml, readers.handle
        if device.settings_at is None or now - device.settings_at >= self._settings_every_s:
            device.settings = setting_fields(nvml, handle) | health_fields(nvml, handle)
            device.tlimits, device.settings_at = tlimit_thresholds(nvml, handle), now
        values = device_fields(
            nvml,
            handle,
            readers.scalars,
            readers.memory,
            readers.margin,
            readers.fields,
            device.settings,
            device.tlimits,
        )
        current, pending = mig_mode(nvml, handle)
        migs = None
        if current:
            found = (read_mig(nvml, mig) for mig in mig_handles(nvml, handle))
            migs = readers.mig_gpm.read(tuple(m for m in found if m is not None))
        processes = readers.processes.read(self._names)
        extra: dict[str, float] = {}
        for name, value in readers.gpm.read().items():
            if name in EXTRA:
                extra[name] = value
            else:
                values[name] = value
        values["info"], values["timestamp_s"] = device.info, now
        values["mig_mode"], values["mig_mode_pending"] = current, pending  # mig.mode.*
        values["mig_devices"], values["processes"] = migs, processes
        values["xid_last"], values["extra"] = device.xid_last, extra
        return _sample(values)

    def _lost_sample(self, device: _Device, now: float, events: list[DeviceEvent]) -> DeviceSample:
        if not device.lost_reported:
            device.lost_reported = True
            events.append(
                DeviceEvent(
                    kind=EventKind.GPU_LOST,
                    timestamp_s=now,
                    uuid=device.info.uuid,
                    index=device.info.index,
                    message=LOST_MESSAGE,
                )
            )
        return DeviceSample(
            info=device.info,
            timestamp_s=now,
            state=DeviceState.GPU_LOST,
            error=device.error or LOST_MESSAGE,
            xid_last=device.xid_last,
        )

    def _xid_events(self, now: float) -> list[DeviceEvent]:
        by_uuid = {d.info.uuid: d for d in self._devices}
        out = []
        for handle, xid in self._xids.drain():
            try:
                uuid = text(self._nvml.call("nvmlDeviceGetUUID", handle))
            except DeviceUnusableError:
                uuid = None
            device = by_uuid.get(uuid or "")
            if device is not None:
                device.xid_last = xid
            out.append(
                DeviceEvent(
                    kind=EventKind.XID,
                    timestamp_s=now,
                    uuid=uuid,
                    index=None if device is None else device.info.index,
                    code=xid,
                    message=f"Xid {xid}",
                )
            )
        return out

    def read(self) -> Snapshot:
        now = self._clock()
        if len(self._names) > 4096:  # pids are reused: forget names now and then
            self._names.clear()
        events = self._xid_events(now)
        samples = []
        for device in self._devices:
            if device.state is DeviceState.OK and device.readers is not None:
                try:
                    samples.append(self._read_device(device, device.readers, self._clock()))
                    continue
                except DeviceUnusableError as exc:
                    device.state, device.error = _unusable(exc)
            if device.state is DeviceState.GPU_LOST:
                samples.append(self._lost_sample(device, now, events))
            else:
                samples.append(
                    DeviceSample(
                        info=device.info, timestamp_s=now, state=device.state, error=device.error
                    )
                )
        return validate_snapshot(
            Snapshot(
                timestamp_s=now,
                host=self._host,
                backend=self.name,
                simulated=False,
                samples=tuple(samples),
                events=tuple(events),
            )
        )

    def close(self) -> None:
        for device in self._devices:
            if device.readers is not None:
                device.readers.gpm.close()
                device.readers.mig_gpm.close()
        self._xids.close()
        self._nvml.shutdown()
