"""A fake ``pynvml``: the real nvidia-ml-py wrappers over a fake libnvidia-ml built from captures.

``make_fake_pynvml(gpus)`` returns a fresh module object with pynvml's whole surface (it is a
private copy of the installed ``pynvml.py``, executed again), whose ``CDLL`` returns a
``FakeNvmlLib`` instead of loading ``libnvidia-ml.so.1``. Classes (NVMLError and its
``NVMLError_*`` subclasses, the ``c_nvml*`` ctypes structs) are the real module's, so
``except pynvml.NVMLError_NotSupported`` and ``isinstance(m, pynvml.c_nvmlMemory_v2_t)`` hold.
Behaviour this buys for free, because it is nvidia-ml-py's own code: Uninitialized before
``nvmlInit``, FunctionNotFound for functions the fake driver does not export, the sizing calls,
``usedGpuMemory`` None for NVML_VALUE_NOT_AVAILABLE, str (not bytes) strings.

Design template: DCGM's nvml-injection (a drop-in fake libnvidia-ml), telemetry.md §5.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pynvml as _real

from .captures import CapturedGpu, load_capture
from .clib import FakeNvmlLib
from .device import FakeGpu, FakeGridFeature, FakeMig, attach_migs

__all__ = [
    "CapturedGpu",
    "FakeClock",
    "FakeGpu",
    "FakeGridFeature",
    "FakeHost",
    "FakeMig",
    "FakeNvmlLib",
    "fake_gpus",
    "fake_host",
    "installed",
    "load_capture",
    "make_fake_pynvml",
]

_SOURCE = Path(_real.__file__)
_CODE = compile(_SOURCE.read_text(), str(_SOURCE), "exec")
_COUNTER = itertools.count()


class FakeClock:
    """A clock tests move by hand (seconds)."""

    def __init__(self, start: float = 1_784_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def fake_gpus(
    captures: list[CapturedGpu],
    *,
    clock: Callable[[], float],
    facts: Path | None = None,
) -> list[FakeGpu]:
    """One FakeGpu per capture (same order = NVML index); MIG devices from the go-nvml facts."""
    gpus = []
    for minor, capture in enumerate(captures):
        gpu = FakeGpu(capture, clock, minor=minor)
        if facts is not None and capture.mig_current:
            attach_migs(gpu, facts)
        gpus.append(gpu)
    return gpus


def make_fake_pynvml(
    gpus: list[FakeGpu],
    *,
    driver_version: str | None = None,
    cuda_version: int | None = None,
    library_present: bool = True,
    clock: Callable[[], float] = time.time,
) -> ModuleType:
    """A new module with pynvml's surface over these fake GPUs.

    ``driver_version`` (default: the first capture's) decides which functions exist;
    ``library_present=False`` makes ``nvmlInit`` raise NVMLError_LibraryNotFound. The fake library
    is ``module.fake_lib`` (set ``init_error``/``global_error`` on it to script driver trouble).
    """
    driver = driver_version or (gpus[0].capture.driver_version if gpus else "550.54.15")
    if cuda_version is None:
        text = next((g.capture.cuda_version for g in gpus if g.capture.cuda_version), "12.4")
        major, minor = (int(p) for p in text.split(".")[:2])
        cuda_version = major * 1000 + minor * 10  # nvmlSystemGetCudaDriverVersion: 12040 = 12.4
    lib = FakeNvmlLib(gpus, driver_version=driver, cuda_version=cuda_version, clock=clock)
    name = f"_fake_pynvml_{next(_COUNTER)}"
    module = ModuleType(name)
    module.__file__ = str(_SOURCE)
    # pynvml's error-class generator writes into sys.modules[__name__]: register the copy there
    # while it runs so the real module is left alone.
    sys.modules[name] = module
    try:
        exec(_CODE, module.__dict__)
    finally:
        del sys.modules[name]
    for attr, value in vars(_real).items():
        if isinstance(value, type):
            setattr(module, attr, value)
    exported = lib.exported()

    def cdll(path: str, *args: Any, **kwargs: Any) -> Any:
        if not library_present:
            raise OSError(f"{path}: cannot open shared object file: No such file or directory")
        return exported

    module.CDLL = cdll  # type: ignore[attr-defined]
    module.fake_lib = lib  # type: ignore[attr-defined]
    module.fake_gpus = gpus  # type: ignore[attr-defined]
    return module


@dataclass
class FakeHost:
    """A fake NVML host: the pynvml module over fake GPUs built from captures, and its clock."""

    module: ModuleType
    gpus: list[FakeGpu]
    captures: list[CapturedGpu]
    clock: FakeClock


FACTS = Path("nvml") / "go-nvml-mock-facts.json"  # under the fixtures: go-nvml's MIG facts


def fake_host(
    root: Path,
    *gpus: str | CapturedGpu,
    state: str = "load",
    facts: Path | None = None,
    migs: bool = True,
    **module_kwargs: Any,
) -> FakeHost:
    """The fake host of these captures (a capture's stem under ``root``, loaded in ``state``,
    or a CapturedGpu as is), in order = NVML index. MIG devices come from ``facts`` (default:
    ``root``'s go-nvml facts) unless ``migs`` is False; ``module_kwargs`` go to
    make_fake_pynvml."""
    clock = FakeClock()
    captures = [g if isinstance(g, CapturedGpu) else load_capture(root, g, state) for g in gpus]
    mig_facts = (facts or root / FACTS) if migs else None
    fakes = fake_gpus(captures, clock=clock, facts=mig_facts)
    module = make_fake_pynvml(fakes, clock=clock, **module_kwargs)
    return FakeHost(module, fakes, captures, clock)


@contextmanager
def installed(module: ModuleType) -> Iterator[ModuleType]:
    """``module`` as ``sys.modules['pynvml']`` for the duration (third-party tools import it)."""
    previous = sys.modules.get("pynvml")
    sys.modules["pynvml"] = module
    try:
        yield module
    finally:
        if previous is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = previous
