"""Device facts the simulator starts from: the catalog row plus what real captures showed.

Catalog (``gpuwarden.catalog``): name, architecture, memory total, power limit (TDP), NVLink.
Captures (``shared/fixtures``), cited per value below; where no capture has a value the field
says how it was derived.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.catalog import resolve_gpu
from gpuwarden.units import GB, MIB


@dataclass(frozen=True, slots=True)
class SimGpuModel:
    catalog_key: str
    smi_name: str  # what nvidia-smi / NVML print as the product name
    architecture: str
    memory_total_bytes: int
    memory_reserved_bytes: int | None  # None: the captured driver did not report it
    power_limit_watts: float
    power_idle_watts: float
    power_full_watts: float  # at full activity (a burn test)
    temp_idle_celsius: float
    temp_full_celsius: float
    temp_max_operating_celsius: float  # above it the driver slows clocks (SW thermal slowdown)
    temp_memory_max_operating_celsius: float | None  # None: the capture prints no degrees
    temp_slowdown_celsius: float  # hardware slowdown threshold
    temp_shutdown_celsius: float
    clock_sm_max_mhz: float
    clock_sm_idle_mhz: float
    clock_memory_mhz: float
    clock_video_mhz: float
    pcie_gen: int
    pcie_width: int
    nvlink_count: int
    nvlink_link_bytes_per_second: float  # per link, as `nvidia-smi nvlink -s` prints it
    # GPU fabric registration (nvmlDeviceGetGpuFabricInfo, Hopper and newer): reported
    # "Completed" / "Success" on a healthy node; False = the device has no fabric state
    fabric_registration: bool
    driver_version: str
    cuda_driver_version: str
    vbios_version: str

    @property
    def thermal_resistance_c_per_watt(self) -> float:
        """Steady-state °C per watt, from the idle and full-load captures."""
        return (self.temp_full_celsius - self.temp_idle_celsius) / (
            self.power_full_watts - self.power_idle_watts
        )

    @property
    def ambient_celsius(self) -> float:
        return self.temp_idle_celsius - self.thermal_resistance_c_per_watt * self.power_idle_watts


# The captures the values are read off: the H100's files (idle.q.txt, load.q.txt, load.dmon.txt)
# are fixtures/nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.*, the A100's
# fixtures/nvidia-smi/netdata__a100-sxm4-mig.xml.


def _h100() -> SimGpuModel:
    spec = resolve_gpu("h100-sxm5-80gb")
    return SimGpuModel(
        catalog_key=spec.key,
        smi_name=spec.smi_names[0],
        architecture=spec.architecture,
        memory_total_bytes=spec.memory_bytes,
        memory_reserved_bytes=479 * MIB,  # idle.q.txt "Reserved : 479 MiB"
        power_limit_watts=spec.tdp_watts or 700.0,
        power_idle_watts=69.62,  # idle.q.txt "Instantaneous Power Draw"
        power_full_watts=631.0,  # load.dmon.txt first row, gpu_burn at sm 100 %
        temp_idle_celsius=41.0,  # idle.q.txt "GPU Current Temp"
        temp_full_celsius=63.0,  # load.dmon.txt first row
        # load.q.txt: current 59 C with "T.Limit 26 C" → max operating 85 C; slowdown at T.Limit
        # -2 C → 87 C; shutdown at -8 C → 93 C.
        temp_max_operating_celsius=85.0,
        # "Memory Max Operating T.Limit Temp : 0 C": a margin, no degrees to start from
        temp_memory_max_operating_celsius=None,
        temp_slowdown_celsius=87.0,
        temp_shutdown_celsius=93.0,
        clock_sm_max_mhz=1980.0,  # load.q.txt "Max Clocks SM"
        clock_sm_idle_mhz=345.0,  # idle.dmon.txt pclk
        clock_memory_mhz=2619.0,
        clock_video_mhz=1545.0,
        pcie_gen=5,
        pcie_width=16,
        nvlink_count=18,  # catalog notes "NVLink4 18 links"; fixtures/topo ...nvlink-s.txt
        nvlink_link_bytes_per_second=26.562 * GB,  # fixtures/topo h100 nvlink-s.txt
        fabric_registration=True,  # q.txt Fabric "State : Completed", "Status : Success"
        driver_version="590.48.01",
        cuda_driver_version="13.1",
        vbios_version="96.00.A5.00.01",
    )


def _a100() -> SimGpuModel:
    spec = resolve_gpu("a100-sxm4-40gb")
    return SimGpuModel(
        catalog_key=spec.key,
        smi_name=spec.smi_names[0],
        architecture=spec.architecture,
        memory_total_bytes=spec.memory_bytes,
        memory_reserved_bytes=None,  # driver 510 does not report it
        power_limit_watts=spec.tdp_watts or 400.0,
        power_idle_watts=66.92,  # XML power_draw at idle
        # No A100 load capture: full load at the H100 capture's share of its limit (631/700).
        power_full_watts=round(400.0 * 631.0 / 700.0, 1),
        temp_idle_celsius=36.0,  # XML gpu_temp at idle
        temp_full_celsius=63.0,  # assumed as on the H100 capture
        temp_max_operating_celsius=85.0,  # XML gpu_temp_max_gpu_threshold
        temp_memory_max_operating_celsius=95.0,  # XML gpu_temp_max_mem_threshold
        temp_slowdown_celsius=89.0,  # XML gpu_temp_slow_threshold
        temp_shutdown_celsius=92.0,  # XML gpu_temp_max_threshold
        clock_sm_max_mhz=1410.0,  # XML max_clocks/sm_clock
        clock_sm_idle_mhz=1410.0,  # the captured A100 stays at 1410 MHz in P0 while idle
        clock_memory_mhz=1215.0,
        clock_video_mhz=1290.0,
        pcie_gen=4,  # XML max_link_gen
        pcie_width=16,
        nvlink_count=12,  # catalog notes "NVLink3 12 links"; fixtures/topo gpud a100 x8 status
        nvlink_link_bytes_per_second=25 * GB,  # fixtures/topo gpud__a100-sxm4-80gb-x8 "25 GB/s"
        fabric_registration=False,  # Ampere: NVML reports no fabric state (Hopper and newer)
        driver_version="510.47.03",
        cuda_driver_version="11.6",
        vbios_version="92.00.45.00.03",
    )


_MODELS = {"h100-sxm5-80gb": _h100, "a100-sxm4-40gb": _a100}
SIM_GPU_KEYS = tuple(_MODELS)


def sim_gpu_model(key: str) -> SimGpuModel:
    """The simulated device for a catalog key in ``SIM_GPU_KEYS``."""
    return _MODELS[key]()
