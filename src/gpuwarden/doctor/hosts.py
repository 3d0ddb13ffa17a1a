"""Which host each capture of a bundle is of: a folder of several nodes' captures (a support
bundle per node, a must-gather) is judged host by host, never as one node whose GPU 0 is every
host's GPU 0.

A capture says its host where its format prints one: an nvidia-bug-report log's prologue
(``uname:``, what ``uname -a`` prints: kernel name, then the node name), a dcgm-exporter page's
``Hostname`` label (dcgm-exporter sets it to the node's name), a syslog or journal kernel log's
host field ("Feb 15 17:37:45 node-a kernel: ..."). nvidia-smi's outputs, dmesg and the rest name
none: such a capture is of the host its folder's other captures state, or of the host whose GPUs
(their UUIDs, which NVML makes unique per GPU) it names; and where the bundle holds one folder
per host (``node-a/``, ``node-b/``: their GPUs differ, or their captures state different hosts),
of its folder's. A bundle that shows one host (the usual case) is one host's, as before; one
whose captures cannot all be told apart says so in a note. A kernel log whose lines name several
hosts (a remote syslog server's file, two nodes' logs pasted into one) is read as one part per
host (``by_host``); a bundle unpacked into a folder of its own is read from that folder.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuwarden.doctor.captures import (
    MAX_DIRECTORY_FILES,
    Capture,
    CaptureKind,
    is_within,
    real_path,
)
from gpuwarden.health.devices import MASKED_UUID
from gpuwarden.types.health import UNKNOWN_HOST

# How much of each end of a capture is read for its host and its GPUs' UUIDs: a kernel log of
# hundreds of MB is one machine's from end to end, and its ends say whose as well as the whole
_HOST_SCAN_CHARS = 256 << 10
# uname -a: "Linux <nodename> <release> ..." (bug_report.py reads the same prologue)
_UNAME = re.compile(r"^uname: +\S+ +(?P<host>\S+) ", re.MULTILINE)
# syslog (any locale's month), with or without fractional seconds, and ISO-dated syslog
# (rsyslog's RFC 3339 template, journalctl -o short-iso): the field before "kernel:" is the host
_SYSLOG_HOST = re.compile(
    r"^[ \t]*(?:\w{2,12}\.? +[ \d]\d [\d:]{8}(?:\.\d{1,9})?"
    r"|\d{4}-\d\d-\d\dT[\d:,.]+\S*) +(?P<host>\S+) +kernel:",
    re.MULTILINE,
)
# The most hosts one kernel log is split into: a remote syslog server's file of a rack's or a
# pod's nodes. A log naming more is a fleet's (or names a new host on every line): read whole,
# as one unknown host's, with a note
MAX_HOSTS_IN_ONE_LOG = 256
# dcgm-exporter's label (the dcgm reader takes either spelling)
_HOSTNAME_LABEL = re.compile(r'\b[Hh]ostname="(?P<host>[^"\n]{1,253})"')
# A host name as RFC 1123 spells one. Names shared captures mask ("****-*****", "<hostname>",
# "xxx") or that name no machine (journald's and syslog's stand-ins) are no host.
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")
_MASKED_NAME = re.compile(r"[xX]+(?:[-_.][xX]+)*")
_NO_HOST = frozenset({"localhost", "localhost.localdomain", "(none)", "hostname", "host"})
# A GPU's UUID as NVML prints it (nvidia-smi -q, --query-gpu uuid, the dcgm UUID label, the
# driver's "NVRM: GPU at PCI:... GPU-<uuid>" line). It starts with its literal so that re skips
# to each "GPU-" (a leading \b made it try every position: 0.75 → 0.02 ms on a 60 KB -q -x);
# the word boundary before it is checked on the match (_starts_a_word).
_GPU_UUID = re.compile(
    r"GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)


# a capture as HostKeys knows it: its path, and the host of a part of a log split by host
# (the parts of one log share its path)
CaptureId = tuple[str, str | None]


def capture_id(capture: Capture) -> CaptureId:
    return capture.path, capture.host


@dataclass(frozen=True, slots=True)
class HostKeys:
    """Each capture's host (by ``capture_id``; None: not known) and what is said about how
    they were told apart."""

    hosts: Mapping[CaptureId, str | None]
    notes: tuple[str, ...] = ()

    def of(self, capture: Capture) -> str | None:
        """The host of one of the captures keyed."""
        return self.hosts[capture_id(capture)]

    @property
    def several(self) -> bool:
        """Whether the captures are more than one host's (unknown counting as one more)."""
        return len(set(self.hosts.values())) > 1


