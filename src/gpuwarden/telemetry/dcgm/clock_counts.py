"""dcgm-exporter's per-reason clock-event counters → CLOCK_EVENT events, keeping each reason.

``DCGM_EXP_CLOCK_EVENTS_COUNT{clock_event="R",window_size_in_ms="W"} n``: n times reason R was
set in DCGM_FI_DEV_CLOCKS_EVENT_REASONS in the last W ms (dcgm-exporter >= 3.3.5-3.4.0, PR 261;
PR 254 introduced it as ``DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT`` with a ``throttle_reason``
label). ``DCGM_EXP_CLOCK_EVENTS_TOTAL{clock_event="R"}``: n since the exporter started (newer
releases). One series per reason: without the reason kept, the page's counts collapse into one
number. The bitmask itself says what is active *now*; these say what was, so they become
events (and numbers of the GPU's sample), never the sample's current clock_event_reasons.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuwarden.telemetry.clock_events import CLOCK_EVENT_BITS
from gpuwarden.telemetry.dcgm.xid import new_occurrences
from gpuwarden.types.telemetry import DeviceEvent, EventKind

WINDOWED = "DCGM_EXP_CLOCK_EVENTS_COUNT"
WINDOWED_OLD = "DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT"
CUMULATIVE = "DCGM_EXP_CLOCK_EVENTS_TOTAL"
FAMILIES = frozenset({WINDOWED, WINDOWED_OLD, CUMULATIVE})
REASON_LABELS = ("clock_event", "throttle_reason")
# dcgm-exporter's reason labels (its clocksThrottleReasonToString, after dcgmi's
# CommandLineParser.cpp) → the NVML bit; the name DeviceSample uses comes from CLOCK_EVENT_BITS.
EXPORTER_REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "clocks_setting": 0x2,
    "power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "hw_power_brake": 0x80,
    "display_clocks": 0x100,
}
_NAME_OF_BIT = dict(CLOCK_EVENT_BITS)
# Reasons that say nothing is wrong (nvml.h: the GPU is idle; the user set application or display
# clocks): counted in the sample's extra numbers, but no event, so the event list stays about the
# clocks the GPU was made to lower (power cap, slowdowns, sync boost).
BENIGN_BITS = frozenset({0x1, 0x2, 0x100})


@dataclass(frozen=True, slots=True)
class ClockEventCount:
    """How often one clock-event reason was set on one GPU, as one exporter family counts."""

    uuid: str
    index: int
    bit: int  # the NVML clock-event bit
    count: int
    family: str
    window_s: float | None  # a windowed family's window; None for the total

    @property
    def reason(self) -> str:
        return _NAME_OF_BIT[self.bit]

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.uuid, self.family, self.bit)

    @property
    def cumulative(self) -> bool:
        return self.family == CUMULATIVE

    def extra_name(self) -> str:
        """The sample's extra field holding this count."""
        kind = "total" if self.cumulative else "count"
        return f"dcgm_exp_clock_events_{kind}_{self.reason}"


def reason_bit(labels: Mapping[str, str]) -> int | None:
    """The NVML bit a series' reason label names; None for a label the exporter does not use
    (a newer reason is skipped, not guessed)."""
    label = next((labels[n] for n in REASON_LABELS if labels.get(n)), None)
    return None if label is None else EXPORTER_REASON_BITS.get(label)


def clock_events(
    counts: Iterable[ClockEventCount],
    previous: Mapping[tuple[str, str, int], int],
    timestamp_s: float,
) -> list[DeviceEvent]:
    """One CLOCK_EVENT per GPU and (not benign) reason that rose since the previous reading (a
    clock event is a stretch of time, not a discrete fault: the count is in the message). A
    windowed family speaks for a GPU that has one; its total then repeats it."""
    counts = tuple(counts)
    windowed_gpus = {c.uuid for c in counts if not c.cumulative}
    events: list[DeviceEvent] = []
    for count in counts:
        if count.bit in BENIGN_BITS or (count.cumulative and count.uuid in windowed_gpus):
            continue
        if not new_occurrences(count, previous):
            continue
        if count.window_s is not None:
            seen = f"{count.count} time(s) in the last {count.window_s:g} s"
        else:
            seen = f"{count.count} time(s) since dcgm-exporter started"
        events.append(
            DeviceEvent(
                kind=EventKind.CLOCK_EVENT,
                timestamp_s=timestamp_s,
                uuid=count.uuid,
                index=count.index,
                code=count.bit,
                message=f"clock event {count.reason}: {seen} ({count.family})",
            )
        )
    return events
