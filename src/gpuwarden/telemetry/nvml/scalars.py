"""The per-read scalar queries of a device, bound once to reusable ctypes buffers.

nvidia-ml-py's wrappers build new ctypes objects, take a lock and look the function up on every
call; for the ~17 one-value queries a collector repeats each second that is most of its CPU.
Here each query is the C function plus argument buffers made at open (as nvml.h declares
them), so a reading is one C call and one ``.value`` per field. Units are NVML's; readings.py
converts them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from gpuwarden.catalog.nvml_enums import NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED
from gpuwarden.telemetry.nvml._lib import Nvml

# (result key, C function, leading enum arguments, output ctypes)
_C_UINT, _C_ULL, _C_INT = ctypes.c_uint, ctypes.c_ulonglong, ctypes.c_int
SCALARS: tuple[tuple[str, str, tuple[int, ...], tuple[type, ...]], ...] = (
    ("temperature_gpu", "nvmlDeviceGetTemperature", (0,), (_C_UINT,)),  # NVML_TEMPERATURE_GPU
    ("power_mw", "nvmlDeviceGetPowerUsage", (), (_C_UINT,)),
    ("clock_graphics", "nvmlDeviceGetClockInfo", (0,), (_C_UINT,)),  # NVML_CLOCK_GRAPHICS
    ("clock_sm", "nvmlDeviceGetClockInfo", (1,), (_C_UINT,)),  # NVML_CLOCK_SM
    ("clock_memory", "nvmlDeviceGetClockInfo", (2,), (_C_UINT,)),  # NVML_CLOCK_MEM
    ("clock_video", "nvmlDeviceGetClockInfo", (3,), (_C_UINT,)),  # NVML_CLOCK_VIDEO
    ("pstate", "nvmlDeviceGetPerformanceState", (), (_C_INT,)),
    ("fan", "nvmlDeviceGetFanSpeed", (), (_C_UINT,)),
    ("reasons", "nvmlDeviceGetCurrentClocksEventReasons", (), (_C_ULL,)),
    ("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", (), (_C_UINT,)),
    ("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", (), (_C_UINT,)),
    ("pcie_tx_kbs", "nvmlDeviceGetPcieThroughput", (0,), (_C_UINT,)),  # NVML_PCIE_UTIL_TX_BYTES
    ("pcie_rx_kbs", "nvmlDeviceGetPcieThroughput", (1,), (_C_UINT,)),  # NVML_PCIE_UTIL_RX_BYTES
    ("encoder", "nvmlDeviceGetEncoderUtilization", (), (_C_UINT, _C_UINT)),  # util, period µs
    ("decoder", "nvmlDeviceGetDecoderUtilization", (), (_C_UINT, _C_UINT)),
)
# A function the driver may lack, and the older name to use then
FALLBACK = {"nvmlDeviceGetCurrentClocksEventReasons": "nvmlDeviceGetCurrentClocksThrottleReasons"}


class _Utilization(ctypes.Structure):
    _fields_ = (("gpu", ctypes.c_uint), ("memory", ctypes.c_uint))  # nvmlUtilization_t


class _MemoryV2(ctypes.Structure):
    _fields_ = (  # nvmlMemory_v2_t
        ("version", ctypes.c_uint),
        ("total", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    )


class _MemoryV1(ctypes.Structure):
    _fields_ = (  # nvmlMemory_t
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    )


_MEMORY_V2 = 0x02000028  # nvmlMemory_v2 = NVML_STRUCT_VERSION(Memory, 2) (nvml.h)


class MemoryReader:
    """Framebuffer memory: nvmlDeviceGetMemoryInfo_v2 (reserved apart, driver 510.39+), else v1
    (which counts reserved as used). Called as C functions: other NVML clients in the same
    process (gpustat) replace nvidia-ml-py's Python wrapper with one of another signature."""

    def __init__(self, nvml: Nvml, handle: Any) -> None:
        self.nvml = nvml
        self.name = "nvmlDeviceGetMemoryInfo_v2"
        self.fn = nvml.raw(self.name)
        self.memory: Any = _MemoryV2(version=_MEMORY_V2)
        if self.fn is None:
            self.name, self.fn = "nvmlDeviceGetMemoryInfo", nvml.raw("nvmlDeviceGetMemoryInfo")
            self.memory = _MemoryV1()
        self.args = (handle, ctypes.byref(self.memory))

    def read(self) -> dict[str, Any]:
        """memory.used / memory.free / memory.reserved in bytes; {} when not reported."""
        if self.fn is None:
            return {}
        code = self.fn(*self.args)
        if code:
            self.nvml.check(code, self.name)
            return {}
        mem = self.memory
        return {
            "memory_used_bytes": int(mem.used),  # memory.used
            "memory_free_bytes": int(mem.free),  # memory.free
            "memory_reserved_bytes": int(mem.reserved) if hasattr(mem, "reserved") else None,
        }


