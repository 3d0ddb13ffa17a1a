"""A fake libnvidia-ml: the C functions nvidia-ml-py's wrappers call, over FakeGpu state.

Each method has the C name and C calling convention the real ``pynvml.py`` uses
(``fn(handle, byref(out))`` -> ``nvmlReturn_t``), so the real wrappers (error mapping,
struct building, ``usedGpuMemory`` -> None, sizing calls with INSUFFICIENT_SIZE) run unchanged.
A function this fake does not implement, or that ``driver_version`` predates, is missing from
the library object: the real ``_nvmlGetFunctionPointer`` then raises NVMLError_FunctionNotFound
exactly as with an old driver.
"""

from __future__ import annotations

from .clib_base import INTRODUCED, LibBase
from .clib_device import DeviceQueries
from .clib_extra import ExtraQueries
from .clib_vgpu import VgpuQueries

__all__ = ["INTRODUCED", "FakeNvmlLib", "LibBase"]


class FakeNvmlLib(DeviceQueries, ExtraQueries, VgpuQueries):
    """The library object ``CDLL("libnvidia-ml.so.1")`` returns in the fake module."""
