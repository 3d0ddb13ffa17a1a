"""One dcgm-exporter scrape → a Snapshot, plus which Kubernetes pod used which GPU.

Series are grouped by device: the GPU's UUID (or its ``gpu`` index when an old exporter omits
it) and, for MIG, ``GPU_I_ID``. A MIG GPU instance becomes its own DeviceSample (DeviceInfo
carries ``mig_parent_uuid``/``mig_profile``/``gpu_instance_id``) and also appears in its parent's
``mig_devices``; a parent that has no series of its own is still listed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuwarden.errors import naming, quoted, shown
from gpuwarden.telemetry.clock_events import decode_clock_events
from gpuwarden.telemetry.dcgm import clock_counts
from gpuwarden.telemetry.dcgm.clock_counts import ClockEventCount, clock_events
from gpuwarden.telemetry.dcgm.exposition import (
    COUNT_SUFFIX,
    Sample,
    ScrapeError,
    Tally,
    read_exposition,
)
from gpuwarden.telemetry.dcgm.fields import (
    CLOCK_EVENT_FIELDS,
    FABRIC_ERROR_FIELD,
    FABRIC_HEALTH_FIELDS,
    FABRIC_STATUS_FIELD,
    FIELDS,
    LEGACY_INFO,
    LEGACY_NAMES,
    POWER_CAP_TIME_FIELD,
    THERMAL_TIME_FIELDS,
    VGPU_LICENSE_FIELD,
    VIRTUAL_MODE_FIELD,
    clock_event_mask,
    clock_event_times,
    cuda_version,
    extra_name,
    fabric_fields,
    fabric_health_fields,
    is_blank,
    pre_dcgm46_name,
    vgpu_license_status,
)
from gpuwarden.telemetry.dcgm.profiling import stale_profiling
from gpuwarden.telemetry.dcgm.xid import FAMILIES as XID_FAMILIES
from gpuwarden.telemetry.dcgm.xid import (
    WINDOWED,
    XID_LABELS,
    XidCount,
    merged,
    xid_events,
)
from gpuwarden.telemetry.health_readings import TLimitThresholds
from gpuwarden.telemetry.validate import (
    MAX_DEVICES,
    U32_MAX,
    U64_MAX,
    possible,
    rejection,
    validate_snapshot,
)
from gpuwarden.types.telemetry import (
    MIG_PILLARS,
    DeviceEvent,
    DeviceInfo,
    DeviceSample,
    EventKind,
    MigDeviceSample,
    PodSample,
    Snapshot,
    placeholder_uuid,
)

# Readings of the physical GPU, not of a GPU instance (NVML reads them on the parent's handle;
# a MIG device handle does not support them): dcgm-exporter repeats them on every GI series of a
# GPU in MIG mode, which may have no series of its own. They belong to the parent's sample.
BOARD_FIELDS = (
    "temperature_gpu_celsius",
    "temperature_memory_celsius",
    "power_draw_watts",
    "power_limit_watts",
    "power_enforced_limit_watts",
    "energy_consumed_joules",
    "clock_sm_mhz",
    "clock_memory_mhz",
    "clock_video_mhz",
    "pstate",
    "fan_speed_percent",
    "pcie_link_gen_current",
    "pcie_link_width_current",
    "temperature_margin_celsius",
    "temperature_gpu_max_celsius",
    "temperature_memory_max_celsius",
    "temperature_slowdown_celsius",
    "temperature_shutdown_celsius",
    "sram_threshold_exceeded",
    "remapped_rows_banks_exhausted",
    "recovery_action",
    "fabric_state",
    "fabric_status",
    "fabric_health_summary",
    "fabric_health_issues",
)


@dataclass(frozen=True, slots=True)
class PodAttribution:
    """A pod dcgm-exporter's kubelet mapping put on a device (labels pod, namespace, container)."""

    device_uuid: str
    gpu_instance_id: int | None
    namespace: str | None
    pod: str
    container: str | None


@dataclass(frozen=True, slots=True)
class DcgmScrape:
    snapshot: Snapshot
    pods: tuple[PodAttribution, ...]
    # per GPU and Xid, as DCGM_EXP_XID_ERRORS_COUNT / _TOTAL count them (the next reading of the
    # same exporter turns only what is new into events)
    xid_counts: tuple[XidCount, ...] = ()
    # (GPU uuid, host) from the Hostname label: a scrape of several nodes (federation, a merged
    # file) has one device 0 per host
    hosts: tuple[tuple[str, str], ...] = ()
    # per GPU and clock-event reason, as DCGM_EXP_CLOCK_EVENTS_COUNT / _TOTAL count them
    clock_event_counts: tuple[ClockEventCount, ...] = ()

    def counts_seen(self) -> dict[tuple[str, str, int], int]:
        """What the next reading of the same exporter passes as ``previous``."""
        counted: tuple[XidCount | ClockEventCount, ...] = (
            *self.xid_counts,
            *self.clock_event_counts,
        )
        return {c.key: c.count for c in counted}