class _MarginV1(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint), ("marginTemperature", ctypes.c_int))


_MARGIN_V1 = 0x01000008  # nvmlMarginTemperature_v1 = NVML_STRUCT_VERSION(MarginTemperature, 1)
# errors that will not change on asking again
_NEVER = frozenset({NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND})


class MarginReader:
    """nvmlDeviceGetMarginTemperature: °C below the max operating temperature (nvidia-smi "GPU
    T.Limit Temp"), a versioned struct the scalar table cannot take; bound once like memory."""

    def __init__(self, nvml: Nvml, handle: Any) -> None:
        self.nvml = nvml
        self.name = "nvmlDeviceGetMarginTemperature"
        self.fn = nvml.raw(self.name)
        self.margin = _MarginV1(version=_MARGIN_V1)
        self.args = (handle, ctypes.byref(self.margin))

    def read(self) -> int | None:
        """May raise DeviceUnusableError."""
        if self.fn is None:
            return None
        code = self.fn(*self.args)
        if code:
            self.nvml.check(code, self.name)
            if code in _NEVER:
                self.fn = None
            return None
        return int(self.margin.marginTemperature)


# What ScalarReader.read returns, in order: the SCALARS keys, then nvmlUtilization_t's two
KEYS = (*(key for key, _, _, _ in SCALARS), "util_gpu", "util_memory")


class ScalarReader:
    """One device's scalar queries. ``read`` returns a list aligned with KEYS (None where the
    value is not reported)."""

    def __init__(self, nvml: Nvml, handle: Any) -> None:
        self.nvml = nvml
        self.calls: list[tuple[int, str, Callable[..., int], tuple[Any, ...], Any]] = []
        for position, (_, function, enums, outs) in enumerate(SCALARS):
            fn, name = nvml.raw(function), function
            if fn is None and function in FALLBACK:
                name = FALLBACK[function]
                fn = nvml.raw(name)
            if fn is None:
                continue
            buffers = tuple(out() for out in outs)
            args = (handle, *(ctypes.c_uint(e) for e in enums), *map(ctypes.byref, buffers))
            self.calls.append((position, name, fn, args, buffers[0]))
        self.util = getattr(nvml.module, "c_nvmlUtilization_t", _Utilization)()
        self.util_fn = nvml.raw("nvmlDeviceGetUtilizationRates")
        self.util_args = (handle, ctypes.byref(self.util))

    def read(self) -> list[Any]:
        """May raise DeviceUnusableError."""
        out: list[Any] = [None] * len(KEYS)
        check = self.nvml.check
        for position, name, fn, args, buffer in self.calls:
            code = fn(*args)
            if code:
                check(code, name)  # raises for a lost GPU; else the field is not reported
            else:
                out[position] = buffer.value
        if self.util_fn is not None:
            code = self.util_fn(*self.util_args)
            if code:
                check(code, "nvmlDeviceGetUtilizationRates")
            else:
                out[-2], out[-1] = self.util.gpu, self.util.memory
        return out
