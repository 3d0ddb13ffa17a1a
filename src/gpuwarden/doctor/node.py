"""`doctor`: one verdict for a node, live or from captures.

It gathers what there is to read — GPU readings (NVML, nvidia-smi, dcgm-exporter), the kernel
log, `nvidia-smi topo -m` / `nvlink -s` / `nvlink -e`, the driver and framework versions, the
container context — and judges each with its rules (`health`), then folds them into one list of
findings (most severe first) and one list of checks (pass / warn / fail / skip). A check whose
signal no input carries is a skip with its reason, never a silent pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from gpuwarden.catalog.pci_bus import normalize_pci_bus_id
from gpuwarden.doctor.captures import (
    Capture,
    CaptureKind,
    SkippedFile,
    TimeSource,
    collect_captures,
    distinct_inputs,
    reading_time_source,
)
from gpuwarden.doctor.environment import HostAccess
from gpuwarden.doctor.hosts import HostKeys, by_host, key_hosts
from gpuwarden.errors import GpuwardenError
from gpuwarden.health.checks import check_of
from gpuwarden.health.dcgm_diag import DiagReport, DiagStatus, parse_dcgm_diag
from gpuwarden.health.dcgm_diag_findings import dcgm_diag_check, dcgm_diag_findings
from gpuwarden.health.devices import MASKED_UUID, attach_devices
from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.evaluate import evaluate_readings, finding_order
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.rules.links import nvlink_counter_findings
from gpuwarden.health.thresholds import DEFAULT_THRESHOLDS, Thresholds
from gpuwarden.health.topology import topology_findings
from gpuwarden.health.versions import driver_of, evaluate_versions
from gpuwarden.health.xid import xid_findings
from gpuwarden.health.xid_repeats import XidRecordTally
from gpuwarden.types.environment import NodeEnvironment, SmiStatus
from gpuwarden.types.health import (
    UNKNOWN_HOST,
    Check,
    CheckStatus,
    Evidence,
    Finding,
    KernelLogReport,
    Severity,
)
from gpuwarden.types.nvlink_counters import CounterReading
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample, EventKind, Snapshot
from gpuwarden.types.topology import NvLinkStatus, Topology
from gpuwarden.units import GIB

# More than the driver's own reservation and a CUDA context: someone holds this memory.
_UNLISTED_MEMORY_BYTES = 1 << 30
_STATUS_RANK = {CheckStatus.SKIP: 0, CheckStatus.PASS: 1, CheckStatus.WARN: 2, CheckStatus.FAIL: 3}


# Checks that pass whenever GPUs are listed, whatever their health: the GPUs read, their MIG
# instances, processes and count, and a fabric manager a GPU outside an NVSwitch system needs not
_LISTING_CHECKS = frozenset({"devices", "mig", "processes", "gpu-count", "fabric-manager"})


@dataclass(frozen=True, slots=True)
class DoctorOptions:
    expect_gpus: int | None = None
    thresholds: Thresholds = DEFAULT_THRESHOLDS
    read_kernel_log: bool = True


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One thing doctor read, in words: what it is and what it held; and, where doctor dates
    its readings by it, when it was taken and how that is known (captures.TimeSource: the
    capture states it, or it is the file's modification time)."""

    source: str
    kind: str
    detail: str
    time_s: float | None = None
    time_source: TimeSource | None = None


@dataclass(frozen=True, slots=True)
class KernelLogSummary:
    source: str
    report: KernelLogReport
    truncated: bool


@dataclass(frozen=True, slots=True)
class DoctorReport:
    mode: str  # "live" or "captures"
    host: str | None
    simulated: bool
    samples: tuple[DeviceSample, ...]  # the newest reading of each GPU, by index
    findings: tuple[Finding, ...]  # most severe first
    checks: tuple[Check, ...]
    inputs: tuple[InputRecord, ...]
    skipped: tuple[SkippedFile, ...] = ()
    environment: NodeEnvironment | None = None
    kernel_logs: tuple[KernelLogSummary, ...] = ()
    # the host of each of ``samples`` (in order) where the captures are several hosts' (their
    # GPU 0s are two GPUs); empty for one host's
    sample_hosts: tuple[str, ...] = ()
    # each host's environment (driver, CUDA, kernel module ...) where the captures are several
    # hosts' (``environment`` then holds what they all agree on); empty for one host's
    host_environments: tuple[tuple[str, NodeEnvironment], ...] = ()
    # the hosts among several whose own report is judged (``judged``): a host of whose health
    # its captures read nothing (its GPUs' UUIDs alone) is not, as doctor says of it alone
    judged_hosts: tuple[str, ...] = ()

    @property
    def several_hosts(self) -> bool:
        """Whether the report says several hosts', each judged apart."""
        return bool(self.host_environments)

    def host_of(self, position: int) -> str | None:
        """The host of ``samples[position]``: its own among several hosts', else the report's."""
        return self.sample_hosts[position] if self.sample_hosts else self.host

    def on_sample(self, finding: Finding, position: int) -> bool:
        """Whether a finding is about ``samples[position]`` (its index, and among several
        hosts' its host: two hosts' GPU 0 are two GPUs)."""
        device = finding.device
        if device is None or device.index != self.samples[position].info.index:
            return False
        return not self.sample_hosts or (device.host or UNKNOWN_HOST) == self.host_of(position)

    @property
    def verdict(self) -> Severity | None:
        """The worst finding above info, or None: healthy (or unknown, see ``judged``)."""
        worst = max((f.severity for f in self.findings), key=lambda s: s.rank, default=None)
        return worst if worst is not None and worst.rank > 0 else None

    @property
    def judged(self) -> bool:
        """False when no GPU could be read, or when no check beyond listing the GPUs judged any
        health reading (a scrape of GPU names and nothing else, a process list): "no finding"
        then means "no evidence", not "healthy"."""
        if self.verdict is not None:
            return True
        return bool(self.samples) and any(
            c.status is CheckStatus.PASS and c.name not in _LISTING_CHECKS for c in self.checks
        )