@dataclass(slots=True)
class _Device:
    index: int
    uuid: str
    gpu_instance_id: int | None
    labels: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    memory_total_bytes: int | None = None
    fabric: dict[str, float] = field(default_factory=dict)  # FABRIC_MANAGER_STATUS / _ERROR

    @property
    def sample_uuid(self) -> str:
        """The uuid its DeviceSample has: a GPU's own, "<GPU uuid>:gi<id>" for a MIG instance."""
        gi = self.gpu_instance_id
        return self.uuid if gi is None else f"{self.uuid}:gi{gi}"


# The max operating temperature where DCGM_FI_DEV_GPU_MAX_OP_TEMP is not scraped, from the T.Limit
# margin; DCGM has no thresholds relative to T.Limit, so those stay as scraped.
_NO_RELATIVE_THRESHOLDS = TLimitThresholds()


def _label(labels: dict[str, str], *names: str) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


def _window_s(sample: Sample) -> float | None:
    """An exporter-owned counter's ``window_size_in_ms`` label, in seconds; None without one."""
    window = sample.labels.get("window_size_in_ms")
    if window in (None, ""):
        return None
    try:
        return int(window) / 1000
    except ValueError:
        raise ScrapeError(
            sample.line, f"{shown(sample.name)}: window_size_in_ms label is not a number"
        ) from None


def _xid_count(
    sample: Sample, device: _Device, counts: list[XidCount], windows: dict[str, float]
) -> None:
    """One DCGM_EXP_XID_ERRORS_COUNT/_TOTAL series into ``counts`` (per GPU, Xid label kept)."""
    labels = sample.labels
    window_s = _window_s(sample)
    try:
        xid_label = next((labels[n] for n in XID_LABELS if labels.get(n)), None)
        xid = int(xid_label) if xid_label is not None else None
    except ValueError:
        raise ScrapeError(sample.line, f"{shown(sample.name)}: xid label is not a number") from None
    if window_s is not None:
        windows[device.uuid] = window_s
    if xid is None or is_blank(sample.value) or sample.value <= 0:
        return  # the exporter's "no Xid in the window" series
    counts.append(
        XidCount(
            uuid=device.uuid,
            index=device.index,
            xid=xid,
            count=round(sample.value),
            family=sample.name,
            window_s=window_s if sample.name == WINDOWED else None,
        )
    )


def _clock_count(
    sample: Sample,
    device: _Device,
    counts: list[ClockEventCount],
    windows: dict[str, float],
) -> None:
    """One DCGM_EXP_CLOCK_EVENTS_COUNT/_TOTAL series into ``counts`` (per GPU, reason kept)."""
    window_s = _window_s(sample)
    if window_s is not None:
        windows[device.uuid] = window_s
    bit = clock_counts.reason_bit(sample.labels)
    if bit is None or is_blank(sample.value) or sample.value <= 0:
        return
    counts.append(
        ClockEventCount(
            uuid=device.uuid,
            index=device.index,
            bit=bit,
            count=round(sample.value),
            family=sample.name,
            window_s=None if sample.name == clock_counts.CUMULATIVE else window_s,
        )
    )


def _whole_label(labels: dict[str, str], name: str) -> int | None:
    """A device index label (``gpu``, ``GPU_I_ID``): NVML's unsigned ids; "" = absent."""
    text = labels.get(name)
    if text in (None, ""):
        return None
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"{name} label {quoted(text)} is not a number") from None
    if not 0 <= number <= U32_MAX:
        raise ValueError(f"{name} label {quoted(text)} is not a device index")
    return number


def _index_identity(labels: dict[str, str], index: int) -> str:
    """A GPU named by its ``gpu`` index on its host, where no UUID label names it."""
    return placeholder_uuid(index, _label(labels, "Hostname", "hostname"))


# What an NVML UUID is made of once its GPU-/MIG- prefixes are set aside: hex groups, and the
# "/gi/ci" of the MIG form before R470 (MIG-GPU-<uuid>/1/0).
_UUID_BODY = re.compile(r"[0-9a-fA-F/-]+")


