"""One Xid event, several logs: the same kernel record copied into the logs of one node.

nvidia-bug-report.sh greps the NVRM lines of every kernel log it finds (/var/log/kern.log,
/var/log/messages, /var/log/dmesg, ``journalctl -b -0``, ``-b -1`` ...) and a user may hand
doctor a dmesg and a journal of the same boot: each event then stands in several logs, and
counted once per log it would pass NVSentinel's escalation (a fatal Xid five times in a day)
on events that happened twice. A record is known across logs by its Xid, GPU and message with
its calendar second (syslog, journalctl) or its uptime (dmesg, syslog with a dmesg stamp): a
syslog line carries both, so it matches the journal's copy by one and dmesg's by the other.
Counts are multisets: a burst of identical lines within one log stays a burst, and a log holding
more copies of a record than any earlier one adds the difference.
"""

from __future__ import annotations

from collections import Counter

from gpuwarden.health.kernel_log import parse_xid_line
from gpuwarden.types.health import XidOccurrence

# the records remembered across logs (a burst of 800k Xid lines is not remembered whole: the
# logs after it are then read as they are)
MAX_REMEMBERED_RECORDS = 200_000

_Key = tuple[object, ...]


def _keys(record: XidOccurrence) -> tuple[_Key, ...]:
    what = (record.xid, record.pci_bus_id, record.message)
    keys: list[_Key] = []
    if record.timestamp_s is not None:
        keys.append(("calendar", record.timestamp_s, *what))
    if record.uptime_s is not None:
        keys.append(("uptime", record.uptime_s, *what))
    return tuple(keys)


class XidRecordTally:
    """The Xid records of the logs read so far, to read each next log without them."""

    def __init__(self) -> None:
        # per record, the most copies any one earlier log held
        self._most: Counter[_Key] = Counter()

    def unseen(self, text: str, *, year: int | None = None) -> tuple[str, int]:
        """``text`` without the Xid lines whose record an earlier log held (as many copies as
        the earlier log that held most), and how many were left out; then ``text``'s records
        are remembered."""
        kept: list[str] = []
        mine: Counter[_Key] = Counter()
        repeated = 0
        for line in text.splitlines(keepends=True):
            record = parse_xid_line(line, year=year) if "Xid" in line else None
            keys = _keys(record) if record is not None else ()
            mine.update(keys)
            if any(mine[key] <= self._most[key] for key in keys):
                repeated += 1
                continue
            kept.append(line)
        if len(self._most) + len(mine) <= MAX_REMEMBERED_RECORDS:
            self._most |= mine  # the larger count of each record
        return ("".join(kept) if repeated else text), repeated