@dataclass
class _Gathered:
    """Everything read, before judging."""

    series: list[tuple[str, list[Snapshot]]] = dataclasses.field(default_factory=list)
    kernel_logs: list[tuple[str, str, float, bool]] = dataclasses.field(default_factory=list)
    topologies: list[tuple[str, Topology]] = dataclasses.field(default_factory=list)
    nvlinks: list[tuple[str, NvLinkStatus]] = dataclasses.field(default_factory=list)
    nvlink_counters: list[CounterReading] = dataclasses.field(default_factory=list)
    diag_reports: list[tuple[str, DiagReport]] = dataclasses.field(default_factory=list)
    inputs: list[InputRecord] = dataclasses.field(default_factory=list)
    failures: list[Check] = dataclasses.field(default_factory=list)
    kernel_module: str | None = None
    smi_failure: SmiStatus | None = None  # a saved output of an nvidia-smi that failed
    pci_gpus: tuple[str, ...] | None = None  # NVIDIA display devices on the PCI bus (live)


# ---- reading captures ---------------------------------------------------------------------------


def _smi_snapshots(capture: Capture) -> list[Snapshot]:
    from gpuwarden.telemetry.smi.detect import read_smi_output

    readings = read_smi_output(capture.text, capture.written_s)
    return [dataclasses.replace(reading, source=capture.path) for reading in readings]


def _dcgm_snapshot(capture: Capture) -> Snapshot:
    from gpuwarden.telemetry.dcgm.scrape import read_scrape

    snapshot = read_scrape(capture.text, capture.written_s).snapshot
    return dataclasses.replace(snapshot, source=capture.path)


def _describe(snapshots: Sequence[Snapshot]) -> str:
    newest = snapshots[-1]
    gpus = [s for s in newest.samples if s.info.mig_parent_uuid is None]
    names = sorted({s.info.name for s in gpus if s.info.name})  # unnamed: not opened, or cut
    # a page of two hosts carries two drivers: each is said
    drivers = list(dict.fromkeys(s.info.driver_version for s in gpus if s.info.driver_version))
    parts = [f"{len(gpus)} GPU(s)" + (f" ({', '.join(names)})" if names else "")]
    if drivers:
        parts.append(f"driver{'s' if len(drivers) > 1 else ''} {', '.join(drivers)}")
    if len(snapshots) > 1:
        span = newest.timestamp_s - snapshots[0].timestamp_s
        parts.append(f"{len(snapshots)} readings over {span:.0f} s")
    return ", ".join([*parts, *_left_out(newest)])


# readings the reader left out of a GPU's sample, said with the input (a few: each is one line)
_MAX_LEFT_OUT_SAID = 3


def _left_out(snapshot: Snapshot) -> list[str]:
    """What the reader left out of a device's reading and why (its backend-error events that
    name a device: an impossible value, DCGM's profiling failure value)."""
    rejected = [
        e for e in snapshot.events if e.kind is EventKind.BACKEND_ERROR and e.uuid is not None
    ]
    said = [f"left out on {e.uuid}: {e.message}" for e in rejected[:_MAX_LEFT_OUT_SAID]]
    if len(rejected) > _MAX_LEFT_OUT_SAID:
        said.append(f"{len(rejected) - _MAX_LEFT_OUT_SAID} more reading(s) left out")
    return said


def _read_capture(capture: Capture, gathered: _Gathered) -> None:
    from gpuwarden.doctor.environment import parse_nvrm_version
    from gpuwarden.telemetry.smi.failure import smi_failure_output
    from gpuwarden.telemetry.smi.paste import strip_terminal
    from gpuwarden.telemetry.smi.topo import read_nvlink_status, read_topology

    kind = capture.kind
    if kind is CaptureKind.NVIDIA_SMI:
        snapshots = _smi_snapshots(capture)
        gathered.series.append((capture.path, snapshots))
        gathered.inputs.append(_reading_record(capture, snapshots))
        # an nvidia_gpu_exporter capture also holds the topology and NVLink outputs (and a text
        # longer than classify's head may, past it): looked for unless classify ruled them out
        _read_outputs_beside(capture, gathered)
    elif kind is CaptureKind.DCGM:
        snapshot = _dcgm_snapshot(capture)
        gathered.series.append((capture.path, [snapshot]))
        gathered.inputs.append(_reading_record(capture, [snapshot]))
    elif kind is CaptureKind.TOPOLOGY:
        topology = read_topology(capture.text)
        gathered.topologies.append((capture.path, topology))
        detail = f"{len(topology.gpus)} GPU(s), {len(topology.nics)} NIC(s)"
        gathered.inputs.append(InputRecord(capture.path, kind.value, detail))
    elif kind is CaptureKind.NVLINK:
        status = read_nvlink_status(capture.text)
        gathered.nvlinks.append((capture.path, status))
        gathered.inputs.append(InputRecord(capture.path, kind.value, f"{len(status.gpus)} GPU(s)"))
    elif kind is CaptureKind.NVLINK_COUNTERS:
        _read_nvlink_counters(capture, gathered)
    elif kind is CaptureKind.KERNEL_LOG:
        for path, text in _kernel_logs(capture):
            gathered.kernel_logs.append((path, text, capture.written_s, capture.truncated))
    elif kind is CaptureKind.SMI_FAILURE:
        gathered.smi_failure = smi_failure_output(strip_terminal(capture.text).text)
        failure = gathered.smi_failure.failure if gathered.smi_failure else "unreadable"
        gathered.inputs.append(
            InputRecord(capture.path, kind.value, f"nvidia-smi failed: {failure}")
        )
    elif kind is CaptureKind.DCGM_DIAG:
        _read_dcgm_diag(capture, gathered)
    elif kind is CaptureKind.DRIVER_VERSION:
        module = parse_nvrm_version(capture.text)
        gathered.kernel_module = module.version if module is not None else None
        detail = f"kernel module {gathered.kernel_module or 'unreadable'}"
        gathered.inputs.append(InputRecord(capture.path, kind.value, detail))


