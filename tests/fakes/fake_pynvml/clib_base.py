# ruff: noqa: N802, N815  (the C function names of nvml.h)
"""The fake libnvidia-ml's core: return codes, handles, init, system queries, call guard."""

from __future__ import annotations

import ctypes
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from .device import FakeGpu, FakeMig

# nvmlReturn_t (nvml.h)
OK, UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED = 0, 1, 2, 3
NOT_FOUND, INSUFFICIENT_SIZE, TIMEOUT = 6, 7, 10
ARGUMENT_VERSION_MISMATCH = 25

# First driver branch that exports a function (nvml.h "Added in" notes / the driver branches
# gpustat's NvidiaDriverMock emulates: 430, 450, 510, 535). Unlisted functions: always there.
INTRODUCED: dict[str, tuple[int, ...]] = {
    # first in CUDA 9.1's nvml.h (R387; the Ubuntu nvidia-cuda-dev 9.1.85 man pages document it,
    # 9.0/R384 drivers do not export it): before that, FunctionNotFound for the whole batch
    "nvmlDeviceGetFieldValues": (387,),
    "nvmlDeviceGetMemoryInfo_v2": (510, 39),
    "nvmlDeviceGetComputeRunningProcesses_v3": (510, 39),
    "nvmlDeviceGetGraphicsRunningProcesses_v3": (510, 39),
    "nvmlDeviceGetRemappedRows": (450,),
    "nvmlDeviceGetMigMode": (450,),
    "nvmlDeviceGetMaxMigDeviceCount": (450,),
    "nvmlDeviceGetMigDeviceHandleByIndex": (450,),
    "nvmlDeviceIsMigDeviceHandle": (450,),
    "nvmlDeviceGetGpuInstanceId": (450,),
    "nvmlDeviceGetComputeInstanceId": (450,),
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle": (450,),
    "nvmlGpmQueryDeviceSupport": (520,),
    "nvmlGpmSampleAlloc": (520,),
    "nvmlGpmSampleFree": (520,),
    "nvmlGpmSampleGet": (520,),
    "nvmlGpmMigSampleGet": (520,),
    "nvmlGpmMetricsGet": (520,),
    "nvmlDeviceGetCurrentClocksEventReasons": (535,),
    # Approximate first branches (what the tests need is that an older driver lacks them):
    # the fabric info of Hopper NVSwitch systems, its versioned successor, the T.Limit margin
    # and the SRAM status (Ampere+, root only) arrived with R5xx drivers.
    "nvmlDeviceGetRowRemapperHistogram": (470,),
    "nvmlDeviceGetGpuFabricInfo": (525,),
    "nvmlDeviceGetMarginTemperature": (535,),
    "nvmlDeviceGetGpuFabricInfoV": (550,),
    "nvmlDeviceGetSramEccErrorStatus": (550,),
    # the repair readings nvidia-smi prints from R575 ("Channel / TPC Repair Pending",
    # "Unrepairable Memory"; no capture of an older driver prints them)
    "nvmlDeviceGetRepairStatus": (575,),
    "nvmlDeviceGetUnrepairableMemoryFlag_v1": (575,),
}


def _out(arg: Any) -> Any:
    """The ctypes object behind ``byref(x)``."""
    return arg._obj


def _address(pointer: Any) -> int:
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


def _point(pointer_obj: Any, address: int) -> None:
    """Make an opaque handle (``c_nvmlDevice_t`` etc.) hold ``address``."""
    ctypes.cast(ctypes.byref(pointer_obj), ctypes.POINTER(ctypes.c_void_p))[0] = address


def _driver_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


@dataclass
class _EventSet:
    devices: dict[int, int] = field(default_factory=dict)  # gpu index -> event mask


@dataclass
class _GpmSample:
    taken: bool = False
    time_s: float = 0.0
    integrals: dict[int, float] = field(default_factory=dict)
    gpu: FakeGpu | None = None


