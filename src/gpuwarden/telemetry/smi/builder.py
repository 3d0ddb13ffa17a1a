"""Collects the fields one nvidia-smi format found for one device, then builds the DeviceSample.

Every format parser fills a ``DeviceBuilder`` by DeviceSample field name; ``None`` never
overwrites a value, so a parser can try an old and a new spelling of a field in turn. Absolute
temperature limits a format leaves out are derived at ``build`` from the T.Limit margin and the
T.Limit-relative thresholds it printed (health_readings.TLimitThresholds).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import fields, replace
from typing import Any

from gpuwarden.catalog.nvml_enums import DEVICE_HANDLE_UNKNOWN
from gpuwarden.telemetry.health_readings import TLimitThresholds
from gpuwarden.telemetry.smi.cells import (
    LineError,
    SmiOutputError,
    device_fault,
    device_fault_said,
    is_missing,
)
from gpuwarden.telemetry.validate import MAX_DEVICES, U32_MAX, validate_snapshot
from gpuwarden.types.telemetry import (
    DeviceEvent,
    DeviceInfo,
    DeviceSample,
    DeviceState,
    EventKind,
    Snapshot,
    placeholder_uuid,
)

_INFO_FIELDS = frozenset(f.name for f in fields(DeviceInfo))
_SAMPLE_FIELDS = frozenset(f.name for f in fields(DeviceSample))


class DeviceBuilder:
    def __init__(self, index: int) -> None:
        self.default_index = index  # position in the output, when the format prints no index
        self.info: dict[str, Any] = {}
        self.values: dict[str, Any] = {}
        self.extra: dict[str, float] = {}
        self.tlimits = TLimitThresholds()
        self.fault: tuple[DeviceState, str] | None = None

    def note(self, cell: str | None) -> None:
        """Look at a printed value for an NVML error about the whole GPU ("[GPU requires
        reset]"); the first one found is the GPU's state."""
        if self.fault is None:
            self.fault = device_fault(cell)

    def note_each(self, texts: Iterable[str | None]) -> None:
        """``note`` each of ``texts`` until one names such an error (one call for a document's
        every element)."""
        if self.fault is None:
            self.fault = next(filter(None, map(device_fault, texts)), None)

    def note_message(self, message: str) -> None:
        """Look at what nvidia-smi printed in place of the GPU's report for such an error."""
        if self.fault is None:
            self.fault = device_fault_said(message)

    def note_unopened(self, error: str) -> None:
        """nvidia-smi could not open the GPU ("Unable to determine the device handle for GPU
        ...: <NVML error>") and printed no reading of it: the error's state (lost, requires
        reset), else an error state that says it."""
        self.note_message(error)
        if self.fault is None:
            self.fault = (
                DeviceState.ERROR,
                f"{DEVICE_HANDLE_UNKNOWN}: {error} (NVML could not open the GPU; "
                "nvidia-smi printed no reading of it)",
            )

    def set(self, name: str, value: object) -> None:
        """Set a DeviceInfo or DeviceSample field unless ``value`` is None or already set."""
        if value is None:
            return
        if name == "index":
            # identity, not a reading: it cannot be left out, so the input is refused
            device_index(value)
        target = self.info if name in _INFO_FIELDS else self.values
        if name not in _INFO_FIELDS and name not in _SAMPLE_FIELDS:
            raise KeyError(f"no DeviceInfo/DeviceSample field {name!r}")
        target.setdefault(name, value)

    def set_extra(self, name: str, value: float | int | None) -> None:
        if value is not None:
            self.extra.setdefault(name, float(value))

    def get(self, name: str) -> Any:
        return self.info.get(name, self.values.get(name))

    def set_tlimit_thresholds(self, slowdown: float | None, shutdown: float | None) -> None:
        """Thresholds the format printed relative to T.Limit ("GPU Slowdown T.Limit Temp")."""
        self.tlimits = TLimitThresholds(slowdown_celsius=slowdown, shutdown_celsius=shutdown)

    def build(self, timestamp_s: float) -> DeviceSample:
        info = dict(self.info)
        info.setdefault("index", self.default_index)
        info.setdefault("uuid", placeholder_uuid(info["index"]))
        info.setdefault("name", "")
        values = self.tlimits.filled(self.values)  # absolute values the format printed win
        if self.fault is not None:
            values["state"], values["error"] = self.fault
        return DeviceSample(
            info=DeviceInfo(**info), timestamp_s=timestamp_s, extra=dict(self.extra), **values
        )