def _read_outputs_beside(capture: Capture, gathered: _Gathered) -> None:
    """The `topo -m` and `nvlink -s` outputs an nvidia-smi capture holds beside its readings."""
    from gpuwarden.telemetry.smi.topo import (
        looks_like_nvlink_status,
        looks_like_topo,
        read_nvlink_status,
        read_topology,
    )

    if CaptureKind.TOPOLOGY not in capture.ruled_out and looks_like_topo(capture.text):
        gathered.topologies.append((capture.path, read_topology(capture.text)))
    if CaptureKind.NVLINK not in capture.ruled_out and looks_like_nvlink_status(capture.text):
        gathered.nvlinks.append((capture.path, read_nvlink_status(capture.text)))


def _unread(exc: GpuwardenError, capture: Capture) -> SkippedFile:
    """A capture its reader refused, listed with the reader's plain message (the listing names
    the file in front)."""
    return SkippedFile(capture.shown, exc.message)


def _reading_record(capture: Capture, snapshots: Sequence[Snapshot]) -> InputRecord:
    """The input record of a capture's readings, dated by the newest."""
    stamps = [s.timestamp_s for s in snapshots]
    return InputRecord(
        capture.path,
        capture.kind.value,
        _describe(snapshots),
        time_s=stamps[-1],
        time_source=reading_time_source(capture, stamps),
    )


def _read_nvlink_counters(capture: Capture, gathered: _Gathered) -> None:
    from gpuwarden.telemetry.smi.nvlink_counters import parse_nvlink_counters

    counters = parse_nvlink_counters(capture.text)
    gathered.nvlink_counters.append(CounterReading(capture.path, capture.written_s, counters))
    links = sum(len(gpu.links) for gpu in counters.gpus)
    detail = f"{len(counters.gpus)} GPU(s), {links} link(s), {len(counters.labels)} counter(s)"
    # `nvlink -e` prints no time: two readings' rise is over the span of their files' times
    record = InputRecord(
        capture.path, capture.kind.value, detail, capture.written_s, capture.time_source
    )
    gathered.inputs.append(record)


def _read_dcgm_diag(capture: Capture, gathered: _Gathered) -> None:
    report = parse_dcgm_diag(capture.text)
    gathered.diag_reports.append((capture.path, report))
    failed = sum(1 for t in report.tests if t.status.rank >= DiagStatus.WARN.rank)
    version = f"DCGM {report.dcgm_version}, " if report.dcgm_version else ""
    detail = f"{version}{len(report.tests)} test(s), {failed} failed or warned ({report.form})"
    gathered.inputs.append(InputRecord(capture.path, capture.kind.value, detail))


def diagnose_captures(paths: Sequence[str], options: DoctorOptions) -> DoctorReport:
    """The verdict on a node from saved outputs (files or directories of them); on each host
    where they are several hosts' (doctor/hosts.py), each judged apart."""
    paths = distinct_inputs(paths)
    captures, skipped = collect_captures(paths)
    captures = by_host(captures)
    keys = key_hosts(captures, paths)
    if keys.several:
        return _judge_hosts(captures, keys, paths, options, skipped)
    gathered, unread = _gather(captures, paths)
    environment = _offline_environment(gathered, keys.notes)
    skipped = (*skipped, *unread)
    return _judge(gathered, options, mode="captures", environment=environment, skipped=skipped)


def _gather(
    captures: Sequence[Capture], paths: Sequence[str]
) -> tuple[_Gathered, list[SkippedFile]]:
    """Every capture read (one host's), and those that looked like captures but did not read."""
    gathered = _Gathered()
    unread: list[SkippedFile] = []
    named = set(paths)
    for capture in captures:
        if capture.kind is CaptureKind.BUG_REPORT:
            unread += _read_bug_report(capture, gathered)
            continue
        try:
            _read_capture(capture, gathered)
        except GpuwardenError as exc:
            # a file named on the command line: its error is the answer (a part of a log split
            # by host is one part of the file, as a bug report's is)
            if capture.path in named and capture.host is None:
                raise exc.about(capture.path) from None
            # one file of a directory that looked like a capture but does not read: the rest
            # of the bundle is still judged, and the file is listed with why
            unread.append(_unread(exc, capture))
    return gathered, unread


def _judge_hosts(
    captures: Sequence[Capture],
    keys: HostKeys,
    paths: Sequence[str],
    options: DoctorOptions,
    skipped: Sequence[SkippedFile],
) -> DoctorReport:
    """Several hosts' captures: each host's judged as a node of its own (its GPUs, its kernel
    logs' Xids on them), then said together, every finding and check with its host."""
    judged: list[tuple[str, DoctorReport]] = []
    unread: list[SkippedFile] = []
    for host in dict.fromkeys(keys.of(c) for c in captures):
        gathered, refused = _gather([c for c in captures if keys.of(c) == host], paths)
        unread += refused
        environment = _offline_environment(gathered)
        report = _judge(gathered, options, mode="captures", environment=environment, skipped=())
        judged.append((host or UNKNOWN_HOST, report))
    return _joined(judged, keys.notes, (*skipped, *unread))


