"""The labels of exported series: dcgm-exporter's device labels, and the node's name.

dcgm-exporter labels every device series ``gpu`` (index), ``UUID``, ``pci_bus_id``, ``device``
(``nvidia<gpu>``: collector/gpu_collector.go formats it from the same GPU id), ``modelName``, MIG
``GPU_I_PROFILE``/``GPU_I_ID``, ``Hostname`` (renamed ``hostname`` in its latest release, PR
#655: both are set here, to the same value), the label fields of its CSV
(``DCGM_FI_DRIVER_VERSION``), and with ``--kubernetes`` ``container``/``namespace``/``pod``.
A label whose value is unknown is left out (an empty label is no label in Prometheus).
``DCGM_FI_DEV_XID_ERRORS`` also carries ``err_code`` (the Xid) and ``err_msg``, as dcgm-exporter
does since 3.3.6-3.4.2 (PR #309), so that alerts written ``{err_code=~"48|79"}`` work on either.

Every GPU and verdict series of a simulated backend also carries ``simulated="true"`` (and
``gpuwarden_exporter_info`` says ``simulated="true"``): nobody can read a simulated H100 on a
dashboard or in an alert as a real one. Real backends carry no such label, so their label sets
stay exactly dcgm-exporter's.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.catalog.xid import xid_info
from gpuwarden.types.telemetry import DeviceInfo, PodSample

Labels = tuple[tuple[str, str], ...]

SIMULATED_LABEL = ("simulated", "true")


@dataclass(frozen=True, slots=True)
class Instance:
    """A MIG GPU instance a series is about."""

    gpu_instance_id: int
    profile: str | None


def _kept(pairs: list[tuple[str, str | None]]) -> Labels:
    return tuple((name, value) for name, value in pairs if value)


def node_labels(host: str | None, simulated: bool) -> Labels:
    """``Hostname``/``hostname`` (the node), plus the simulated mark."""
    pairs: list[tuple[str, str | None]] = [("Hostname", host), ("hostname", host)]
    return _kept(pairs) + ((SIMULATED_LABEL,) if simulated else ())


def gpu_labels(info: DeviceInfo, host: str | None, simulated: bool) -> Labels:
    """gpuwarden's own per-GPU series: gpu, UUID, pci_bus_id, modelName, Hostname, hostname."""
    pairs: list[tuple[str, str | None]] = [
        ("gpu", str(info.index)),
        ("UUID", info.uuid),
        ("pci_bus_id", info.pci_bus_id),
        ("modelName", info.name),
    ]
    return _kept(pairs) + node_labels(host, simulated)


def dcgm_labels(
    info: DeviceInfo,
    host: str | None,
    simulated: bool,
    *,
    instance: Instance | None = None,
    pod: PodSample | None = None,
) -> Labels:
    """dcgm-exporter's label set of one device (or MIG instance) series, in its order."""
    pairs: list[tuple[str, str | None]] = [
        ("gpu", str(info.index)),
        ("UUID", info.uuid),
        ("pci_bus_id", info.pci_bus_id),
        ("device", f"nvidia{info.index}"),
        ("modelName", info.name),
    ]
    if instance is not None:
        pairs += [("GPU_I_PROFILE", instance.profile), ("GPU_I_ID", str(instance.gpu_instance_id))]
    pairs += [
        ("Hostname", host),
        ("hostname", host),
        ("DCGM_FI_DRIVER_VERSION", info.driver_version),
    ]
    if pod is not None:
        pairs += [("container", pod.container), ("namespace", pod.namespace), ("pod", pod.pod)]
    return _kept(pairs) + ((SIMULATED_LABEL,) if simulated else ())


# dcgm-exporter's words where the Xid gives none (real scrapes: 'err_code="0",err_msg="No
# Error"'; older releases said "Unknown Error" for 0 too). A listed Xid's words are the catalog's
# meaning, not dcgm-exporter's own table: an alert reads err_code, a person reads err_msg.
NO_XID_MESSAGE = "No Error"
UNKNOWN_XID_MESSAGE = "Unknown Error"


def xid_labels(xid: int) -> Labels:
    """``err_code`` and ``err_msg`` of a ``DCGM_FI_DEV_XID_ERRORS`` reading of ``xid``."""
    info = xid_info(xid) if xid else None
    message = NO_XID_MESSAGE if not xid else UNKNOWN_XID_MESSAGE if info is None else info.meaning
    return (("err_code", str(xid)), ("err_msg", message))