def _masked(uuid: str) -> bool:
    """A UUID label blanked out before the scrape was shared ("GPU-********", dcgm-exporter
    issue 512; "GPU-xxxxxxxx-…", "<redacted>"): characters no NVML UUID has."""
    body = uuid
    for prefix in ("MIG-", "GPU-"):
        body = body.removeprefix(prefix)
    return _UUID_BODY.fullmatch(body) is None


def _device_of(
    sample: Sample,
    devices: dict[tuple[str, int | None], _Device],
    index_of_uuid: dict[tuple[str, str | None], int],
) -> _Device | None:
    """The device (GPU, or MIG instance) a DCGM series is about; None for exporter-wide ones.
    ``index_of_uuid``: (UUID label, host) → the ``gpu`` index it came with first."""
    labels = sample.labels
    gpu = labels.get("gpu")
    uuid = labels.get("UUID") or labels.get("uuid")
    if gpu is None and uuid is None:
        return None
    try:
        index = _whole_label(labels, "gpu")
        gi = _whole_label(labels, "GPU_I_ID")
    except ValueError as exc:
        raise ScrapeError(sample.line, f"{shown(sample.name)}: {exc}") from None
    if index is None:
        index = len(devices)
    if uuid is None or _masked(uuid):  # an old exporter, or a UUID blanked before sharing
        uuid = _index_identity(labels, index)
    else:
        # NVML UUIDs are unique per GPU, so one UUID under two indexes of a host is a UUID
        # blanked out in a form that still looks like one (all zeros): the index names those
        # GPUs, as it does without a UUID.
        key = (uuid, _label(labels, "Hostname", "hostname"))
        if index_of_uuid.setdefault(key, index) != index:
            uuid = _index_identity(labels, index)
    device = devices.get((uuid, gi))
    if device is None:
        if len(devices) >= MAX_DEVICES:
            raise ScrapeError(
                sample.line,
                f"more than {MAX_DEVICES} GPUs and MIG instances: a fleet's metrics, not a "
                "node's scrape (`gpuwarden fleet` reads those from Prometheus)",
            )
        device = devices[(uuid, gi)] = _Device(index=index, uuid=uuid, gpu_instance_id=gi)
    for name, value in labels.items():
        device.labels.setdefault(name, value)
    return device


# The labels naming the workload's pod (first present wins). Prometheus scraping without
# honor_labels renames a series' own pod/namespace/container to exported_* and sets the plain
# ones to the exporter's own pod (dcgm-exporter issues 27 and 340, kube-prometheus
# ServiceMonitors): then only the exported_* ones are the workload's. dcgm-exporter 1.x spelled
# them pod_name, pod_namespace, container_name; a fork of its pkg/dcgmexporter (the old names
# beside job_pod_name, job_pod_namespace, job_pod_container_name) spells the container's
# pod_container_name. The older spellings come first: an exporter writes one spelling, and a
# series that has both got the plain pod/namespace/container from the Prometheus target that
# scraped it (Kubernetes service discovery's labels, the exporter's own pod), not from it.
_RELABELLED = ("exported_pod", "exported_namespace", "exported_container")
_POD_LABELS = ("pod_name", "pod")
_NAMESPACE_LABELS = ("pod_namespace", "namespace")
_CONTAINER_LABELS = ("container_name", "pod_container_name", "container")


def _pod_of(labels: dict[str, str], device: _Device) -> PodAttribution | None:
    """The pod dcgm-exporter put on a series; None when it names none."""
    if labels.get(_RELABELLED[0]):
        pod, namespace, container = (labels.get(name) or None for name in _RELABELLED)
    else:
        pod, namespace, container = (
            _label(labels, *names) for names in (_POD_LABELS, _NAMESPACE_LABELS, _CONTAINER_LABELS)
        )
    if pod is None:
        return None
    return PodAttribution(
        device_uuid=device.uuid,
        gpu_instance_id=device.gpu_instance_id,
        namespace=namespace,
        pod=pod,
        container=container,
    )


def _unreadable(device: _Device, sample: Sample, stamp: float, why: str) -> DeviceEvent:
    """A value that cannot become a reading: not reported, and said (as telemetry.validate)."""
    return rejection(stamp, device.sample_uuid, device.index, sample.name, sample.value, why)


