"""GPUs and cloud instances as the catalog describes them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU variant. TFLOPS are dense (no sparsity), keyed by precision name."""

    key: str  # stable id, e.g. "h100-sxm5-80gb"
    name: str  # display name, e.g. "H100 SXM5 80GB"
    family: str  # e.g. "H100"
    variant: str  # e.g. "SXM5-80GB"
    architecture: str
    # framebuffer total as nvidia-smi prints it (FB Memory Usage → Total; drivers from R510 on
    # count the driver's own reservation in it and print it apart as "Reserved")
    memory_bytes: int
    memory_bandwidth_bytes_per_s: float
    dense_tflops: dict[str, float]  # "fp32", "tf32", "bf16", "fp16", "fp8", "int8" (TOPS)
    tdp_watts: float | None
    nvlink_bytes_per_s: float | None  # total per GPU, both directions
    mig_profiles: tuple[str, ...] = ()
    smi_names: tuple[str, ...] = ()  # what nvidia-smi / NVML print as the product name
    compute_capability: str | None = None
    source: str = ""
    notes: str = ""
    memory_basis: str = ""  # where memory_bytes comes from: a capture, an NVML mock, or nominal
    # what CUDA hands to processes (cudaMemGetInfo's total, torch's total_memory): the total less
    # the driver's reservation; None where no reading was found (then usable_bytes = memory_bytes)
    usable_memory_bytes: int | None = None
    usable_basis: str = ""  # where usable_memory_bytes comes from
    nominal_memory_bytes: int | None = None  # the datasheet size ("80GB" HBM = 80 GiB)
    memory_type: str = ""  # e.g. "HBM3", "GDDR6X"
    confidence: str = ""  # "high" (datasheet), "medium" (derived / partly verified), "low"
    # streaming multiprocessors enabled on this product (whitepaper / datasheet), None if unknown
    sm_count: int | None = None
    # most MIG instances the GPU splits into (NVIDIA's MIG user guide, "Supported GPUs": 7 on
    # A100 / H100 / B200, 4 on A30 and RTX PRO 6000 Blackwell); 0 = no MIG; None = not known
    mig_instances_max: int | None = None

    @property
    def has_mig(self) -> bool | None:
        """Whether the GPU can run MIG; None when the catalog does not know."""
        return None if self.mig_instances_max is None else self.mig_instances_max > 0

    @property
    def usable_bytes(self) -> int:
        """Memory one job can have: CUDA's total where it was read, else the nvidia-smi total.

        What PyTorch sees (OOM messages: "GPU 0 has a total capacity of 79.19 GiB" on an H100 whose
        nvidia-smi total is 81559 MiB), and what vLLM's gpu_memory_utilization multiplies.
        """
        if self.usable_memory_bytes is None:
            return self.memory_bytes
        return self.usable_memory_bytes

    def tflops(self, precision: str) -> float | None:
        return self.dense_tflops.get(precision)

    def balance_point(self, precision: str) -> float | None:
        """Roofline ridge point in FLOPs/byte: below it a kernel is memory-bound."""
        tflops = self.dense_tflops.get(precision)
        if tflops is None or self.memory_bandwidth_bytes_per_s <= 0:
            return None
        return tflops * 1e12 / self.memory_bandwidth_bytes_per_s


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    """A cloud instance type with its on-demand price (a dated fact, not a constant)."""

    provider: str
    instance_type: str
    gpu_key: str
    gpu_count: int
    vcpus: int | None
    memory_gib: float | None
    interconnect: str
    network: str
    region: str
    usd_per_hour: float | None
    price_basis: str
    price_date: str
    source: str
    notes: str = ""
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def usd_per_gpu_hour(self) -> float | None:
        return None if self.usd_per_hour is None else self.usd_per_hour / self.gpu_count
