"""Folding Xid occurrences into one ``XidGroup`` per (GPU, Xid), and the escalation rules.

A builder keeps, per group, a bounded amount of state (counts, first/last, the first few lines,
a few distinct payload decodes, and incident trackers of fixed size), so a burst of a million lines
costs a few groups. The same builders classify Xids that come from kernel logs and from NVML /
dcgm-exporter events.

Escalation (after NVIDIA/NVSentinel's health-events analyzer and NVIDIA's Xid workflows):

* a fatal (critical) Xid in ``FATAL_REPEAT_COUNT`` incidents within ``FATAL_REPEAT_WINDOW_S`` on
  one GPU → CONTACT_SUPPORT, an RMA candidate (NVSentinel's repeated-fatal-Xid rule: 5 in 24 h);
* Xid 13 / 31 in several incidents on one GPU → RUN_DCGMEUD (dcgmi diag -r 3, then field
  diagnostics); for 13 only when the same GPC/TPC is hit again (WORKFLOW_XID_13), other
  locations point at the application;
* the same Xid 13 / 31 on different GPUs → CHECK_APP/CUDA: the application, not the hardware
  (WORKFLOW_XID_13 / WORKFLOW_XID_31).

An incident is a run of occurrences with less than ``INCIDENT_GAP_S`` between neighbours: the
driver prints one fault as a burst of lines (15 Xid 13 lines within 2 ms for one kernel), and a
burst is one event, not fifteen. Without timestamps or uptimes the rules count lines and say
"time unknown".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpuwarden.catalog.xid import UNKNOWN_XID_SEVERITY, xid_info
from gpuwarden.health.xid_decode import PAYLOAD_XIDS, PayloadDecode, decode_payload, sm_location
from gpuwarden.types.health import Severity, XidGroup

# The messages that say a GPU stopped answering, and how much of the line names its bus: "GPU at
# 0000:01:00.0 has fallen off the bus." / "GPU 0000:3b:00.0: GPU is lost, ...". The scanner
# reads them; a GPU-lost group without them was read from the driver's status alone.
GPU_LOST_MARKERS = ("fallen off the bus", "GPU is lost")
# Bounds on what one group keeps (memory is bounded by groups, not lines).
MAX_LINES_PER_GROUP = 5
MAX_LINE_CHARS = 2000  # a longer "line" is not a kernel message; keep its start
MAX_DECODES_PER_GROUP = 4
MAX_MESSAGES_REMEMBERED = 64  # distinct messages of a burst whose decode is remembered
MAX_SM_LOCATIONS = 256  # (GPC, TPC) pairs tracked for Xid 13; a GPU has fewer
# Rule knobs. Sources: NVSentinel health-events-analyzer (repeated fatal Xid: 5 in 24 h);
# NVIDIA Xid catalog WORKFLOW_XID_13 / WORKFLOW_XID_31 ("repeat" = more than one incident).
FATAL_REPEAT_COUNT = 5
FATAL_REPEAT_WINDOW_S = 24 * 3600.0
REPEAT_INCIDENTS = 2
INCIDENT_GAP_S = 60.0  # ours: lines of one fault arrive within seconds (gpud fixtures)
APP_WORKFLOW_XIDS = frozenset({13, 31})
SM_LOCATED_XID = 13  # its message names the GPC/TPC/SM
_GAP = INCIDENT_GAP_S
SYMPATHETIC_XID = 45  # "Preemptive cleanup, due to previous errors"
RECOVERY_XID = 154  # "GPU recovery action changed": its latest message is the state now
INFORMATIONAL_XIDS = frozenset({45, 154})  # never a reason to call another Xid "not solo"

# The first word of an escalation: NVIDIA's bucket for what to do next.
ESCALATE_SUPPORT = "CONTACT_SUPPORT"
ESCALATE_DIAGNOSTICS = "RUN_DCGMEUD"
ESCALATE_APPLICATION = "CHECK_APP/CUDA"
TIME_UNKNOWN = "time unknown"
_SEP = " — "


def escalation_bucket(group: XidGroup) -> str | None:
    """The bucket an escalation names (``ESCALATE_*``), or None when there is none."""
    if group.escalation is None:
        return None
    return group.escalation.split(_SEP, 1)[0]


def escalation_advice(group: XidGroup) -> str | None:
    """What the escalation says, without its bucket."""
    if group.escalation is None:
        return None
    return group.escalation.split(_SEP, 1)[-1]


def escalation_time_unknown(group: XidGroup) -> bool:
    """True when the escalation rests on lines that carry no time (counted, not timed)."""
    untimed = group.first_seen_s is None and group.first_uptime_s is None
    return group.escalation is not None and untimed


@dataclass(slots=True)
class Incidents:
    """Incidents along one clock (calendar or uptime), in O(1) memory."""

    last: float | None = None
    count: int = 0
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=FATAL_REPEAT_COUNT))
    window: tuple[float, float] | None = None  # first FATAL_REPEAT_COUNT incidents in a window
    # Xid 13: incident index at which each (GPC, TPC) was first hit, and those hit again later
    first_hit: dict[tuple[int, int], int] = field(default_factory=dict)
    repeated: list[tuple[int, int]] = field(default_factory=list)

    def add(self, t: float, location: tuple[int, int] | None) -> None:
        last = self.last
        self.last = t
        if last is not None and 0.0 <= t - last <= INCIDENT_GAP_S:  # the same burst: most lines
            if location is not None:
                self._locate(location)
            return
        backwards = last is not None and t < last  # a reboot (uptime) or a clock step
        if backwards:
            self.recent.clear()
        self.count += 1
        self.recent.append(t)
        full = len(self.recent) == FATAL_REPEAT_COUNT
        if self.window is None and full and t - self.recent[0] <= FATAL_REPEAT_WINDOW_S:
            self.window = (self.recent[0], t)
        if location is not None:
            self._locate(location)

    def _locate(self, location: tuple[int, int]) -> None:
        seen = self.first_hit.get(location)
        if seen is None:
            if len(self.first_hit) < MAX_SM_LOCATIONS:
                self.first_hit[location] = self.count
        elif seen < self.count and location not in self.repeated:
            self.repeated.append(location)


def _keep(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"


class XidGroupBuilder:
    """Every occurrence of one Xid on one GPU, folded as they come (in log order)."""

    __slots__ = (
        "_decodes",
        "_last_stamp",
        "_messages",
        "_stamp_runs",
        "_stamped",
        "_timed",
        "_uptimed",
        "calendar",
        "count",
        "first_line",
        "first_seen_s",
        "first_uptime_s",
        "last_decode",
        "last_line",
        "last_seen_s",
        "last_uptime_s",
        "lines",
        "lost_by_status",
        "pci_bus_id",
        "reads_message",
        "sm_locations",
        "undecoded",
        "uptime",
        "uuid",
        "worst_decode",
        "xid",
    )

    def __init__(self, xid: int, pci_bus_id: str | None, uuid: str | None) -> None:
        self.xid = xid
        self.pci_bus_id = pci_bus_id
        self.uuid = uuid
        self.count = 0
        self.first_line = 0
        self.last_line = 0
        self.first_seen_s: float | None = None
        self.last_seen_s: float | None = None
        self.first_uptime_s: float | None = None
        self.last_uptime_s: float | None = None
        self.lines: list[str] = []
        # the loss is said only by a failed call's status (kernel_log's ``_lost_by_status``)
        self.lost_by_status = False
        self._decodes: dict[tuple[tuple[str, str], ...], None] = {}
        self.worst_decode: PayloadDecode | None = None
        self.last_decode: PayloadDecode | None = None
        self.undecoded = 0  # occurrences whose documented payload did not decode
        self._timed = 0
        self._uptimed = 0
        # the prefix text each line printed before the message, for logs whose stamps cannot be
        # read (a locale's month name, no year): runs of one stamp are one second
        self._last_stamp: str | None = None
        self._stamp_runs = 0
        self._stamped = 0
        self.calendar = Incidents()
        self.uptime = Incidents()
        self.sm_locations: list[tuple[int, int, int]] = []
        self.reads_message = xid in PAYLOAD_XIDS or xid == SM_LOCATED_XID
        self._messages: dict[str, tuple[tuple[int, int] | None, PayloadDecode | None]] = {}

    def add(
        self,
        line_number: int,
        line: str | None,
        timestamp_s: float | None,
        uptime_s: float | None,
        message: str,
        uuid: str | None = None,
        stamp: str | None = None,
    ) -> None:
        """One occurrence: its line (None for an event), times, and the text after the Xid
        (read only when ``reads_message``: callers may pass "" otherwise). ``stamp``: the
        prefix the line printed before the driver's message ("" or None: none)."""
        self.count += 1
        if stamp:
            self._stamped += 1
            if stamp != self._last_stamp:
                self._stamp_runs += 1
                self._last_stamp = stamp
        if self.count == 1:
            self.first_line = line_number
            self.uuid = self.uuid or uuid
        self.last_line = line_number
        if line is not None and len(self.lines) < MAX_LINES_PER_GROUP:
            self.lines.append(_keep(line))
        location = None
        if self.reads_message:
            read = self._messages.get(message) or self._read(message)
            location = read[0]
            if read[1] is not None:
                self.last_decode = read[1]
        clock: Incidents | None = None
        if timestamp_s is not None:
            self._timed += 1
            if self.first_seen_s is None:
                self.first_seen_s = timestamp_s
            self.last_seen_s = timestamp_s
            clock, t = self.calendar, timestamp_s
        if uptime_s is not None:
            self._uptimed += 1
            if self.first_uptime_s is None:
                self.first_uptime_s = uptime_s
            self.last_uptime_s = uptime_s
            if not self._timed:  # calendar time, once seen, is the clock the rules use
                clock, t = self.uptime, uptime_s
        if clock is not None:
            last = clock.last
            if location is None and last is not None and 0.0 <= t - last <= _GAP:
                clock.last = t  # the same incident (Incidents.add's fast path): most lines
            else:
                clock.add(t, location)

    def _read(self, message: str) -> tuple[tuple[int, int] | None, PayloadDecode | None]:
        """(GPC, TPC) and payload decode of a message not seen lately; a burst repeats a few
        messages, so they are remembered (a bounded number of them)."""
        decode = decode_payload(self.xid, message)
        if decode is not None:
            self._record(decode)
        location = self._location(message) if self.xid == SM_LOCATED_XID else None
        if len(self._messages) >= MAX_MESSAGES_REMEMBERED:
            self._messages.clear()
        read = self._messages[message] = (location, decode)
        return read

    def add_context(self, lines: Iterable[str]) -> None:
        """Lines that belong to the last occurrence's message (multi-line driver messages)."""
        for line in lines:
            if len(self.lines) < MAX_LINES_PER_GROUP:
                self.lines.append(_keep(line))

    def _location(self, message: str) -> tuple[int, int] | None:
        where = sm_location(message)
        if where is None:
            return None
        if len(self.sm_locations) < MAX_DECODES_PER_GROUP and where not in self.sm_locations:
            self.sm_locations.append(where)
        return where[0], where[1]

    def _record(self, decode: PayloadDecode) -> None:
        self.last_decode = decode
        if decode.severity is None:
            self.undecoded += 1
        elif self.worst_decode is None or decode.severity.rank > _rank(self.worst_decode):
            self.worst_decode = decode
        if len(self._decodes) < MAX_DECODES_PER_GROUP:
            self._decodes[decode.pairs] = None

    @property
    def decoded(self) -> tuple[tuple[str, str], ...]:
        """The distinct decodes seen (bounded): Xid 154 shows its latest change only (the
        action now asked for); the worst decode is always among those shown."""
        decodes = list(self._decodes)
        if self.xid == RECOVERY_XID and self.last_decode is not None:
            decodes = [self.last_decode.pairs]
        elif self.worst_decode is not None and self.worst_decode.pairs not in self._decodes:
            decodes = [self.worst_decode.pairs, *decodes[: MAX_DECODES_PER_GROUP - 1]]
        pairs = [pair for decode in decodes for pair in decode]
        if self.sm_locations:
            where = "; ".join(f"GPC {g} TPC {t} SM {s}" for g, t, s in self.sm_locations)
            pairs.append(("sm_locations", where))
        return tuple(pairs)

    def clock(self) -> tuple[str, Incidents | None]:
        """The clock the escalation rules use: calendar time, else uptime, else line order."""
        if self._timed:
            return "time", self.calendar
        if self._uptimed:
            return "uptime", self.uptime
        return TIME_UNKNOWN, None

    def untimed_incidents(self) -> int:
        """How many separate incidents the lines can be, when no time could be read: a run of
        lines that print the same stamp happened in one second (one burst); lines without a
        stamp could each be another day, so each counts."""
        return self._stamp_runs if self._stamped == self.count else self.count

    def caused_by(self) -> set[int]:
        return {int(v) for decode in self._decodes for k, v in decode if k == "caused_by"}