class LibBase:
    """State and helpers every group of fake C functions shares."""

    def __init__(
        self,
        gpus: list[FakeGpu],
        *,
        driver_version: str,
        cuda_version: int,
        clock: Callable[[], float],
    ) -> None:
        self.gpus = gpus
        self.driver_version = driver_version
        self.cuda_version = cuda_version
        self.clock = clock
        self.init_error = OK  # e.g. DRIVER_NOT_LOADED (9), LIB_RM_VERSION_MISMATCH (18)
        self.global_error = OK  # every call fails with this (driver reloaded mid-run)
        self.initialized = 0
        self.calls = 0
        # meter=True: CPU seconds spent inside this fake driver (benchmarks subtract it, since a
        # real libnvidia-ml is C and its cost is not the collector's)
        self.meter = False
        self.cpu_s = 0.0
        self._ids = itertools.count(0x1000, 0x10)
        self._gpu_at: dict[int, FakeGpu] = {}
        self._mig_at: dict[int, FakeMig] = {}
        self._addr_of: dict[int, int] = {}
        self._mig_addr: dict[int, int] = {}
        self._sets: dict[int, _EventSet] = {}
        self._samples: dict[int, _GpmSample] = {}
        for gpu in gpus:
            address = next(self._ids)
            self._gpu_at[address] = gpu
            self._addr_of[id(gpu)] = address
            for mig in gpu.migs:
                mig_address = next(self._ids)
                self._mig_at[mig_address] = mig
                self._mig_addr[id(mig)] = mig_address

    def exported(self) -> SimpleNamespace:
        """The functions this driver version exports, as attributes (what CDLL gives)."""
        driver = _driver_tuple(self.driver_version)
        names = [n for n in dir(self) if n.startswith("nvml")]
        return SimpleNamespace(
            **{n: self._guard(n) for n in names if driver >= INTRODUCED.get(n, (0,))}
        )

    def _guard(self, name: str) -> Callable[..., int]:
        method = getattr(self, name)
        if name in ("nvmlInitWithFlags", "nvmlInit_v2", "nvmlErrorString"):
            return method  # type: ignore[no-any-return]

        def call(*args: Any) -> int:
            self.calls += 1
            if not self.initialized:
                return UNINITIALIZED
            if self.global_error:
                return self.global_error
            if not self.meter:
                return method(*args)  # type: ignore[no-any-return]
            start = time.process_time()
            try:
                return method(*args)  # type: ignore[no-any-return]
            finally:
                self.cpu_s += time.process_time() - start

        return call

    # ---- handles -------------------------------------------------------------------------------
    def _target(self, handle: Any, function: str) -> tuple[int, FakeGpu | None, FakeMig | None]:
        address = _address(handle)
        mig = self._mig_at.get(address)
        gpu = mig.parent if mig is not None else self._gpu_at.get(address)
        if gpu is None:
            return INVALID_ARGUMENT, None, None
        return gpu.check(function), gpu, mig

    # ---- init and system -----------------------------------------------------------------------
    def nvmlInitWithFlags(self, flags: int) -> int:
        if self.init_error:
            return self.init_error
        self.initialized += 1
        return OK

    def nvmlInit_v2(self) -> int:
        return self.nvmlInitWithFlags(0)

    def nvmlShutdown(self) -> int:
        self.initialized = max(0, self.initialized - 1)
        return OK

    def nvmlErrorString(self, result: int) -> bytes:
        return f"Unknown Error (fake code {result})".encode()

    def nvmlSystemGetDriverVersion(self, buf: Any, size: Any) -> int:
        buf.value = self.driver_version.encode()
        return OK

    def nvmlSystemGetNVMLVersion(self, buf: Any, size: Any) -> int:
        buf.value = f"{self.cuda_version // 1000}.{self.driver_version}".encode()
        return OK

    def nvmlSystemGetCudaDriverVersion(self, out: Any) -> int:
        _out(out).value = self.cuda_version
        return OK

    nvmlSystemGetCudaDriverVersion_v2 = nvmlSystemGetCudaDriverVersion

    def nvmlSystemGetProcessName(self, pid: Any, buf: Any, size: Any) -> int:
        for gpu in self.gpus:
            for proc in gpu.capture.processes:
                if proc.pid == pid.value and proc.name:
                    buf.value = proc.name.encode()[: size.value - 1]
                    return OK
        return NOT_FOUND

    def nvmlDeviceGetCount_v2(self, out: Any) -> int:
        _out(out).value = len(self.gpus)
        return OK

    def nvmlDeviceGetHandleByIndex_v2(self, index: Any, out: Any) -> int:
        i = index.value
        if not 0 <= i < len(self.gpus):
            return INVALID_ARGUMENT
        gpu = self.gpus[i]
        code = gpu.check("nvmlDeviceGetHandleByIndex_v2")
        if code:
            return code
        _point(_out(out), self._addr_of[id(gpu)])
        return OK

    def _handle_where(self, out: Any, match: Callable[[FakeGpu], bool]) -> int:
        for gpu in self.gpus:
            if match(gpu):
                code = gpu.check("lookup")
                if code:
                    return code
                _point(_out(out), self._addr_of[id(gpu)])
                return OK
        return NOT_FOUND

    def nvmlDeviceGetHandleByUUID(self, uuid: Any, out: Any) -> int:
        return self._handle_where(out, lambda g: g.capture.uuid.encode() == uuid.value)

    def nvmlDeviceGetHandleByPciBusId_v2(self, bus: Any, out: Any) -> int:
        want = bus.value.decode().lower()
        return self._handle_where(out, lambda g: (g.capture.pci_bus_id or "").lower() == want)

    # ---- a generic "one value out" helper -------------------------------------------------------
    def _one(self, handle: Any, out: Any, name: str, value: Callable[[FakeGpu], Any]) -> int:
        code, gpu, _ = self._target(handle, name)
        if code or gpu is None:
            return code
        got = value(gpu)
        if got is None:
            return NOT_SUPPORTED
        target = _out(out)
        target.value = got
        return OK

    def _string(
        self, handle: Any, buf: Any, size: Any, name: str, value: Callable[..., Any]
    ) -> int:
        code, gpu, mig = self._target(handle, name)
        if code or gpu is None:
            return code
        text = value(gpu, mig)
        if text is None:
            return NOT_SUPPORTED
        encoded = text.encode()
        if len(encoded) >= size.value:
            return INSUFFICIENT_SIZE
        buf.value = encoded
        return OK