def _read_value(device: _Device, sample: Sample) -> None:
    """One DCGM field of a device into its values (ValueError: the value cannot be one); the
    first value of a field stays."""
    name, value = sample.name, sample.value
    if name in FIELDS:
        converted = FIELDS[name][1](value)
    elif name in CLOCK_EVENT_FIELDS:
        converted = decode_clock_events(clock_event_mask(value))
    else:
        converted = value
    if _is_memory_total(name):  # identity, lives in DeviceInfo
        if not device.memory_total_bytes and isinstance(converted, int):
            device.memory_total_bytes = converted
    elif converted is not None:
        store, key = _slot(device, name)
        store.setdefault(key, converted)


def _forget_value(device: _Device, name: str) -> None:
    """Undo ``_read_value`` of field ``name``: the device reports it as unknown."""
    if _is_memory_total(name):
        device.memory_total_bytes = None
    else:
        store, key = _slot(device, name)
        store.pop(key, None)


def _is_memory_total(name: str) -> bool:
    return name in FIELDS and FIELDS[name][0] == "memory_total_bytes"


def _slot(device: _Device, name: str) -> tuple[dict[str, Any], str]:
    """Where a DCGM field of a device is kept: the mapping and its key."""
    if name in FIELDS:
        return device.values, FIELDS[name][0]
    if name in CLOCK_EVENT_FIELDS:
        return device.values, "clock_event_reasons"
    if name in (FABRIC_STATUS_FIELD, FABRIC_ERROR_FIELD):
        return device.fabric, "status" if name == FABRIC_STATUS_FIELD else "error"
    if name in FABRIC_HEALTH_FIELDS:
        return device.fabric, FABRIC_HEALTH_FIELDS[name]
    return device.extra, extra_name(name)


def _no_dcgm_series(tally: Tally, first: str | None, dcgm: int) -> ScrapeError:
    """A page with no DCGM_* series of a GPU: not a dcgm-exporter scrape (smi refuses an empty
    or foreign file the same way). ``first``: the first series' name; ``dcgm``: DCGM_* series."""
    if first is None and tally.metadata:
        # dcgm-exporter declares every family of its counters file whether or not any GPU
        # gave it a value: HELP/TYPE alone is what it serves when it sees no GPU or the fields
        # are unsupported on the one it sees (dcgm-exporter issues 222, 430: MIG, time-sliced).
        problem = (
            f"no metrics at all: {tally.metadata} HELP/TYPE line(s) but no sample "
            "(dcgm-exporter declared its families and served no reading of any GPU)"
        )
    elif first is None:
        problem = "no metrics at all (an empty page or file)"
    elif not dcgm:
        problem = (
            f"{tally.samples} series, none of them DCGM_* (the first is {quoted(first)}): not a "
            "dcgm-exporter scrape"
        )
    else:
        problem = "DCGM_* series, but none of a GPU (no gpu or UUID label)"
    return ScrapeError(
        None,
        problem,
        reference="dcgm-scrape-no-gpus",
        hint="pass what dcgm-exporter serves (`curl -s http://<node>:9400/metrics`); for "
        "nvidia-smi output use --backend smi",
    )


def _canonical(sample: Sample) -> Sample:
    """dcgm-exporter names its series DCGM_*; a pipeline that lower-cases metric names (a
    Prometheus relabel, a remote-write backend; pasted in dcgm-exporter issue 272 together with
    a ``uuid`` label) prints the same series as ``dcgm_fi_*``: read them as the exporter's.
    dcgm-exporter 1.x's short names (``dcgm_gpu_temp``) are read as the fields they were, and
    DCGM 4.6's field names (series and label-type fields alike) as their older aliases. A
    counter's series stored under an OpenMetrics name (``DCGM_FI_..._total``) is read as its
    field (_counter_field)."""
    name = _counter_field(sample.name)
    if not name.startswith("DCGM_") and name[:5].lower() == "dcgm_":
        lowered = name.lower()
        name = LEGACY_NAMES.get(lowered, lowered.upper())
    name = pre_dcgm46_name(name)
    labels = sample.labels
    if any(pre_dcgm46_name(key) != key for key in labels):
        labels = _labels_by_older_names(labels)
    if name == sample.name and labels is sample.labels:
        return sample
    return dataclasses.replace(sample, name=name, labels=labels)