def _rank(decode: PayloadDecode) -> int:
    return -1 if decode.severity is None else decode.severity.rank


@dataclass(frozen=True, slots=True)
class _Context:
    """What the rules need to know about the other groups."""

    gpus_by_xid: Mapping[int, frozenset[str]]  # known GPUs (bus id or UUID) per Xid
    xids_by_gpu: Mapping[str, frozenset[int]]
    xids: frozenset[int]


def _gpu(builder: XidGroupBuilder) -> str | None:
    return builder.pci_bus_id or builder.uuid


def _context(builders: Iterable[XidGroupBuilder]) -> _Context:
    gpus: dict[int, set[str]] = {}
    xids: dict[str, set[int]] = {}
    for b in builders:
        gpu = _gpu(b)
        if gpu is not None:
            gpus.setdefault(b.xid, set()).add(gpu)
            xids.setdefault(gpu, set()).add(b.xid)
    return _Context(
        {k: frozenset(v) for k, v in gpus.items()},
        {k: frozenset(v) for k, v in xids.items()},
        frozenset(b.xid for b in builders),
    )


def _decoded_severity(b: XidGroupBuilder, catalog: Severity) -> tuple[Severity, str | None]:
    """Severity and bucket once the payload is read: Xid 154 speaks for its latest change;
    an NVLink5 Xid for its worst decoded line (never below the catalog's while a line of it
    did not decode)."""
    if b.xid == RECOVERY_XID and b.last_decode is not None and b.last_decode.severity is not None:
        return b.last_decode.severity, b.last_decode.action
    worst = b.worst_decode
    if worst is None or worst.severity is None:
        return catalog, None
    if b.undecoded and catalog.rank > worst.severity.rank:
        return catalog, None  # an undecoded line: the catalog's bucket (decode it yourself)
    return worst.severity, worst.action