def _host_name(name: str) -> str | None:
    masked = _MASKED_NAME.fullmatch(name) is not None
    # a fully qualified name may end in the DNS root's dot: "localhost." is "localhost"
    unrooted = name.lower().removesuffix(".")
    if masked or _HOST_NAME.fullmatch(name) is None or unrooted in _NO_HOST:
        return None
    return None if _is_own_address(name) else name


def _is_own_address(name: str) -> bool:
    """A loopback or unspecified address (127.0.0.1, 0.0.0.0, ::1): every machine's name for
    itself, as "localhost" is. A cluster's nodes may be named by their addresses (10.0.0.5 is a
    valid Kubernetes node name), so other addresses stay host names."""
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _one_host(names: Iterable[str]) -> str | None:
    """The host a capture names, when it names one and only one."""
    hosts = {host for name in names if (host := _host_name(name)) is not None}
    return next(iter(hosts)) if len(hosts) == 1 else None


def _one_spelling(stated: Mapping[CaptureId, str | None]) -> dict[CaptureId, str | None]:
    """One name per host: a name and its fully qualified form ("node-a", "node-a.cluster.local":
    a journal prints the one, a dcgm label the other) are one host, named by its shortest
    spelling; host names are case-insensitive (RFC 4343)."""
    # the shortest first; of two as short ("node-a", "NODE-A"), the one first in code-point
    # order: the name the report says is the same whatever order the captures were read in
    names = sorted({h for h in stated.values() if h is not None}, key=lambda h: (len(h), h))
    first_spelled: dict[str, str] = {}  # a folded name → the first name folded so
    spelling: dict[str, str] = {}
    for name in names:
        folded = name.lower()
        # the name itself and the shorter names it may be the qualified form of, shortest first:
        # looked up, not compared with every shorter name (thousands of hosts stay linear)
        shorter = [folded[:i] for i, c in enumerate(folded) if c == "."]
        known = next((first_spelled[f] for f in (*shorter, folded) if f in first_spelled), None)
        spelling[name] = name if known is None else spelling[known]
        first_spelled.setdefault(folded, name)
    return {key: None if host is None else spelling[host] for key, host in stated.items()}


def _ends(text: str) -> str:
    if len(text) <= 2 * _HOST_SCAN_CHARS:
        return text
    return f"{text[:_HOST_SCAN_CHARS]}\n{text[-_HOST_SCAN_CHARS:]}"


def stated_host(capture: Capture) -> str | None:
    """The host a capture's own text names, where its format prints one."""
    if capture.kind is CaptureKind.BUG_REPORT:
        uname = _UNAME.search(capture.text, 0, 1 << 16)
        return None if uname is None else _host_name(uname["host"])
    if capture.kind is CaptureKind.DCGM:
        return _one_host(m["host"] for m in _HOSTNAME_LABEL.finditer(capture.text))
    if capture.kind is CaptureKind.KERNEL_LOG:
        hosts = _log_hosts(_ends(capture.text))
        return next(iter(hosts)) if len(hosts) == 1 else None
    return None


def _log_hosts(text: str) -> dict[str, None]:
    """The hosts a kernel log's syslog lines name, in the order they first appear."""
    named = (_host_name(m["host"]) for m in _SYSLOG_HOST.finditer(text))
    return dict.fromkeys(host for host in named if host is not None)


