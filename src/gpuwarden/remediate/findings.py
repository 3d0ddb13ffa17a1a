"""Findings documents → ``FindingsInput``: which node, which code, which GPU, since when.

Two documents are read (diagnosis.md §3):

* ``gpuwarden.fleet/1``: each finding names its node by ``node`` when the series carried one
  (gpuwarden's ServiceMonitor sets it from the scraped pod's node, the Kubernetes truth), else
  by ``Hostname`` (dcgm-exporter's label: ``NODE_NAME`` on Kubernetes, but the pod's own name
  before dcgm-exporter PR #129), and its GPU by ``UUID``/``gpu``; the nodes listed in
  ``by_node`` were judged over the window, which ends at ``window.end_s``, with their GPU count.
* ``gpuwarden.doctor/1``: one node, its ``host`` (or each finding's ``device.host``); a doctor
  run in a pod sees the pod's name as its host, so ``--node`` names the Kubernetes node instead.
  It judged the node unless its verdict is ``unknown``; its time is its newest device reading;
  its devices are the GPUs it saw (count and UUIDs).
* a ``gpuwarden.doctor/1`` of several hosts' captures (``environment.hosts`` lists them; its
  ``host`` is null): each host is a node of its own, named by the ``host`` of its devices and
  findings (a node's finding has no device), with its own time and GPUs. A host is judged when
  the document is and doctor says it judged the host (``environment.hosts[].judged``: checks ran
  on its health readings, doctor's verdict on its captures alone would not be ``unknown``; a
  host only a finding or a device names, not listed, had no check run on it); in a document
  written before doctor said so, a listed host whose GPUs were read or that has a finding above
  info. The captures of no known host judge no node (a note says so); ``--node``, which names
  one node, is refused.

A finding's labels keep dcgm-exporter's spelling (``Hostname``, ``UUID``, ``gpu``, ``modelName``,
plus ``namespace`` and ``pod`` from a fleet report) so that a rule's ``labels`` read like the
alert labels they mirror. Malformed documents are a ``CorruptInputError`` naming the entry.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from gpuwarden.documents import DocumentError, load_json_text
from gpuwarden.errors import CorruptInputError, InputError, InvalidConfigError
from gpuwarden.files import CaptureTooLargeError, read_capped
from gpuwarden.remediate.model import FindingsInput, NodeFinding, NodeGpus
from gpuwarden.types.health import UNKNOWN_HOST, Severity
from gpuwarden.types.schemas import DOCTOR_SCHEMA, FLEET_SCHEMA

MAX_FINDINGS_BYTES = 256 << 20  # a fleet report of thousands of GPUs is tens of MB
NODE_KEYS = ("node", "Hostname")  # a fleet entry's node, the first present
FLEET_LABELS = ("Hostname", "node", "UUID", "gpu", "modelName", "namespace", "pod")
JUDGED_VERDICTS = ("healthy", "warning", "critical")
_HINT = (
    "pass the --json output of `gpuwarden doctor` (gpuwarden.doctor/1) or `gpuwarden fleet "
    "report` (gpuwarden.fleet/1)"
)


class FindingsError(CorruptInputError):
    reference = "findings-invalid"


def _problem(where: str, text: str) -> FindingsError:
    return FindingsError(f"{where}: {text}" if where else text, hint=_HINT)


@dataclass(frozen=True, slots=True)
class Document:
    """The findings of one document and the nodes it judged."""

    findings: tuple[NodeFinding, ...]
    judged: tuple[tuple[str, float | None], ...]
    simulated: bool
    sha256: str | None = None  # of the file's bytes, once read from one
    gpus: tuple[tuple[str, NodeGpus], ...] = ()  # of the judged nodes
    notes: tuple[str, ...] = ()  # what the document could not say of any node


def _str_or_none(value: object, where: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _problem(where, "must be a string")
    return str(value)


def _seconds(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _problem(where, "must be Unix seconds")
    return float(value)


def _rfc3339(value: object, where: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _problem(where, "must be an RFC 3339 time")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise _problem(where, f"{value!r} is not an RFC 3339 time") from None
    if when.tzinfo is None:
        raise _problem(where, f"{value!r} has no time zone")
    return when.timestamp()


def _severity(value: object, where: str) -> Severity:
    try:
        return Severity(str(value))
    except ValueError:
        raise _problem(where, f"unknown severity {value!r} (info, warning, critical)") from None


def _code(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _problem(where, "a finding needs its code")
    return value


def _entries(value: object, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _problem(where, "must be a list of objects")
    return value


def _title(entry: dict[str, Any]) -> str:
    title = entry.get("title")
    return title if isinstance(title, str) else ""


def _labels(pairs: Sequence[tuple[str, str | None]]) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in pairs if v is not None)


# --- gpuwarden.fleet/1


def _fleet_node(labels: dict[str, str]) -> str | None:
    return next((labels[k] for k in NODE_KEYS if k in labels), None)


def _fleet_finding(
    entry: dict[str, Any], where: str, observed: float | None, gpus: dict[str, int]
) -> NodeFinding:
    labels = _labels([(k, _str_or_none(entry.get(k), f"{where}.{k}")) for k in FLEET_LABELS])
    first = entry.get("first_seen")
    node = _fleet_node(dict(labels))
    return NodeFinding(
        code=_code(entry.get("code"), f"{where}.code"),
        severity=_severity(entry.get("severity"), f"{where}.severity"),
        node=node,
        uuid=dict(labels).get("UUID"),
        labels=labels,
        first_seen_s=_rfc3339(first, f"{where}.first_seen")
        if not isinstance(first, int | float) or isinstance(first, bool)
        else _seconds(first, f"{where}.first_seen"),
        observed_s=observed,
        source="",
        title=_title(entry),
        node_gpus=None if node is None else gpus.get(node),
    )


def _count(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _problem(where, "must be a count of GPUs")
    return value


def fleet_findings(document: dict[str, Any]) -> Document:
    window = document.get("window")
    window = window if isinstance(window, dict) else {}
    observed = _seconds(window.get("end_s"), "window.end_s")
    if observed is None:
        observed = _rfc3339(window.get("end"), "window.end")
    judged: list[tuple[str, float | None]] = []
    gpus: dict[str, int] = {}
    for i, row in enumerate(_entries(document.get("by_node"), "by_node")):
        names = {k: _str_or_none(row.get(k), f"by_node[{i}].{k}") for k in NODE_KEYS}
        node = _fleet_node({k: v for k, v in names.items() if v is not None})
        if node is None:
            continue
        judged.append((node, observed))
        count = _count(row.get("gpus"), f"by_node[{i}].gpus")
        if count is not None:
            gpus[node] = count
    findings = tuple(
        _fleet_finding(e, f"findings[{i}]", observed, gpus)
        for i, e in enumerate(_entries(document.get("findings"), "findings"))
    )
    seen = tuple((node, NodeGpus(gpus.get(node))) for node, _ in judged)
    return Document(findings, tuple(judged), simulated=False, gpus=seen)


# --- gpuwarden.doctor/1


def _doctor_time(devices: Sequence[tuple[int, dict[str, Any]]]) -> float | None:
    """The newest reading of ``devices`` (each with its position in ``devices``)."""
    times = [_seconds(d.get("timestamp_s"), f"devices[{i}].timestamp_s") for i, d in devices]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _doctor_gpus(devices: Sequence[tuple[int, dict[str, Any]]]) -> NodeGpus:
    """The GPUs doctor read; none listed (a diagnosis of saved logs) says nothing of the node's
    GPUs, and a device without its UUID leaves the list of UUIDs unknown."""
    if not devices:
        return NodeGpus(None)
    uuids = [_str_or_none(d.get("uuid"), f"devices[{i}].uuid") for i, d in devices]
    known = frozenset(u for u in uuids if u is not None)
    return NodeGpus(len(devices), known if len(known) == len(uuids) else None)


def _doctor_finding(
    entry: dict[str, Any],
    where: str,
    node: str | None,
    observed: float | None,
    node_gpus: int | None,
) -> NodeFinding:
    device = entry.get("device")
    device = device if isinstance(device, dict) else {}
    at = f"{where}.device"
    host = node or _finding_host(entry, where)
    uuid = _str_or_none(device.get("uuid"), f"{at}.uuid")
    labels = _labels(
        [
            ("Hostname", host),
            ("UUID", uuid),
            ("gpu", _str_or_none(device.get("index"), f"{at}.index")),
            ("modelName", _str_or_none(device.get("name"), f"{at}.name")),
            ("pci_bus_id", _str_or_none(device.get("pci_bus_id"), f"{at}.pci_bus_id")),
        ]
    )
    return NodeFinding(
        code=_code(entry.get("code"), f"{where}.code"),
        severity=_severity(entry.get("severity"), f"{where}.severity"),
        node=host,
        uuid=uuid,
        labels=labels,
        first_seen_s=_seconds(entry.get("first_seen_s"), f"{where}.first_seen_s"),
        observed_s=observed,
        source="",
        title=_title(entry),
        node_gpus=node_gpus,
    )


def _known_host(value: object, where: str) -> str | None:
    """A host as a doctor document spells it; None for none, or the captures of no known host."""
    host = _str_or_none(value, where)
    return None if host == UNKNOWN_HOST else host


def _listed_hosts(document: dict[str, Any]) -> list[dict[str, Any]] | None:
    """``environment.hosts`` of a document of several hosts' captures; None for one host's."""
    environment = document.get("environment")
    if not isinstance(environment, dict) or "hosts" not in environment:
        return None
    return _entries(environment.get("hosts"), "environment.hosts")


def doctor_findings(document: dict[str, Any], node: str | None = None) -> Document:
    """``node`` (``--node``) replaces the document's host: in a pod, host is the pod's name."""
    listed = _listed_hosts(document)
    if listed is not None:
        return _several_hosts_findings(document, listed, node)
    host = node or _str_or_none(document.get("host"), "host")
    devices = list(enumerate(_entries(document.get("devices"), "devices")))
    observed = _doctor_time(devices)
    gpus = _doctor_gpus(devices)
    findings = tuple(
        _doctor_finding(e, f"findings[{i}]", node or None, observed, gpus.count)
        for i, e in enumerate(_entries(document.get("findings"), "findings"))
    )
    # a finding without a device.host is about the document's host
    findings = tuple(
        f if f.node is not None or host is None else _on_node(f, host) for f in findings
    )
    judged = document.get("verdict") in JUDGED_VERDICTS and host is not None
    return Document(
        findings,
        ((host, observed),) if judged and host is not None else (),
        simulated=document.get("simulated") is True,
        gpus=((host, gpus),) if judged and host is not None else (),
    )


@dataclass(frozen=True, slots=True)
class _HostPart:
    """One host's share of a several-host document (``name`` None: of no known host)."""

    name: str | None
    devices: list[tuple[int, dict[str, Any]]]
    findings: list[tuple[int, dict[str, Any]]]
    listed: bool = False  # among ``environment.hosts``: the hosts doctor ran checks on

    @property
    def observed(self) -> float | None:
        return _doctor_time(self.devices)

    @property
    def gpus(self) -> NodeGpus:
        return _doctor_gpus(self.devices)

    def judged(self, document_judged: bool, said: dict[str | None, bool] | None) -> bool:
        """Whether doctor judged this host: it ran checks on it (the host is listed) and says
        it judged it (``said``); in a document written before it said so, the host's GPUs were
        read or it has a finding above info (a host of kernel logs without an Xid read nothing
        of its GPUs: unknown, not healthy, as doctor says of one host's)."""
        if not (document_judged and self.listed):
            return False
        if said is not None:
            return said.get(self.name, False)
        serious = any(
            _severity(e.get("severity"), f"findings[{i}].severity") is not Severity.INFO
            for i, e in self.findings
        )
        return bool(self.devices or serious)


