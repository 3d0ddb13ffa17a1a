"""The one module that imports ``pynvml`` (nvidia-ml-py): init, calls, error mapping.

Every NVML call of the backend goes through ``Nvml.call``: "not reported" errors
(NotSupported, NoPermission, FunctionNotFound, Unknown, ...) become ``None``, a lost GPU or one
that needs a reset raises a ``DeviceUnusableError`` for that device only, a driver that went
away mid-run raises ``EnvironmentProblemError`` for the whole backend.
Like nvitop's ``api/libnvml.py``.
"""

from __future__ import annotations

import contextlib
import ctypes
from types import ModuleType
from typing import Any

from gpuwarden.catalog.nvml_enums import (
    INSUFFICIENT_PERMISSIONS,
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_RESET_REQUIRED,
    NVML_ERROR_UNINITIALIZED,
)
from gpuwarden.errors import EnvironmentProblemError, MissingExtraError

_NO_BACKEND = "use --backend smi|dcgm|sim on a machine without a working NVIDIA driver"


class DeviceUnusableError(Exception):
    """A call of one device says the whole device answers nothing (internal; the backend
    catches it and keeps reading the others)."""


class DeviceLostError(DeviceUnusableError):
    """NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus or is otherwise inaccessible."""


class DeviceResetRequiredError(DeviceUnusableError):
    """NVML_ERROR_RESET_REQUIRED: "The GPU requires a reset before it can be used again"
    (nvidia-smi prints "[GPU requires reset]" for every value)."""


def load_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError as exc:
        raise MissingExtraError("NVML telemetry", "nvml", "nvidia-ml-py") from exc
    module: ModuleType = pynvml
    return module


def _driver_gone(exc: Exception, when: str) -> EnvironmentProblemError:
    code = getattr(exc, "value", None)
    if code == NVML_ERROR_LIBRARY_NOT_FOUND:
        return EnvironmentProblemError(
            f"NVML library (libnvidia-ml) not found {when}",
            reference="nvml-library-not-found",
            hint="install the NVIDIA driver, run on a GPU host, or " + _NO_BACKEND,
        )
    if code in (NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_UNINITIALIZED):
        return EnvironmentProblemError(
            f"NVIDIA kernel driver is not loaded {when}",
            reference="nvml-driver-not-loaded",
            hint="load it (`modprobe nvidia`, check `dmesg` for NVRM errors), or " + _NO_BACKEND,
        )
    if code == NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return EnvironmentProblemError(
            f"NVML library and kernel driver versions differ {when}",
            reference="nvml-driver-mismatch",
            hint="reboot, or reload the nvidia kernel modules after the driver upgrade",
        )
    if code == NVML_ERROR_NO_PERMISSION:
        return EnvironmentProblemError(
            f"no permission to use NVML {when}",
            reference="nvml-no-permission",
            hint="run as a user with access to /dev/nvidia* (group video, or the container's "
            "--gpus flag)",
        )
    return EnvironmentProblemError(
        f"NVML failed {when}: {exc}",
        reference="nvml-error",
        hint="check `nvidia-smi`; if it fails too, the driver needs attention",
    )


