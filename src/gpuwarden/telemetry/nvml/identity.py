"""Identity of a device: what stays the same while the driver is loaded (read once)."""

from __future__ import annotations

from typing import Any

from gpuwarden.telemetry.nvml._lib import Nvml, text
from gpuwarden.types.telemetry import DeviceInfo

# nvmlDeviceArchitecture_t (nvml.h NVML_DEVICE_ARCH_*) -> the name nvidia-smi -q prints
ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}


def system_versions(nvml: Nvml) -> tuple[str | None, str | None]:
    """(driver version "550.54.15", CUDA driver version "12.4" as nvidia-smi prints it)."""
    driver = text(nvml.call("nvmlSystemGetDriverVersion"))
    cuda = nvml.call("nvmlSystemGetCudaDriverVersion_v2")
    if cuda is None:
        cuda = nvml.call("nvmlSystemGetCudaDriverVersion")
    # 12040 -> "12.4" (nvml.h: major * 1000 + minor * 10)
    cuda_text = None if cuda is None else f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}"
    return driver, cuda_text


def read_identity(
    nvml: Nvml, handle: Any, index: int, driver: str | None, cuda: str | None
) -> DeviceInfo:
    """May raise DeviceUnusableError."""
    pci = nvml.call("nvmlDeviceGetPciInfo_v3", handle)
    memory = nvml.call("nvmlDeviceGetMemoryInfo", handle)
    arch = nvml.call("nvmlDeviceGetArchitecture", handle)
    return DeviceInfo(
        index=index,  # index
        uuid=text(nvml.call("nvmlDeviceGetUUID", handle)) or f"nvml-index-{index}",  # uuid
        name=text(nvml.call("nvmlDeviceGetName", handle)) or "unknown NVIDIA GPU",  # name
        pci_bus_id=None if pci is None else text(pci.busId),  # pci.bus_id
        serial=text(nvml.call("nvmlDeviceGetSerial", handle)),  # serial
        vbios_version=text(nvml.call("nvmlDeviceGetVbiosVersion", handle)),  # vbios_version
        architecture=None if arch is None else ARCHITECTURES.get(int(arch)),
        driver_version=driver,  # driver_version
        cuda_driver_version=cuda,  # (nvidia-smi header "CUDA Version")
        memory_total_bytes=None if memory is None else int(memory.total),  # memory.total
    )