def _log_host_count(capture: Capture) -> int:
    """How many hosts a kernel log's lines name (at its ends); 0 for any other capture."""
    if capture.kind is not CaptureKind.KERNEL_LOG:
        return 0
    return len(_log_hosts(_ends(capture.text)))


def by_host(captures: Sequence[Capture]) -> tuple[Capture, ...]:
    """The captures, each kernel log whose lines name several hosts (a remote syslog server's
    file, logs of several nodes pasted into one) as one part per host (its ``host``, the
    file's path kept: a file name may hold any character, "#" too): every line of its host's,
    and a line that names none (a continuation, a header) of the host of the line before it.
    Judged as one, their Xids on GPUs of the same bus id were one."""
    parts: list[Capture] = []
    room = MAX_DIRECTORY_FILES - len(captures)  # the parts beyond the captures, in all
    for capture in captures:
        if _log_host_count(capture) < 2:
            parts.append(capture)
            continue
        lines = _lines_by_host(capture.text)
        if not 1 < len(lines) <= min(MAX_HOSTS_IN_ONE_LOG, room + 1):
            parts.append(capture)
            continue
        room -= len(lines) - 1
        parts += (
            dataclasses.replace(capture, host=host, text="".join(text))
            for host, text in lines.items()
        )
    return tuple(parts)


def _lines_by_host(text: str) -> dict[str, list[str]]:
    """A kernel log's text by the host its lines name (stopping past MAX_HOSTS_IN_ONE_LOG)."""
    found: dict[str, list[str]] = {}
    host: str | None = None
    start = 0
    for match in _SYSLOG_HOST.finditer(text):
        named = _host_name(match["host"])
        if named is None or named == host:
            continue
        line = text.rfind("\n", 0, match.start()) + 1
        if host is not None or line > 0:  # the lines before it: the host before's (or this)
            found.setdefault(host or named, []).append(text[start:line])
        host, start = named, line
        if len(found) > MAX_HOSTS_IN_ONE_LOG:
            return found
    if host is not None:
        found.setdefault(host, []).append(text[start:])
    return found


def _unsplit(captures: Sequence[Capture]) -> tuple[str, ...]:
    """A note for each kernel log whose lines name several hosts and that was not split (more
    than MAX_HOSTS_IN_ONE_LOG, or than MAX_DIRECTORY_FILES captures in all)."""
    return tuple(
        f"{capture.path}: its lines name {hosts} hosts, more than doctor splits a log into "
        f"({MAX_HOSTS_IN_ONE_LOG} a log, {MAX_DIRECTORY_FILES} captures in all): read as one "
        "unknown host's, its Xids on GPUs of the same bus id as one GPU's (keep one log per "
        "host)"
        for capture in captures
        if (hosts := _log_host_count(capture)) > 1
    )


def _gpu_uuids(capture: Capture) -> frozenset[str]:
    text = _ends(capture.text)
    found = {m.group().upper() for m in _GPU_UUID.finditer(text) if _starts_a_word(text, m.start())}
    return frozenset(found - {MASKED_UUID})


def _starts_a_word(text: str, at: int) -> bool:
    """Whether a word starts at ``at``: what a leading \\b checks (\\w is Unicode's letters,
    digits and the underscore, as str.isalnum and "_")."""
    if at == 0:
        return True
    before = text[at - 1]
    return not (before.isalnum() or before == "_")


@dataclass(frozen=True, slots=True)
class _Unit:
    """The captures of one folder of a bundle (or one file named alone)."""

    key: str  # the folder's path, or the file's
    name: str | None  # the host it would be as a folder per host; None: not a host's folder
    captures: tuple[Capture, ...]


