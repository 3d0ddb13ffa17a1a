"""The NVLink error counters ``nvidia-smi nvlink -e`` (``--errorcounters``) prints: per GPU, per
link, each counter by a stable snake_case key ("Replay Errors" → ``replay_errors``, "CRC Flit
Errors" → ``crc_flit_errors``, "FEC Errors - 3" → ``fec_errors_3``, "Link recovery failed
events" → ``link_recovery_failed_events``), the name as printed kept in ``labels``.

A count is what the driver counted since it loaded (or since `nvidia-smi nvlink -re` reset the
counters): one reading has no time span, so no rate. Values that are not counts (NVLink 5's
"Effective BER: 15e-255", a "N/A") are kept as printed in ``values``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LinkCounters:
    link: int
    counts: dict[str, int] = field(default_factory=dict)  # key → count
    values: dict[str, str] = field(default_factory=dict)  # key → the text, where not a count


@dataclass(frozen=True, slots=True)
class GpuLinkCounters:
    """One GPU's block: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)", "GPU 0: NVIDIA GB300"
    (no UUID), or "GPU 00000008:06:00.0" (the GPU by its PCI bus id only)."""

    index: int | None  # None where the header names the GPU by its bus id only
    name: str | None
    uuid: str | None
    pci_bus_id: str | None = None
    links: tuple[LinkCounters, ...] = ()
    message: str | None = (
        None  # what nvidia-smi said instead of links ("... all links are inActive")
    )

    @property
    def label(self) -> str:
        if self.index is not None:
            return f"GPU {self.index}"
        return f"GPU {self.pci_bus_id}"


@dataclass(frozen=True, slots=True)
class NvLinkCounters:
    gpus: tuple[GpuLinkCounters, ...]
    labels: dict[str, str] = field(default_factory=dict)  # key → the counter's name as printed


@dataclass(frozen=True, slots=True)
class CounterReading:
    """One `nvlink -e` output of a node: where it was read, when (the file's time: the output
    prints none) and what it held. Two readings of a node, in order, show what rose."""

    source: str
    time_s: float
    counters: NvLinkCounters
