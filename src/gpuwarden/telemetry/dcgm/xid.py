"""dcgm-exporter's per-Xid counters → Xid events, keeping which Xid and how many.

``DCGM_EXP_XID_ERRORS_COUNT{xid="N",window_size_in_ms="W"} n``: n Xid N in the last W ms
(dcgm-exporter >= 3.3.5-3.4.0, collector/xid_collector.go; a device without an Xid in the window
gets one series without the ``xid`` label and value 0). ``DCGM_EXP_XID_ERRORS_TOTAL{xid="N"}``:
n since the exporter started (newer releases, xid_total_collector.go). The Xid is the value of
DCGM_FI_DEV_XID_ERRORS DCGM counted, a GPU-level fault: the exporter repeats a GPU's counts on
each of its MIG instance series, so a GPU's count is the largest any of its series shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from gpuwarden.types.telemetry import DeviceEvent, EventKind

WINDOWED = "DCGM_EXP_XID_ERRORS_COUNT"
CUMULATIVE = "DCGM_EXP_XID_ERRORS_TOTAL"
FAMILIES = frozenset({WINDOWED, CUMULATIVE})
# The Xid label: "xid" on both families; "err_code" is what PR #309 put on DCGM_FI_DEV_XID_ERRORS
# and some relabelling configs carry over, so it is read too.
XID_LABELS = ("xid", "err_code")
# Events one reading makes for one Xid of one GPU: a burst (Xid 13 storms) or the first reading
# of a long-running exporter's total must not flood the store; the count itself stays exact in
# the message and in the sample's extra fields.
MAX_EVENTS_PER_XID = 64


@dataclass(frozen=True, slots=True)
class XidCount:
    """How many Xid ``xid`` one GPU had, as one dcgm-exporter family counts them."""

    uuid: str  # the physical GPU's (MIG instance series count for their parent)
    index: int
    xid: int
    count: int
    family: str  # WINDOWED or CUMULATIVE
    window_s: float | None  # WINDOWED: the exporter's window; CUMULATIVE: None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.uuid, self.family, self.xid)

    @property
    def cumulative(self) -> bool:
        return self.family == CUMULATIVE

    def extra_name(self) -> str:
        """The sample's extra field holding this count."""
        return (
            f"dcgm_exp_xid_errors_{'count' if self.family == WINDOWED else 'total'}_xid_{self.xid}"
        )


class ExporterCount(Protocol):
    """A count dcgm-exporter keeps per GPU and kind (an Xid, a clock-event reason), in a window
    or since it started: what tells how many are new since its previous reading."""

    @property
    def key(self) -> tuple[str, str, int]: ...  # (GPU uuid, family, the kind's code)

    @property
    def index(self) -> int: ...  # the GPU's index

    @property
    def count(self) -> int: ...

    @property
    def cumulative(self) -> bool: ...


Count = TypeVar("Count", bound=ExporterCount)


def merged(counts: Iterable[Count]) -> tuple[Count, ...]:
    """One count per GPU, family and code: the largest of the GPU's own series and its MIG
    instances' (the exporter repeats a GPU's counts on each instance series)."""
    best: dict[tuple[str, str, int], Count] = {}
    for count in counts:
        kept = best.get(count.key)
        if kept is None or count.count > kept.count:
            best[count.key] = count
    return tuple(sorted(best.values(), key=lambda c: (c.index, *c.key[1:])))


def new_occurrences(count: ExporterCount, previous: Mapping[tuple[str, str, int], int]) -> int:
    """Occurrences not seen in the previous reading of the same exporter. A windowed count can
    only say how much it rose (a lower bound when old ones left the window meanwhile); a total
    that went down means the exporter restarted and counts again from zero."""
    before = previous.get(count.key)
    if before is None:
        return count.count
    if count.cumulative and count.count < before:
        return count.count
    return max(0, count.count - before)


def xid_events(
    counts: Iterable[XidCount], previous: Mapping[tuple[str, str, int], int], timestamp_s: float
) -> list[DeviceEvent]:
    """One XID event per new occurrence (at most MAX_EVENTS_PER_XID per Xid and reading).
    Both families present: the windowed one speaks (the total says the same Xids again)."""
    counts = tuple(counts)
    windowed_gpus = {c.uuid for c in counts if c.family == WINDOWED}
    events: list[DeviceEvent] = []
    for count in counts:
        if count.family == CUMULATIVE and count.uuid in windowed_gpus:
            continue
        new = new_occurrences(count, previous)
        if count.window_s is not None:
            seen = f"{count.count} in the last {count.window_s:g} s"
        else:
            seen = f"{count.count} since dcgm-exporter started"
        message = f"Xid {count.xid}: {seen} ({count.family})"
        events.extend(
            DeviceEvent(
                kind=EventKind.XID,
                timestamp_s=timestamp_s,
                uuid=count.uuid,
                index=count.index,
                code=count.xid,
                message=message,
            )
            for _ in range(min(new, MAX_EVENTS_PER_XID))
        )
    return events