def _judged_hosts(listed: list[dict[str, Any]]) -> dict[str | None, bool] | None:
    """Whether doctor judged each host it lists (``environment.hosts[].judged``); None for a
    document written before doctor said it (no host says)."""
    if not any("judged" in h for h in listed):
        return None
    said: dict[str | None, bool] = {}
    for i, listing in enumerate(listed):
        where = f"environment.hosts[{i}]"
        judged = listing.get("judged")
        if not isinstance(judged, bool):
            raise _problem(f"{where}.judged", "must be true or false")
        name = _known_host(listing.get("host"), f"{where}.host")
        said[name] = said.get(name, False) or judged
    return said


def _host_parts(document: dict[str, Any], listed: list[dict[str, Any]]) -> list[_HostPart]:
    """The document's devices and findings by host, in the order ``environment.hosts`` gives."""
    names = [
        _known_host(h.get("host"), f"environment.hosts[{i}].host") for i, h in enumerate(listed)
    ]
    parts = {name: _HostPart(name, [], [], listed=True) for name in names}
    for i, device in enumerate(_entries(document.get("devices"), "devices")):
        name = _known_host(device.get("host"), f"devices[{i}].host")
        parts.setdefault(name, _HostPart(name, [], [])).devices.append((i, device))
    for i, entry in enumerate(_entries(document.get("findings"), "findings")):
        name = _finding_host(entry, f"findings[{i}]")
        parts.setdefault(name, _HostPart(name, [], [])).findings.append((i, entry))
    return list(parts.values())


