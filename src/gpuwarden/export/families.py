"""A ``View`` → the metric families one scrape serves (plain data; ``export.prometheus`` turns
them into prometheus_client metrics).

Device families carry dcgm-exporter's names, units and labels (``export.fields``,
``export.labels``) and come from the newest reading only while it is fresh: a field the backend
did not read is no series (never 0), a GPU that is lost or gone has none, and a reading older
than ``stale_after_s`` is not served as if it were current. A GPU with MIG instances has series
per instance only, as dcgm-exporter's default ``--devices f`` publishes it: the instance's own
framebuffer and profiling fields, the GPU's other readings repeated on each instance
(``fields.instance_scoped``), so that a sum over a family counts a GPU's memory once.
gpuwarden's own families (the contract the alert rules of ``gpuwarden deploy`` are written
against) stay per GPU:

* ``gpuwarden_finding{code, severity, gpu, UUID, pci_bus_id, modelName, Hostname, hostname}`` 1
  per active finding of the health rules (node findings without the GPU labels; ``GPU_I_ID`` for
  a MIG instance);
* ``gpuwarden_xid_total{xid, gpu, UUID, ...}`` Xid occurrences since the exporter started;
* ``gpuwarden_clock_event_active{reason, gpu, UUID, ...}`` 0/1 per clock-event reason;
* ``gpuwarden_gpu_lost{gpu, UUID, ...}`` 0/1;
* ``gpuwarden_collection_errors_total{backend}``, ``gpuwarden_collections_total{backend}``,
  ``gpuwarden_last_reading_timestamp_seconds``, ``gpuwarden_exporter_info{version, backend,
  simulated}``; ``gpuwarden_reading_age_seconds`` is rendered per scrape (``reading_age``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuwarden.export.fields import (
    DCGM_FIELDS,
    FABRIC_HEALTH_MASK,
    FABRIC_HEALTH_SUMMARY,
    FABRIC_MANAGER_STATUS,
    FB_TOTAL,
    MIG_FB_FREE,
    MIG_FB_TOTAL,
    MIG_FIELDS,
    VGPU_LICENSE_STATUS,
    XID_LAST,
    XID_WATCHING_BACKENDS,
    DcgmField,
    Kind,
    fabric_manager_status,
    fb_total_is_read,
    instance_scoped,
    mig_free_mib,
    passed_through,
    passthrough_name,
)
from gpuwarden.export.labels import (
    SIMULATED_LABEL,
    Instance,
    Labels,
    dcgm_labels,
    gpu_labels,
    node_labels,
    xid_labels,
)
from gpuwarden.export.state import OTHER_XID, View
from gpuwarden.telemetry.clock_events import CLOCK_EVENT_BITS
from gpuwarden.types.health import Finding
from gpuwarden.types.telemetry import (
    DeviceInfo,
    DeviceSample,
    DeviceState,
    MigDeviceSample,
    PodSample,
    Snapshot,
)

CLOCK_EVENT_REASONS = tuple(name for _, name in CLOCK_EVENT_BITS)


@dataclass(frozen=True, slots=True)
class Family:
    name: str  # the exact name of its samples (counters included: no suffix is added)
    help: str
    kind: Kind
    samples: tuple[tuple[Labels, float], ...]


class _Families:
    """Families in first-seen order; a label set seen twice in a family keeps its first value
    (two equal series would make the whole scrape invalid)."""

    def __init__(self) -> None:
        self._meta: dict[str, tuple[str, Kind]] = {}
        self._samples: dict[str, dict[Labels, float]] = {}

    def add(self, name: str, help_text: str, kind: Kind, labels: Labels, value: float) -> None:
        if not math.isfinite(value):
            return
        self._meta.setdefault(name, (help_text, kind))
        self._samples.setdefault(name, {}).setdefault(labels, value)

    def build(self) -> tuple[Family, ...]:
        return tuple(
            Family(name, help_text, kind, tuple(self._samples[name].items()))
            for name, (help_text, kind) in self._meta.items()
            if self._samples[name]
        )


# --- DCGM device families ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Reading:
    """One value of a device's DCGM family, before the device's labels are put on it."""

    name: str
    help: str
    kind: Kind
    value: float
    own_labels: Labels = ()  # the value's own (the Xid's err_code / err_msg), after the device's


def _label_sets(
    info: DeviceInfo,
    host: str | None,
    simulated: bool,
    pods: Sequence[PodSample],
    instance: Instance | None = None,
) -> list[Labels]:
    """One label set per pod using the device (time-sliced GPUs: each pod), else one."""
    if not pods:
        return [dcgm_labels(info, host, simulated, instance=instance)]
    return [dcgm_labels(info, host, simulated, instance=instance, pod=pod) for pod in pods]


def _publish(out: _Families, readings: Iterable[_Reading], label_sets: list[Labels]) -> None:
    for reading in readings:
        for labels in label_sets:
            labelled = labels + reading.own_labels
            out.add(reading.name, reading.help, reading.kind, labelled, reading.value)


def _row_readings(rows: Iterable[DcgmField], source: object) -> list[_Reading]:
    readings = []
    for row in rows:
        value = row.value(source)
        if value is not None:
            readings.append(_Reading(row.name, row.help, row.kind, value))
    return readings


def _sample_readings(sample: DeviceSample, backend: str) -> list[_Reading]:
    """A GPU's (or a scraped GPU instance's) readings: the table's rows, the fields that need
    more than one attribute, and what a scrape passed through."""
    readings = _row_readings(DCGM_FIELDS, sample)
    known = sample.xid_last is not None or backend in XID_WATCHING_BACKENDS
    if known:
        xid = sample.xid_last or 0
        readings.append(_Reading(XID_LAST.name, XID_LAST.help, XID_LAST.kind, xid, xid_labels(xid)))
    read = fb_total_is_read(backend, sample.memory_used_bytes, sample.memory_free_bytes)
    computed = (
        (FABRIC_MANAGER_STATUS, fabric_manager_status(sample.fabric_state, sample.fabric_status)),
        (FB_TOTAL, FB_TOTAL.value(sample) if read else None),
        (FABRIC_HEALTH_MASK, FABRIC_HEALTH_MASK.value(sample)),
        (FABRIC_HEALTH_SUMMARY, FABRIC_HEALTH_SUMMARY.value(sample)),
        (VGPU_LICENSE_STATUS, VGPU_LICENSE_STATUS.value(sample)),
    )
    for row, value in computed:
        if value is not None:
            readings.append(_Reading(row.name, row.help, row.kind, float(value)))
    for key, value in sample.extra.items():
        name = passthrough_name(key)
        if name is not None:
            published = passed_through(name)
            readings.append(_Reading(name, published.help, published.kind, value))
    return readings


def _mig_readings(mig: MigDeviceSample) -> list[_Reading]:
    """A MIG GPU instance's own readings (MigDeviceSample): its pillars and its framebuffer."""
    readings = _row_readings((*MIG_FIELDS, MIG_FB_TOTAL), mig)
    free = mig_free_mib(mig)
    if free is not None:
        readings.append(_Reading(MIG_FB_FREE.name, MIG_FB_FREE.help, MIG_FB_FREE.kind, free))
    return readings


