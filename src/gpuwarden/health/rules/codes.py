"""What each finding code the health rules emit means and what fixes it: data, one row per code.

Codes, default severities and remedies follow ``shared/reference/diagnosis.md`` §2; the actions
are NVIDIA's resolution buckets (Xid catalog) where one applies. Rules add the numbers (in the
finding's title and evidence); the words here do not change with the reading.

Codes added by gpuwarden beyond diagnosis.md §2: ``power-capped`` (info), ``pcie-errors``,
``recovery-action-pending``, ``vgpu-unlicensed``, ``nvswitch-error``, ``iommu-fault``,
``gsp-firmware-crash``, ``display-engine-hang``, ``suspend-resume-failed``, ``driver-crashed``
(the last four from the kernel log's driver messages, health/driver_messages.py),
``memory-unrepairable`` and ``repair-pending`` (the R575+ repair flags, rules/memory_repair.py),
``gpu-access-denied`` (info: a GPU NVML may not open for this user or container,
rules/device_state.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.health.checks import DEVICE_NOT_READ
from gpuwarden.types.health import Severity


@dataclass(frozen=True, slots=True)
class CodeInfo:
    severity: Severity  # the default; a rule may lower it where the reading cannot decide
    cause: str
    remedy: str
    action: str | None = None  # NVIDIA's bucket: RESET_GPU, RESTART_BM, CONTACT_SUPPORT, ...


_RMA = (
    "drain the GPU; run NVIDIA's field diagnostic (or `dcgmi diag -r 3`) and open an RMA "
    "with its report"
)

CODES: dict[str, CodeInfo] = {
    "gpu-lost": CodeInfo(
        Severity.CRITICAL,
        "the GPU stopped answering on PCIe (NVML GpuIsLost, Xid 79 'fallen off the bus'); "
        "every process on it is dead and the others keep running",
        "drain the node and power-cycle it (a reboot may not bring the GPU back); check power "
        "cables, seating and thermals; if it happens again, RMA the GPU",
        "RESTART_BM",
    ),
    "ecc-uncorrectable": CodeInfo(
        Severity.CRITICAL,
        "an uncorrectable (double-bit DRAM or SRAM) ECC error since the last driver load or "
        "reset: the context that touched it was killed",
        "find the GPU (`nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`), reset it when idle "
        "(`nvidia-smi -r`) so the bad row is remapped or the page retired; exclude it until "
        "then; repeated → RMA",
        "RESET_GPU",
    ),
    "ecc-correctable-storm": CodeInfo(
        Severity.WARNING,
        "corrected (single-bit) ECC errors are rising fast: a weak memory cell or a failing "
        "stack, the step before uncorrectable errors",
        "watch the count; plan a reset so pages retire / rows remap; run the field diagnostic "
        "if it keeps rising",
    ),
    "retired-pages-pending": CodeInfo(
        Severity.WARNING,
        "a memory page is waiting for retirement (pre-Ampere dynamic page retirement); it takes "
        "effect at the next GPU reset",
        "reset the GPU when idle (`nvidia-smi -r`) or reboot",
        "RESET_GPU",
    ),
    "retired-pages-limit": CodeInfo(
        Severity.CRITICAL,
        "the retired-page table is (nearly) full: NVIDIA's RMA criterion for pre-Ampere GPUs",
        _RMA,
        "CONTACT_SUPPORT",
    ),
    "row-remap-pending": CodeInfo(
        Severity.WARNING,
        "a row remap waits for a GPU reset (Ampere+ memory error recovery); running work is "
        "protected, the spare row is wired in at the reset",
        "reset the GPU when idle (`nvidia-smi -r`)",
        "RESET_GPU",
    ),
    "row-remap-failure": CodeInfo(
        Severity.CRITICAL,
        "a row remap failed, or a memory bank has no spare rows left: the next uncorrectable "
        "error there cannot be repaired (NVIDIA's RMA criterion for Ampere+)",
        _RMA,
        "CONTACT_SUPPORT",
    ),
    "sram-threshold-exceeded": CodeInfo(
        Severity.CRITICAL,
        "the GPU's on-chip SRAM had more uncorrectable errors in one bank than NVIDIA allows "
        "(Hopper+ 'SRAM Threshold Exceeded')",
        _RMA,
        "CONTACT_SUPPORT",
    ),
    "memory-unrepairable": CodeInfo(
        Severity.CRITICAL,
        "the driver flags GPU memory it can no longer repair (R575+ 'Unrepairable Memory: "
        "Yes', NVML's unrepairable-memory flag): the next error there has no spare to be "
        "repaired with, as with a failed row remap",
        _RMA,
        "CONTACT_SUPPORT",
    ),
    "repair-pending": CodeInfo(
        Severity.WARNING,
        "the driver marked a memory channel or a TPC for repair (R575+ 'Channel / TPC Repair "
        "Pending: Yes', NVML's repair status); like a pending row remap, it is carried out at "
        "the next GPU reset",
        "reset the GPU when idle (`nvidia-smi -r`) or reboot the node, then read the flags "
        "again: still Yes after the reset, or back soon, → run the field diagnostic",
        "RESET_GPU",
    ),
    "thermal-slowdown": CodeInfo(
        Severity.WARNING,
        "the GPU lowers its clocks because it is too hot (HW or SW thermal slowdown)",
        "check airflow, fans and inlet temperature; compare with the neighbouring GPUs and "
        "slots; clean filters, check blanking panels",
    ),
    "temperature-high": CodeInfo(
        Severity.WARNING,
        "the GPU (or its memory) is within a few °C of the temperature where it slows down",
        "check airflow, fans and inlet temperature; compare with the neighbouring GPUs",
    ),
    "power-brake": CodeInfo(
        Severity.WARNING,
        "HW power brake: an external signal (the system's power supply or BMC) halves the clocks",
        "check the PSUs, the rack's power budget and the BMC event log",
    ),
    "power-capped": CodeInfo(
        Severity.INFO,
        "the GPU is busy and holds its power at the limit (SW power cap): clocks are below "
        "their maximum by design — normal for a power-limited job",
        "nothing to fix; raise the limit (`nvidia-smi -pl`) if the board and rack allow it and "
        "the job is slower than it should be",
    ),
    "pcie-link-degraded": CodeInfo(
        Severity.WARNING,
        "under load, the PCIe link runs below the generation or width the GPU and slot support "
        "(idle downtraining saves power and is normal; under load it is not)",
        "reseat the GPU; check the riser and slot; check the BIOS PCIe settings; compare "
        "`nvidia-smi -q -d PCIE` with the slot's rating",
        "CHECK_MECHANICALS",
    ),
    "pcie-errors": CodeInfo(
        Severity.WARNING,
        "the GPU's PCIe link makes errors: its replay counter rises faster than the driver "
        "team's limit, or the kernel's AER records errors on it (the link retransmits packets: "
        "signal integrity)",
        "reseat the GPU; check the riser, cable and slot; if it persists, run the field diagnostic",
        "CHECK_MECHANICALS",
    ),
    "nvlink-down": CodeInfo(
        Severity.CRITICAL,
        "an NVLink that this GPU has is inactive: traffic to that peer goes over fewer links or "
        "PCIe, and NCCL may hang or slow down",
        "check `nvidia-smi nvlink -s` and the Fabric Manager (NVSwitch systems); reset the GPU; "
        "run the field diagnostic if the link stays down",
        "RESET_GPU",
    ),
    "nvlink-errors": CodeInfo(
        Severity.WARNING,
        "NVLink replay/recovery (or many CRC) errors are rising: the link retransmits",
        "reseat the GPU/baseboard connection if possible; run the field diagnostic; check the "
        "kernel log for Xid 74",
    ),
    DEVICE_NOT_READ: CodeInfo(
        Severity.INFO,
        "NVML refused this user or container access to the GPU (NVML_ERROR_NO_PERMISSION, "
        "'Insufficient Permissions' when opening it): none of its readings were taken; the GPU "
        "may be healthy, this is no fault of it",
        "read it as root, or let this user open its device node: check the modes and group of "
        "/dev/nvidia* (the driver's NVreg_DeviceFileMode / NVreg_DeviceFileGID); in a container, "
        "that the GPU was passed in (--gpus / NVIDIA_VISIBLE_DEVICES / CDI) and its device cgroup "
        "allows /dev/nvidiaN; then read the GPU again",
    ),
    "persistence-off": CodeInfo(
        Severity.INFO,
        "persistence mode is off (Linux): the driver unloads when no process uses the GPU, so "
        "each start pays the initialisation and clocks/settings reset",
        "enable nvidia-persistenced (or `nvidia-smi -pm 1`)",
    ),
    "mig-no-instances": CodeInfo(
        Severity.WARNING,
        "MIG mode is on but no GPU instances exist: CUDA sees no usable device "
        "('all CUDA-capable devices are busy or unavailable')",
        "create instances (`nvidia-smi mig -cgi <profiles> -C`, mig-parted), or disable MIG "
        "(`nvidia-smi -mig 0`)",
    ),
    "memory-nearly-full": CodeInfo(
        Severity.WARNING,
        "the GPU's memory is almost full: the next allocation may fail with out-of-memory",
        "`gpuwarden plan` the job; smaller micro-batch, activation checkpointing, or fewer "
        "processes per GPU",
    ),
    "fabric-manager-down": CodeInfo(
        Severity.CRITICAL,
        "the GPU is not (yet) registered with the NVSwitch fabric: CUDA fails with error 802 "
        "'system not yet initialized' until the Fabric Manager has configured it",
        "`systemctl enable --now nvidia-fabricmanager` at exactly the driver's version; check "
        "`journalctl -u nvidia-fabricmanager`",
    ),
    "recovery-action-pending": CodeInfo(
        Severity.CRITICAL,
        "the driver asks for a recovery action before this GPU is reliable again "
        "(NVML GPU recovery action, Xid 154)",
        "do what the driver asks (below), then check the kernel log for the Xid that caused it",
    ),
    "low-utilization": CodeInfo(
        Severity.WARNING,
        "a process holds the GPU but uses little of it, sustained",
        "see the bottleneck verdicts (data-starved, comm-bound); profile the job "
        "(`gpuwarden trace`); free the GPU if the process is idle (a notebook, a stuck job)",
    ),
    "fake-load": CodeInfo(
        Severity.WARNING,
        "utilization reads ≈ 100 % while almost no SM computes: a kernel stays resident on few "
        "SMs or spin-waits (a hung collective, a polling loop)",
        "look at what the process does (py-spy dump, NCCL_DEBUG=INFO); the DCGM pillars "
        "(tensor, DRAM) tell a tiny kernel from a spin-wait",
    ),
    "data-starved": CodeInfo(
        Severity.WARNING,
        "the GPU computes in bursts and waits for input in between: the input pipeline cannot "
        "keep up",
        "more DataLoader workers, pin_memory=True, prefetching, a faster data format or "
        "storage; confirm with `gpuwarden trace` (DataLoader waits)",
    ),
    "memory-bound": CodeInfo(
        Severity.INFO,
        "DRAM is busy while most SMs wait: kernels are limited by memory bandwidth",
        "fuse element-wise ops (torch.compile), larger batches, FlashAttention, lower precision",
    ),
    "no-tensor-cores": CodeInfo(
        Severity.INFO,
        "the SMs are busy but the tensor cores are idle: math runs in FP32 on the CUDA cores",
        "bf16/fp16 autocast or TF32 (`torch.backends.cuda.matmul.allow_tf32`); keep matrix "
        "dimensions multiples of 8",
    ),
    "comm-bound": CodeInfo(
        Severity.WARNING,
        "the GPUs stop computing together while the interconnect is busy: time goes to "
        "communication that does not overlap with compute",
        "overlap communication (DDP bucket sizes, FSDP prefetch), fewer/larger collectives, "
        "check the topology (`nvidia-smi topo -m`)",
    ),
    "straggler": CodeInfo(
        Severity.WARNING,
        "one GPU's activity is off its peers': in a synchronous job everyone waits for the slowest",
        "compare its clocks, temperature and power with the peers; look for throttling, a "
        "degraded link or a noisy neighbour; exclude it to confirm",
    ),
    "thermal-outlier": CodeInfo(
        Severity.WARNING,
        "this GPU runs hotter than its peers of the same model at the same load",
        "check its fan, airflow and slot position; reseat or re-paste; compare inlet temperatures",
    ),
    # NVIDIA vGPU licensing: an unlicensed guest runs at full capability for a 20-minute grace
    # period, then is restricted (NVIDIA AI Enterprise 8 "vGPU for Compute Licensing": compute
    # reduced to an idle level; vGPU client licensing reference: frame rate capped at 3 fps,
    # CUDA disabled) until a license is acquired.
    "vgpu-unlicensed": CodeInfo(
        Severity.WARNING,
        "this vGPU guest holds no NVIDIA vGPU software license: after a 20-minute grace period "
        "the driver restricts it (frame rate capped at 3 fps, CUDA disabled / compute at an idle "
        "level) until a license is acquired",
        "check `nvidia-smi -q | grep -A2 'Licensed Product'` and the nvidia-gridd log "
        "(`journalctl -u nvidia-gridd`): the client configuration token in "
        "/etc/nvidia/ClientConfigToken, the license server's reachability and free licenses of "
        "the vGPU's product, and the guest's clock; restart nvidia-gridd",
    ),
    # NVSwitch SXid records ("nvidia-nvswitchN: SXid (PCI:...): <n>, Fatal|Non-fatal, Link L"):
    # Fabric Manager user guide, "NVSwitch SXid errors": a fatal one aborts the CUDA jobs on the
    # GPUs behind the port and needs the GPUs and NVSwitches reset (a reboot if that fails);
    # non-fatal ones are informational and the jobs continue.
    "nvswitch-error": CodeInfo(
        Severity.CRITICAL,
        "an NVSwitch reported an SXid error on an NVLink port: a fatal one stalls NVLink traffic "
        "through that port and aborts the CUDA jobs of the GPUs behind it (they log Xid 45/74); "
        "non-fatal ones repeating point at a degrading link",
        "drain the node; reset the GPUs of the affected jobs and the NVSwitches "
        "(`nvidia-smi -r`, with the Fabric Manager stopped), or reboot if the reset fails; look "
        "up the SXid in the Fabric Manager user guide; if it returns on the same link, contact "
        "support with an nvidia-bug-report",
        "RESET_GPU",
    ),
    "dcgm-diag-failed": CodeInfo(
        Severity.CRITICAL,  # a Fail; a Warn, or a test that broke inside DCGM, is a warning
        "a DCGM active diagnostic (`dcgmi diag`) failed or warned on this GPU or node, for a "
        "reason no other finding code names (DCGM's message is the evidence)",
        "do what DCGM's documentation says for the test (below); rerun `dcgmi diag` at the same "
        "level; a hardware test (memory, diagnostic, stress, power, EUD) failing again → drain "
        "and run the field diagnostic",
    ),
    # The IOMMU blocked a DMA of an NVIDIA GPU (Intel VT-d "DMAR: [DMA Read] Request device
    # [41:00.0] fault addr", AMD-Vi "IO_PAGE_FAULT", Arm SMMUv3 "F_TRANSLATION"): NCCL's
    # troubleshooting guide ("PCI Access Control Services (ACS)": IO virtualization - VT-d or
    # IOMMU - can interfere with GPU Direct by redirecting PCI peer-to-peer traffic to the CPU
    # root complex, a slowdown or a hang; disable ACS and put the IOMMU in passthrough) and the
    # GPUDirect RDMA documentation (peer mappings need the IOMMU disabled or in passthrough).
    "iommu-fault": CodeInfo(
        Severity.WARNING,
        "the IOMMU blocked DMA of this GPU (no mapping allowed the address): the transfer's data "
        "is lost, so the job gets wrong data, hangs or fails (peer copies reading zeros, NCCL "
        "hangs, an Xid after it). Usual causes: GPU peer-to-peer or GPUDirect RDMA traffic under "
        "an IOMMU that is not in passthrough mode, or PCIe ACS redirecting peer traffic to the "
        "root complex; otherwise a driver or application bug DMAing to memory it did not map",
        "if the faults come with peer-to-peer, NCCL or GPUDirect RDMA traffic: boot with the "
        "IOMMU in passthrough (`iommu=pt`, plus `intel_iommu=on` or `amd_iommu=on`) or disable it "
        "in the BIOS where VMs do not need it, and disable ACS on the PCIe switches/root ports "
        "between the GPUs (NCCL troubleshooting guide, 'PCI Access Control Services'); check "
        "`nvidia-smi topo -p2p r`; otherwise update the driver and report the faulting "
        "application with an nvidia-bug-report",
    ),
    # The GSP firmware's crash report (open-gpu-kernel-modules, kernel_gsp_tu102.c,
    # kgspHealthCheck: "GSP-CrashCat Report"; a task watchdog's "LibOS Task Watchdog Report" is
    # a timeout, not an error, and no finding). A crash that touches GSP-RM marks it unhealthy
    # (bFatalError), stops every channel with GSP_ERROR (Xid 120) and marks the GPU for reset.
    # The GSP: the driver README's "GSP Firmware" chapter.
    # Action: the Xid catalog's for Xids 119/120 (RESET_GPU, then INVESTIGATE_SW).
    "gsp-firmware-crash": CodeInfo(
        Severity.CRITICAL,
        "the GPU System Processor (GSP: the RISC-V processor of Turing and newer GPUs whose "
        "firmware does GPU initialisation and management for the driver) reported a crash of its "
        "firmware ('GSP-CrashCat Report'). A crash that hits GSP-RM makes the driver mark the GSP "
        "unhealthy, stop every channel of the GPU with Xid 120 (GSP error) and mark the GPU for "
        "reset: its jobs are lost and it runs nothing until it is reset.",
        "drain the GPU and reset it (`nvidia-smi -r`); reboot the node if the reset fails. The "
        "Xid 119 (GSP RPC timeout) or 120 (GSP error) lines around the report name the GPU; "
        "`nvidia-smi -q` shows 'GSP Firmware Version' (the firmware in use; N/A: GSP disabled). "
        "NVIDIA's investigatory action for Xids 119/120 is INVESTIGATE_SW: update the driver, "
        "and if it happens again send NVIDIA an nvidia-bug-report.log.gz with the report",
        "RESET_GPU",
    ),
    # nvidia-modeset (NVKMS, the module that drives the display engine: modesets, flips) logs its
    # own errors, without NVRM or an Xid: "Idling display engine timed out" (the display engine
    # did not go idle), "Error while waiting for GPU progress" (nvkms-dma.c nvEvoMakeRoom: a
    # display channel took no more methods for 5 s; it keeps waiting and says so every 5 s).
    "display-engine-hang": CodeInfo(
        Severity.WARNING,
        "the GPU's display engine stopped making progress: nvidia-modeset timed out idling it "
        "('Idling display engine timed out') or waiting for a display channel to take more "
        "commands ('Error while waiting for GPU progress', repeated every 5 s while it waits). "
        "The screen freezes, goes blank or updates every few seconds: a desktop/workstation "
        "symptom of a mode change or monitor the driver mishandles, or of a GPU that stopped "
        "answering (then NVRM Xid lines come with it)",
        "look for NVRM Xid lines or a lost GPU around the timeouts and check that `nvidia-smi` "
        "answers (if not, the GPU's fault is the cause: see those findings); otherwise it is the "
        "display path: restart the display server or reboot to get the screen back, try another "
        "cable, port, mode or refresh rate (variable refresh off), update the driver, and if it "
        "stays send NVIDIA an nvidia-bug-report.log.gz",
    ),
    # mem_mgr's memmgrRestorePowerMgmtState_KERNEL refusing a resume that finds no state a
    # suspend saved ("Calling Resume on an active GPU or the previous Suspend call might have
    # failed ... So ignoring the resume request"); the driver README's "Configuring Power
    # Management Support" chapter: video memory is saved only with
    # NVreg_PreserveVideoMemoryAllocations=1 and the nvidia-suspend / -hibernate / -resume
    # services, into NVreg_TemporaryFilePath (default /tmp)
    "suspend-resume-failed": CodeInfo(
        Severity.WARNING,
        "the driver refused to resume a GPU because the suspend before it had not saved the "
        "GPU's state, so the GPU's memory was not restored: a blank or frozen screen after "
        "resume and CUDA programs that fail until the driver is reloaded. The suspend fails "
        "when video memory cannot be saved: the nvidia-suspend / nvidia-hibernate / "
        "nvidia-resume services not enabled, or NVreg_PreserveVideoMemoryAllocations=1 with a "
        "NVreg_TemporaryFilePath (default /tmp) too small for the GPU's memory",
        "reboot, or unload and reload the nvidia modules, to get the GPU back; then enable "
        "nvidia-suspend.service, nvidia-hibernate.service and nvidia-resume.service and set "
        "NVreg_PreserveVideoMemoryAllocations=1 with NVreg_TemporaryFilePath on a filesystem with "
        "more free space than the GPUs' memory (the driver README's 'Configuring Power "
        "Management Support'); keep GPU servers out of system suspend",
    ),
    # The kernel's crash report (arch/x86/kernel/dumpstack.c, traps.c, kernel/watchdog.c) with
    # its RIP, or the stuck task's top frames, in an NVIDIA module (nvidia, nvidia_uvm,
    # nvidia_modeset, nvidia_drm, nvidia_peermem): an oops kills the task inside the driver with
    # its locks and the GPU's state as they were; a soft lockup is a CPU spinning in the driver.
    "driver-crashed": CodeInfo(
        Severity.CRITICAL,
        "the kernel caught a fault (an oops: page fault, NULL pointer, general protection fault, "
        "kernel BUG) or a soft lockup inside an NVIDIA kernel module: the task died (or its CPU "
        "spun) in the driver with its locks held and the GPU's state half-changed, so the "
        "driver's state is undefined until the module is reloaded, in practice a reboot. A "
        "driver bug, often a driver built for another kernel than the one running (a kernel "
        "newer than the driver supports), or memory the driver was handed corrupted",
        "drain the node and reboot it (the module cannot be reloaded while the crashed task "
        "holds it); check that the driver supports the running kernel (`uname -r` vs the "
        "driver's release notes) and update the driver; if it recurs, send NVIDIA an "
        "nvidia-bug-report.log.gz (nvidia-bug-report.sh) with the crash report",
    ),
}