def _counter_field(name: str) -> str:
    """The DCGM field a series name is, without a counter suffix added after the exporter:
    DCGM field names are upper case (dcgm_fields.h), so a lower-case ``_total`` after one
    is no part of it (``DCGM_FI_DEV_ECC_SBE_VOL_TOTAL`` keeps its own). OpenMetrics gives a
    counter's series that suffix (an OpenTelemetry Collector's or Grafana Alloy's Prometheus
    exporter adds it by default, add_metric_suffixes); a Prometheus that scraped such a
    re-export stores and federates the series under that name, its TYPE gone."""
    field_name = name.removesuffix(COUNT_SUFFIX)
    if field_name != name and field_name.startswith("DCGM_") and field_name.isupper():
        return field_name
    return name


def _labels_by_older_names(labels: dict[str, str]) -> dict[str, str]:
    """``labels`` with DCGM 4.6's field names as their older aliases. A label given under both
    names with two values (a name, a bus id, a driver version) is left out: which one is the
    GPU's is unknown, and the later one in the series no longer wins unsaid."""
    renamed: dict[str, str] = {}
    contradicted: set[str] = set()
    for key, value in labels.items():
        older = pre_dcgm46_name(key)
        if renamed.setdefault(older, value) != value:
            contradicted.add(older)
    return {key: value for key, value in renamed.items() if key not in contradicted}


# Families with a series per Xid, clock-event reason or GPU type: no one reading of their device
_SERIES_PER_LABEL = frozenset({*XID_FAMILIES, *clock_counts.FAMILIES, LEGACY_INFO.upper()})
_DeviceField = tuple[str, int | None, str]  # (device uuid, GPU instance, field)
_PodKey = tuple[str, int | None, str]  # (device uuid, GPU instance, pod)


@dataclass(slots=True)
class _ScrapeReading:
    """What one pass over a page's series gathers, before it becomes a Snapshot."""

    tally: Tally = field(default_factory=Tally)
    first: str | None = None  # the first series' name
    dcgm: int = 0  # how many series were DCGM_*
    devices: dict[tuple[str, int | None], _Device] = field(default_factory=dict)
    index_of_uuid: dict[tuple[str, str | None], int] = field(default_factory=dict)
    counted: list[XidCount] = field(default_factory=list)
    windows: dict[str, float] = field(default_factory=dict)
    clocked: list[ClockEventCount] = field(default_factory=list)
    clock_windows: dict[str, float] = field(default_factory=dict)
    pods: dict[_PodKey, PodAttribution] = field(default_factory=dict)
    # the pods named by a plain ``pod`` label and those named by exported_* ones
    # (_drop_target_pods)
    plain_pods: set[_PodKey] = field(default_factory=set)
    relabelled_pods: set[_PodKey] = field(default_factory=set)
    hosts: dict[str, str] = field(default_factory=dict)  # device uuid → its host, in order
    rejected: list[DeviceEvent] = field(default_factory=list)
    simulated: bool = False  # gpuwarden export of a sim backend marks its series simulated="true"
    # a renamed field's first spelling and value on each device, and the fields a page gives
    # under both spellings with two values (what the second said)
    spellings: dict[_DeviceField, tuple[str, float]] = field(default_factory=dict)
    contradicted: dict[_DeviceField, tuple[_Device, str, float]] = field(default_factory=dict)


def parse_scrape(
    text: str,
    source: str,
    timestamp_s: float,
    *,
    previous: Mapping[tuple[str, str, int], int] | None = None,
) -> DcgmScrape:
    """``read_scrape`` of a page named ``source`` (a file, a URL): its errors name it (and the
    line), its Snapshot carries it."""
    with naming(source):
        scrape = read_scrape(text, timestamp_s, previous=previous)
    return dataclasses.replace(scrape, snapshot=dataclasses.replace(scrape.snapshot, source=source))