def _finding_host(entry: dict[str, Any], where: str) -> str | None:
    """The host a finding names: its device's, or, a node's finding having no device, the host
    the finding carries (several hosts')."""
    device = entry.get("device")
    on_device = (
        _known_host(device.get("host"), f"{where}.device.host")
        if isinstance(device, dict)
        else None
    )
    return on_device or _known_host(entry.get("host"), f"{where}.host")


def _several_hosts_findings(
    document: dict[str, Any], listed: list[dict[str, Any]], node: str | None
) -> Document:
    """Each host of several hosts' captures as a node of its own: its findings at its own time,
    with its own GPUs; the captures of no known host judge no node."""
    if node is not None:
        raise InvalidConfigError(
            f"--node {node!r} names one node; this doctor document judged "
            f"{len(listed)} hosts' captures, each named by its host",
            reference="node-of-several-hosts",
            hint="drop --node: each host's findings act on the node of the host's name "
            "(or run doctor on each host's captures apart and pass --node with each document)",
        )
    document_judged = document.get("verdict") in JUDGED_VERDICTS
    said = _judged_hosts(listed)
    parts = _host_parts(document, listed)
    findings = sorted(
        (
            (i, _doctor_finding(e, f"findings[{i}]", p.name, p.observed, p.gpus.count))
            for p in parts
            for i, e in p.findings
        ),
        key=lambda pair: pair[0],  # in the document's order
    )
    judged = [(p.name, p) for p in parts if p.name is not None and p.judged(document_judged, said)]
    unknown = [p for p in parts if p.name is None and (p.devices or p.findings)]
    return Document(
        tuple(f for _, f in findings),
        tuple((name, p.observed) for name, p in judged),
        simulated=document.get("simulated") is True,
        gpus=tuple((name, p.gpus) for name, p in judged),
        notes=tuple(_unknown_host_note(p) for p in unknown),
    )


