"""The node's software environment: what the doctor's probe read, and what the catalog says about
the driver → CUDA → framework chain.

``None`` means "could not tell" (the probe says why in ``NodeEnvironment.notes``), never a guess.
Versions stay strings as the tools print them ("550.54.15", "12.4", "2.5.1+cu124"); the catalog
compares them numerically.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# ---------------------------------------------------------------------------------------------
# What the probe read (doctor.environment)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SmiStatus:
    """``nvidia-smi`` on this node: whether it runs, and what it said."""

    present: bool  # False: not installed / not on PATH
    returncode: int | None = None  # None: not run, or killed at its timeout
    # what the failure means, read from the exit code (NVML's nvmlReturn_t) and the text:
    # "driver-not-loaded", "version-mismatch", "library-not-found", "no-devices", "gpu-lost",
    # "permission", "timeout", "other"; None when it worked
    failure: str | None = None
    message: str | None = None  # the first line it printed on failure, verbatim
    gpu_count: int | None = None  # lines of `nvidia-smi -L`
    smi_version: str | None = None  # `nvidia-smi --version`: "NVIDIA-SMI version"
    nvml_version: str | None = None  # "NVML version" (major.minor only, "550.54")
    driver_version: str | None = None  # "DRIVER version" / "KMD version" (R610+)
    cuda_version: str | None = None  # "CUDA Version" / "CUDA UMD version" (R610+)
    nvml_library_version: str | None = None  # "NVML library version:" after a mismatch


@dataclass(frozen=True, slots=True)
class FrameworkInstall:
    """One ML framework found in the Python environment's metadata (never imported)."""

    name: str  # "torch", "jax", "tensorflow"
    distribution: str  # the installed distribution: "torch", "jax-cuda12-plugin", ...
    version: str  # as installed: "2.5.1+cu124"
    # "cu124" (torch), "cuda12"/"cuda13" (JAX plugins), "gpu" (TensorFlow), "cpu", "rocm6.2", ...;
    # None when the metadata cannot tell (a source or conda build)
    variant: str | None
    # True: built without CUDA (+cpu, ROCm, tensorflow-cpu); False: a CUDA build; None: unknown
    without_cuda: bool | None
    cuda_version: str | None  # "12.4": the CUDA the build targets (major.minor)
    cuda_runtime: str | None  # the installed runtime wheel: "nvidia-cuda-runtime-cu12 12.4.127"
    evidence: str  # how the CUDA facts were read: "local version tag +cu124", ...
    # True where the facts follow from the platform's defaults rather than the metadata stating
    # them (PyPI's Windows torch wheels are CPU builds without a +cpu tag)
    inferred: bool = False


@dataclass(frozen=True, slots=True)
class CudaCompatLibrary:
    """A CUDA forward-compatibility ``libcuda.so.<version>`` (the cuda-compat package)."""

    directory: str  # "/usr/local/cuda-12.4/compat"
    version: str  # "550.54.15": the driver the package was built from
    in_use: bool  # the dynamic loader is pointed at it (LD_LIBRARY_PATH or ld.so.conf.d)
    via: str  # "LD_LIBRARY_PATH", "/etc/ld.so.conf.d/cuda-compat.conf", "installed"


@dataclass(frozen=True, slots=True)
class FabricManagerState:
    """NVIDIA Fabric Manager and the NVSwitches the host sees."""

    service_state: str | None = None  # `systemctl is-active`: "active", "inactive", "failed", ...
    version: str | None = None  # `nv-fabricmanager --version`
    nvswitch_count: int | None = None  # entries of /proc/driver/nvidia-nvswitch/devices


@dataclass(frozen=True, slots=True)
class ContainerContext:
    """Whether we run in a container, and the NVIDIA runtime's settings that reached it."""

    in_container: bool | None
    kind: str | None = None  # "docker", "podman", "kubernetes", "containerd", "lxc", ...
    evidence: tuple[str, ...] = ()  # "/.dockerenv exists", "/proc/1/cgroup: kubepods", ...
    nvidia_visible_devices: str | None = None  # None = unset
    nvidia_driver_capabilities: str | None = None
    cuda_visible_devices: str | None = None
    device_nodes: tuple[str, ...] | None = None  # /dev/nvidia* names; None = /dev unreadable


@dataclass(frozen=True, slots=True)
class NodeEnvironment:
    """What the doctor's probe read on this node. Each field None when it could not tell."""

    platform: str  # sys.platform: "linux", "win32", "darwin"
    machine: str | None = None  # "x86_64", "aarch64"
    kernel_module_version: str | None = None  # the loaded nvidia.ko: "550.54.15"
    kernel_module_flavor: str | None = None  # "proprietary", "open"
    kernel_module_source: str | None = None  # "/proc/driver/nvidia/version", "/sys/module/..."
    # Jetson / Tegra (L4T) modules carry L4T release numbers ("35.3.1"), not driver branches
    tegra: bool = False
    library_version: str | None = None  # user-space NVML: "550.54.15"
    library_version_source: str | None = None  # "libnvidia-ml.so.550.54.15 in /usr/lib/...", ...
    library_versions_found: tuple[str, ...] = ()  # every libnvidia-ml.so.X.Y.Z seen
    smi: SmiStatus = SmiStatus(present=False)
    frameworks: tuple[FrameworkInstall, ...] = ()
    cuda_compat: tuple[CudaCompatLibrary, ...] = ()
    fabric_manager: FabricManagerState = FabricManagerState()
    container: ContainerContext = ContainerContext(in_container=None)
    kernel_log_source: str | None = None  # "dmesg" or "journalctl" when readable
    notes: tuple[str, ...] = ()  # why a field is None, what failed, in words


