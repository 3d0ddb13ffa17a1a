"""The ``replay`` backend: what ``gpuwarden record`` stored, read back one snapshot at a time.

``read()`` returns the next stored snapshot (one per stored snapshot timestamp, oldest first),
with ``backend="replay"`` and the recorded host, ``simulated`` flag and samples. With ``speed``
it first sleeps the recorded gap divided by ``speed`` (1.0 = recorded speed, 10.0 = ten times
faster) through the injected ``sleep``; without it, snapshots come back as fast as asked.

End of data: ``read()`` raises ``ReplayFinished`` (a GpuwardenError, so an unhandled one still
prints a clean message); ``exhausted`` tells it beforehand without reading.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from gpuwarden.errors import GpuwardenError, InputError
from gpuwarden.telemetry.store import Store
from gpuwarden.telemetry.validate import validate_snapshot
from gpuwarden.types.telemetry import DeviceInfo, Snapshot

_PAGE = 256  # snapshots fetched per query: bounded memory for long recordings


class ReplayFinished(GpuwardenError):  # noqa: N818 (the normal end of a replay, not a failure)
    """Every stored snapshot in the range has been read."""

    reference = "replay-finished"


class ReplayEmpty(ReplayFinished):
    """The store (or the range asked) holds no snapshot at all: nothing to show, as for an
    empty capture file, is the input's fault (exit 2), not the end of a replay."""

    reference = "replay-empty"
    exit_code = 2


class ReplayBackend:
    """A Backend over a telemetry store (see the module docstring)."""

    name = "replay"

    def __init__(
        self,
        store: Store,
        *,
        since_s: float | None,
        until_s: float | None,
        speed: float | None,
        sleep: Callable[[float], None],
    ) -> None:
        self._store = store
        self._until_s = until_s
        self._speed = speed
        self._sleep = sleep
        self._buffer: deque[Snapshot] = deque()
        # pages of the range, each read in its own transaction; the next page starts after
        # the last snapshot read, also when several share its millisecond (two writers)
        self._pages = store.snapshot_pages(since_s, until_s, page=_PAGE)
        self._first_since_s = since_s
        self._previous_s: float | None = None
        self._done = False
        self._devices = store.devices(since_s, until_s)
        first = store.snapshots(since_s, until_s, limit=1)
        # Recorded simulation stays labelled as such when replayed.
        self.simulated = bool(first) and first[0].simulated
        self._fill()

    def _fill(self) -> None:
        if self._done or self._buffer:
            return
        page = next(self._pages, None)
        if not page:
            self._done = True
            return
        self._buffer.extend(page)

    @property
    def exhausted(self) -> bool:
        """True when the next ``read()`` would raise ReplayFinished."""
        self._fill()
        return not self._buffer

    def devices(self) -> tuple[DeviceInfo, ...]:
        return self._devices

    def _finished(self) -> ReplayFinished:
        if self._previous_s is not None:
            return ReplayFinished(
                f"replay of {self._store.path} finished: no more stored snapshots",
                hint="record more, or replay another store",
            )
        record_first = "gpuwarden record --db FILE -- CMD"
        if self._first_since_s is not None or self._until_s is not None:
            return ReplayEmpty(
                f"{self._store.path} holds no stored snapshot in the time range asked",
                hint=f"widen the time range, or record first: {record_first}",
            )
        return ReplayEmpty(
            f"{self._store.path} holds no stored snapshot",
            hint=f"record into it first: {record_first} "
            "(a run stopped by a full disk or a crash stores none)",
        )

    def latest(self) -> Snapshot:
        """The newest stored snapshot in the range (what `snapshot` shows of a recording)."""
        newest = self._store.snapshots(self._first_since_s, self._until_s, limit=1, newest=True)
        if not newest:
            raise self._finished()
        return replace(
            validate_snapshot(newest[0]), backend=self.name, source=str(self._store.path)
        )

    def read(self) -> Snapshot:
        self._fill()
        if not self._buffer:
            raise self._finished()
        # what the other backends check where a reading leaves them: a stored inf or an impossible
        # value (an old file, a hand edit) is null, with an event
        snapshot = validate_snapshot(self._buffer.popleft())
        if self._speed is not None and self._previous_s is not None:
            gap = snapshot.timestamp_s - self._previous_s
            if gap > 0:
                self._sleep(gap / self._speed)
        self._previous_s = snapshot.timestamp_s
        return replace(snapshot, backend=self.name, source=str(self._store.path))

    def close(self) -> None:
        self._store.close()


def open_replay(
    db_path: str | Path,
    *,
    since_s: float | None = None,
    until_s: float | None = None,
    speed: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ReplayBackend:
    """A replay backend over the store at ``db_path`` (opened read-only)."""
    if speed is not None and not speed > 0:
        raise InputError(
            f"replay speed must be positive, got {speed}",
            reference="invalid-replay-speed",
            hint="use 1 for recorded speed, 10 for ten times faster",
        )
    store = Store.open(db_path, readonly=True)
    try:
        return ReplayBackend(store, since_s=since_s, until_s=until_s, speed=speed, sleep=sleep)
    except BaseException:
        store.close()
        raise
