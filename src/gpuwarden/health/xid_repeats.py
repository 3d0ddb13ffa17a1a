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

The scanner asks the tally about each Xid record as it reads it (``KernelLogScanner``'s
``is_copy``): a log is read once, its records' keys taken from that one reading.
"""

from __future__ import annotations

from collections import Counter

from gpuwarden.health.kernel_log import KernelLogScanner, XidRecord
from gpuwarden.types.health import KernelLogReport

# the records remembered across logs (a burst of 800k Xid lines is not remembered whole: the
# logs after it are then read as they are)
MAX_REMEMBERED_RECORDS = 200_000

_Key = tuple[object, ...]


def _keys(record: XidRecord) -> tuple[_Key, ...]:
    xid, bus, message, timestamp_s, uptime_s = record
    keys: list[_Key] = []
    if timestamp_s is not None:
        keys.append(("calendar", timestamp_s, xid, bus, message))
    if uptime_s is not None:
        keys.append(("uptime", uptime_s, xid, bus, message))
    return tuple(keys)


class _OneLog:
    """The records of the log being read, against the most copies any earlier log held."""

    def __init__(self, most: Counter[_Key]) -> None:
        self._most = most
        self.mine: Counter[_Key] = Counter()
        self.copied_lines = 0  # a line may hold several records: it counts once
        self._last_copied = 0  # line numbers start at 1

    def is_copy(self, number: int, record: XidRecord) -> bool:
        keys = _keys(record)
        self.mine.update(keys)
        if not any(self.mine[key] <= self._most[key] for key in keys):
            return False
        if number != self._last_copied:
            self.copied_lines += 1
            self._last_copied = number
        return True


class XidRecordTally:
    """The Xid records of the logs read so far, to read each next log without them."""

    def __init__(self) -> None:
        # per record, the most copies any one earlier log held
        self._most: Counter[_Key] = Counter()

    def scan(
        self, text: str, *, year: int | None = None, written_s: float | None = None
    ) -> tuple[KernelLogReport, int]:
        """The report of ``text`` (``scan_kernel_log``) without the Xid records an earlier log
        held (as many copies as the earlier log that held most), and how many lines were left
        out; then ``text``'s records are remembered. Line numbers are ``text``'s own."""
        log = _OneLog(self._most)
        scanner = KernelLogScanner(year=year, is_copy=log.is_copy, written_s=written_s)
        scanner.feed(text)
        report = scanner.finish()
        if len(self._most) + len(log.mine) <= MAX_REMEMBERED_RECORDS:
            self._most |= log.mine  # the larger count of each record
        return report, log.copied_lines