def _pods(
    view: View, own: tuple[PodSample, ...] | None, mapped: tuple[PodSample, ...]
) -> tuple[PodSample, ...]:
    """The kubelet's answer with --kubernetes, else what the reading itself carried (a
    dcgm-exporter scrape's pod labels)."""
    return mapped if view.pods is not None else own or ()


def _add_mig_gpu(
    out: _Families, view: View, gpu: DeviceSample, host: str | None, gpu_readings: list[_Reading]
) -> None:
    """A GPU whose instances the backend read as MigDeviceSamples (NVML, nvidia-smi), as
    dcgm-exporter publishes it: series per instance only, the instance's own framebuffer and
    pillars, and the GPU's other readings repeated on each instance (``instance_scoped``)."""
    board = [r for r in gpu_readings if not instance_scoped(r.name)]
    for gi, devices in _by_gpu_instance(gpu.mig_devices or ()).items():
        mig = devices[0]  # its compute instances share the GPU instance's memory and pillars
        instance = Instance(gi, gpu_instance_profile(mig.profile))
        mapped = (
            tuple(p for d in devices for p in view.pods.pods_of_instance(gpu.info, gi, d.uuid))
            if view.pods
            else ()
        )
        label_sets = _label_sets(
            gpu.info, host, view.settings.simulated, _pods(view, None, mapped), instance
        )
        _publish(out, [*_mig_readings(mig), *board], label_sets)


