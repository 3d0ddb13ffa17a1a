"""GPU catalog: ``data/gpus.csv`` (one row per variant, each naming its source) → ``GpuSpec``.

Units in the file are the ones datasheets and ``nvidia-smi`` print: memory in MiB, bandwidth and
NVLink in decimal GB/s (NVLink: total per GPU, both directions), dense TFLOPS (datasheet sparse ÷
2). An empty compute cell means the GPU has no such unit or the number is not published.

Three memory sizes, each with its source:

* ``memory_mib``: the framebuffer total nvidia-smi prints (R510+ drivers: with the driver's
  reservation, shown apart as "Reserved"; GDDR cards with ECC on lose 1/16 to it: L4 23034 MiB);
* ``usable_mib``: what CUDA gives processes (``cudaMemGetInfo`` total, torch's ``total_memory``),
  the total less the reservation. Taken, in this order, from a capture in the fixtures (total −
  reserved), a torch reading, an ``nvidia-smi -q`` total − reserved (the lower usable when several),
  or an nvidia-smi total from before R510 (which printed the total without the reservation).
  Empty where none was found: the planner then uses the nvidia-smi total;
* ``nominal_memory_mib``: the datasheet size ("80GB" HBM is 80 GiB).

``mig_instances_max`` is the most MIG instances the product splits into, from the "Supported
GPUs" table of NVIDIA's MIG user guide (0 where the guide rules MIG out; empty = not known;
data/SOURCES.md gives each row's basis): whether a GPU can run MIG at all is this fact
(``GpuSpec.has_mig``), not its name or whether its profile names are listed.

``sm_count`` is the number of streaming multiprocessors the product enables (whitepaper or
datasheet, cited in ``source``); with the compute capability it sizes what the driver reserves per
resident thread (``max_resident_threads_per_sm``).
"""

from __future__ import annotations

import re
from functools import cache

from gpuwarden.catalog.gpu_names import compact, match_gpu
from gpuwarden.catalog.tables import Row, read_rows
from gpuwarden.catalog.tensor_math import has_tensor_math
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.units import GB, MIB

_FILE = "gpus.csv"
# NVIDIA's MIG profile names: "<slices>g.<memory>gb", "+me" with the media extensions; a compute
# instance within a GPU instance is "<c>c.<slices>g.<memory>gb" (the GPU instance's slices).
MIG_PROFILE = re.compile(
    r"^(?:(?P<compute>\d{1,2})c\.)?(?P<slices>\d{1,2})g\.(?P<gb>\d{1,4})gb(?P<me>\+me)?$"
)
# CSV column → GpuSpec.dense_tflops key (INT8 is in TOPS).
PRECISION_COLUMNS = {
    "fp32": "fp32_tflops",
    "tf32": "tf32_tflops",
    "bf16": "bf16_tflops",
    "fp16": "fp16_tflops",
    "fp8": "fp8_tflops",
    "int8": "int8_tops",
}
_COLUMNS = (
    "key",
    "name",
    "family",
    "variant",
    "architecture",
    "compute_capability",
    "sm_count",
    "memory_mib",
    "memory_basis",
    "usable_mib",
    "usable_basis",
    "nominal_memory_mib",
    "memory_type",
    "bandwidth_gb_s",
    *PRECISION_COLUMNS.values(),
    "tdp_w",
    "nvlink_gb_s",
    "mig_profiles",
    "mig_instances_max",
    "smi_names",
    "confidence",
    "source",
    "notes",
)
# Maximum resident threads per SM by compute capability: CUDA C++ Programming Guide, "Compute
# Capabilities", table "Technical Specifications per Compute Capability" (row "Maximum number of
# resident threads per SM"): 2048 on the data-center designs, 1024 on Turing, 1536 on GA10x, Ada
# and the RTX / GB10 Blackwell parts (torch reports max_threads_per_multi_processor=1536 on sm_120).
_MAX_THREADS_PER_SM = {
    "6.0": 2048,
    "6.1": 2048,
    "7.0": 2048,
    "7.2": 2048,
    "7.5": 1024,
    "8.0": 2048,
    "8.6": 1536,
    "8.7": 2048,
    "8.9": 1536,
    "9.0": 2048,
    "10.0": 2048,
    "10.3": 2048,
    "12.0": 1536,
    "12.1": 1536,
}


