"""The recent readings the windowed rules judge, for anything that reads GPUs over time (`watch`,
the exporter): bounded in time and in count, so a process that runs for months holds what one
that runs for a minute holds."""

from __future__ import annotations

from collections import deque

from gpuwarden.types.telemetry import Snapshot

# A window of readings at the fastest interval the verbs allow (0.1 s) over the longest window
# (1 h) would be 36,000 snapshots; the windowed rules need a few hundred at most to see a trend.
MAX_WINDOW_SNAPSHOTS = 600


class RecentSnapshots:
    """The snapshots of the last ``window_s`` seconds (at least the newest one), oldest first."""

    def __init__(self, window_s: float, *, max_snapshots: int = MAX_WINDOW_SNAPSHOTS) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self.window_s = window_s
        self._snapshots: deque[Snapshot] = deque(maxlen=max_snapshots)

    def add(self, snapshot: Snapshot) -> None:
        self._snapshots.append(snapshot)
        newest = snapshot.timestamp_s
        while len(self._snapshots) > 1 and newest - self._snapshots[0].timestamp_s > self.window_s:
            self._snapshots.popleft()

    def snapshots(self) -> tuple[Snapshot, ...]:
        return tuple(self._snapshots)

    def span_s(self) -> float:
        """Seconds from the oldest reading kept to the newest."""
        if not self._snapshots:
            return 0.0
        return self._snapshots[-1].timestamp_s - self._snapshots[0].timestamp_s

    def __len__(self) -> int:
        return len(self._snapshots)