# NVML names a MIG device after its compute instance's profile where the GPU instance is split:
# "1c.3g.40gb" is one compute slice of a 3g.40gb GPU instance (NVIDIA's MIG user guide, CI
# profiles); the series is the GPU instance's, labelled with its profile.
_COMPUTE_SLICES = re.compile(r"^[0-9]+c\.(?=[0-9]+g\.)")


def gpu_instance_profile(profile: str | None) -> str | None:
    """The GPU instance's profile of a MIG device's ("1c.3g.40gb" -> "3g.40gb")."""
    return None if profile is None else _COMPUTE_SLICES.sub("", profile)


def _by_gpu_instance(
    devices: Iterable[MigDeviceSample],
) -> dict[int, list[MigDeviceSample]]:
    """MIG devices by GPU instance: a GPU instance split into compute instances is one MIG
    device per compute instance (nvidia-smi lists each with the instance's shared memory), but
    one series, or a sum over the family counts its memory once per compute instance."""
    grouped: dict[int, list[MigDeviceSample]] = {}
    for device in devices:
        grouped.setdefault(device.gpu_instance_id, []).append(device)
    return grouped


def _add_scraped_mig_gpu(
    out: _Families,
    view: View,
    gpu: DeviceSample,
    host: str | None,
    gpu_readings: list[_Reading],
    instances: list[DeviceSample],
) -> None:
    """A dcgm-exporter scrape's GPU with GPU_I_ID series (the dcgm backend): each instance as a
    device of its own, and the GPU's series where the scrape had them. A GPU reading that its
    instances also carry is left on the instances: the dcgm backend copies the board's readings
    from them into the GPU's sample (telemetry.dcgm.scrape.BOARD_FIELDS), and dcgm-exporter
    watching a GPU through its instances publishes no series of the GPU's own."""
    simulated = view.settings.simulated
    instance_readings = [_sample_readings(s, view.settings.backend) for s in instances]
    on_instances = {r.name for readings in instance_readings for r in readings}
    mapped = view.pods.pods_of_gpu(gpu.info) if view.pods else ()
    label_sets = _label_sets(gpu.info, host, simulated, _pods(view, gpu.pods, mapped))
    own = [r for r in gpu_readings if instance_scoped(r.name) or r.name not in on_instances]
    _publish(out, own, label_sets)
    for sample, readings in zip(instances, instance_readings, strict=True):
        gi = sample.info.gpu_instance_id if sample.info.gpu_instance_id is not None else 0
        instance = Instance(gi, sample.info.mig_profile)
        mapped = view.pods.pods_of_instance(gpu.info, gi, None) if view.pods else ()
        sets = _label_sets(gpu.info, host, simulated, _pods(view, sample.pods, mapped), instance)
        _publish(out, readings, sets)


def _add_gpu(
    out: _Families, view: View, snapshot: Snapshot, gpu: DeviceSample, host: str | None
) -> None:
    readings = _sample_readings(gpu, view.settings.backend)
    instances = [
        s
        for s in snapshot.samples
        if s.info.mig_parent_uuid == gpu.info.uuid and s.state is DeviceState.OK
    ]
    if instances:
        _add_scraped_mig_gpu(out, view, gpu, host, readings, instances)
    elif gpu.mig_devices:
        _add_mig_gpu(out, view, gpu, host, readings)
    else:
        mapped = view.pods.pods_of_gpu(gpu.info) if view.pods else ()
        pods = _pods(view, gpu.pods, mapped)
        _publish(out, readings, _label_sets(gpu.info, host, view.settings.simulated, pods))


