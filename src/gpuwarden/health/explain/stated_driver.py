"""What the paste states of the driver — its version, or that there is none — weighed against
the runtime's "driver version is insufficient".

The CUDA runtime returns cudaErrorInsufficientDriver (error 35; PyTorch words it "The NVIDIA
driver on your system is too old") when the libcuda it loaded is older than its CUDA family
needs: through minor-version compatibility a CUDA 12.x runtime runs on any driver from 525.60.13
and a 13.x one on any R580 or later (CUDA Compatibility guide; ``catalog.compat``). When the
paste states the installed driver (nvidia-smi's "Driver Version: 580.95.05" or "NVIDIA-SMI
580.95.05", collect_env's "Nvidia driver version: 535.104.05", "driver: 550.54.15") and the
catalog says that driver runs the newest CUDA the paste names for the program — or, naming none,
every CUDA family the catalog knows — the error cannot be that driver's age. Either the runtime
loaded an older libcuda ahead of the driver's (an earlier driver's copy left on the library path,
a cuda-compat package of an older CUDA on LD_LIBRARY_PATH, a Linux libcuda shadowing WSL's) or
the driver stated is not the failing process's (the host of a container, another machine). The
toolkit's stubs/libcuda.so is not one: since CUDA 11.1 the runtime reports it as error 34,
cudaErrorStubLibrary. driver-too-old then stays the
usual reading, not the stated one, and a library shadowing the driver's (library-conflict) is a
candidate.

Only the runtime's own check reads so: nvidia-container-cli's "cuda>=X" requirement, an NGC
image's driver release, a PTX JIT and a libcuda missing an entry point compare the exact
version, which minor-version compatibility does not cover, so a paste with one of those keeps
its reading. nvidia-smi's "CUDA Version" is the newest CUDA the driver runs, not the program's:
it is not read as one.

The runtime returns the same error when it finds no driver at all: no libcuda to load (no NVIDIA
driver installed, no NVIDIA GPU). Its words do not tell the two apart; PyTorch does by asking
cudaDriverGetVersion, which returns 0 when no driver is installed (CUDA runtime API, Version
Management), and words a 0 "Found no NVIDIA driver on your system", any other version "The
NVIDIA driver on your system is too old (found version N)" (c10/cuda/CUDAFunctions.cpp,
device_count_impl). So where the runtime's own error states no driver version and comes from no
container (whose signatures read a missing libcuda as the runtime's doing), "no NVIDIA driver
loaded" (driver-not-loaded) is one candidate beside driver-too-old, which stays the reading
the message states; where the paste shows no driver (nvidia-smi missing or unable to reach one,
the framework finding none, libcuda.so.1 or nvcuda.dll not found), it is the usual reading and
driver-too-old one candidate. A check of the exact version, PyTorch's "too old (found version
N)", a CUDA driver version above 0 (deviceQuery's) and a stated driver show a driver there:
those keep the reading above.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from gpuwarden.catalog.compat import driver_supports_cuda, newest_cuda_major, parse_version
from gpuwarden.health.explain.arch_cuda import cuda_versions
from gpuwarden.health.explain.match import cuda_numbers, excerpt, quoted
from gpuwarden.health.explain.rank import MEDIUM, Ceiling
from gpuwarden.health.explain.signatures import (
    CONTAINER,
    KUBERNETES,
    NO_DRIVER_SHOWN,
    NO_GPU_IN_CONTAINER,
)
from gpuwarden.health.explain.text import Paste
from gpuwarden.health.explain.votes import Vote
from gpuwarden.types.environment import CompatAnswer, CompatVerdict

_I = re.IGNORECASE
# the reading runs only on a paste with one of these (lower-case) words
WORDS = ("insufficient", "too old")
# The runtime's own insufficient-driver error: the message, the enum names of the runtime, the
# driver API and cuda-python. Its words do not say whether a driver was found (module docstring).
_RUNTIME_INSUFFICIENT = (
    r"driver version is insufficient for CUDA runtime version|cudaErrorInsufficientDriver|"
    r"CUDA_ERROR_INSUFFICIENT_DRIVER|CUDAError:?\s+InsufficientDriver"
)
# PyTorch's wording, only after cudaDriverGetVersion found a driver
_TORCH_FOUND_DRIVER = r"NVIDIA driver on your system is too old"
_INSUFFICIENT = re.compile(_RUNTIME_INSUFFICIENT + "|" + _TORCH_FOUND_DRIVER, _I)
_RUNTIME_ERROR = re.compile(_RUNTIME_INSUFFICIENT, _I)
# A driver there, as a program says it: PyTorch's wording, or the CUDA version a driver runs
# (cudaDriverGetVersion, 0 when none is installed) as deviceQuery prints it ("CUDA Driver Version
# / Runtime Version 12.2 / 11.8") or a program its number ("CUDA Driver Version: 13000").
_A_DRIVER_FOUND = re.compile(
    _TORCH_FOUND_DRIVER
    + r"|CUDA Driver Version(?:\s{0,8}/\s{0,8}Runtime Version)?\s{0,8}[:=]?\s{0,8}[1-9]",
    _I,
)
INSUFFICIENT_DRIVER = 35  # cudaErrorInsufficientDriver's number
_NO_DRIVER_SHOWN = re.compile(NO_DRIVER_SHOWN, _I)
# a container's or a pod's missing libcuda is the container runtime's doing (signatures.py)
_IN_A_CONTAINER = re.compile(CONTAINER + "|" + KUBERNETES + "|" + NO_GPU_IN_CONTAINER, _I)
# Checks of the exact version that minor-version compatibility does not cover (module docstring).
_EXACT_VERSION_CHECK = re.compile(
    r"unsatisfied condition|please update your driver to a newer version|"
    r"built for NVIDIA Driver Release|compiled with an unsupported toolchain|"
    r"UNSUPPORTED_PTX_VERSION|UnsupportedPtxVersion|"
    r"(?:libcuda\.so[\d.]*|nvcuda\.dll):?\s*undefined symbol",
    _I,
)
# A driver version as the tools print it: a three-digit branch (R300 and later) with its
# dotted parts. "CUDA Driver Version: 13000" or deviceQuery's "12.2" are CUDA versions, not
# driver versions. The blanks are bounded: a run of them is read in linear time on any text.
_STATED_DRIVER = re.compile(
    r"(?<![a-z0-9_])(?:nvidia-smi|driver(?:\s{1,8}version)?)\s{0,8}[:=]?\s{0,8}v?"
    r"(?P<version>[3-9]\d\d\.\d{1,3}(?:\.\d{1,3})?)(?![\d.]*\d)",
    _I,
)
# nvidia-smi's header: the "CUDA Version" after the driver's is the newest CUDA it runs
_SMI_CUDA = re.compile(r"Driver Version:?\s*[\d.]+\s*\|?\s*CUDA Version:?\s*\d+\.\d+", _I)
_MATCHES_READ = 50  # a log repeating its header thousands of times states it once

CEILING_SCORE = MEDIUM + 0.05  # the usual reading: the message says so, the driver stated not
SHADOW_WEIGHT = 0.4  # one candidate: nothing in the text shows the other libcuda
SHADOW_CAUSE = "library-conflict"
DECIDES = (
    "`ldconfig -p | grep libcuda` and `echo $LD_LIBRARY_PATH` in the failing process (an older "
    "libcuda or a cuda-compat ahead of the driver's; under WSL a Linux libcuda in place of "
    "/usr/lib/wsl/lib's), `nvidia-smi` where the error happened (inside the container, on that "
    "machine), and the CUDA the program was built for (torch.version.cuda, the image's "
    "CUDA_VERSION) against that driver"
)


NO_DRIVER_CAUSE = "driver-not-loaded"
NO_DRIVER_WEIGHT = 0.3  # one candidate: nothing in the text shows whether a driver is there
NO_DRIVER_SHOWN_WEIGHT = 0.75  # the usual reading: the text shows no driver
NO_DRIVER_CEILING = MEDIUM - 0.1  # driver-too-old, one candidate where the text shows none
NO_DRIVER_DECIDES = (
    '`nvidia-smi` where the error happened: a "Driver Version" in its header is a driver '
    "there, then too old for the CUDA the program was built for (torch.version.cuda, the image's "
    'CUDA_VERSION; compare it with that CUDA\'s minimum driver); "command not found" or '
    '"couldn\'t communicate with the NVIDIA driver" is no driver loaded — none installed, or '
    "no NVIDIA GPU (`lspci | grep -i nvidia`)"
)


@dataclass(frozen=True, slots=True)
class DriverReading:
    """The paste's insufficient-driver error against what it states of the driver: the ceiling
    on driver-too-old (None: the error's reading stands) and the candidates it adds."""

    ceiling: Ceiling | None
    votes: tuple[Vote, ...]


def _stated_drivers(flat: str) -> list[tuple[tuple[int, ...], str]]:
    """(parsed, as written) of each driver version the paste states."""
    found = []
    for match in itertools.islice(_STATED_DRIVER.finditer(flat), _MATCHES_READ):
        parsed = parse_version(match["version"])
        if parsed is not None:
            found.append((parsed, match["version"]))
    return found


def _newest_family_answer(driver: str) -> CompatAnswer | None:
    """The catalog's answer for ``driver`` against the newest CUDA family it knows, when the
    driver runs that family; None otherwise."""
    answer = driver_supports_cuda(driver, f"{newest_cuda_major()}.0")
    return answer if answer.supported else None


def _program_cuda(flat: str) -> str | None:
    """The newest CUDA the paste names for the program (nvidia-smi's header left out)."""
    named = [(parse_version(v), v) for v in cuda_versions(_SMI_CUDA.sub(" ", flat))]
    known = [(parsed, v) for parsed, v in named if parsed is not None]
    return max(known)[1] if known else None


def _runs(driver: str, flat: str) -> tuple[CompatAnswer, bool] | None:
    """The catalog's answer when ``driver`` runs the CUDA the paste names for the program (True)
    or, naming none, the newest family the catalog knows (False); None when it does not."""
    cuda = _program_cuda(flat)
    if cuda is None:
        newest = _newest_family_answer(driver)
        return None if newest is None else (newest, False)
    answer = driver_supports_cuda(driver, cuda)
    return (answer, True) if answer.supported else None


def _what_it_runs(answer: CompatAnswer, named: bool) -> str:
    if named and answer.verdict is CompatVerdict.YES:
        return f"runs CUDA {answer.cuda}"
    floor = answer.minor_compat_min or answer.toolkit_driver_min
    if named:
        return f"runs CUDA {answer.cuda} (minor-version compatibility from {floor})"
    family = answer.cuda.split(".")[0]
    return (
        f"runs every CUDA {family}.x runtime (minor-version compatibility from {floor}), the "
        "newest CUDA family the catalog knows"
    )


def contradiction(paste: Paste) -> DriverReading | None:
    """The ceiling and candidate of a paste whose insufficient-driver error meets a stated
    driver that runs the CUDA it could need; None for any other paste."""
    if not paste.mentions(*WORDS):
        return None
    flat = paste.flat
    error = _INSUFFICIENT.search(flat)
    if error is None or _EXACT_VERSION_CHECK.search(flat) is not None:
        return None
    drivers = _stated_drivers(flat)
    if not drivers:
        return None
    driver = min(drivers)[1]  # of several stated, the oldest must run it too
    found = _runs(driver, flat)
    if found is None:
        return None
    answer, named = found
    runs = _what_it_runs(answer, named)
    why = (
        f"the paste states driver {driver}, which {runs} ({answer.source_row}): the error is not "
        "that driver's age unless another driver is the one in use"
    )
    decides = (
        f"driver {driver} {runs}, so which libcuda and driver the failing process met decides: "
        f"{DECIDES}"
    )
    meaning = (
        f"with driver {driver} installed, an older libcuda found first (an earlier driver's "
        "copy, a cuda-compat package of an older CUDA) reports the older driver"
    )
    shadow = Vote(SHADOW_CAUSE, SHADOW_WEIGHT, quoted(error[0], meaning), decides)
    ceiling = Ceiling(
        score=CEILING_SCORE, why=why, decides=decides, causes=frozenset({"driver-too-old"})
    )
    return DriverReading(ceiling=ceiling, votes=(shadow,))


def _runtime_error(paste: Paste) -> str | None:
    """The phrase of the runtime's own insufficient-driver error (its words, or its number
    alone), where nothing in the paste shows a driver there; None otherwise."""
    flat = paste.flat
    words = _RUNTIME_ERROR.search(flat) if paste.mentions(*WORDS) else None
    error = words[0] if words is not None else cuda_numbers(paste).get(INSUFFICIENT_DRIVER)
    if error is None:
        return None
    if _A_DRIVER_FOUND.search(flat) or _EXACT_VERSION_CHECK.search(flat) or _stated_drivers(flat):
        return None
    return error


def absent_driver(paste: Paste) -> DriverReading | None:
    """The no-driver reading of the runtime's insufficient-driver error outside a container:
    a candidate beside driver-too-old, or, where the paste shows no driver, the usual reading
    with driver-too-old capped; None for any other paste."""
    if not paste.mentions(*WORDS, str(INSUFFICIENT_DRIVER)):
        return None
    error = _runtime_error(paste)
    if error is None or _IN_A_CONTAINER.search(paste.flat) is not None:
        return None
    shown = _NO_DRIVER_SHOWN.search(paste.flat)
    if shown is None:
        meaning = (
            "the CUDA runtime returns this error also when it finds no driver at all (no "
            "libcuda: no NVIDIA driver installed, or no NVIDIA GPU), which its words do not tell "
            "apart from an old one"
        )
        vote = Vote(NO_DRIVER_CAUSE, NO_DRIVER_WEIGHT, quoted(error, meaning), NO_DRIVER_DECIDES)
        return DriverReading(ceiling=None, votes=(vote,))
    meaning = (
        f"no NVIDIA driver where the program ran, and the CUDA runtime reports a missing driver as "
        f'"{excerpt(error)}"'
    )
    vote = Vote(
        NO_DRIVER_CAUSE, NO_DRIVER_SHOWN_WEIGHT, quoted(shown[0], meaning), NO_DRIVER_DECIDES
    )
    ceiling = Ceiling(
        score=NO_DRIVER_CEILING,
        why=f'the paste shows no NVIDIA driver ("{excerpt(shown[0])}"): the runtime found none, '
        "and says so with the same error",
        decides=NO_DRIVER_DECIDES,
        causes=frozenset({"driver-too-old"}),
    )
    return DriverReading(ceiling=ceiling, votes=(vote,))


def reading(paste: Paste) -> DriverReading | None:
    """What the paste states of the driver against its insufficient-driver error: a stated
    driver that runs the CUDA it could need (``contradiction``), or no driver stated
    (``absent_driver``); None when neither reading applies."""
    return contradiction(paste) or absent_driver(paste)