def read_scrape(
    text: str,
    timestamp_s: float,
    *,
    previous: Mapping[tuple[str, str, int], int] | None = None,
) -> DcgmScrape:
    """``previous``: the last reading's exporter-owned counts (``DcgmScrape.counts_seen()``),
    so that only new Xids and clock events become events; None = every count is new.

    Raises ``ScrapeError`` (naming the line, not the page) for a page that is not exposition,
    or has no DCGM series of a GPU. Values no GPU can report are left out, each with an event
    (telemetry.validate)."""
    reading = _read_series(text, timestamp_s)
    if not reading.devices:
        raise _no_dcgm_series(reading.tally, reading.first, reading.dcgm)
    for device in reading.devices.values():
        _fabric_values(device)
        _vgpu_license(device)
        _clock_event_times(device)
        reading.rejected.extend(
            stale_profiling(device.values, timestamp_s, device.sample_uuid, device.index)
        )
    _attach_pods(reading.devices, reading.pods)
    xid_counts = merged(reading.counted)
    clock_event_counts = merged(reading.clocked)
    snapshot = Snapshot(
        timestamp_s=timestamp_s,
        host=",".join(dict.fromkeys(reading.hosts.values())),
        backend="dcgm",
        simulated=reading.simulated,
        samples=_samples(
            reading.devices,
            timestamp_s,
            _exporter_counts_by_gpu(reading, (*xid_counts, *clock_event_counts)),
        ),
        events=(
            *xid_events(xid_counts, previous or {}, timestamp_s),
            *clock_events(clock_event_counts, previous or {}, timestamp_s),
            *(
                DeviceEvent(EventKind.BACKEND_ERROR, timestamp_s, None, None, None, note)
                for note in reading.tally.notes()
            ),
            *reading.rejected,
        ),
    )
    return DcgmScrape(
        snapshot=validate_snapshot(snapshot),
        pods=tuple(reading.pods.values()),
        xid_counts=xid_counts,
        hosts=tuple(reading.hosts.items()),
        clock_event_counts=clock_event_counts,
    )


def _read_series(text: str, timestamp_s: float) -> _ScrapeReading:
    """Every DCGM_* series of the page onto its device (exporter-wide series are skipped)."""
    reading = _ScrapeReading()
    for read in read_exposition(text, reading.tally):
        sample = _canonical(read)
        reading.first = reading.first or sample.name
        if not sample.name.startswith("DCGM_"):
            continue
        reading.dcgm += 1
        device = _device_of(sample, reading.devices, reading.index_of_uuid)
        if device is None:
            continue  # exporter-wide series (no device)
        _note_labels(reading, sample.labels, device)
        if not _spelled_twice(reading, read.spelling, sample, device):
            _take_value(reading, sample, device, timestamp_s)
    _leave_out_contradicted(reading, timestamp_s)
    _drop_target_pods(reading)
    return reading


def _spelled_twice(reading: _ScrapeReading, spelling: str, sample: Sample, device: _Device) -> bool:
    """Whether ``sample`` is a field this device's page also gives under another name with
    another value (or did before): one field id is one reading, so the page contradicts itself
    (pages of two exporters or of two times run together). The names: DCGM 4.6's and the older
    one of a field it renamed; a counter's own and its OpenMetrics ``X_total`` (_counter_field).
    Equal values under two names are one reading."""
    if sample.name in _SERIES_PER_LABEL or is_blank(sample.value):  # a blank says nothing
        return False
    key = (device.uuid, device.gpu_instance_id, sample.name)
    if key in reading.contradicted:
        return True
    first_spelling, first_value = reading.spellings.setdefault(key, (spelling, sample.value))
    if first_spelling.upper() == spelling.upper() or first_value == sample.value:
        return False
    reading.contradicted[key] = (device, spelling, sample.value)
    return True


def _leave_out_contradicted(reading: _ScrapeReading, timestamp_s: float) -> None:
    """Each field a page gave under two names with two values is not reported, and said."""
    for (_, _, name), (device, spelling, value) in reading.contradicted.items():
        _forget_value(device, name)
        first_spelling, first_value = reading.spellings[(device.uuid, device.gpu_instance_id, name)]
        why = (
            f"contradicts {first_spelling} = {_whole(first_value)} on the same page (one DCGM "
            "field under two names): which is the GPU's reading is unknown"
        )
        reading.rejected.append(
            rejection(timestamp_s, device.sample_uuid, device.index, spelling, _whole(value), why)
        )


def _whole(value: float) -> float | int:
    """A whole number as one (a counter's 4763214 is not "4.76321e+06", which hides the step
    between two readings of it)."""
    return int(value) if value.is_integer() and abs(value) <= U64_MAX else value


def _note_labels(reading: _ScrapeReading, labels: dict[str, str], device: _Device) -> None:
    """What a series' labels say besides its device: simulated, its host, its pod."""
    reading.simulated = reading.simulated or labels.get("simulated") == "true"
    host = _label(labels, "Hostname", "hostname")
    if host:
        reading.hosts.setdefault(device.uuid, host)
    attribution = _pod_of(labels, device)
    if attribution is not None:
        key = (device.uuid, device.gpu_instance_id, attribution.pod)
        reading.pods.setdefault(key, attribution)
        if labels.get(_RELABELLED[0]):
            reading.relabelled_pods.add(key)
        elif attribution.pod == labels.get("pod"):
            reading.plain_pods.add(key)