def _physical_samples(snapshot: Snapshot) -> list[DeviceSample]:
    return [s for s in snapshot.samples if s.info.mig_parent_uuid is None]


def device_families(out: _Families, view: View) -> None:
    snapshot, host = view.snapshot, view.host()
    if snapshot is None:
        return
    for gpu in _physical_samples(snapshot):
        if gpu.state is DeviceState.OK:
            _add_gpu(out, view, snapshot, gpu, host)


# --- gpuwarden's own families ---------------------------------------------------------------

FINDING = "gpuwarden_finding"
XID_TOTAL = "gpuwarden_xid_total"
CLOCK_EVENT = "gpuwarden_clock_event_active"
GPU_LOST = "gpuwarden_gpu_lost"
COLLECTION_ERRORS = "gpuwarden_collection_errors_total"
COLLECTIONS = "gpuwarden_collections_total"
HEALTH_ERRORS = "gpuwarden_health_evaluation_errors_total"
POD_ERRORS = "gpuwarden_pod_resources_errors_total"
LAST_READING = "gpuwarden_last_reading_timestamp_seconds"
READING_AGE = "gpuwarden_reading_age_seconds"
EXPORTER_INFO = "gpuwarden_exporter_info"

_FINDING_HELP = (
    "1 for every active finding of gpuwarden's health rules (code and severity as in "
    "gpuwarden's diagnosis reference)"
)


class _Devices:
    """The newest reading's devices, to label a finding whose DeviceRef names only some ids."""

    def __init__(self, snapshot: Snapshot | None) -> None:
        samples = snapshot.samples if snapshot is not None else ()
        self.by_uuid = {s.info.uuid: s.info for s in samples}
        self.by_bus = {
            s.info.pci_bus_id.lower(): s.info
            for s in samples
            if s.info.pci_bus_id and s.info.mig_parent_uuid is None
        }
        self.by_index = {s.info.index: s.info for s in samples if s.info.mig_parent_uuid is None}

    def resolve(self, uuid: str | None, bus: str | None, index: int | None) -> DeviceInfo | None:
        info = self.by_uuid.get(uuid or "")
        if info is not None and info.mig_parent_uuid is not None:
            return self.by_uuid.get(info.mig_parent_uuid, info)
        if info is None and bus:
            info = self.by_bus.get(bus.lower())
        if info is None and index is not None:
            info = self.by_index.get(index)
        return info


def _finding_labels(finding: Finding, devices: _Devices, host: str | None, sim: bool) -> Labels:
    head: Labels = (("code", finding.code), ("severity", finding.severity.value))
    ref = finding.device
    if ref is None:
        return head + node_labels(host, sim)
    info = devices.resolve(ref.uuid, ref.pci_bus_id, ref.index)
    gi = ref.gpu_instance_id
    if info is None:
        info = DeviceInfo(
            index=ref.index if ref.index is not None else -1,
            uuid=ref.uuid or "",
            name=ref.name or "",
            pci_bus_id=ref.pci_bus_id,
        )
    else:
        uuid_info = devices.by_uuid.get(ref.uuid or "")
        if gi is None and uuid_info is not None and uuid_info.mig_parent_uuid is not None:
            gi = uuid_info.gpu_instance_id
    labels = gpu_labels(info, host, sim)
    if info.index < 0:
        labels = tuple(pair for pair in labels if pair[0] != "gpu")
    if gi is not None:
        labels = (*labels, ("GPU_I_ID", str(gi)))
    return head + labels


def finding_families(out: _Families, view: View) -> None:
    devices, host, sim = _Devices(view.snapshot), view.host(), view.settings.simulated
    # the most severe first: two findings that label alike keep the worse one
    for finding in sorted(view.findings, key=lambda f: -f.severity.rank):
        out.add(
            FINDING, _FINDING_HELP, Kind.GAUGE, _finding_labels(finding, devices, host, sim), 1.0
        )