def _on_host(finding: Finding, host: str) -> Finding:
    """A host's finding among several hosts': its title says the host, and its host (and its
    device's) names it, a node's finding too: it has no device to."""
    known = None if host == UNKNOWN_HOST else host  # the host as the report spells it
    device = finding.device
    if device is not None and known is not None:
        device = dataclasses.replace(device, host=known)
    return dataclasses.replace(finding, device=device, host=known, title=f"{host}: {finding.title}")


def _joined(
    judged: Sequence[tuple[str, DoctorReport]],
    notes: Sequence[str],
    skipped: Sequence[SkippedFile],
) -> DoctorReport:
    """Hosts' reports as one: no report's host stands for the others (``host`` is None; the
    environment holds only what every host's agrees on), each finding, check, input and
    environment says its own."""
    reports = [report for _, report in judged]
    findings = [_on_host(f, host) for host, report in judged for f in report.findings]
    inputs = [
        dataclasses.replace(i, detail=f"host {host}: {i.detail}")
        for host, report in judged
        for i in report.inputs
    ]
    hosts = ", ".join(host for host, _ in judged)
    said = (f"captures of {len(judged)} hosts, each judged apart: {hosts}", *notes)
    environments = tuple((host, r.environment) for host, r in judged if r.environment is not None)
    environment = None
    if environments:
        kept = tuple(n for _, env in environments for n in env.notes)
        environment = dataclasses.replace(
            _agreed([env for _, env in environments]), notes=tuple(dict.fromkeys((*said, *kept)))
        )
    return DoctorReport(
        mode="captures",
        host=None,
        simulated=any(r.simulated for r in reports),
        samples=tuple(s for r in reports for s in r.samples),
        findings=_ordered(findings),
        checks=_joined_checks(judged),
        inputs=tuple(inputs),
        skipped=tuple(skipped),
        environment=environment,
        kernel_logs=tuple(k for r in reports for k in r.kernel_logs),
        sample_hosts=tuple(host for host, report in judged for _ in report.samples),
        host_environments=environments,
        judged_hosts=tuple(host for host, report in judged if report.judged),
    )


# what _agreed joins: an environment, or the nvidia-smi status inside one
_Facts = TypeVar("_Facts", NodeEnvironment, SmiStatus)


def _agreed(each: Sequence[_Facts]) -> _Facts:
    """What every host's environment (or nvidia-smi status) states alike: a fact where hosts
    differ is not known of them all (its default, None), never the first host's standing for
    the rest; a yes-or-no fact with no default (nvidia-smi present) is yes where any host's is."""
    first = each[0]
    differing: dict[str, Any] = {}
    for field in dataclasses.fields(first):
        values = [getattr(facts, field.name) for facts in each]
        if all(value == values[0] for value in values):
            continue
        if isinstance(values[0], SmiStatus):
            differing[field.name] = _agreed(values)
        elif field.default is not dataclasses.MISSING:
            differing[field.name] = field.default
        elif isinstance(values[0], bool):
            differing[field.name] = any(values)
        # (the one other fact with no default, the platform, is "linux" for every capture)
    return dataclasses.replace(first, **differing)


def _joined_checks(judged: Sequence[tuple[str, DoctorReport]]) -> tuple[Check, ...]:
    """One check per name over the hosts: the worst status, each judging host's detail with its
    name; a check no host could run says why of each host (alike: once, of all of them), and
    one some hosts ran says why the others did not (each host is judged apart: another host's
    pass is not this one's)."""
    by_name: dict[str, list[tuple[str, Check]]] = {}
    for host, report in judged:
        for check in report.checks:
            by_name.setdefault(check.name, []).append((host, check))
    joined = []
    for name, said in by_name.items():
        if all(check.status is CheckStatus.SKIP for _, check in said):
            codes = tuple(dict.fromkeys(code for _, check in said for code in check.codes))
            joined.append(Check(name, CheckStatus.SKIP, _skip_reasons(said, len(judged)), codes))
            continue
        ones = [[dataclasses.replace(c, detail=f"{host}: {c.detail}")] for host, c in said]
        (merged,) = _merged_checks(ones)  # one name: one check
        not_run = [(host, check) for host, check in said if check.status is CheckStatus.SKIP]
        if not_run:
            detail = f"{merged.detail}; not checked on {_skip_reasons(not_run, len(judged))}"
            merged = dataclasses.replace(merged, detail=detail)
        joined.append(merged)
    return tuple(joined)


def _skip_reasons(said: Sequence[tuple[str, Check]], hosts: int) -> str:
    """Why hosts skipped a check: "all 3 hosts: <why>" where they agree, else each reason with
    the hosts it is of ("node-a, node-c: <why>; node-b: <why>")."""
    by_reason: dict[str, list[str]] = {}
    for host, check in said:
        by_reason.setdefault(check.detail, []).append(host)
    if len(by_reason) == 1 and len(said) == hosts:
        return f"all {hosts} hosts: {said[0][1].detail}"
    return "; ".join(f"{', '.join(of)}: {reason}" for reason, of in by_reason.items())


def _kernel_logs(capture: Capture) -> list[tuple[str, str]]:
    """A kernel log as (source, text); a paste of nvidia-bug-report's kernel-log scan as the
    logs it holds, each read apart (their copies of one event then count once)."""
    from gpuwarden.doctor.bug_report import scanned_logs

    # the scan's log headers are indented by two spaces: a text without any is not split
    logs = scanned_logs(capture.path, capture.text) if "  " in capture.text else ()
    if not logs:
        return [(capture.shown, capture.text)]
    return [
        (log.name if log.name == capture.path else f"{capture.path}#{log.name}", log.body)
        for log in logs
    ]


