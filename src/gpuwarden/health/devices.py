"""Which GPU a finding is about, completed from the readings: a kernel log or a topology names a
GPU by PCI bus id or UUID only; the readings give its index and name."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from gpuwarden.catalog.pci_bus import normalize_pci_bus_id
from gpuwarden.types.health import DeviceRef, Finding
from gpuwarden.types.telemetry import DeviceInfo

# Captures shared publicly mask their UUIDs: such a UUID says nothing about which GPU it is.
MASKED_UUID = "GPU-00000000-0000-0000-0000-000000000000"


def attach_devices(findings: Iterable[Finding], devices: Sequence[DeviceInfo]) -> list[Finding]:
    """``findings`` with the index, UUID, bus id and name of the GPU each names, where the
    devices know it; findings that already name an index are left as they are."""
    gpus = [d for d in devices if d.mig_parent_uuid is None]
    by_bus = {normalize_pci_bus_id(d.pci_bus_id): d for d in gpus if d.pci_bus_id}
    by_uuid = {d.uuid: d for d in gpus if d.uuid != MASKED_UUID}
    out: list[Finding] = []
    for finding in findings:
        device = finding.device
        if device is None or device.index is not None:
            out.append(finding)
            continue
        info = by_uuid.get(device.uuid or "") or by_bus.get(normalize_pci_bus_id(device.pci_bus_id))
        if info is None:
            out.append(finding)
            continue
        ref = DeviceRef(
            index=info.index,
            uuid=device.uuid or info.uuid,
            pci_bus_id=device.pci_bus_id or info.pci_bus_id,
            name=device.name or info.name,
            host=device.host,
            mig_profile=device.mig_profile,
            gpu_instance_id=device.gpu_instance_id,
        )
        out.append(dataclasses.replace(finding, device=ref))
    return out