def _bundle_root(directory: Path, captures: Sequence[Capture]) -> Path:
    """The folder whose folders are the bundle's: ``directory``, or the one folder inside it
    that holds every capture (a bundle unpacked into a folder of its own, ``bundle/node-a``,
    ``bundle/node-b``: its folders are the hosts', not the one folder around them). The
    folder that itself holds them all is no root of folders: its parent is."""
    folders: list[tuple[str, ...]] = []
    for capture in captures:
        try:
            folders.append(Path(capture.path).relative_to(directory).parts[:-1])
        except ValueError:
            continue
    shared = folders[0] if folders else ()
    for folder in folders:
        while folder[: len(shared)] != shared:
            shared = shared[:-1]
    if shared and all(folder == shared for folder in folders):
        shared = shared[:-1]
    return directory.joinpath(*shared)


def _outermost(named: Sequence[str]) -> list[str]:
    """The paths named that are not inside a folder named too (``--from nest --from
    nest/node-b``: one bundle, ``nest``, whose folder node-b is named again)."""
    folders = [real_path(path) for path in named if Path(path).is_dir()]
    return [
        path for path in named if not any(is_within(real_path(path), folder) for folder in folders)
    ]


def _units(captures: Sequence[Capture], named: Sequence[str]) -> list[_Unit]:
    """The captures by folder: the first folder under a directory named on the command line
    (a bundle of one folder per host), or the directory itself when several paths are named
    (``--from node-a --from node-b``). Files directly in the one directory named, and files
    named, are units of their own with no folder name (the parts of a log split by host, one
    unit: their file's)."""
    outermost = _outermost(named)
    directories = [_bundle_root(Path(path), captures) for path in outermost if Path(path).is_dir()]
    by_key: dict[str, tuple[str | None, list[Capture]]] = {}
    for capture in captures:
        key, name = capture.path, None
        for directory in directories:
            try:
                parts = Path(capture.path).relative_to(directory).parts
            except ValueError:
                continue
            if len(parts) > 1:
                key, name = str(directory / parts[0]), parts[0]
            elif len(outermost) > 1:
                key, name = str(directory), directory.absolute().name
            break
        by_key.setdefault(key, (name, []))[1].append(capture)
    return [_Unit(key, name, tuple(found)) for key, (name, found) in by_key.items()]


def key_hosts(captures: Sequence[Capture], named: Sequence[str]) -> HostKeys:
    """Each capture's host. One host's captures (nothing shows another) are all of the one host
    they state (or of None): judged together, as ever."""
    stated = _one_spelling({capture_id(c): stated_host(c) for c in captures})
    units = _units(captures, named)
    named_hosts = {h for h in stated.values() if h is not None}
    if len(units) < 2 and len(named_hosts) < 2:  # one file, or one folder of one host's
        return HostKeys(dict.fromkeys(stated, next(iter(named_hosts), None)), _unsplit(captures))
    unit_host = {
        u.key: _one_host(h for c in u.captures if (h := stated[capture_id(c)])) for u in units
    }
    uuids = {u.key: frozenset().union(*(_gpu_uuids(c) for c in u.captures)) for u in units}
    by_folder = _folders_apart(units, unit_host, uuids)
    if len(named_hosts) < 2 and not by_folder:
        only = next(iter(named_hosts), None)
        notes = (*_unsplit(captures), *_undecided(units, unit_host, uuids))
        return HostKeys(dict.fromkeys(stated, only), notes)
    hosts: dict[CaptureId, str | None] = {}
    no_host_names: list[str] = []
    for unit in units:
        host = unit_host[unit.key] or _host_of_gpus(uuids[unit.key], units, unit_host, uuids)
        if host is None and by_folder:
            host = _folder_host(unit.name)
            if host is None and unit.name is not None and unit.name.strip():
                no_host_names.append(unit.name)
        for capture in unit.captures:
            hosts[capture_id(capture)] = stated[capture_id(capture)] or host
    unknown = sorted(path for (path, _), host in hosts.items() if host is None)
    notes = (*_unsplit(captures), *map(_no_host_name_note, no_host_names))
    if unknown:
        notes += (
            f"{len(unknown)} capture(s) name no host and their folder does not tell whose they "
            f"are ({', '.join(unknown[:3])}{', ...' if len(unknown) > 3 else ''}): judged "
            "apart, as an unknown host's",
        )
    return HostKeys(hosts, notes)