def _read_bug_report(capture: Capture, gathered: _Gathered) -> list[SkippedFile]:
    """Each capture an nvidia-bug-report log holds, read as if it were a file of its own; a part
    its reader refuses is listed as unread, and the other parts are still read."""
    from gpuwarden.doctor.bug_report import read_bug_report

    report = read_bug_report(capture.path, capture.text, capture.written_s)
    parts = ", ".join(c.path.rsplit("#", 1)[-1] for c in report.captures) or "none"
    when = "its Date: line" if report.dated else "the file's modification time"
    detail = (
        f"nvidia-bug-report.sh {report.script_version or '(version not shown)'}: "
        f"{report.sections} part(s); read: {parts}; {len(report.unread)} unreadable; "
        f"{report.ignored} of no kind doctor reads; time from {when}"
    )
    # its parts are of the time its Date: line states, else of the file's
    source = TimeSource.STATED if report.dated else capture.time_source
    gathered.inputs.append(InputRecord(capture.path, capture.kind.value, detail))
    unread = list(report.unread)
    for part in report.captures:
        try:
            _read_capture(dataclasses.replace(part, time_source=source), gathered)
        except GpuwardenError as exc:
            unread.append(_unread(exc, part))
    return unread


def _offline_environment(gathered: _Gathered, said: Sequence[str] = ()) -> NodeEnvironment:
    """What the captures say about versions: the driver nvidia-smi printed and, with
    /proc/driver/nvidia/version, the loaded module. Frameworks are not in them."""
    infos = [s.info for _, series in gathered.series for s in series[-1].samples]
    drivers = [i.driver_version for i in infos if i.driver_version]
    # readings of several drivers (hosts, or both sides of an upgrade): the one the loaded
    # module agrees with is this node's, whichever input came first
    driver = gathered.kernel_module if gathered.kernel_module in drivers else None
    driver = driver or next(iter(drivers), None)
    cuda = next((i.cuda_driver_version for i in infos if i.cuda_driver_version), None)
    smi = SmiStatus(present=bool(infos), driver_version=driver, cuda_version=cuda)
    if gathered.smi_failure is not None and not infos:  # nvidia-smi failed and nothing read
        smi = gathered.smi_failure
    notes = (
        "offline: framework versions, Fabric Manager and the container are not in captures",
        *said,
    )
    return NodeEnvironment(
        platform="linux",
        kernel_module_version=gathered.kernel_module,
        kernel_module_source="/proc/driver/nvidia/version (capture)"
        if gathered.kernel_module
        else None,
        library_version=driver if gathered.kernel_module else None,
        library_version_source="nvidia-smi's driver version (capture)"
        if gathered.kernel_module
        else None,
        smi=smi,
        notes=notes,
    )


# ---- live ---------------------------------------------------------------------------------------


def diagnose_live(
    options: DoctorOptions,
    *,
    backend_name: str | None = None,
    scenario: str | None = None,
    readings: int = 1,
    interval_s: float = 1.0,
) -> DoctorReport:
    """The verdict on this node now: its GPUs, kernel log, topology, versions and container
    (a simulated node has no kernel log, topology, versions or container to read)."""
    from gpuwarden.doctor.environment import LocalHost, probe_environment

    host = LocalHost()
    environment = None if backend_name == "sim" else probe_environment(host)
    gathered = _Gathered()
    _read_gpus(gathered, backend_name, scenario, readings, interval_s)
    if environment is not None and not gathered.series:
        gathered.pci_gpus = nvidia_pci_devices(host)
    if environment is not None:
        if options.read_kernel_log:
            _read_live_kernel_log(host, environment, gathered)
        _read_live_topology(host, environment, gathered)
    return _judge(gathered, options, mode="live", environment=environment, skipped=())


_PCI = "/sys/bus/pci/devices"
_NVIDIA_VENDOR = "0x10de"
# PCI base class 0x03: display controllers (VGA 0x0300, 3D 0x0302); NVSwitches are bridges
_DISPLAY_CLASS = "0x03"


def nvidia_pci_devices(host: HostAccess) -> tuple[str, ...] | None:
    """Bus ids of the NVIDIA GPUs the kernel sees on the PCI bus, whether or not a driver took
    them (None where sysfs cannot be read: not Linux, a restricted container)."""
    entries = host.list_dir(_PCI)
    if entries is None:
        return None
    found = []
    for entry in entries:
        vendor = (host.read_text(f"{_PCI}/{entry}/vendor") or "").strip().lower()
        kind = (host.read_text(f"{_PCI}/{entry}/class") or "").strip().lower()
        if vendor == _NVIDIA_VENDOR and kind.startswith(_DISPLAY_CLASS):
            found.append(entry)
    return tuple(sorted(found))


def _read_gpus(
    gathered: _Gathered,
    backend_name: str | None,
    scenario: str | None,
    readings: int,
    interval_s: float,
) -> None:
    from gpuwarden.telemetry.collector import Collector
    from gpuwarden.telemetry.open import open_backend

    try:
        backend = open_backend(backend_name, None, scenario=scenario)
    except GpuwardenError as exc:
        if backend_name is not None:
            raise  # the user asked for this backend: its error is the answer
        detail = f"no GPU readings: {exc.message}"
        gathered.failures.append(Check("gpu-backend", CheckStatus.FAIL, detail))
        return
    try:
        collector = Collector(backend, interval_s=interval_s)
        snapshots = [collector.poll()]
        if readings > 1:
            collector.run(until=lambda: len(snapshots) >= readings, sink=snapshots.append)
    finally:
        backend.close()
    gathered.series.append((backend.name, snapshots))
    gathered.inputs.append(InputRecord(backend.name, "gpu-readings", _describe(snapshots)))