def _spec(row: Row) -> GpuSpec:
    tflops = {
        precision: value
        for precision, column in PRECISION_COLUMNS.items()
        if (value := row.number(column)) is not None
    }
    nvlink = row.number("nvlink_gb_s")
    usable = row.count("usable_mib")
    return GpuSpec(
        key=row.text("key"),
        name=row.text("name"),
        family=row.text("family"),
        variant=row.text("variant"),
        architecture=row.text("architecture"),
        memory_bytes=row.required_count("memory_mib") * MIB,
        memory_bandwidth_bytes_per_s=row.required_number("bandwidth_gb_s") * GB,
        dense_tflops=tflops,
        tdp_watts=row.number("tdp_w"),
        nvlink_bytes_per_s=None if nvlink is None else nvlink * GB,
        mig_profiles=row.items("mig_profiles"),
        mig_instances_max=row.tally("mig_instances_max"),
        smi_names=row.items("smi_names"),
        compute_capability=row.optional_text("compute_capability") or None,
        source=row.text("source"),
        notes=row.optional_text("notes"),
        memory_basis=row.text("memory_basis"),
        usable_memory_bytes=None if usable is None else usable * MIB,
        usable_basis=row.text("usable_basis"),
        nominal_memory_bytes=row.required_count("nominal_memory_mib") * MIB,
        memory_type=row.optional_text("memory_type"),
        confidence=row.text("confidence"),
        sm_count=row.count("sm_count"),
    )


@cache
def _catalog() -> tuple[GpuSpec, ...]:
    return tuple(_spec(row) for row in read_rows(_FILE, _COLUMNS))


def gpu_catalog() -> list[GpuSpec]:
    """Every GPU variant gpuwarden knows, in file order (grouped by family, oldest first)."""
    return list(_catalog())


def resolve_gpu(name: str) -> GpuSpec:
    """A GPU by key, display name, nvidia-smi name, or a loose form ("A100 80GB", "H100 SXM").

    A name without a form factor means the SXM module — what 8-GPU servers and cloud GPU instances
    use ("H100" → H100 SXM5 80GB, "A100 40GB" → A100 SXM4 40GB). If that still leaves variants with
    different memory ("A100": 40GB or 80GB), the name is ambiguous and the error lists them.
    Unknown names raise ``UnknownNameError`` with the closest keys.
    """
    return match_gpu(name, _catalog())


@cache
def _by_smi_name() -> dict[str, GpuSpec]:
    return {compact(n): gpu for gpu in _catalog() for n in gpu.smi_names}


# How nvidia-smi's default table ends a product name too long for its column.
_CUT_MARKS = ("...", "…")


def is_cut_name(name: str) -> bool:
    """A name the default table cut to fit ("NVIDIA GeForce RTX 2080 ..."): no name at all, it
    may be a SUPER or a Ti."""
    return name.rstrip().endswith(_CUT_MARKS)


def gpu_by_smi_name(name: str | None) -> GpuSpec | None:
    """The GPU whose nvidia-smi / NVML product name is ``name`` (case and punctuation aside), or
    None: no loose matching, for names a device reports rather than names a person types, and
    never for a cut name (``is_cut_name``)."""
    if not name or is_cut_name(name):
        return None
    return _by_smi_name().get(compact(name))


def compute_capability_of(sm: str) -> tuple[int, int] | None:
    """ "sm_86" / "compute_120" / "8.6" → (8, 6), (12, 0), (8, 6)."""
    text = sm.strip().lower()
    dotted = re.fullmatch(r"(\d+)\.(\d)", text)
    if dotted:
        return int(dotted.group(1)), int(dotted.group(2))
    token = re.fullmatch(r"(?:sm|compute)_(\d{2,3})[af]?", text)
    if token is None:
        return None
    digits = token.group(1)
    return int(digits[:-1]), int(digits[-1])


def computes(gpu: GpuSpec, dtype: str) -> bool | None:
    """Whether ``gpu`` has the math for ``dtype`` ("fp32", "tf32", "bf16", "fp16", "fp8",
    "int8"): its row's published rate when it lists one; a row that lists tensor rates but not
    this one has none (a V100's bf16); a row that publishes no tensor rate (a GeForce refresh
    NVIDIA gave no tensor figures for) is judged by its compute capability; None when neither
    tells."""
    if dtype in gpu.dense_tflops:
        return True
    if any(key != "fp32" for key in gpu.dense_tflops):
        return False
    if dtype == "fp32":
        return True
    capability = compute_capability_of(gpu.compute_capability or "")
    return None if capability is None else has_tensor_math(capability, dtype)


def max_resident_threads_per_sm(compute_capability: str | None) -> int | None:
    """How many threads one SM of this compute capability holds at once ("9.0" → 2048), or None
    for a capability CUDA's table does not list here."""
    return _MAX_THREADS_PER_SM.get(compute_capability.strip()) if compute_capability else None


def mig_slices(profile: str | None) -> int | None:
    """The compute slices of a MIG profile ("3g.40gb" → 3), or None for a name that is not one."""
    found = None if profile is None else MIG_PROFILE.match(profile.strip().lower())
    return None if found is None or int(found["slices"]) == 0 else int(found["slices"])