def _is_sympathetic(b: XidGroupBuilder, ctx: _Context) -> bool:
    """Xid 45 with its cause in view: NVIDIA says "not solo: IGNORE (follow the other Xid)"."""
    if b.xid != SYMPATHETIC_XID:
        return False
    if b.caused_by() & ctx.xids:
        return True
    gpu = _gpu(b)
    others = ctx.xids_by_gpu.get(gpu, frozenset()) if gpu is not None else frozenset()
    return bool(others - INFORMATIONAL_XIDS)


def _span(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _fatal_escalation(b: XidGroupBuilder) -> str | None:
    basis, incidents = b.clock()
    if incidents is None:
        possible = b.untimed_incidents()
        if possible < FATAL_REPEAT_COUNT:
            return None
        return (
            f"{ESCALATE_SUPPORT}{_SEP}fatal Xid {b.xid} {b.count} times on this GPU "
            f"({possible} distinct stamps or unstamped lines), "
            f"{TIME_UNKNOWN} (the lines carry no timestamp): an RMA candidate if they span "
            f"less than 24 h and are separate incidents; find when they happened "
            f"(journalctl -k -o short-iso)"
        )
    if incidents.window is None:
        return None
    first, last = incidents.window
    return (
        f"{ESCALATE_SUPPORT}{_SEP}fatal Xid {b.xid} in {FATAL_REPEAT_COUNT} separate incidents "
        f"within {_span(last - first)} ({basis}) on this GPU, {b.count} lines in all: RMA "
        f"candidate: drain it, run the field diagnostics and open a support case "
        f"(rule: {FATAL_REPEAT_COUNT} fatal Xids in 24 h)"
    )


def _workflow_escalation(b: XidGroupBuilder, ctx: _Context) -> str | None:
    workflow = f"NVIDIA WORKFLOW_XID_{b.xid}"
    gpus = ctx.gpus_by_xid.get(b.xid, frozenset())
    if len(gpus) > 1:
        return (
            f"{ESCALATE_APPLICATION}{_SEP}Xid {b.xid} also on {len(gpus) - 1} other GPU(s) in "
            f"this log: the application or a CUDA library, not this GPU's hardware ({workflow})"
        )
    basis, incidents = b.clock()
    if incidents is None:
        if b.count < REPEAT_INCIDENTS:
            return None
        return (
            f"{ESCALATE_DIAGNOSTICS}{_SEP}Xid {b.xid} {b.count} times on this GPU, "
            f"{TIME_UNKNOWN} (one burst or several?): if it recurs across jobs, run dcgmi diag "
            f"-r 3 and then the field diagnostics ({workflow})"
        )
    if incidents.count < REPEAT_INCIDENTS:
        return None
    if b.xid == 13 and incidents.first_hit:
        if not incidents.repeated:
            return (
                f"{ESCALATE_APPLICATION}{_SEP}Xid 13 in {incidents.count} incidents on this GPU, "
                f"never on the same GPC/TPC twice: the application, not the hardware ({workflow})"
            )
        where = ", ".join(f"GPC {g} TPC {t}" for g, t in incidents.repeated[:3])
        return (
            f"{ESCALATE_DIAGNOSTICS}{_SEP}Xid 13 hit {where} again in a later incident "
            f"({incidents.count} incidents, {basis}): possible hardware fault: run dcgmi diag "
            f"-r 3 and, if it passes, the field diagnostics ({workflow})"
        )
    return (
        f"{ESCALATE_DIAGNOSTICS}{_SEP}Xid {b.xid} repeated in {incidents.count} incidents on "
        f"this GPU ({basis}): run dcgmi diag -r 3 and, if it passes, the field diagnostics "
        f"({workflow})"
    )


def _escalation(b: XidGroupBuilder, severity: Severity, ctx: _Context) -> str | None:
    if severity is Severity.CRITICAL:
        return _fatal_escalation(b)
    if b.xid in APP_WORKFLOW_XIDS:
        return _workflow_escalation(b, ctx)
    return None


def _group(b: XidGroupBuilder, ctx: _Context, uuids: Mapping[str, str]) -> XidGroup:
    info = xid_info(b.xid)
    catalog = UNKNOWN_XID_SEVERITY if info is None else info.severity
    severity, decoded_action = _decoded_severity(b, catalog)
    if _is_sympathetic(b, ctx):
        severity = Severity.INFO
    uuid = b.uuid or (uuids.get(b.pci_bus_id) if b.pci_bus_id is not None else None)
    return XidGroup(
        xid=b.xid,
        pci_bus_id=b.pci_bus_id,
        uuid=uuid,
        count=b.count,
        first_line=b.first_line,
        last_line=b.last_line,
        first_seen_s=b.first_seen_s,
        last_seen_s=b.last_seen_s,
        first_uptime_s=b.first_uptime_s,
        last_uptime_s=b.last_uptime_s,
        mnemonic=None if info is None else info.mnemonic,
        meaning=None if info is None else info.meaning,
        action=decoded_action or (None if info is None else info.immediate_action),
        investigatory_action=None if info is None else info.investigatory_action,
        severity=severity,
        lines=tuple(b.lines),
        decoded=b.decoded,
        escalation=_escalation(b, severity, ctx),
        lost_by_status=b.lost_by_status,
    )


def build_groups(
    builders: Iterable[XidGroupBuilder],
    uuids: Mapping[str, str] | None = None,
    *,
    context: Iterable[XidGroupBuilder] = (),
) -> tuple[XidGroup, ...]:
    """The groups, in order of first occurrence, with the rules applied across all of them.

    ``uuids`` maps a bus id to the UUID the log gave it (for groups that saw no mapping line
    before their first Xid); ``context`` adds builders that count for the cross-group rules
    without being returned (the fallen-off-bus messages next to the Xid groups)."""
    builders = list(builders)
    ctx = _context([*builders, *context])
    groups = (_group(b, ctx, uuids or {}) for b in builders)
    return tuple(sorted(groups, key=lambda g: (g.first_line, g.first_seen_s or 0.0, g.xid)))