def _drop_target_pods(reading: _ScrapeReading) -> None:
    """A page whose series name their workload by ``exported_pod`` went through a Prometheus
    scrape with honor_labels false whose target labels include ``pod`` (Kubernetes service
    discovery): Prometheus renames a series' own conflicting labels to exported_* and sets the
    plain ones to the target's, the exporter's own pod, on every series it scrapes (a federated
    page keeps both). Then a plain pod on a series without exported_* ones, a GPU that ran no
    workload, is the exporter's, not a pod that used the GPU."""
    if not reading.relabelled_pods:
        return
    for key in reading.plain_pods - reading.relabelled_pods:
        del reading.pods[key]


def _take_value(
    reading: _ScrapeReading, sample: Sample, device: _Device, timestamp_s: float
) -> None:
    """A series' value: an exporter-owned count, or a field of its device's sample."""
    if sample.name in XID_FAMILIES or sample.name in clock_counts.FAMILIES:
        if not 0 <= sample.value <= U64_MAX:  # NaN too
            reading.rejected.append(_unreadable(device, sample, timestamp_s, "is not a count"))
        elif sample.name in XID_FAMILIES:
            _xid_count(sample, device, reading.counted, reading.windows)
        else:
            _clock_count(sample, device, reading.clocked, reading.clock_windows)
        return
    if sample.name == LEGACY_INFO.upper():
        return  # its labels (gpu_type: the name) are the device's; its value is always 1
    if is_blank(sample.value):
        return
    try:
        _read_value(device, sample)
    except ValueError as exc:
        reading.rejected.append(_unreadable(device, sample, timestamp_s, str(exc)))


def _attach_pods(
    devices: Mapping[tuple[str, int | None], _Device],
    pods: Mapping[tuple[str, int | None, str], PodAttribution],
) -> None:
    """Each pod onto the sample of the GPU or MIG instance it used."""
    for (uuid, gi, _), seen in pods.items():
        values = devices[(uuid, gi)].values
        values["pods"] = (
            *values.get("pods", ()),
            PodSample(pod=seen.pod, namespace=seen.namespace, container=seen.container),
        )


def _exporter_counts_by_gpu(
    reading: _ScrapeReading, counts: tuple[XidCount | ClockEventCount, ...]
) -> dict[str, dict[str, float]]:
    """A GPU's exporter-owned counts and their windows, as extras of its own sample (its
    instances' series repeat them)."""
    gpu_extra: dict[str, dict[str, float]] = {}
    for name, window_of in (
        ("xid_errors", reading.windows),
        ("clock_events", reading.clock_windows),
    ):
        for uuid, window in window_of.items():
            gpu_extra.setdefault(uuid, {})[f"dcgm_exp_{name}_window_s"] = window
    for count in counts:
        gpu_extra.setdefault(count.uuid, {})[count.extra_name()] = count.count
    return gpu_extra


def _fabric_values(device: _Device) -> None:
    """The fabric fields from DCGM's Fabric Manager status (and error code) and its fabric
    health fields."""
    if not device.fabric:
        return
    status, error = device.fabric.get("status"), device.fabric.get("error")
    fabric: dict[str, Any] = fabric_fields(status, error)
    health = fabric_health_fields(
        device.fabric.get("health_summary"), device.fabric.get("health_mask")
    )
    for name, value in (*fabric.items(), *health.items()):
        device.values.setdefault(name, value)
    if not fabric and status is not None:  # a status DCGM itself does not know: kept raw
        device.extra.setdefault(extra_name(FABRIC_STATUS_FIELD), status)


def _vgpu_license(device: _Device) -> None:
    """A vGPU guest's license state (field 526, read with the virtualization mode, field 500: a
    bare-metal GPU publishes 526 as 0 too); the raw field stays among the extras."""
    state = vgpu_license_status(
        device.extra.get(extra_name(VGPU_LICENSE_FIELD)),
        device.extra.get(extra_name(VIRTUAL_MODE_FIELD)),
    )
    if state is not None:
        device.values.setdefault("vgpu_license_status", state)


def _clock_event_times(device: _Device) -> None:
    """The violation times from DCGM 4's per-reason clock-event times when fields 240/241 are
    not on the page; the raw counters stay among the extras."""
    times = clock_event_times(
        device.extra.get(extra_name(POWER_CAP_TIME_FIELD)),
        [device.extra.get(extra_name(name)) for name in THERMAL_TIME_FIELDS],
    )
    for name, value in times.items():
        device.values.setdefault(name, value)