def device_index(value: object) -> int:
    """``value`` as a GPU's index; ValueError when NVML could not print it (not an unsigned
    32-bit int)."""
    if not (isinstance(value, int) and 0 <= value <= U32_MAX):
        raise ValueError(f"GPU index {value!r} is not a device index (NVML's are unsigned)")
    return value


def read_cell(
    builder: DeviceBuilder,
    name: str,
    cell: str | None,
    convert: Callable[[str | None], object],
) -> None:
    """Convert one printed value into a field; a value that cannot be read names itself
    (``cells.LineError`` without a line: the parser's entry point names the file)."""
    try:
        value = convert(cell)
    except (ValueError, OverflowError) as exc:
        raise LineError(None, f"{name}: {exc}") from None
    builder.set(name, value)


# "License Status" (-q) / <license_status> (XML) of a vGPU guest: NVML's nvmlGridLicenseState_t
# as nvidia-smi and DCGM print it -- "Licensed", "Unlicensed", "Unlicensed (Restricted)",
# "Unlicensed (Unrestricted)" -- a licensed guest adding "(Expiry: 2025-3-19 7:29:4 GMT)"; the
# hypervisor's `nvidia-smi vgpu -q` prints "N/A (Expiry: N/A)" for a guest without a driver.
_LICENSE_STATE = re.compile(r"(?P<state>[^()]*)(?:\((?P<detail>[^()]*)\))?")
_EXPIRY = "expiry"


def to_vgpu_license_status(cell: str | None) -> str | None:
    """ "Unlicensed (Restricted)" → "unlicensed-restricted", "Licensed (Expiry: ...)" →
    "licensed"; N/A → None. The words are kept lower-case and hyphenated (a state a later driver
    adds reads as itself); a cell of any other shape is kept whole the same way."""
    if is_missing(cell):
        return None
    assert cell is not None
    found = _LICENSE_STATE.fullmatch(cell.strip())
    if found is None:
        return _words(cell)
    state, detail = found["state"], found["detail"]
    if is_missing(state):
        return None
    if detail is None or detail.strip().lower().startswith(_EXPIRY) or is_missing(detail):
        return _words(state)
    return f"{_words(state)}-{_words(detail)}"


def _words(text: str) -> str:
    return "-".join(text.lower().split())


def said_on_last_gpu(samples: list[DeviceSample], notes: list[str]) -> tuple[DeviceEvent, ...]:
    """What a reader says of its input as a whole (a cut, a header left out), each note an event
    on the last GPU it read: the one nearest to where the input ends."""
    last = samples[-1]
    return tuple(
        DeviceEvent(
            EventKind.BACKEND_ERROR, last.timestamp_s, last.info.uuid, last.info.index, None, note
        )
        for note in notes
    )


def snapshot(
    samples: list[DeviceSample],
    *,
    timestamp_s: float,
    host: str | None,
    events: tuple[DeviceEvent, ...] = (),
) -> Snapshot:
    """The Snapshot every smi format ends in, its readings checked (telemetry.validate); its
    ``source`` is set by the entry point that knows the input."""
    if len(samples) > MAX_DEVICES:
        raise SmiOutputError(
            None,
            f"more than {MAX_DEVICES} GPUs in one reading: not one node's output",
            hint="pass the output of one node's nvidia-smi",
        )
    return validate_snapshot(
        Snapshot(
            timestamp_s=timestamp_s,
            host=host or "",
            backend="smi",
            simulated=False,
            samples=tuple(samples),
            events=events,
        )
    )


# The readings of a saved series (dmon, a --query-gpu -l log) kept in memory: an hour of 1 s
# readings, as the collector's ring (Collector.max_samples). A longer log is read through and
# its newest readings kept, so memory stays bounded however long the log is.
MAX_SERIES_READINGS = 3600


class Series:
    """The Snapshots of a saved series, the newest MAX_SERIES_READINGS kept."""

    def __init__(self) -> None:
        self.kept: deque[Snapshot] = deque(maxlen=MAX_SERIES_READINGS)
        self.count = 0

    def append(self, reading: Snapshot) -> None:
        self.kept.append(reading)
        self.count += 1

    def readings(self) -> list[Snapshot]:
        """Oldest first; when readings were left out, the newest says how many."""
        out = list(self.kept)
        dropped = self.count - len(out)
        if dropped and out:
            note = DeviceEvent(
                EventKind.BACKEND_ERROR,
                out[-1].timestamp_s,
                None,
                None,
                None,
                f"the series holds {self.count} readings; the newest {len(out)} are kept, the "
                f"oldest {dropped} left out",
            )
            out[-1] = replace(out[-1], events=(*out[-1].events, note))
        return out
