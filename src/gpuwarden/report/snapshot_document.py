"""`gpuwarden snapshot --json`: the `gpuwarden.snapshot/1` document, also inside `watch` and
`record` documents. Apart from the tables (report/snapshot.py) so that the JSON path does not
import rich."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwarden.health.evaluate import HealthResult
from gpuwarden.report.findings import check_record, finding_record
from gpuwarden.report.output import print_json
from gpuwarden.report.telemetry_records import device_record
from gpuwarden.types.telemetry import DeviceEvent, DeviceSample, Snapshot
from gpuwarden.units import iso_utc

SNAPSHOT_SCHEMA = "gpuwarden.snapshot/1"


def stamp(timestamp_s: float) -> str:
    """The snapshot, record and watch documents' time: milliseconds, Python's "+00:00"."""
    return iso_utc(timestamp_s, timespec="milliseconds", offset="+00:00")


def event_record(event: DeviceEvent) -> dict[str, Any]:
    return {
        "kind": event.kind.value,
        "timestamp_s": event.timestamp_s,
        "uuid": event.uuid,
        "index": event.index,
        "code": event.code,
        "message": event.message,
    }


def device_host(sample: DeviceSample, hosts: Mapping[str, str] | None) -> str | None:
    """The host a device's readings named (a dcgm scrape of several nodes), else None."""
    if not hosts:
        return None
    info = sample.info
    return hosts.get(info.uuid) or hosts.get(info.mig_parent_uuid or "")


def snapshot_document(
    snapshot: Snapshot,
    health: HealthResult | None = None,
    hosts: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The `gpuwarden.snapshot/1` document; with ``health``, its ``findings`` and ``checks``.
    Each device carries its ``host``: the one its series named (``hosts``, uuid → host, for a
    scrape of several nodes), else the snapshot's (null when unknown)."""
    devices = []
    for sample in snapshot.samples:
        record = device_record(sample)
        record["host"] = device_host(sample, hosts) or snapshot.host or None
        devices.append(record)
    document = {
        "schema": SNAPSHOT_SCHEMA,
        "timestamp": stamp(snapshot.timestamp_s),
        "timestamp_s": snapshot.timestamp_s,
        "host": snapshot.host,
        "backend": snapshot.backend,
        "simulated": snapshot.simulated,
        "source": snapshot.source,
        "devices": devices,
        "events": [event_record(e) for e in snapshot.events],
    }
    if health is not None:
        document["findings"] = [finding_record(f) for f in health.findings]
        document["checks"] = [check_record(c) for c in health.checks]
    return document


def print_snapshot_json(
    snapshot: Snapshot,
    health: HealthResult | None = None,
    hosts: Mapping[str, str] | None = None,
) -> None:
    print_json(snapshot_document(snapshot, health, hosts))
