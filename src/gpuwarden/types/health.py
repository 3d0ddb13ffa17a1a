"""Verdicts: findings about GPUs and nodes, doctor checks, kernel-log Xids, diagnoses of errors.

The codes are an interface (``../shared/reference/diagnosis.md``): alert rules, remediation
policies and users' scripts match on them, so a code never changes meaning once released.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 info, 1 warning, 2 critical: for sorting and ``--fail-on``."""
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


class Confidence(StrEnum):
    """How sure a verdict is: high = the reading states it; medium = the evidence points to it
    and nothing contradicts; low = a candidate among others (the verdict says what decides)."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True, slots=True)
class DeviceRef:
    """Which GPU a finding is about (any field may be unknown: a kernel log names only the PCI
    bus id, a dcgm scrape the index and UUID)."""

    index: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    name: str | None = None
    host: str | None = None
    mig_profile: str | None = None  # set when the finding is about one MIG instance
    gpu_instance_id: int | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    """One thing read that a verdict rests on."""

    field: str  # what was read: a DeviceSample field, a DCGM field, "kernel-log", "env:NAME"
    value: float | int | str | bool | None
    source: str  # where: "nvml", "smi:/path/q.txt", "dcgm:URL", "kernel-log:/var/log/kern.log"
    detail: str = ""  # the comparison in words: "≥ 83 °C = slowdown 88 °C − 5"


@dataclass(frozen=True, slots=True)
class Finding:
    """Something about a GPU (or the node, ``device`` None) that a person should know."""

    code: str  # kebab-case, diagnosis.md §2 (or §1 for causes found on the node)
    severity: Severity
    title: str  # one line, the finding in words with its numbers
    cause: str  # what it means
    remedy: str  # what to do, in order
    device: DeviceRef | None = None
    evidence: tuple[Evidence, ...] = ()
    action: str | None = None  # NVIDIA's bucket: RESTART_APP, RESET_GPU, RESTART_BM, ...
    confidence: Confidence = Confidence.HIGH
    # windowed rules: which signals decided ("dcgm-pillars" = DCGM profiling / GPM,
    # "nvml-fallback" = utilization, power and PCIe counters); None for a single reading
    method: str | None = None
    references: tuple[str, ...] = ()
    first_seen_s: float | None = None  # Unix seconds; windows and kernel logs
    last_seen_s: float | None = None
    count: int | None = None  # occurrences folded into this finding (Xid bursts)
    # the host it was judged on where one report says several hosts' (doctor on a bundle of
    # several nodes' captures): a node's finding has no device to name it; None: the report's
    host: str | None = None


# what a several-host doctor report says of the captures that name no host (doctor judges them
# apart; remediate judges no node by them): never a node's name, a Kubernetes node name has no
# space
UNKNOWN_HOST = "host unknown"


class CheckStatus(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"  # the input cannot tell (never a silent pass): detail says why


@dataclass(frozen=True, slots=True)
class Check:
    """One line of ``doctor``: what was checked, the outcome, and the findings behind it."""

    name: str  # stable kebab-case: "gpu-count", "driver-cuda", "ecc", ...
    status: CheckStatus
    detail: str
    codes: tuple[str, ...] = ()  # the finding codes that made it warn/fail


@dataclass(frozen=True, slots=True)
class XidOccurrence:
    """One Xid line of a kernel log."""

    xid: int
    line_number: int  # 1-based, in the text scanned
    line: str  # verbatim (without the trailing newline)
    pci_bus_id: str | None  # normalised "0000:3b:00.0"; None when redacted ("PCI:...")
    uuid: str | None  # from an "NVRM: GPU at PCI:… GPU-<uuid>" line before it, or None
    message: str  # the text after "Xid (PCI:…): NN, "
    timestamp_s: float | None = None  # Unix seconds where the line has a calendar time
    uptime_s: float | None = None  # dmesg's "[ 1234.567890]" seconds since boot
    pid: int | None = None
    process: str | None = None


@dataclass(frozen=True, slots=True)
class XidGroup:
    """Every occurrence of one Xid on one GPU, folded: a burst of 800k lines is a few groups."""

    xid: int
    pci_bus_id: str | None
    uuid: str | None
    count: int
    first_line: int
    last_line: int
    first_seen_s: float | None
    last_seen_s: float | None
    first_uptime_s: float | None
    last_uptime_s: float | None
    mnemonic: str | None  # from the catalog; None for an Xid it does not list
    meaning: str | None
    action: str | None  # NVIDIA immediate bucket (RESTART_APP, RESET_GPU, ...)
    investigatory_action: str | None
    severity: Severity
    lines: tuple[str, ...]  # the first few lines verbatim (bounded)
    # what the payload says where the catalog documents it (NVLink5 144-150 sub-unit,
    # Xid 154's new recovery action, Xid 45's "caused by previous Xid N"), as text pairs
    decoded: tuple[tuple[str, str], ...] = ()
    # escalation by NVSentinel's rules (a fatal Xid >= 5 times in 24 h → CONTACT_SUPPORT,
    # 13/31 repeating on one GPU → run diagnostics), None when none applies
    escalation: str | None = None
    # a GPU lost said only by the status the driver's failed calls returned (NV_ERR_GPU_IS_LOST),
    # no line on the loss itself: as the scanner read it, whatever of ``lines`` is kept
    lost_by_status: bool = False


@dataclass(frozen=True, slots=True)
class NvSwitchErrorGroup:
    """Every record of one SXid on one NVSwitch, folded ("nvidia-nvswitch3: SXid
    (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 ..."; a record may add "Data {...}" and
    "Severity N Engine instance ..." lines, which are part of it, not records of their own)."""

    sxid: int
    switch: str | None  # the driver's device name, "nvidia-nvswitch3"; None when not printed
    pci_bus_id: str | None  # the switch's, normalised; None when redacted
    count: int  # records (a group of Data/Severity lines only counts as the records it implies)
    fatal_count: int  # records the driver marked "Fatal"
    non_fatal_count: int  # records marked "Non-fatal"
    links: tuple[int, ...]  # the NVLink ports the records name, sorted (bounded)
    incidents: int | None  # bursts of records; None when no line carries a time
    first_line: int
    last_line: int
    first_seen_s: float | None
    last_seen_s: float | None
    first_uptime_s: float | None
    last_uptime_s: float | None
    message: str | None  # the first record's words after its severity and link
    lines: tuple[str, ...]  # the first few lines verbatim (bounded)


@dataclass(frozen=True, slots=True)
class PcieAerGroup:
    """The kernel's PCIe AER records (drivers/pci/pcie/aer.c) of one device and one severity,
    folded: "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, ..."
    and the lines that belong to it ("error received", "[ 0] RxErr", "can't recover")."""

    pci_bus_id: str  # the device the records name, normalised "0000:3b:00.0"
    severity: str  # "corrected", "non-fatal", "fatal"; "uncorrected" when the log omits which
    # how the same log ties the device to an NVIDIA GPU ("nvidia driver", "vendor 10de", "xid",
    # "nvrm"); None: it does not (a root port, a NIC, an NVMe drive)
    nvidia: str | None
    records: int  # "PCIe Bus Error" records printed for it
    messages: int  # "error received" messages naming it as the source
    multiple: int  # of those, "Multiple ... error received": more errors than were printed
    recovery_failed: int  # "can't recover" / "no AER-aware driver": the kernel's recovery failed
    error_types: tuple[str, ...]  # the status bits printed ("RxErr", "BadTLP", "CmpltTO"), bounded
    # the most records in any 60 s (counted up to a cap); None when no line carries a time
    busiest_minute: int | None
    first_line: int
    last_line: int
    first_seen_s: float | None
    last_seen_s: float | None
    first_uptime_s: float | None
    last_uptime_s: float | None
    lines: tuple[str, ...]  # the first few lines verbatim (bounded)

    @property
    def count(self) -> int:
        """Errors reported for the device: records or messages, whichever the log printed more
        of (a message is followed by its record), or the failed recoveries alone."""
        return max(self.records, self.messages) or self.recovery_failed


@dataclass(frozen=True, slots=True)
class IommuFaultGroup:
    """The IOMMU's DMA faults (Intel VT-d "DMAR: [DMA Read] Request device [41:00.0] fault
    addr ...", AMD-Vi "Event logged [IO_PAGE_FAULT ...]", Arm SMMUv3 "event: F_TRANSLATION
    client: ...") of one device, folded: a DMA the IOMMU blocked because no mapping allowed it."""

    pci_bus_id: str  # the device the faults name, normalised "0000:41:00.0"
    iommu: str  # "dmar" (Intel VT-d), "amd-vi", "smmu-v3"
    # how the same log ties the device to an NVIDIA GPU ("nvidia driver", "vendor 10de", "xid",
    # "nvrm"); None: it does not (a NIC, an NVMe drive, an integrated GPU)
    nvidia: str | None
    faults: int  # fault records printed for the device
    reasons: tuple[str, ...]  # what the IOMMU said ("PTE Read access is not set"), bounded
    accesses: tuple[str, ...]  # "read", "write" as printed (DMAR, SMMU); empty when not said
    first_line: int
    last_line: int
    first_seen_s: float | None
    last_seen_s: float | None
    first_uptime_s: float | None
    last_uptime_s: float | None
    lines: tuple[str, ...]  # the first few lines verbatim (bounded)


@dataclass(frozen=True, slots=True)
class DriverCrash:
    """A crash report of the kernel's whose RIP (or a top frame of its call trace) is in an NVIDIA
    module: the oops, BUG or lockup the driver died in (health/kernel_log.py reads them)."""

    confidence: Confidence  # HIGH: its header is in the log; MEDIUM: not, or only a frame is
    module: str  # the NVIDIA module: "nvidia", "nvidia_uvm", "nvidia_modeset", ...
    where: str  # "<function>+0x../0x..": the RIP's, or the top frame's in the module
    rip_line: str  # the register line, from "RIP: "
    frame: str | None  # the top frame in the module when the RIP is outside it
    count: int  # reports with this place


@dataclass(frozen=True, slots=True)
class KernelLogReport:
    """What a kernel-log scan found: Xid groups, GPUs lost without an Xid, and bookkeeping."""

    groups: tuple[XidGroup, ...]
    fallen_off_bus: tuple[XidGroup, ...] = ()  # "fallen off the bus" messages without an Xid
    lines_scanned: int = 0
    xid_lines: int = 0
    unparsed_xid_lines: int = 0  # lines that name an Xid but whose number could not be read
    bus_to_uuid: tuple[tuple[str, str], ...] = ()  # PCI bus id → UUID as the log stated it
    other: tuple[tuple[str, int], ...] = ()  # other NVRM messages worth a line: (kind, count)
    nvswitch_errors: tuple[NvSwitchErrorGroup, ...] = ()  # NVSwitch SXid records, by switch+SXid
    pcie_errors: tuple[PcieAerGroup, ...] = ()  # PCIe AER records, by device and severity
    iommu_faults: tuple[IommuFaultGroup, ...] = ()  # IOMMU DMA faults, by device
    driver_crashes: tuple[DriverCrash, ...] = ()  # crashes in an NVIDIA module, surest first


@dataclass(frozen=True, slots=True)
class OomFacts:
    """The numbers an out-of-memory message states (bytes); None where it does not say."""

    # "pytorch", "tensorflow", "jax", "vllm", "ggml", "tensorrt-llm", "cupy", "unknown"
    framework: str
    tried_bytes: int | None = None
    total_bytes: int | None = None
    allocated_bytes: int | None = None  # by the framework's allocator (PyTorch "allocated")
    reserved_bytes: int | None = None  # held by the allocator, allocated or cached
    free_bytes: int | None = None  # free on the device, as the driver said
    this_process_bytes: int | None = None  # PyTorch 2.x "this process has X memory in use"
    other_processes: tuple[tuple[int, int], ...] = ()  # (pid, bytes) "Process N has X in use"
    device: str | None = None  # "GPU 0", "/device:GPU:0"


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """One candidate cause of a pasted error."""

    cause: str  # kebab-case, diagnosis.md §1
    category: str  # oom, version, driver, hardware, app, distributed, containers, kubernetes
    confidence: Confidence
    score: float  # 0..1, for ranking (the label is what people read)
    title: str
    evidence: tuple[str, ...]  # the phrases matched and the numbers parsed, in words
    fixes: tuple[str, ...]  # in the order a person should try them
    references: tuple[str, ...] = ()
    decides: str | None = None  # when uncertain: the log or command that decides


@dataclass(frozen=True, slots=True)
class Explanation:
    """Everything ``explain`` read in a text."""

    diagnoses: tuple[Diagnosis, ...]  # most likely first; empty when nothing matched
    oom: OomFacts | None = None
    kernel_log: KernelLogReport | None = None
    findings: tuple[Finding, ...] = ()  # a pasted nvidia-smi screen, judged by the health rules
    next_steps: tuple[str, ...] = ()  # when nothing matched: what to capture next
    facts: dict[str, str] = field(default_factory=dict)  # other numbers read (SeqNum, ...)