def xid_families(out: _Families, view: View) -> None:
    host, sim = view.host(), view.settings.simulated
    help_text = "Xid errors by code since the exporter started (never the last value only)"
    for count in view.xids:
        xid = "other" if count.xid == OTHER_XID else str(count.xid)
        labels = (("xid", xid), *gpu_labels(count.device, host, sim))
        out.add(XID_TOTAL, help_text, Kind.COUNTER, labels, float(count.count))


def gpu_state_families(out: _Families, view: View, fresh: bool) -> None:
    snapshot, host, sim = view.snapshot, view.host(), view.settings.simulated
    if snapshot is None:
        return
    for gpu in _physical_samples(snapshot):
        labels = gpu_labels(gpu.info, host, sim)
        lost = 1.0 if gpu.state is DeviceState.GPU_LOST else 0.0
        out.add(
            GPU_LOST,
            "1 while the GPU does not answer (fallen off the bus, NVML GpuIsLost)",
            Kind.GAUGE,
            labels,
            lost,
        )
        reasons = gpu.clock_event_reasons
        if not fresh or gpu.state is not DeviceState.OK or reasons is None:
            continue
        for reason in CLOCK_EVENT_REASONS:
            out.add(
                CLOCK_EVENT,
                "1 while this clock-event (throttle) reason holds the GPU's clocks down",
                Kind.GAUGE,
                (("reason", reason), *labels),
                1.0 if reason in reasons else 0.0,
            )


def exporter_families(out: _Families, view: View, version: str) -> None:
    settings, counters = view.settings, view.counters
    mark: Labels = (SIMULATED_LABEL,) if settings.simulated else ()
    backend: Labels = (("backend", settings.backend), *mark)
    info: Labels = (
        ("version", version),
        ("backend", settings.backend),
        ("simulated", "true" if settings.simulated else "false"),
    )
    out.add(
        EXPORTER_INFO,
        "gpuwarden export: version, backend, and whether it is simulated",
        Kind.GAUGE,
        info,
        1.0,
    )
    out.add(
        COLLECTIONS, "Readings the exporter attempted", Kind.COUNTER, backend, float(counters.polls)
    )
    out.add(
        COLLECTION_ERRORS,
        "Readings that failed (the backend raised or answered nothing)",
        Kind.COUNTER,
        backend,
        float(counters.collection_errors),
    )
    out.add(
        HEALTH_ERRORS,
        "Health evaluations that failed (the previous verdict is kept)",
        Kind.COUNTER,
        mark,
        float(counters.health_errors),
    )
    if view.pods is not None or counters.pod_errors:
        out.add(
            POD_ERRORS,
            "kubelet pod-resources List calls that failed",
            Kind.COUNTER,
            mark,
            float(counters.pod_errors),
        )
    if view.snapshot is not None:
        out.add(
            LAST_READING,
            "Unix time of the newest reading (the data's own time)",
            Kind.GAUGE,
            mark,
            view.snapshot.timestamp_s,
        )


def build_families(view: View, *, now_s: float, version: str) -> tuple[Family, ...]:
    """Everything a scrape serves but the per-scrape families (reading age, durations).

    ``now_s``: the monotonic clock of ``View.received_s``, to tell whether values are fresh."""
    out = _Families()
    fresh = view.fresh(now_s)
    if fresh:
        device_families(out, view)
    gpu_state_families(out, view, fresh)
    finding_families(out, view)
    xid_families(out, view)
    exporter_families(out, view, version)
    return out.build()


def reading_age(view: View, *, wall_s: float) -> Family | None:
    """``gpuwarden_reading_age_seconds``: how old the newest reading's data is at this scrape."""
    if view.snapshot is None:
        return None
    mark: Labels = (SIMULATED_LABEL,) if view.settings.simulated else ()
    age = max(0.0, wall_s - view.snapshot.timestamp_s)
    help_text = "Age of the newest reading at scrape time (now minus the data's own time)"
    return Family(READING_AGE, help_text, Kind.GAUGE, ((mark, age),))
