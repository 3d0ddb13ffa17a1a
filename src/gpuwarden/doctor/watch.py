"""`watch`'s engine: a sliding window of snapshots judged by the health rules, frame by frame.

Findings are keyed by (code, device): a key present in this frame and not in the last one is
*new*; one that disappears is *cleared* at this frame's time. The window is bounded in time and in
snapshots, so a watch that runs for days holds the same memory as one that runs for a minute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuwarden.health.devices import MASKED_UUID
from gpuwarden.health.evaluate import evaluate_window, finding_order
from gpuwarden.health.recent import RecentSnapshots
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS, Thresholds
from gpuwarden.types.health import Check, Finding
from gpuwarden.types.telemetry import Snapshot

FindingKey = tuple[str, str]


def finding_key(finding: Finding) -> FindingKey:
    """What makes two findings of consecutive frames the same one: code and device."""
    device = finding.device
    if device is None:
        return (finding.code, "node")
    uuid = device.uuid if device.uuid != MASKED_UUID else None  # shared captures mask them all
    who = uuid or device.pci_bus_id or str(device.index)
    if device.gpu_instance_id is not None:
        who = f"{who}/gi{device.gpu_instance_id}"
    return (finding.code, who)


@dataclass(frozen=True, slots=True)
class ActiveFinding:
    finding: Finding
    first_seen_s: float  # the frame time it first appeared (this watch's clock)
    new: bool  # appeared in this frame


@dataclass(frozen=True, slots=True)
class ClearedFinding:
    finding: Finding  # as it last read
    first_seen_s: float
    cleared_s: float


@dataclass(frozen=True, slots=True)
class WatchFrame:
    """One refresh of `watch`: the newest reading and the verdict over the window."""

    snapshot: Snapshot
    window_s: float  # time spanned by the snapshots judged
    window_snapshots: int
    findings: tuple[ActiveFinding, ...]  # most severe first
    cleared: tuple[ClearedFinding, ...]  # findings that ended with this frame
    checks: tuple[Check, ...]


Judge = Callable[[Sequence[Snapshot]], tuple[tuple[Finding, ...], tuple[Check, ...]]]
DEFAULT_WINDOW_S = 60.0  # the history the windowed rules judge, unless told


def health_judge(thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Judge:
    """The health rules over a window of snapshots, as `watch` and `record` judge them."""

    def judge(snapshots: Sequence[Snapshot]) -> tuple[tuple[Finding, ...], tuple[Check, ...]]:
        result = evaluate_window(snapshots, thresholds=thresholds)
        return result.findings, result.checks

    return judge


class Watcher:
    """Feed it snapshots in time order; each ``update`` returns the frame to show."""

    def __init__(self, judge: Judge, *, window_s: float) -> None:
        self._judge = judge
        self._recent = RecentSnapshots(window_s)
        self._active: dict[FindingKey, ActiveFinding] = {}

    def update(self, snapshot: Snapshot) -> WatchFrame:
        self._recent.add(snapshot)
        newest = snapshot.timestamp_s
        # A failed read (backend error: no samples) says nothing about the GPUs: keep the last
        # verdict instead of clearing every finding for one missed reading.
        if not snapshot.samples and self._active:
            return self._frame(snapshot, tuple(self._active.values()), (), ())
        findings, checks = self._judge(self._recent.snapshots())
        seen: dict[FindingKey, ActiveFinding] = {}
        for finding in findings:
            key = finding_key(finding)
            if key in seen:
                continue
            before = self._active.get(key)
            if before is None:
                seen[key] = ActiveFinding(finding, newest, new=True)
            else:
                seen[key] = ActiveFinding(finding, before.first_seen_s, new=False)
        cleared = tuple(
            ClearedFinding(old.finding, old.first_seen_s, newest)
            for key, old in self._active.items()
            if key not in seen
        )
        self._active = seen
        return self._frame(snapshot, tuple(seen.values()), cleared, checks)

    def _frame(
        self,
        snapshot: Snapshot,
        active: tuple[ActiveFinding, ...],
        cleared: tuple[ClearedFinding, ...],
        checks: tuple[Check, ...],
    ) -> WatchFrame:
        ordered = tuple(sorted(active, key=lambda a: finding_order(a.finding)))
        return WatchFrame(
            snapshot=snapshot,
            window_s=self._recent.span_s(),
            window_snapshots=len(self._recent),
            findings=ordered,
            cleared=cleared,
            checks=checks,
        )


@dataclass(frozen=True, slots=True)
class FindingEpisode:
    """A finding from the frame it appeared in to the frame it cleared (None: still active when
    the readings ended)."""

    finding: Finding  # as it last read
    first_seen_s: float
    cleared_s: float | None


# A finding that comes and goes every few readings would otherwise grow the log with the run
MAX_EPISODES = 200


class EpisodeLog:
    """What a run's frames found, each finding once per time it was active: ``record``'s
    verdict on the whole run, where ``watch`` shows the one frame."""

    def __init__(self) -> None:
        self._closed: list[FindingEpisode] = []
        self._active: tuple[ActiveFinding, ...] = ()
        self.dropped = 0  # episodes past MAX_EPISODES, counted

    def add(self, frame: WatchFrame) -> None:
        for cleared in frame.cleared:
            episode = FindingEpisode(cleared.finding, cleared.first_seen_s, cleared.cleared_s)
            if len(self._closed) < MAX_EPISODES:
                self._closed.append(episode)
            else:
                self.dropped += 1
        self._active = frame.findings

    def episodes(self) -> tuple[FindingEpisode, ...]:
        """Every episode, most severe first, then as they began."""
        still = [FindingEpisode(a.finding, a.first_seen_s, None) for a in self._active]
        return tuple(
            sorted(
                [*self._closed, *still],
                key=lambda e: (finding_order(e.finding)[0], e.first_seen_s),
            )
        )