def _folder_host(name: str | None) -> str | None:
    """The host a folder of one host's captures names, by the rule of a host name a capture
    states (_host_name): none where it names no one machine — blanks or a name with one
    (remediate would act on a node " "), "localhost" or a loopback address (every machine's own),
    a masked name — or is doctor's own name for the captures of no known host (two "host
    unknown"s would be judged apart)."""
    if name is None or name == UNKNOWN_HOST:
        return None
    return _host_name(name)


def _no_host_name_note(folder: str) -> str:
    return (
        f"folder {folder!r} names no one machine (a host name is letters, digits, '.', '-' and "
        "'_', not localhost, a loopback address or a masked name): its captures are of no "
        "known host"
    )


def _host_of_gpus(
    mine: frozenset[str],
    units: Sequence[_Unit],
    unit_host: Mapping[str, str | None],
    uuids: Mapping[str, frozenset[str]],
) -> str | None:
    """The one stated host whose folder's captures name a GPU these name."""
    hosts = {unit_host[u.key] for u in units if unit_host[u.key] and mine & uuids[u.key]}
    return next(iter(hosts)) if len(hosts) == 1 else None


def _folders_apart(
    units: Sequence[_Unit],
    unit_host: Mapping[str, str | None],
    uuids: Mapping[str, frozenset[str]],
) -> bool:
    """Whether the folders are one per host: two of them state different hosts, or name GPUs
    and none in common (a GPU's UUID is its own: two folders of one node name the same GPUs)."""
    folders = [u for u in units if u.name is not None]
    return any(
        _apart(unit_host[a.key], unit_host[b.key], uuids[a.key], uuids[b.key])
        for i, a in enumerate(folders)
        for b in folders[i + 1 :]
    )


def _apart(
    host: str | None, other: str | None, gpus: frozenset[str], others: frozenset[str]
) -> bool:
    if host is not None and other is not None:
        return host != other
    return bool(gpus and others) and not gpus & others


def _undecided(
    units: Sequence[_Unit],
    unit_host: Mapping[str, str | None],
    uuids: Mapping[str, frozenset[str]],
) -> tuple[str, ...]:
    """A note where folders read as one host's do not show that they are: some folder neither
    states the host another states nor names a GPU another names."""
    folders = [u for u in units if u.name is not None]
    if len(folders) < 2:
        return ()
    joined = [folders[0]]
    rest = folders[1:]
    while rest:  # the folders the first is tied to, through any chain of ties
        tied = [u for u in rest if any(_tied(u, j, unit_host, uuids) for j in joined)]
        if not tied:
            break
        joined += tied
        rest = [u for u in rest if u not in tied]
    if not rest:
        return ()
    names = ", ".join(u.name or u.key for u in folders[:4])
    more = ", ..." if len(folders) > 4 else ""
    return (
        f"the captures of {len(folders)} folders ({names}{more}) do not show that they are one "
        "host's (no host they all state, no GPU they all tie to): read as one host's, which "
        "they may not be (keep one folder per host, with a capture that names its host or its "
        "GPUs' UUIDs: nvidia-smi -q, a syslog kernel log)",
    )


def _tied(
    unit: _Unit,
    other: _Unit,
    unit_host: Mapping[str, str | None],
    uuids: Mapping[str, frozenset[str]],
) -> bool:
    """Whether two folders are shown to be one host's: the host both state, a GPU both name."""
    host = unit_host[unit.key]
    return (host is not None and host == unit_host[other.key]) or bool(
        uuids[unit.key] & uuids[other.key]
    )