@dataclass(frozen=True, slots=True)
class KernelLogText:
    """The kernel log as read (bounded): the newest ``max_bytes`` when it was longer."""

    text: str
    source: str  # "dmesg", "journalctl -k"
    truncated: bool  # True: older lines were dropped to stay within the bound


# ---------------------------------------------------------------------------------------------
# What the catalog says (catalog.compat)
# ---------------------------------------------------------------------------------------------


class CompatVerdict(StrEnum):
    YES = "yes"  # the driver is at least the one the toolkit shipped with
    MINOR = "minor-version-compatibility"  # ≥ the CUDA major family's floor, with caveats
    NO = "no"
    UNKNOWN = "unknown"  # the catalog has no row for this CUDA, or the version is unreadable


@dataclass(frozen=True, slots=True)
class CompatAnswer:
    """Can driver D run applications built with CUDA C? With what it rests on."""

    verdict: CompatVerdict
    driver: str
    cuda: str
    os: str
    toolkit_driver_min: str | None  # full support: the driver the toolkit shipped with
    minor_compat_min: str | None  # the family floor of minor-version compatibility
    caveats: tuple[str, ...] = ()
    source_row: str | None = None  # "cuda_driver.csv: 12.4.0 (12.4 GA)"
    source: str = ""

    @property
    def supported(self) -> bool | None:
        """True for yes and minor-version compatibility, False for no, None when unknown."""
        if self.verdict is CompatVerdict.UNKNOWN:
            return None
        return self.verdict is not CompatVerdict.NO


@dataclass(frozen=True, slots=True)
class ArchInfo:
    """A GPU's compute capability and the CUDA releases that can target it."""

    name: str  # the catalog's product name: "H100 SXM5 80GB (H100 80GB HBM3)"
    architecture: str  # "Hopper"
    compute_capability: str  # "9.0"
    sm: str  # "sm_90"
    pci_device_ids: tuple[str, ...] = ()  # "2330"
    first_cuda: str | None = None  # first CUDA that targets the sm natively
    last_cuda: str | None = None  # last CUDA that can build for it (None: still supported)
    first_driver_branch: str | None = None  # as the catalog words it ("R570 per ...")
    # how the query was matched: "pci-id", "name" (exact), "family" (the product's words, e.g.
    # "RTX 2080 SUPER" → the RTX 2080 row: same chip generation), "gpus.csv" (the GPU catalog)
    matched_by: str = "name"
    source: str = ""
    notes: str = ""


class ArchSupport(StrEnum):
    CUBIN = "cubin"  # machine code for this compute capability (or a lower minor, same major)
    PTX = "ptx"  # only through JIT compilation of PTX (needs the build's toolkit driver)
    DECLARED = "declared"  # the framework states support for it (cubin or PTX: not said)
    NONE = "none"  # no compatible code: "no kernel image is available"
    UNKNOWN = "unknown"  # the build's arch list is not known


@dataclass(frozen=True, slots=True)
class ArchMatch:
    support: ArchSupport
    target: str | None  # the arch entry that runs: "sm_80", "compute_120", "SM >= 7.5"
    detail: str  # the rule in words: "sm_80 cubins run on 8.6 (same major, lower minor)"


@dataclass(frozen=True, slots=True)
class FrameworkBuild:
    """One framework build (a PyTorch cuXXX wheel, a JAX plugin, a TensorFlow release)."""

    framework: str  # "PyTorch", "JAX", "TensorFlow"
    version: str  # the catalog's version text: "2.5", "0.7.1", "2.16.1"
    variant: str  # "cu124", "cuda12", "gpu"
    cuda_version: str | None  # "12.4": the CUDA it was built with, or the minimum it needs
    cuda_text: str  # the cell as the catalog has it: "12.4 (runtime 12.4.127)"
    status: str
    pypi_default: bool | None
    cudnn: str | None
    nccl: str | None
    sm_archs: tuple[str, ...]  # "sm_80", "compute_120"; empty when the list is not known
    min_compute_capability: str | None  # "7.5" where the source states a floor instead
    archs_verified: bool  # False where the catalog marks the list unverified
    driver_floor_linux: str | None  # "525.60.13"
    python: str
    released: str
    notes: str = ""
    source: str = ""


@dataclass(frozen=True, slots=True)
class DriverBranch:
    """An NVIDIA data-center driver branch and its end of life."""

    branch: int  # 535
    designation: str  # "long-term support branch", "production branch", "new feature branch"
    end_of_life: str  # "2026-06"
    source: str
