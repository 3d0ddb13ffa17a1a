"""A driver version the paste states, weighed against the runtime's "driver version is
insufficient".

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
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from gpuwarden.catalog.compat import driver_supports_cuda, newest_cuda_major, parse_version
from gpuwarden.health.explain.arch_cuda import cuda_versions
from gpuwarden.health.explain.match import quoted
from gpuwarden.health.explain.rank import MEDIUM, Ceiling
from gpuwarden.health.explain.text import Paste
from gpuwarden.health.explain.votes import Vote
from gpuwarden.types.environment import CompatAnswer, CompatVerdict

_I = re.IGNORECASE
# the reading runs only on a paste with one of these (lower-case) words
WORDS = ("insufficient", "too old")
# The runtime's insufficient-driver error in its wordings: the message, the enum names of the
# runtime, the driver API and cuda-python, PyTorch's.
_INSUFFICIENT = re.compile(
    r"driver version is insufficient for CUDA runtime version|cudaErrorInsufficientDriver|"
    r"CUDA_ERROR_INSUFFICIENT_DRIVER|CUDAError:?\s+InsufficientDriver|"
    r"NVIDIA driver on your system is too old",
    _I,
)
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


@dataclass(frozen=True, slots=True)
class DriverContradiction:
    """The paste's insufficient-driver error against the driver it states: the ceiling on
    driver-too-old and the candidate it leaves."""

    ceiling: Ceiling
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


def contradiction(paste: Paste) -> DriverContradiction | None:
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
    return DriverContradiction(ceiling=ceiling, votes=(shadow,))
