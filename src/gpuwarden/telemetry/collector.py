"""Sample a backend on an interval and turn counters into rates.

Rates come from two readings of one device (by UUID): energy → average power, violation
nanoseconds → throttled share of the time, NVLink (and PCIe, where a backend gives only totals)
bytes → bytes/s. The first reading and a counter that went backwards (driver reload, reset) give
``None``, never a guess. A device that vanishes from the backend becomes a ``gpu-lost`` sample
and event while the others keep reporting. Memory is bounded: a ring of the last
``max_samples`` readings per device.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Iterable

from gpuwarden.errors import GpuwardenError
from gpuwarden.telemetry.backend import Backend
from gpuwarden.telemetry.validate import validate_sample
from gpuwarden.types.telemetry import (
    DeviceEvent,
    DeviceSample,
    DeviceState,
    EventKind,
    NvLinkSample,
    Snapshot,
)

# Backends that report PCIe only as byte counters put them in ``extra`` under these names.
PCIE_TX_TOTAL = "pcie_tx_bytes_total"
PCIE_RX_TOTAL = "pcie_rx_bytes_total"
_MAX_DEVICES = 1024  # bound on distinct UUIDs remembered (MIG reconfiguration churns them)
_STOP_CHECK_S = 1.0  # longest sleep between two looks at whether the loop should stop


def counter_rate(before: float | None, after: float | None, seconds: float) -> float | None:
    """Increase per second of a counter; None without two readings, time, or across a reset."""
    if before is None or after is None or seconds <= 0 or after < before:
        return None
    return (after - before) / seconds


def _share(before: int | None, after: int | None, seconds: float) -> float | None:
    rate = counter_rate(before, after, seconds)
    return None if rate is None else min(1.0, rate / 1e9)


def _link_total(
    before: Iterable[NvLinkSample], after: Iterable[NvLinkSample], attr: str
) -> tuple[int, int] | None:
    """Sum of one counter over the links both readings report; None if any went backwards."""
    old: dict[int, int | None] = {link.link: getattr(link, attr) for link in before}
    total_before = total_after = 0
    paired = False
    for link in after:
        a, b = old.get(link.link), getattr(link, attr)
        if a is None or b is None:
            continue
        if b < a:
            return None
        total_before, total_after, paired = total_before + a, total_after + b, True
    return (total_before, total_after) if paired else None


def _nvlink_rate(prev: DeviceSample, cur: DeviceSample, attr: str, seconds: float) -> float | None:
    if prev.nvlinks is None or cur.nvlinks is None:
        return None
    totals = _link_total(prev.nvlinks, cur.nvlinks, attr)
    return None if totals is None else counter_rate(totals[0], totals[1], seconds)


def derive_rates(prev: DeviceSample | None, cur: DeviceSample) -> DeviceSample:
    """``cur`` with the rate fields the backend left empty filled from ``prev``."""
    if prev is None or cur.state is not DeviceState.OK or prev.state is not DeviceState.OK:
        return cur
    dt = cur.timestamp_s - prev.timestamp_s
    changes: dict[str, float | None] = {}

    def fill(name: str, value: float | None) -> None:
        if getattr(cur, name) is None and value is not None:
            changes[name] = value

    fill(
        "power_average_watts",
        counter_rate(prev.energy_consumed_joules, cur.energy_consumed_joules, dt),
    )
    fill(
        "power_throttled_ratio",
        _share(prev.power_violation_ns_total, cur.power_violation_ns_total, dt),
    )
    fill(
        "thermal_throttled_ratio",
        _share(prev.thermal_violation_ns_total, cur.thermal_violation_ns_total, dt),
    )
    fill("nvlink_tx_bytes_per_second", _nvlink_rate(prev, cur, "tx_bytes_total", dt))
    fill("nvlink_rx_bytes_per_second", _nvlink_rate(prev, cur, "rx_bytes_total", dt))
    for total, field in ((PCIE_TX_TOTAL, "pcie_tx"), (PCIE_RX_TOTAL, "pcie_rx")):
        fill(
            f"{field}_bytes_per_second",
            counter_rate(prev.extra.get(total), cur.extra.get(total), dt),
        )
    return dataclasses.replace(cur, **changes) if changes else cur  # type: ignore[arg-type]


class Collector:
    """Reads ``backend`` every ``interval_s`` seconds of ``clock`` (waiting with ``sleep``)."""

    def __init__(
        self,
        backend: Backend,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        max_samples: int = 3600,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.backend = backend
        self.interval_s = interval_s
        self._clock = clock
        self._last_poll_at: float | None = None  # clock() when the latest poll began
        self._sleep = sleep
        self._wall_clock = wall_clock  # timestamps of snapshots the collector makes itself
        self.max_samples = max(1, max_samples)
        self._last: dict[str, DeviceSample] = {}  # last reading with state OK, per UUID
        self._lost: set[str] = set()  # UUIDs already reported lost
        self._rings: dict[str, deque[DeviceSample]] = {}
        self.events: deque[DeviceEvent] = deque(maxlen=self.max_samples)
        self.polls = 0
        self._host = "unknown"

    # --- one reading ----------------------------------------------------------------------------

    def poll(self) -> Snapshot:
        """One reading with rates filled. A failure of the first read propagates; later ones
        become a ``backend-error`` event and an empty snapshot, and collection goes on."""
        first = self.polls == 0
        self.polls += 1
        self._last_poll_at = self._clock()
        try:
            raw = self.backend.read()
        except GpuwardenError as exc:
            if first:
                raise
            return self._failed(f"{exc.reference}: {exc.message}")
        except Exception as exc:  # a backend bug must not end a long recording
            if first:
                raise
            return self._failed(f"{type(exc).__name__}: {exc}")
        self._host = raw.host
        samples: list[DeviceSample] = []
        events = list(raw.events)
        seen: set[str] = set()
        for sample in raw.samples:
            uuid = sample.info.uuid
            seen.add(uuid)
            derived = derive_rates(self._last.get(uuid), sample)
            if derived is not sample:  # the rates pass the backends' range check too
                derived, said = validate_sample(derived)
                events.extend(said)
            if sample.state is DeviceState.OK:
                self._last[uuid] = derived
                self._lost.discard(uuid)
            elif sample.state is DeviceState.GPU_LOST and uuid not in self._lost:
                self._lost.add(uuid)
                if not any(e.kind is EventKind.GPU_LOST and e.uuid == uuid for e in events):
                    events.append(self._lost_event(sample, "the backend reports the GPU lost"))
            samples.append(derived)
        for uuid, last in list(self._last.items()):
            if uuid in seen:
                continue
            if last.info.mig_parent_uuid is not None:
                # A MIG instance that disappears was destroyed or re-laid out (the instances of
                # a GPU change with its MIG layout): forgotten, not lost. Its GPU's own device
                # is what falls off the bus.
                del self._last[uuid]
                continue
            gone = DeviceSample(
                info=last.info,
                timestamp_s=raw.timestamp_s,
                state=DeviceState.GPU_LOST,
                error="the device is no longer reported by the backend",
            )
            if uuid not in self._lost:
                self._lost.add(uuid)
                events.append(self._lost_event(gone, gone.error or ""))
            samples.append(gone)
        snapshot = dataclasses.replace(raw, samples=tuple(samples), events=tuple(events))
        self._remember(snapshot)
        return snapshot

    def _lost_event(self, sample: DeviceSample, message: str) -> DeviceEvent:
        info = sample.info
        return DeviceEvent(
            EventKind.GPU_LOST, sample.timestamp_s, info.uuid, info.index, None, message
        )

    def _failed(self, message: str) -> Snapshot:
        now = self._wall_clock()
        event = DeviceEvent(EventKind.BACKEND_ERROR, now, None, None, None, message)
        self.events.append(event)
        return Snapshot(
            timestamp_s=now,
            host=self._host,
            backend=self.backend.name,
            simulated=self.backend.simulated,
            samples=(),
            events=(event,),
        )

    def _remember(self, snapshot: Snapshot) -> None:
        for sample in snapshot.samples:
            uuid = sample.info.uuid
            ring = self._rings.get(uuid)
            if ring is None:
                if len(self._rings) >= _MAX_DEVICES:
                    self._rings.pop(next(iter(self._rings)))
                ring = self._rings[uuid] = deque(maxlen=self.max_samples)
            ring.append(sample)
        if len(self._last) > _MAX_DEVICES:
            for uuid in list(self._last)[: len(self._last) - _MAX_DEVICES]:
                del self._last[uuid]
        self.events.extend(snapshot.events)

    def history(self, uuid: str) -> tuple[DeviceSample, ...]:
        """The last ``max_samples`` readings of one device, oldest first."""
        return tuple(self._rings.get(uuid, ()))

    def uuids(self) -> tuple[str, ...]:
        return tuple(self._rings)

    # --- a loop ---------------------------------------------------------------------------------

    def _wait(self, seconds: float, until: Callable[[], bool]) -> None:
        """Sleep ``seconds`` in slices of at most _STOP_CHECK_S, asking ``until()`` between
        them: a job that ends early in a long interval (`record --interval 600 -- job`) ends the
        recording then, not up to an interval later. A wait within one slice is one sleep."""
        left = seconds
        while left > 0:
            step = min(left, _STOP_CHECK_S)
            self._sleep(step)
            left -= step
            if left > 0 and until():
                return

    def run(self, until: Callable[[], bool], sink: Callable[[Snapshot], None]) -> int:
        """Poll on the interval grid until ``until()`` is true; each snapshot goes to ``sink``.
        Returns the number of polls. A late poll skips the missed ticks instead of bursting.
        After an earlier ``poll()`` (a start-up check) the grid continues from it: no second
        reading a few ms after the first, whose rates would rest on a tiny interval."""
        count = 0
        if self._last_poll_at is None:
            start, tick = self._clock(), 0
        else:
            start, tick = self._last_poll_at, 1
            wait = start + self.interval_s - self._clock()
            if wait > 0 and not until():
                self._wait(wait, until)
        while not until():
            sink(self.poll())
            count += 1
            now = self._clock()
            tick = max(tick + 1, int((now - start) / self.interval_s) + 1)
            wait = start + tick * self.interval_s - now
            if wait > 0 and not until():
                self._wait(wait, until)
        return count