def _read_live_kernel_log(host: HostAccess, env: NodeEnvironment, gathered: _Gathered) -> None:
    from gpuwarden.doctor.environment import read_kernel_log

    # the probe has tried dmesg and journalctl -k already: no need to run both again
    log = read_kernel_log(host) if env.kernel_log_source is not None else None
    if log is None:
        gathered.failures.append(
            Check(
                "xid",
                CheckStatus.SKIP,
                "the kernel log is not readable here (dmesg and journalctl -k refused: run as "
                "root, or pass --from /var/log/kern.log)",
            )
        )
        return
    now = datetime.now(UTC).timestamp()
    gathered.kernel_logs.append((log.source, log.text, now, log.truncated))


def _smi_output(host: HostAccess, *args: str) -> tuple[str, str] | None:
    """(command, its output) when nvidia-smi ran and printed something."""
    result = host.run(["nvidia-smi", *args], timeout_s=30.0)
    if result is None or result.returncode != 0 or not result.stdout.strip():
        return None
    return " ".join(("nvidia-smi", *args)), result.stdout


def _read_live_topology(host: HostAccess, env: NodeEnvironment, gathered: _Gathered) -> None:
    from gpuwarden.telemetry.smi.topo import read_nvlink_status, read_topology

    if not env.smi.present or env.smi.failure is not None:
        return
    # an output this version cannot read is no verdict: the nvlink-topology check then skips
    topo = _smi_output(host, "topo", "-m")
    if topo is not None:
        with contextlib.suppress(GpuwardenError):
            gathered.topologies.append((topo[0], read_topology(topo[1])))
    nvlink = _smi_output(host, "nvlink", "-s")
    if nvlink is not None:
        with contextlib.suppress(GpuwardenError):
            gathered.nvlinks.append((nvlink[0], read_nvlink_status(nvlink[1])))


# ---- judging ------------------------------------------------------------------------------------


def _judge(
    gathered: _Gathered,
    options: DoctorOptions,
    *,
    mode: str,
    environment: NodeEnvironment | None,
    skipped: Sequence[SkippedFile],
) -> DoctorReport:
    findings: list[Finding] = []
    checks: list[Check] = list(gathered.failures)
    results = [
        evaluate_readings(series, thresholds=options.thresholds) for _, series in gathered.series
    ]
    for result in results:
        findings += result.findings
    checks += _merged_checks(result.checks for result in results)
    samples = _newest_samples(gathered.series)
    devices = tuple(s.info for s in samples)
    kernel_logs = _scan_logs(gathered, findings, checks, devices)
    if not any(c.name == "xid" for c in checks):
        checks.append(Check("xid", CheckStatus.SKIP, _NO_KERNEL_LOG[mode]))
    topology_found, topology_checks = topology_findings(
        [t for _, t in gathered.topologies], [n for _, n in gathered.nvlinks], devices
    )
    findings += topology_found
    checks += topology_checks
    if gathered.nvlinks:
        checks = [_nvlink_judged_elsewhere(c) for c in checks]
    if gathered.nvlink_counters:
        counter_found, counter_check = nvlink_counter_findings(
            gathered.nvlink_counters, options.thresholds
        )
        findings += counter_found
        checks.append(counter_check)
    for source, report in gathered.diag_reports:
        diag_found = dcgm_diag_findings(report, source=f"dcgmi-diag:{source}")
        findings += diag_found
        checks.append(dcgm_diag_check(report, diag_found, source))
    if environment is not None:
        # a branch's support is a question of the run's month, not the capture's
        this_month = datetime.now(UTC).strftime("%Y-%m")
        version_checks, version_found = evaluate_versions(
            environment, devices, samples, this_month=this_month
        )
        if mode == "captures":
            version_checks, version_found = _offline_versions(version_checks, version_found)
        findings += version_found
        checks += version_checks
    checks.append(_processes_check(samples))
    smi = environment.smi if environment is not None else None
    gpu_count = _gpu_count_check(samples, gathered, options.expect_gpus, smi)
    checks.append(gpu_count[0])
    findings += gpu_count[1]
    findings = attach_devices(findings, devices)
    host = next((series[-1].host for _, series in gathered.series if series[-1].host), None)
    simulated = any(series[-1].simulated for _, series in gathered.series)
    return DoctorReport(
        mode=mode,
        host=host,
        simulated=simulated,
        samples=samples,
        findings=_ordered(_unique(findings)),
        checks=_merged_checks([checks]),
        inputs=tuple(gathered.inputs),
        skipped=tuple(skipped),
        environment=environment,
        kernel_logs=kernel_logs,
    )


# What nvidia-smi captures cannot tell: which framework the jobs run and in what container.
_NOT_IN_CAPTURES = {
    "driver-cuda": "the framework's CUDA runtime is not in the captures",
    "framework-arch": "the framework build is not in the captures",
    "container": "the container context is not in the captures",
}
_NOT_IN_CAPTURES_HINT = "; run `gpuwarden doctor` on the node itself to check it"


def _offline_versions(
    checks: Sequence[Check], findings: Sequence[Finding]
) -> tuple[tuple[Check, ...], tuple[Finding, ...]]:
    """The version checks a set of captures can decide; the others skip, saying why (the
    probe's "not installed" would be about this machine, not the captured node)."""
    undecided = {code for c in checks if c.name in _NOT_IN_CAPTURES for code in c.codes}
    kept = tuple(
        Check(c.name, CheckStatus.SKIP, _NOT_IN_CAPTURES[c.name] + _NOT_IN_CAPTURES_HINT)
        if c.name in _NOT_IN_CAPTURES
        else c
        for c in checks
    )
    return kept, tuple(f for f in findings if f.code not in undecided)


_NO_KERNEL_LOG = {
    "captures": "no kernel log among the captures: Xids unknown (add `dmesg` or "
    "`journalctl -k` output, or /var/log/kern.log)",
    "live": "the kernel log was not read (--no-kernel-log, or a simulated node)",
}