class Nvml:
    """pynvml (or a module with its surface) plus the call discipline above."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.error: type[Exception] = module.NVMLError
        self._missing: set[str] = set()  # FunctionNotFound once: not retried every read

    def init(self) -> None:
        try:
            self.module.nvmlInit()
        except self.error as exc:
            raise _driver_gone(exc, "at start") from exc

    def shutdown(self) -> None:
        with contextlib.suppress(self.error):  # already gone: nothing to release
            self.module.nvmlShutdown()

    def const(self, name: str, default: int) -> int:
        return int(getattr(self.module, name, default))

    def call(self, function: str, *args: Any, memo: str | None = None, **kwargs: Any) -> Any:
        """``pynvml.<function>(*args)``, or None when the device does not report it. ``memo``
        names the C function for the FunctionNotFound memory when the wrapper picks it."""
        key = memo or function
        if key in self._missing:
            return None
        fn = getattr(self.module, function, None)
        if fn is None:
            self._missing.add(function)
            return None
        try:
            return fn(*args, **kwargs)
        except self.error as exc:
            return self._not_reported(exc, key)

    def _not_reported(self, exc: Exception, key: str) -> None:
        """None for "this field is not reported"; raises for an unusable GPU or a gone driver."""
        code = getattr(exc, "value", None)
        if code == NVML_ERROR_GPU_IS_LOST:
            raise DeviceLostError(str(exc)) from exc
        if code == NVML_ERROR_RESET_REQUIRED:
            raise DeviceResetRequiredError(str(exc)) from exc
        if code in (
            NVML_ERROR_LIB_RM_VERSION_MISMATCH,
            NVML_ERROR_DRIVER_NOT_LOADED,
            NVML_ERROR_UNINITIALIZED,
        ):
            raise _driver_gone(exc, f"during {key}") from exc
        if code == NVML_ERROR_FUNCTION_NOT_FOUND:
            self._missing.add(key)
        # NotSupported, NoPermission, Unknown and the rest: this field is not reported

    def open_by_index(self, index: int) -> tuple[Any, str]:
        """nvmlDeviceGetHandleByIndex: the handle, or None and NVML's reason (what nvidia-smi
        prints after "Unable to determine the device handle for GPU ...:"). Raises as ``call``
        for a lost GPU, one that needs a reset, or a gone driver."""
        function = "nvmlDeviceGetHandleByIndex"
        try:
            return getattr(self.module, function)(index), ""
        except self.error as exc:
            self._not_reported(exc, function)
            code = getattr(exc, "value", None)
            return None, INSUFFICIENT_PERMISSIONS if code == NVML_ERROR_NO_PERMISSION else str(exc)

    def raw(self, function: str) -> Any:
        """The C function itself (None when the driver lacks it), for per-device calls whose
        argument buffers are built once; check each return code with ``check``."""
        getter = getattr(self.module, "_nvmlGetFunctionPointer", None)
        if getter is None or function in self._missing:
            return None
        try:
            return getter(function)
        except self.error as exc:
            return self._not_reported(exc, function)

    def check(self, code: int, function: str) -> None:
        """Map a raw call's nvmlReturn_t like ``call`` maps an NVMLError (0 = success)."""
        self._not_reported(self.module.NVMLError(code), function)

    def field_array(self, ids: list[tuple[int, int]]) -> Any:
        """A reusable nvmlFieldValue_t[] request, or None when the module cannot take one."""
        entry = getattr(self.module, "c_nvmlFieldValue_t", None)
        if entry is None or not hasattr(self.module, "_nvmlGetFunctionPointer"):
            return None
        array = (entry * len(ids))()
        for i, (field_id, scope) in enumerate(ids):
            array[i].fieldId, array[i].scopeId = field_id, scope
        return array

    def fill_fields(self, handle: Any, array: Any, ids: list[tuple[int, int]]) -> Any:
        """nvmlDeviceGetFieldValues into ``array`` (the C function, as nvitop's libnvml calls
        it: nvidia-ml-py's wrapper rebuilds the request entry by entry on every call)."""
        key = "nvmlDeviceGetFieldValues"
        if array is None:
            return self.call(key, handle, ids)
        if key in self._missing:
            return None
        try:
            fn = self.module._nvmlGetFunctionPointer(key)
            ret = fn(handle, ctypes.c_int32(len(ids)), ctypes.byref(array))
            if ret != 0:
                raise self.module.NVMLError(ret)
        except self.error as exc:
            return self._not_reported(exc, key)
        return array

    def has(self, function: str) -> bool:
        return function not in self._missing and hasattr(self.module, function)


def text(value: Any) -> str | None:
    """nvidia-ml-py returns str; older releases returned bytes."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)
