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
whose captures cannot all be told apart says so in a note.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuwarden.doctor.captures import Capture, CaptureKind
from gpuwarden.health.devices import MASKED_UUID

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
# dcgm-exporter's label (the dcgm reader takes either spelling)
_HOSTNAME_LABEL = re.compile(r'\b[Hh]ostname="(?P<host>[^"\n]{1,253})"')
# A host name as RFC 1123 spells one. Names shared captures mask ("****-*****", "<hostname>",
# "xxx") or that name no machine (journald's and syslog's stand-ins) are no host.
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")
_MASKED_NAME = re.compile(r"[xX]+(?:[-_.][xX]+)*")
_NO_HOST = frozenset({"localhost", "localhost.localdomain", "(none)", "hostname", "host"})
# A GPU's UUID as NVML prints it (nvidia-smi -q, --query-gpu uuid, the dcgm UUID label, the
# driver's "NVRM: GPU at PCI:... GPU-<uuid>" line)
_GPU_UUID = re.compile(
    r"\bGPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
    r"[0-9a-fA-F]{12}\b"
)


@dataclass(frozen=True, slots=True)
class HostKeys:
    """Each capture's host (by path; None: not known) and what is said about how they were
    told apart."""

    hosts: Mapping[str, str | None]
    notes: tuple[str, ...] = ()

    @property
    def several(self) -> bool:
        """Whether the captures are more than one host's (unknown counting as one more)."""
        return len(set(self.hosts.values())) > 1


def _host_name(name: str) -> str | None:
    masked = _MASKED_NAME.fullmatch(name) is not None
    if masked or _HOST_NAME.fullmatch(name) is None or name.lower() in _NO_HOST:
        return None
    return name


def _one_host(names: Iterable[str]) -> str | None:
    """The host a capture names, when it names one and only one."""
    hosts = {host for name in names if (host := _host_name(name)) is not None}
    return next(iter(hosts)) if len(hosts) == 1 else None


def _one_spelling(stated: Mapping[str, str | None]) -> dict[str, str | None]:
    """One name per host: a name and its fully qualified form ("node-a", "node-a.cluster.local":
    a journal prints the one, a dcgm label the other) are one host, named by its shortest
    spelling; host names are case-insensitive (RFC 4343)."""
    names = sorted({h for h in stated.values() if h is not None}, key=len)
    spelling: dict[str, str] = {}
    for name in names:
        folded = name.lower()
        spelling[name] = next(
            (
                spelling[short]
                for short in names[: names.index(name)]
                if folded == short.lower() or folded.startswith(f"{short.lower()}.")
            ),
            name,
        )
    return {path: None if host is None else spelling[host] for path, host in stated.items()}


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
        return _one_host(m["host"] for m in _SYSLOG_HOST.finditer(_ends(capture.text)))
    return None


def _gpu_uuids(capture: Capture) -> frozenset[str]:
    found = {m.group().upper() for m in _GPU_UUID.finditer(_ends(capture.text))}
    return frozenset(found - {MASKED_UUID})


@dataclass(frozen=True, slots=True)
class _Unit:
    """The captures of one folder of a bundle (or one file named alone)."""

    key: str  # the folder's path, or the file's
    name: str | None  # the host it would be as a folder per host; None: not a host's folder
    captures: tuple[Capture, ...]


def _units(captures: Sequence[Capture], named: Sequence[str]) -> list[_Unit]:
    """The captures by folder: the first folder under a directory named on the command line
    (a bundle of one folder per host), or the directory itself when several paths are named
    (``--from node-a --from node-b``). Files directly in the one directory named, and files
    named, are units of their own with no folder name."""
    directories = [Path(path) for path in named if Path(path).is_dir()]
    by_key: dict[str, tuple[str | None, list[Capture]]] = {}
    for capture in captures:
        key, name = capture.path.split("#", 1)[0], None
        for directory in directories:
            try:
                parts = Path(capture.path).relative_to(directory).parts
            except ValueError:
                continue
            if len(parts) > 1:
                key, name = str(directory / parts[0]), parts[0]
            elif len(named) > 1:
                key, name = str(directory), directory.absolute().name
            break
        by_key.setdefault(key, (name, []))[1].append(capture)
    return [_Unit(key, name, tuple(found)) for key, (name, found) in by_key.items()]


def key_hosts(captures: Sequence[Capture], named: Sequence[str]) -> HostKeys:
    """Each capture's host. One host's captures (nothing shows another) are all of the one host
    they state (or of None): judged together, as ever."""
    stated = _one_spelling({c.path: stated_host(c) for c in captures})
    units = _units(captures, named)
    named_hosts = {h for h in stated.values() if h is not None}
    if len(units) < 2 and len(named_hosts) < 2:  # one file, or one folder of one host's
        return HostKeys(dict.fromkeys(stated, next(iter(named_hosts), None)))
    unit_host = {u.key: _one_host(h for c in u.captures if (h := stated[c.path])) for u in units}
    uuids = {u.key: frozenset().union(*(_gpu_uuids(c) for c in u.captures)) for u in units}
    by_folder = _folders_apart(units, unit_host, uuids)
    if len(named_hosts) < 2 and not by_folder:
        only = next(iter(named_hosts), None)
        return HostKeys({c.path: only for c in captures}, _undecided(units, unit_host, uuids))
    hosts: dict[str, str | None] = {}
    for unit in units:
        host = unit_host[unit.key] or _host_of_gpus(uuids[unit.key], units, unit_host, uuids)
        if host is None and by_folder:
            host = unit.name
        for capture in unit.captures:
            hosts[capture.path] = stated[capture.path] or host
    unknown = sorted(path for path, host in hosts.items() if host is None)
    notes: tuple[str, ...] = ()
    if unknown:
        notes = (
            f"{len(unknown)} capture(s) name no host and their folder does not tell whose they "
            f"are ({', '.join(unknown[:3])}{', ...' if len(unknown) > 3 else ''}): judged "
            "apart, as an unknown host's",
        )
    return HostKeys(hosts, notes)


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