def _merged_checks(groups: Iterable[Sequence[Check]]) -> tuple[Check, ...]:
    """One check per name: the worst status; details of every source that judged it."""
    merged: dict[str, Check] = {}
    for checks in groups:
        for check in checks:
            kept = merged.get(check.name)
            if kept is None:
                merged[check.name] = check
                continue
            worse = _STATUS_RANK[check.status] > _STATUS_RANK[kept.status]
            status = check.status if worse else kept.status
            details = [kept.detail] if kept.status is not CheckStatus.SKIP else []
            if check.status is not CheckStatus.SKIP and check.detail not in details:
                details.append(check.detail)
            detail = "; ".join(details) or kept.detail
            codes = tuple(dict.fromkeys((*kept.codes, *check.codes)))
            merged[check.name] = Check(check.name, status, detail, codes)
    return tuple(merged.values())


def _device_key(info: DeviceInfo) -> str:
    if info.uuid and info.uuid != MASKED_UUID:
        return info.uuid
    bus = normalize_pci_bus_id(info.pci_bus_id)
    return bus or f"{info.index}/{info.name}/{info.mig_profile}"


def _newest_samples(series: Sequence[tuple[str, Sequence[Snapshot]]]) -> tuple[DeviceSample, ...]:
    newest: dict[str, DeviceSample] = {}
    for _, snapshots in series:
        for sample in snapshots[-1].samples:
            if sample.info.mig_parent_uuid is not None:
                continue
            key = _device_key(sample.info)
            kept = newest.get(key)
            if kept is None or sample.timestamp_s >= kept.timestamp_s:
                newest[key] = sample
    return tuple(sorted(newest.values(), key=lambda s: s.info.index))


def _scan_logs(
    gathered: _Gathered,
    findings: list[Finding],
    checks: list[Check],
    devices: Sequence[DeviceInfo],
) -> tuple[KernelLogSummary, ...]:
    """Each kernel log's Xids and driver messages; the GPUs read beside it give their
    architectures (an Xid 63/64 without its message: row remap or page retirement)."""
    summaries: list[KernelLogSummary] = []
    # one node's logs: an event copied into several counts once (one log has no copies: no
    # tally)
    tally = XidRecordTally() if len(gathered.kernel_logs) > 1 else None
    for source, text, written_s, truncated in gathered.kernel_logs:
        if tally is not None:
            report, repeated = tally.scan(text, written_s=written_s)
        else:
            report, repeated = scan_kernel_log(text, written_s=written_s), 0
        summaries.append(KernelLogSummary(source, report, truncated))
        where = f"kernel-log:{source}"
        xids = xid_findings(report, source=where, devices=devices)
        driver = driver_message_findings(report, source=where)
        findings += (*xids, *driver)
        checks.append(_xid_check(source, report, xids, driver, truncated))
        detail = f"{report.lines_scanned} lines, {report.xid_lines} Xid line(s)"
        if repeated:
            detail += f" (and {repeated} Xid line(s) an earlier log holds, counted there)"
        gathered.inputs.append(InputRecord(source, "kernel-log", detail))
    return tuple(summaries)


def _xid_check(
    source: str,
    report: KernelLogReport,
    xids: Sequence[Finding],
    driver: Sequence[Finding],
    truncated: bool,
) -> Check:
    """The kernel log's check: its Xids, lost GPUs and driver messages, each named."""
    found = (*xids, *driver)
    cut = " (newest part only)" if truncated else ""
    if not found:
        detail = f"no Xid in {report.lines_scanned} kernel-log lines of {source}{cut}"
        return Check("xid", CheckStatus.PASS, detail)
    said = [f"Xid {g.xid} ×{g.count}" for g in report.groups[:6]]
    said += [f"SXid {g.sxid} ×{g.count}" for g in report.nvswitch_errors[:6]]
    gpus_iommu = [g for g in report.iommu_faults if g.nvidia is not None]
    said += [f"IOMMU faults ×{g.faults} on GPU {g.pci_bus_id}" for g in gpus_iommu[:6]]
    if report.fallen_off_bus:
        said.append("a GPU lost from the bus")
    said += [f.title for f in driver]
    return check_of("xid", found, f"{', '.join(said)} in {source}{cut}")


def _gib(count: int | None) -> str:
    return "memory not reported" if count is None else f"{count / GIB:.1f} GiB"


def _nvlink_judged_elsewhere(check: Check) -> Check:
    """The readings' nvlink family skips when they carry no link state, but an `nvlink -s`
    output beside them was read: say where its links were judged, not that none was reported."""
    if check.name != "nvlink" or check.status is not CheckStatus.SKIP:
        return check
    said = "the links' state is judged from the `nvidia-smi nvlink -s` output (nvlink-topology)"
    return dataclasses.replace(check, detail=f"{said}; {check.detail}")


def _processes_check(samples: Sequence[DeviceSample]) -> Check:
    """Who holds each GPU's memory, as the driver lists them (host PIDs; a container sees only
    its own). Memory used with no process listed is said too: another namespace or a zombie."""
    reported = [s for s in samples if s.processes is not None]
    if not reported:
        return Check("processes", CheckStatus.SKIP, "no process list in these readings")
    parts = []
    for sample in reported:
        procs = sorted(sample.processes or (), key=lambda p: -(p.used_memory_bytes or 0))
        held = sum(p.used_memory_bytes or 0 for p in procs)
        used = sample.memory_used_bytes or 0
        if procs and all(p.used_memory_bytes is None for p in procs):
            # Windows' WDDM driver model and some containers print N/A per process
            names = ", ".join(f"{p.name or '?'} pid {p.pid}" for p in procs[:3])
            more = f" +{len(procs) - 3}" if len(procs) > 3 else ""
            parts.append(
                f"GPU {sample.info.index}: {len(procs)} process(es), memory per process not "
                f"reported ({names}{more})"
            )
        elif procs:
            top = ", ".join(
                f"{p.name or '?'} pid {p.pid} {_gib(p.used_memory_bytes)}" for p in procs[:3]
            )
            more = f" +{len(procs) - 3}" if len(procs) > 3 else ""
            parts.append(
                f"GPU {sample.info.index}: {len(procs)} process(es) hold {held / GIB:.1f} GiB "
                f"({top}{more})"
            )
        elif used > _UNLISTED_MEMORY_BYTES:
            parts.append(
                f"GPU {sample.info.index}: {used / GIB:.1f} GiB used, no process listed (a "
                "process of another PID namespace or container, or a zombie)"
            )
    return Check("processes", CheckStatus.PASS, "; ".join(parts) or "no process holds a GPU")