def _memory_total(values: Mapping[str, Any]) -> int | None:
    """Total FB when DCGM_FI_DEV_FB_TOTAL is not scraped. NVML memory_v2 (DCGM's FB fields,
    nvidia-smi's "FB Memory Usage") splits Total into Reserved + Used + Free. Without
    FB_RESERVED, Used + Free is the Total of drivers that had no reserved split (v1: an
    A100-40GB's 40535 MiB here vs 40536 printed then) and falls short by the reserved part on
    newer ones. A MIG instance's FB is its whole memory."""
    used, free, reserved = (
        possible(name, values.get(name))
        for name in ("memory_used_bytes", "memory_free_bytes", "memory_reserved_bytes")
    )
    if used is None or free is None:
        return None
    return int(used + free + (reserved or 0))


def _info(device: _Device, *, parent: _Device | None) -> DeviceInfo:
    labels = device.labels
    memory_total = device.memory_total_bytes
    if memory_total is None:
        memory_total = _memory_total(device.values)
    gi = device.gpu_instance_id
    return DeviceInfo(
        index=device.index,
        uuid=device.sample_uuid,
        name=_label(labels, "modelName", "DCGM_FI_DEV_NAME", "gpu_type") or "",
        pci_bus_id=labels.get("pci_bus_id") or None,
        serial=labels.get("DCGM_FI_DEV_SERIAL") or None,
        vbios_version=labels.get("DCGM_FI_DEV_VBIOS_VERSION") or None,
        driver_version=labels.get("DCGM_FI_DRIVER_VERSION") or None,
        cuda_driver_version=cuda_version(labels.get("DCGM_FI_CUDA_DRIVER_VERSION")),
        memory_total_bytes=memory_total,
        mig_parent_uuid=None if parent is None else parent.uuid,
        mig_profile=labels.get("GPU_I_PROFILE") or None if gi is not None else None,
        gpu_instance_id=gi,
    )


def _samples(
    devices: dict[tuple[str, int | None], _Device],
    stamp: float,
    gpu_extra: dict[str, dict[str, float]],
) -> tuple[DeviceSample, ...]:
    # Parents first (a MIG-only scrape still lists its GPU), then each parent's instances.
    parents: dict[str, _Device] = {}
    instances_of: dict[str, list[_Device]] = {}  # one pass: a fleet's scrape has many GPUs
    for (uuid, gi), device in devices.items():
        if gi is not None:
            instances_of.setdefault(uuid, []).append(device)
        if gi is None:
            parents[uuid] = device
        elif uuid not in parents:
            parents[uuid] = _Device(index=device.index, uuid=uuid, gpu_instance_id=None)
            parents[uuid].labels = {
                k: v
                for k, v in device.labels.items()
                if k not in ("GPU_I_ID", "GPU_I_PROFILE", "pod", "namespace", "container")
            }
    out: list[DeviceSample] = []
    for uuid, parent in sorted(parents.items(), key=lambda item: item[1].index):
        instances = instances_of.get(uuid, [])
        instance_samples = [
            DeviceSample(
                info=_info(d, parent=parent),
                timestamp_s=stamp,
                extra=dict(d.extra),
                **_NO_RELATIVE_THRESHOLDS.filled(d.values),
            )
            for d in instances
        ]
        values = dict(parent.values)
        for d in instances:  # the board's own readings, repeated on each GI's series
            for name in BOARD_FIELDS:
                if name in d.values:
                    values.setdefault(name, d.values[name])
        if instances:
            values.setdefault("mig_mode", True)
            values["mig_devices"] = tuple(
                MigDeviceSample(
                    gpu_instance_id=d.gpu_instance_id if d.gpu_instance_id is not None else 0,
                    compute_instance_id=None,
                    profile=s.info.mig_profile,
                    uuid=None,
                    memory_total_bytes=s.info.memory_total_bytes,
                    memory_used_bytes=s.memory_used_bytes,
                    **{name: getattr(s, name) for name in MIG_PILLARS},
                )
                for d, s in zip(instances, instance_samples, strict=True)
            )
        parent.values = _NO_RELATIVE_THRESHOLDS.filled(values)
        out.append(
            DeviceSample(
                info=_info(parent, parent=None),
                timestamp_s=stamp,
                extra=parent.extra | gpu_extra.get(uuid, {}),
                **parent.values,
            )
        )
        out.extend(instance_samples)
    return tuple(out)
