"""How a node's GPUs and NICs are wired (``nvidia-smi topo -m``) and their NVLinks' state
(``nvidia-smi nvlink -s``): what ``doctor`` checks topology and NVLink findings against.

Devices are named as nvidia-smi prints them ("GPU0", "NIC3", or an older driver's "mlx5_0").
CPU and NUMA affinities are inclusive ranges: "0-47,96-143" is ((0, 47), (96, 143)).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class LinkKind(StrEnum):
    """The connection between two devices, as the ``topo -m`` legend defines its codes."""

    NVLINK = "nvlink"  # NV#: a bonded set of # NVLinks
    PIX = "pix"  # at most a single PCIe bridge
    PXB = "pxb"  # multiple PCIe bridges, without the PCIe host bridge
    PHB = "phb"  # PCIe and a PCIe host bridge (typically the CPU)
    NODE = "node"  # PCIe and the interconnect between host bridges within a NUMA node
    SYS = "sys"  # PCIe and the SMP interconnect between NUMA nodes (older drivers: SOC)
    OTHER = "other"  # a code this version does not know; TopoLink.code says which


Ranges = tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class TopoLink:
    """The matrix cell of two devices. Real matrices are symmetric and give one link per pair
    (``a`` printed before ``b``); a pair whose two cells differ gives both, each as its row."""

    a: str
    b: str
    kind: LinkKind
    code: str  # as printed: "NV8", "PIX", "SOC"
    nvlinks: int | None = None  # the # of NV#; None for the PCIe kinds


@dataclass(frozen=True, slots=True)
class TopoGpu:
    index: int  # the # of "GPU#" (nvidia-smi's index)
    label: str  # "GPU3"
    cpu_affinity: Ranges | None = None  # "CPU Affinity"; None = N/A or not printed
    numa_affinity: Ranges | None = None  # "NUMA Affinity"
    numa_id: int | None = None  # "GPU NUMA ID" (a GPU's own NUMA node: Grace Hopper, CDMM)


@dataclass(frozen=True, slots=True)
class TopoNic:
    label: str  # "NIC0", or the device name where older drivers print it as the column
    name: str | None = None  # "mlx5_0" from the "NIC Legend"


@dataclass(frozen=True, slots=True)
class Topology:
    gpus: tuple[TopoGpu, ...]
    nics: tuple[TopoNic, ...]
    links: tuple[TopoLink, ...]
    # devices of the header without a row of their own (a partial capture, a cut paste)
    missing_rows: tuple[str, ...] = ()
    legend: tuple[tuple[str, str], ...] = ()  # ("NV#", "Connection traversing ...") as printed
    # columns named without a header row (a paste cut above the first row): from the rows'
    # diagonal and NV# cells; a GPU column without either would be taken for a NIC
    inferred_columns: tuple[str, ...] = ()
    # each (row, column) pair's first cell, built once: a GPU's sum over its row asks for a cell
    # per other GPU, and a scan of every cell per question made 1,000 GPUs take hours
    _cells: dict[tuple[str, str], TopoLink] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        cells: dict[tuple[str, str], TopoLink] = {}
        for link in self.links:
            cells.setdefault((link.a, link.b), link)
        object.__setattr__(self, "_cells", cells)

    def link(self, a: str, b: str) -> TopoLink | None:
        """The cell of ``a`` and ``b`` (either order; ``a``'s row when the two differ)."""
        mine = self._cells.get((a, b))
        return mine if mine is not None else self._cells.get((b, a))


class NvLinkSupport(StrEnum):
    """What ``nvidia-smi nvlink -s`` said about a GPU's links as a whole."""

    REPORTED = "reported"  # one line per link
    ALL_INACTIVE = "all-inactive"  # "NVML: Unable to retrieve Nvlink information as all links
    # are inActive"
    NOT_SUPPORTED = "not-supported"  # "Device does not have or support Nvlink"
    MIG_MODE = "mig-mode"  # "Nvlink queries are not supported for Devices in MIG mode"
    OTHER = "other"  # a message this version does not know; GpuNvLinks.message has it


@dataclass(frozen=True, slots=True)
class NvLinkState:
    link: int
    active: bool | None  # None: a state this version does not know (``state`` has it)
    speed_bytes_per_s: float | None  # per direction, as printed ("26.562 GB/s" = 26.562e9)
    state: str  # the printed value: "26.562 GB/s", "<inactive>"


@dataclass(frozen=True, slots=True)
class GpuNvLinks:
    index: int
    name: str
    uuid: str | None
    support: NvLinkSupport
    links: tuple[NvLinkState, ...] = ()
    message: str | None = None  # nvidia-smi's sentence when it listed no link


@dataclass(frozen=True, slots=True)
class NvLinkStatus:
    gpus: tuple[GpuNvLinks, ...]
    message: str | None = None  # a statement about the whole host, before any GPU line