def _gpu_count_check(
    samples: Sequence[DeviceSample],
    gathered: _Gathered,
    expected: int | None,
    smi: SmiStatus | None,
) -> tuple[Check, list[Finding]]:
    """GPUs seen against what the user expects and what the topology lists."""
    seen = len(samples)
    listed = max((len(t.gpus) for _, t in gathered.topologies), default=None)
    counts = [f"{seen} GPU(s) reporting"]
    if listed is not None:
        counts.append(f"{listed} in nvidia-smi topo -m")
    want = expected if expected is not None else listed
    if not gathered.series:
        if (
            gathered.pci_gpus is None
            and expected
            and smi is not None
            and smi.failure == "no-devices"
        ):
            # the driver answered and counted none: 0 of the GPUs the user says are there
            said = Evidence("nvidia-smi", smi.message, "nvidia-smi", "the driver counted 0 GPUs")
            return _missing_gpus(0, expected, f"--expect-gpus {expected}", counts, said)
        return _unread_gpus(gathered.pci_gpus)
    if want is None:
        # nothing to count against (a container sees only its GPUs, so not the PCI bus either):
        # a count with no expectation judges nothing
        detail = f"{seen} GPU(s) reporting; pass --expect-gpus N (or add `nvidia-smi topo -m`)"
        return Check("gpu-count", CheckStatus.SKIP, f"{detail} to check the count"), []
    if seen >= want:
        return Check("gpu-count", CheckStatus.PASS, ", ".join(counts)), []
    basis = f"--expect-gpus {expected}" if expected is not None else "the topology"
    return _missing_gpus(seen, want, basis, counts)


def _missing_gpus(
    seen: int, want: int, basis: str, counts: list[str], *more: Evidence
) -> tuple[Check, list[Finding]]:
    finding = Finding(
        code="gpu-missing",
        severity=Severity.CRITICAL,
        title=f"{seen} of {want} GPUs report ({basis})",
        cause="a GPU the node should have does not answer: it fell off the bus, failed to "
        "initialise (RmInitAdapter), or is hidden (CUDA_VISIBLE_DEVICES, a MIG or driver issue)",
        remedy="check `nvidia-smi -L` and `dmesg | grep -i -e xid -e NVRM` for the missing bus "
        "id; reset or reboot; reseat or replace the GPU if it stays missing",
        evidence=(Evidence("gpu_count", seen, "readings", f"expected {want} ({basis})"), *more),
        action="RESTART_BM",
    )
    return Check("gpu-count", CheckStatus.FAIL, ", ".join(counts), ("gpu-missing",)), [finding]


def _unread_gpus(pci_gpus: tuple[str, ...] | None) -> tuple[Check, list[Finding]]:
    """No GPU answered: is there one the driver did not take, or none at all?"""
    if pci_gpus is None:
        return Check("gpu-count", CheckStatus.SKIP, "no GPU readings to count"), []
    if not pci_gpus:
        detail = "no NVIDIA GPU on this machine's PCI bus"
        return Check("gpu-count", CheckStatus.SKIP, detail), []
    finding = Finding(
        code="driver-not-loaded",
        severity=Severity.CRITICAL,
        title=f"{len(pci_gpus)} NVIDIA GPU(s) on the PCI bus, none answers the driver",
        cause="the NVIDIA kernel module is not loaded, not built for the running kernel, or "
        "could not take the GPUs (another driver such as nouveau, RmInitAdapter failures)",
        remedy="`lsmod | grep nvidia`; `dmesg | grep -i nvrm`; rebuild/reinstall the driver for "
        "the running kernel (DKMS) and reboot; blacklist nouveau",
        evidence=(
            Evidence("pci_devices", ", ".join(pci_gpus[:8]), _PCI, "vendor 0x10de, display"),
        ),
        action="RESTART_BM",
    )
    detail = f"{len(pci_gpus)} NVIDIA GPU(s) on the PCI bus, 0 reporting"
    return Check("gpu-count", CheckStatus.FAIL, detail, ("driver-not-loaded",)), [finding]


def _identity(finding: Finding) -> tuple[str, str]:
    device = finding.device
    if device is None:
        # a node finding said once per driver (two hosts' drivers) is one per driver
        driver = driver_of(finding)
        return finding.code, "node" if driver is None else f"node/driver {driver}"
    who = normalize_pci_bus_id(device.pci_bus_id) or device.uuid or str(device.index)
    return finding.code, f"{who}/{device.gpu_instance_id}"


def _unique(findings: Sequence[Finding]) -> list[Finding]:
    """One finding per code and device: two captures of one node say the same thing twice."""
    kept: dict[tuple[str, str], Finding] = {}
    for finding in findings:
        key = _identity(finding)
        old = kept.get(key)
        if old is None or (finding.severity.rank, len(finding.evidence)) > (
            old.severity.rank,
            len(old.evidence),
        ):
            kept[key] = finding
    return list(kept.values())


def _ordered(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=finding_order))