def _unknown_host_note(part: _HostPart) -> str:
    return (
        f"unjudged-host: the captures of no known host ({len(part.devices)} GPU(s), "
        f"{len(part.findings)} finding(s)) judge no node; put each host's captures in a folder "
        "of its name (or have them state it) and run doctor again"
    )


def _on_node(finding: NodeFinding, node: str) -> NodeFinding:
    labels = (("Hostname", node), *((k, v) for k, v in finding.labels if k != "Hostname"))
    return replace(finding, node=node, labels=labels)


# --- files


def document_findings(document: object, node: str | None = None) -> Document:
    """A parsed JSON document (either schema) → its findings; raises ``FindingsError``."""
    if not isinstance(document, dict):
        raise _problem("", "not a gpuwarden JSON document (an object with a schema)")
    schema = document.get("schema")
    if schema == DOCTOR_SCHEMA:
        return doctor_findings(document, node)
    if schema == FLEET_SCHEMA:
        return fleet_findings(document)
    raise _problem("schema", f"{schema!r} is neither {DOCTOR_SCHEMA} nor {FLEET_SCHEMA}")


def _read(path: str) -> bytes:
    try:
        raw, _ = read_capped(path, MAX_FINDINGS_BYTES)
    except OSError as exc:
        raise InputError(
            f"cannot read the findings file {path!r}: {exc.strerror or exc}",
            reference="findings-unreadable",
            hint=_HINT,
        ) from None
    except CaptureTooLargeError:
        raise FindingsError(
            f"{path}: larger than {MAX_FINDINGS_BYTES >> 20} MiB", hint=_HINT
        ) from None
    return raw


def _load_one(path: str, node: str | None) -> Document:
    raw = _read(path)
    try:
        document = load_json_text(raw)
    except DocumentError as exc:
        raise FindingsError(f"{path}: {exc}", hint=_HINT) from None
    try:
        parsed = document_findings(document, node)
    except (FindingsError, InvalidConfigError) as exc:
        raise exc.about(path) from None
    return Document(
        tuple(replace(f, source=path, simulated=parsed.simulated) for f in parsed.findings),
        () if parsed.simulated else parsed.judged,  # a simulated node is never judged healthy
        parsed.simulated,
        hashlib.sha256(raw).hexdigest(),
        () if parsed.simulated else parsed.gpus,
        tuple(f"{path}: {note}" for note in parsed.notes),
    )


def load_findings(paths: Sequence[str], node: str | None = None) -> FindingsInput:
    """Every finding of the documents at ``paths`` (``-`` is not accepted: a remediation names
    its evidence), and the nodes they judged (the newest judgement of a node wins)."""
    findings: list[NodeFinding] = []
    judged: dict[str, float | None] = {}
    gpus: dict[str, NodeGpus] = {}
    digests: list[str] = []
    notes: list[str] = []
    for path in paths:
        document = _load_one(path, node)
        findings.extend(document.findings)
        notes.extend(document.notes)
        digests.append(document.sha256 or "")
        seen = dict(document.gpus)
        for name, when in document.judged:
            before = judged.get(name)
            if before is None or (when or 0.0) >= before:
                judged[name] = when
                gpus[name] = seen.get(name, NodeGpus(None))
    return FindingsInput(tuple(findings), judged, tuple(paths), tuple(digests), gpus, tuple(notes))
