"""The driver → CUDA → framework version chain: ``data/cuda_driver.csv``, ``data/gpu_arch.csv`` and
``data/framework_cuda.csv`` (each row names its source; ``data/SOURCES.md`` explains the columns),
and the questions the doctor asks of them.

Rules encoded here, with their sources:

* A driver runs applications built with CUDA X.Y when it is at least the driver that toolkit shipped
  with (release notes, Table 3). Within a major family it also runs them through minor-version
  compatibility when it is at least the family floor (Table 2: 11.x ≥ 450.80.02, 12.x ≥ 525.60.13,
  13.x ≥ R580), with the caveats of the CUDA Compatibility guide: PTX compiled by the newer
  toolkit cannot be JIT-compiled, and APIs that need a newer driver fail.
* Binary compatibility (CUDA C++ Programming Guide, "Binary Compatibility" and "Application
  Compatibility"): a cubin built for compute capability X.y runs on X.z for z ≥ y only (same
  major); an arch-specific target (``sm_90a``) runs only on exactly that capability; PTX
  (``compute_XY``) is JIT-compiled for any capability ≥ X.Y.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from gpuwarden.catalog.gpu_names import words
from gpuwarden.catalog.gpus import compute_capability_of, gpu_by_smi_name
from gpuwarden.catalog.tables import Row, read_rows
from gpuwarden.types.environment import (
    ArchInfo,
    ArchMatch,
    ArchSupport,
    CompatAnswer,
    CompatVerdict,
    DriverBranch,
    FrameworkBuild,
)

_CUDA_FILE = "cuda_driver.csv"
_ARCH_FILE = "gpu_arch.csv"
_FRAMEWORK_FILE = "framework_cuda.csv"

CUDA_SOURCE = (
    "NVIDIA CUDA Toolkit release notes, Table 2 (minor-version compatibility) and Table 3 "
    "(toolkit driver); catalog/data/cuda_driver.csv"
)
# Cells that state no version on purpose; anything else that does not start with a version is a
# corrupt row.
_NO_VERSION_WORDS = ("not listed", "unverified", "n/a", "none")
# a component of a version has at most 9 digits (a driver's 580.105.08, a date-like 20250101):
# a longer run of digits is no version. The blanks are taken whole (possessive): what follows
# them (">=", "≥", "v", a digit) is never a blank, and giving one back only retried every split
# of a long run between two blank runs (quadratic)
_VERSION_AT_START = re.compile(r"^\s*+(?:(?:>=|≥)\s*+)?[vV]?(\d{1,9}(?:\.\d{1,9})*)(?![\d])")
_PCI_ID = re.compile(r"^(?:0x)?([0-9a-f]{4})(?:10de)?$|^10de:([0-9a-f]{4})$", re.IGNORECASE)
_ARCH_TOKEN = re.compile(r"\b(sm|compute)_(\d{2,3})([af]?)\b")
_SM_FLOOR = re.compile(r"SM\s*>=\s*(\d+\.\d+)")
_CC_LIST = re.compile(r"compute capabilit(?:y|ies)\s+([\d.,\s]+?)(?:\s+and\s+higher|$|\()")
_CUDA_LABEL = re.compile(r"CUDA\s*(\d+)\s*:", re.IGNORECASE)
_VARIANT_TAG = re.compile(r"cuda\s?(\d{2})", re.IGNORECASE)
# "(" up to the first ")" (group "close"), or, when no ")" closes it, up to the end of its line
# (a "(" that is not closed is no parenthesis, and neither is any later "(" before that end):
# consuming the unclosed stretch once keeps a search from scanning it again from each "(" of it
_PARENTHESIS_ON_LINE = re.compile(r"\([^)\n]*+(?P<close>\))?")
# the same across line ends (as the findall it replaces read it), its words in group "inside"
_PARENTHESIS = re.compile(r"\((?P<inside>[^)]*+)(?P<close>\))?")
# "8.0" of "compute capabilities 7.0, 8.0": a digit run is tried from its first digit only, or
# right after a previous "x.y" (where a findall resumes, next to a digit): a later digit of the
# run meets the same end of the run, where the first one failed
_DECIMAL = re.compile(r"(?:(?<!\d)|(?<=\.\d))\d++\.\d")

# The CUDA version nvidia-smi reports for a driver branch that shipped with no toolkit: R565
# drivers report "CUDA Version: 12.7" (the nvidia-smi header of 565.57.01 in public reports), and
# no CUDA 12.7 toolkit exists, so cuda_driver.csv cannot give it.
_REPORTED_CUDA_WITHOUT_TOOLKIT = {565: "12.7"}

_DRIVER_MATRIX_2021 = (
    "NVIDIA CUDA and Drivers Support RN-08625-001 v02, March 2021 "
    "(docs.nvidia.com/datacenter/tesla/pdf/NVIDIA_CUDA_Drivers_Support.pdf)"
)
# the unversioned page of the R580 documentation (its table lists R535, R570 and R580, and says
# every branch not listed — R575, R565, R560, R550 and older — is end of life, without a month)
_DRIVER_MATRIX_580 = (
    "NVIDIA Data Center Drivers, Supported Drivers and CUDA Toolkit Versions, R580 edition "
    "(docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html)"
)
_DRIVER_MATRIX_615 = (
    "NVIDIA Data Center Drivers, Supported Drivers and CUDA Toolkit Versions "
    "(docs.nvidia.com/datacenter/tesla/drivers/615/supported-drivers-and-cuda-toolkit-versions.html)"
)
_DRIVER_MATRIX_620 = (
    "NVIDIA Data Center Drivers, Supported Drivers and CUDA Toolkit Versions "
    "(docs.nvidia.com/datacenter/tesla/drivers/620/supported-drivers-and-cuda-toolkit-versions.html)"
)
LTSB, PB, NFB = "long-term support branch", "production branch", "new feature branch"
DRIVER_BRANCHES = (
    DriverBranch(418, LTSB, "2022-03", _DRIVER_MATRIX_2021),
    DriverBranch(440, NFB, "2020-11", _DRIVER_MATRIX_2021),
    DriverBranch(450, LTSB, "2023-07", _DRIVER_MATRIX_2021),
    DriverBranch(460, PB, "2022-01", _DRIVER_MATRIX_2021),
    DriverBranch(535, LTSB, "2026-06", _DRIVER_MATRIX_615),
    DriverBranch(570, PB, "2026-02", _DRIVER_MATRIX_580),
    DriverBranch(580, LTSB, "2028-06", _DRIVER_MATRIX_615),
    DriverBranch(595, PB, "2027-03", _DRIVER_MATRIX_615),
    DriverBranch(610, NFB, "2026-08", _DRIVER_MATRIX_615),
    DriverBranch(620, LTSB, "2029-09", _DRIVER_MATRIX_620),
)

MINOR_COMPAT_CAVEATS = (
    "PTX compiled by the newer toolkit cannot be JIT-compiled by this driver "
    "(cudaErrorUnsupportedPtxVersion): GPUs that only have PTX in the build fail",
    "APIs introduced with the newer toolkit that need its driver return "
    "cudaErrorCallRequiresNewerDriver",
)


# ---------------------------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------------------------


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """The numeric components of the version ``text`` starts with: "550.54.15" → (550, 54, 15),
    ">=580 (R580 branch)" → (580,), "2.5.1+cu124" → (2, 5, 1). None when it starts otherwise."""
    if not text:
        return None
    match = _VERSION_AT_START.match(text)
    if match is None:
        return None
    return tuple(int(part) for part in match.group(1).split(".")[:6])


def _padded(version: tuple[int, ...], length: int = 4) -> tuple[int, ...]:
    return version + (0,) * (length - len(version))


def version_at_least(version: str | None, floor: str | None) -> bool | None:
    """``version`` ≥ ``floor`` numerically (missing components count as 0); None if unreadable."""
    have, need = parse_version(version), parse_version(floor)
    if have is None or need is None:
        return None
    width = max(len(have), len(need))
    return _padded(have, width) >= _padded(need, width)


def major_minor(version: str | None) -> str | None:
    """ "12.4.127" → "12.4"; None when there is no minor."""
    parsed = parse_version(version)
    if parsed is None or len(parsed) < 2:
        return None
    return f"{parsed[0]}.{parsed[1]}"


def split_local(version: str) -> tuple[str, str | None]:
    """PEP 440 public and local parts: "2.5.1+cu124" → ("2.5.1", "cu124")."""
    public, _, local = version.strip().partition("+")
    return public, (local or None)


def _version_cell(row: Row, column: str) -> str | None:
    """A driver or CUDA version cell: ">=550.54.14" → "550.54.14"; the catalog's stated
    non-values ("not listed in table", "unverified ...", "N/A", "none ...") → None."""
    text = row.optional_text(column)
    if not text:
        return None
    if text.lower().startswith(_NO_VERSION_WORDS):
        return None
    match = _VERSION_AT_START.match(text)
    if match is None:
        raise row.error(column, f"{text!r} is neither a version nor a stated unknown")
    return match.group(1)


# ---------------------------------------------------------------------------------------------
# CUDA toolkit releases and their drivers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _CudaRelease:
    """One row of cuda_driver.csv, cells parsed."""

    cuda: str
    label: str
    toolkit_linux: str | None
    toolkit_windows: str | None
    floor_linux: str | None
    floor_windows: str | None

    @classmethod
    def of(cls, row: Row) -> _CudaRelease:
        stated = _version_cell(row, "toolkit_driver_linux_min")
        listed = not row.optional_text("toolkit_driver_linux_min").lower().startswith("not listed")
        # A release the driver table does not list: the driver its runfile bundles is the
        # driver it shipped with (NVIDIA's installer names).
        return cls(
            cuda=row.text("cuda_version"),
            label=row.text("release_label"),
            toolkit_linux=stated if listed else _version_cell(row, "runfile_bundled_driver_linux"),
            toolkit_windows=_version_cell(row, "toolkit_driver_windows_min"),
            floor_linux=_version_cell(row, "minor_compat_min_linux"),
            floor_windows=_version_cell(row, "minor_compat_min_windows"),
        )

    @property
    def key(self) -> tuple[int, ...]:
        return parse_version(self.cuda) or ()

    def toolkit(self, os: str) -> str | None:
        return self.toolkit_windows if os == "windows" else self.toolkit_linux

    def floor(self, os: str) -> str | None:
        return self.floor_windows if os == "windows" else self.floor_linux

    def describe(self) -> str:
        return f"{_CUDA_FILE}: {self.cuda} ({self.label})"


_CUDA_COLUMNS = (
    "cuda_version",
    "release_label",
    "toolkit_driver_linux_min",
    "toolkit_driver_windows_min",
    "runfile_bundled_driver_linux",
    "minor_compat_min_linux",
    "minor_compat_min_windows",
    "source",
)


@cache
def _cuda_releases() -> tuple[_CudaRelease, ...]:
    return tuple(_CudaRelease.of(row) for row in read_rows(_CUDA_FILE, _CUDA_COLUMNS))


def _releases_for(cuda: tuple[int, ...]) -> list[_CudaRelease]:
    """The rows for "12.4.1" (that update), or for "12.4" / "12.4.127" (every 12.4 update)."""
    rows = _cuda_releases()
    if len(cuda) >= 3:
        exact = [r for r in rows if _padded(r.key, 3) == cuda[:3]]
        if exact:
            return exact
    return [r for r in rows if r.key[:2] == cuda[:2]]


def _family_floor(major: int, os: str) -> tuple[str | None, _CudaRelease | None]:
    """Minor-version compatibility floor of a CUDA major family, from its newest row."""
    family = [r for r in _cuda_releases() if r.key[:1] == (major,) and r.floor(os)]
    if not family:
        return None, None
    newest = family[-1]
    return newest.floor(os), newest


def _lowest(versions: Iterable[str | None]) -> str | None:
    known = [v for v in versions if v and parse_version(v)]
    return min(known, key=lambda v: _padded(parse_version(v) or ())) if known else None


def _normalise_os(os: str) -> str:
    return "windows" if os.lower().startswith("win") else "linux"


def driver_supports_cuda(driver: str, cuda: str, *, os: str = "linux") -> CompatAnswer:
    """Whether ``driver`` runs applications built with CUDA ``cuda`` ("12.4", "12.4.1", or a
    runtime wheel's "12.4.127"), and the minimum it needs, with the row the answer rests on."""
    os = _normalise_os(os)
    have, wanted = parse_version(driver), parse_version(cuda)
    if have is None or wanted is None or len(wanted) < 2:
        return CompatAnswer(
            CompatVerdict.UNKNOWN, driver, cuda, os, None, None,
            caveats=("the driver or CUDA version is not a version number",), source=CUDA_SOURCE,
        )  # fmt: skip
    rows = _releases_for(wanted)
    toolkit = _lowest(r.toolkit(os) for r in rows)
    floor, floor_row = (rows[0].floor(os), rows[0]) if rows else _family_floor(wanted[0], os)
    basis = rows[0] if rows else floor_row
    answer = _verdict(driver, toolkit, floor)
    caveats: tuple[str, ...] = ()
    if answer is CompatVerdict.MINOR:
        caveats = MINOR_COMPAT_CAVEATS
        if toolkit is None:
            caveats += (f"the catalog has no toolkit driver for CUDA {cuda}",)
    elif answer is CompatVerdict.UNKNOWN:
        caveats = (f"the catalog has no driver facts for CUDA {cuda} on {os}",)
    return CompatAnswer(
        answer, driver, cuda, os, toolkit, floor, caveats=caveats,
        source_row=basis.describe() if basis else None, source=CUDA_SOURCE,
    )  # fmt: skip


def _verdict(driver: str, toolkit: str | None, floor: str | None) -> CompatVerdict:
    if version_at_least(driver, toolkit):
        return CompatVerdict.YES
    if version_at_least(driver, floor):
        return CompatVerdict.MINOR
    if toolkit is None and floor is None:
        return CompatVerdict.UNKNOWN
    return CompatVerdict.NO


def newest_cuda_major() -> int:
    """The newest CUDA major family the catalog has driver facts for."""
    return max(release.key[0] for release in _cuda_releases())


def max_cuda_for_driver(driver: str) -> str | None:
    """What ``nvidia-smi`` prints as "CUDA Version" for ``driver``: the newest CUDA whose toolkit
    shipped with this driver's branch or an older one (the driver API version is per branch).
    Windows drivers number their branches alike (591.86 is R590: CUDA 13.1), so one mapping
    serves both.

    For a branch newer than the catalog's newest known toolkit driver this is a lower bound;
    None for a driver older than every catalog row (before CUDA 11.0) or an unreadable one."""
    have = parse_version(driver)
    if have is None:
        return None
    fitting = [cuda for branch, cuda in _cuda_of_branches() if branch <= have[0]]
    if not fitting:
        return None
    newest = max(fitting)
    return f"{newest[0]}.{newest[1]}"


@cache
def _cuda_of_branches() -> tuple[tuple[int, tuple[int, ...]], ...]:
    """(driver branch, CUDA major.minor) of every toolkit with a known Linux driver."""
    pairs = [
        (toolkit[0], release.key[:2])
        for release in _cuda_releases()
        if (toolkit := parse_version(release.toolkit_linux)) is not None
    ]
    extra = [(b, parse_version(c) or ()) for b, c in _REPORTED_CUDA_WITHOUT_TOOLKIT.items()]
    return tuple(pairs + extra)


# The R580 edition's table is the newest that says which older branches live on: the branches
# it lists, and every branch before R580 it does not list (R575, R565, R560, R550 and older) end
# of life, with no month.
R580_EDITION_SOURCE = _DRIVER_MATRIX_580
R580_EDITION_SUPPORTED = (535, 570, 580)
_R580_EDITION = R580_EDITION_SUPPORTED[-1]


def retired_unlisted_branch(driver: str) -> int | None:
    """The branch of ``driver`` when NVIDIA's R580 edition calls it end of life without a month
    (a branch before R580 that no table lists); None for a listed branch, R580 and newer."""
    have = parse_version(driver)
    if have is None or have[0] >= _R580_EDITION or driver_branch(driver) is not None:
        return None
    return have[0]


def driver_branch(driver: str) -> DriverBranch | None:
    """The data-center branch record (designation, end of life) of ``driver``, if listed."""
    have = parse_version(driver)
    if have is None:
        return None
    return next((b for b in DRIVER_BRANCHES if b.branch == have[0]), None)


# ---------------------------------------------------------------------------------------------
# GPUs: compute capability
# ---------------------------------------------------------------------------------------------

_ARCH_COLUMNS = (
    "gpu",
    "variant",
    "architecture",
    "compute_capability",
    "sm",
    "pci_device_id",
    "first_cuda_native",
    "last_cuda",
    "first_driver_branch",
    "source",
)


def _arch_info(row: Row) -> ArchInfo:
    gpu, variant = row.text("gpu"), row.optional_text("variant")
    return ArchInfo(
        name=f"{gpu} {variant}".strip(),
        architecture=row.text("architecture"),
        compute_capability=row.text("compute_capability"),
        sm=row.text("sm"),
        pci_device_ids=tuple(i.upper() for i in row.items("pci_device_id")),
        first_cuda=_version_cell(row, "first_cuda_native"),
        last_cuda=_version_cell(row, "last_cuda"),
        first_driver_branch=row.optional_text("first_driver_branch") or None,
        source=row.text("source"),
        notes=row.optional_text("notes"),
    )


def _closed_removed(match: re.Match[str]) -> str:
    """A closed parenthesis goes, with its words; an unclosed stretch stays as it was."""
    return "" if match.group("close") else match.group(0)


def _parenthesized(text: str) -> list[str]:
    """The words inside each closed parenthesis of ``text``: "SXM5 80GB (H100 80GB HBM3)" →
    ["H100 80GB HBM3"]."""
    return [m.group("inside") for m in _PARENTHESIS.finditer(text) if m.group("close")]


@cache
def _arch_rows() -> tuple[tuple[ArchInfo, tuple[frozenset[str], ...], frozenset[str]], ...]:
    """Each GPU row with the word sets of its exact names, and of its product (family) name."""
    out = []
    for row in read_rows(_ARCH_FILE, _ARCH_COLUMNS):
        info = _arch_info(row)
        gpu, variant = row.text("gpu"), row.optional_text("variant")
        bare_variant = _PARENTHESIS_ON_LINE.sub(_closed_removed, variant).strip()
        names = [gpu, f"{gpu} {bare_variant}"]
        names += _parenthesized(variant)  # the nvidia-smi name in parentheses
        out.append((info, tuple(words(n) for n in names), words(gpu)))
    return tuple(out)


@cache
def first_cuda_for_major(major: int) -> str | None:
    """The first CUDA whose cubins run on any GPU of this compute-capability major: the one that
    first targeted the major's first sm (cubins run on later minors of their major: CUDA C++
    Programming Guide, "Binary Compatibility"). None when the catalog has no GPU of that major."""
    firsts = [
        (version, info.first_cuda)
        for info, _, _ in _arch_rows()
        if info.compute_capability.split(".")[0] == str(major)
        and (version := parse_version(info.first_cuda)) is not None
    ]
    return min(firsts)[1] if firsts else None


def gpu_arch_for(name_or_pci_id: str) -> ArchInfo | None:
    """Compute capability and CUDA range of a GPU named as nvidia-smi prints it ("NVIDIA H100
    80GB HBM3", "Tesla T4", "NVIDIA GeForce RTX 5090") or by PCI device id ("0x233010DE",
    "2330"). A name the catalog lacks but whose product words it has ("RTX 2080 SUPER", "RTX
    3060 Laptop GPU") matches that product when every candidate has one compute capability
    (``matched_by="family"``). None when nothing matches."""
    query = name_or_pci_id.strip()
    if not query:
        return None
    return _by_pci_id(query) or _by_exact_name(query) or _by_gpu_catalog(query) or _by_family(query)


def _by_pci_id(query: str) -> ArchInfo | None:
    match = _PCI_ID.match(query)
    if match is None:
        return None
    device = (match.group(1) or match.group(2)).upper()
    for info, _, _ in _arch_rows():
        if device in info.pci_device_ids:
            return _matched(info, "pci-id")
    return None


def _by_exact_name(query: str) -> ArchInfo | None:
    wanted = words(query)
    for info, names, _ in _arch_rows():
        if wanted in names:
            return _matched(info, "name")
    return None


def _by_gpu_catalog(query: str) -> ArchInfo | None:
    spec = gpu_by_smi_name(query)
    if spec is None or not spec.compute_capability:
        return None
    sm = "sm_" + spec.compute_capability.replace(".", "")
    same_sm = next((info for info, _, _ in _arch_rows() if info.sm == sm), None)
    return ArchInfo(
        name=spec.name,
        architecture=spec.architecture,
        compute_capability=spec.compute_capability,
        sm=sm,
        first_cuda=same_sm.first_cuda if same_sm else None,
        last_cuda=same_sm.last_cuda if same_sm else None,
        matched_by="gpus.csv",
        source=spec.source,
    )


def _by_family(query: str) -> ArchInfo | None:
    wanted = words(query)
    candidates = [(len(fam), info) for info, _, fam in _arch_rows() if fam and fam <= wanted]
    if not candidates:
        return None
    most_specific = max(size for size, _ in candidates)
    best = [info for size, info in candidates if size == most_specific]
    if len({info.compute_capability for info in best}) != 1:
        return None  # e.g. two products whose words both fit, of different generations
    return _matched(best[0], "family")


def _matched(info: ArchInfo, how: str) -> ArchInfo:
    return ArchInfo(
        name=info.name,
        architecture=info.architecture,
        compute_capability=info.compute_capability,
        sm=info.sm,
        pci_device_ids=info.pci_device_ids,
        first_cuda=info.first_cuda,
        last_cuda=info.last_cuda,
        first_driver_branch=info.first_driver_branch,
        matched_by=how,
        source=info.source,
        notes=info.notes,
    )


def build_runs_on(build: FrameworkBuild, compute_capability: str) -> ArchMatch:
    """Whether ``build`` has code for a GPU of ``compute_capability`` ("8.6"), and which."""
    device = compute_capability_of(compute_capability)
    if device is None:
        return ArchMatch(ArchSupport.UNKNOWN, None, f"{compute_capability!r} is not X.Y")
    if build.sm_archs:
        return _match_arch_list(build.sm_archs, device)
    if build.min_compute_capability:
        floor = compute_capability_of(build.min_compute_capability) or (0, 0)
        if device >= floor:
            return ArchMatch(
                ArchSupport.DECLARED,
                f"SM >= {build.min_compute_capability}",
                f"the build supports compute capability {build.min_compute_capability} and up",
            )
        return ArchMatch(
            ArchSupport.NONE,
            None,
            f"the build needs compute capability ≥ {build.min_compute_capability}",
        )
    return ArchMatch(ArchSupport.UNKNOWN, None, "the build's architecture list is not known")


def _match_arch_list(archs: tuple[str, ...], device: tuple[int, int]) -> ArchMatch:
    cubins = [a for a in archs if a.startswith("sm_") and _cubin_runs(a, device)]
    if cubins:
        best = max(cubins, key=lambda a: compute_capability_of(a) or (0, 0))
        target = compute_capability_of(best) or (0, 0)
        how = "exact" if target == device else "same major, lower minor"
        return ArchMatch(ArchSupport.CUBIN, best, f"{best} cubins run on {_cc(device)} ({how})")
    ptx = [
        a
        for a in archs
        if a.startswith("compute_")
        and not a.endswith("a")
        and (compute_capability_of(a) or (99, 9)) <= device
    ]
    if ptx:
        best = max(ptx, key=lambda a: compute_capability_of(a) or (0, 0))
        return ArchMatch(ArchSupport.PTX, best, f"{best} PTX is JIT-compiled for {_cc(device)}")
    return ArchMatch(
        ArchSupport.NONE,
        None,
        f"no sm_{device[0]}x cubin at or below {_cc(device)} and no PTX at or below it "
        f"among {' '.join(archs)}",
    )


def _cubin_runs(arch: str, device: tuple[int, int]) -> bool:
    target = compute_capability_of(arch)
    if target is None:
        return False
    if arch.endswith("a"):  # arch-specific features: that exact capability only
        return target == device
    return target[0] == device[0] and target[1] <= device[1]


def _cc(capability: tuple[int, int]) -> str:
    return f"{capability[0]}.{capability[1]}"


# ---------------------------------------------------------------------------------------------
# Framework builds
# ---------------------------------------------------------------------------------------------

_FRAMEWORK_COLUMNS = (
    "framework",
    "version",
    "released",
    "variant",
    "cuda_version",
    "variant_status",
    "pypi_default",
    "cudnn",
    "nccl",
    "sm_archs_linux_x86_64",
    "python_supported",
    "driver_floor_linux",
    "source",
)
_FRAMEWORK_ALIASES = {
    "pytorch": "PyTorch",
    "torch": "PyTorch",
    "jax": "JAX",
    "jaxlib": "JAX",
    "jax-cuda12-plugin": "JAX",
    "jax-cuda13-plugin": "JAX",
    "tensorflow": "TensorFlow",
    "tf": "TensorFlow",
}


def _variants_of(framework: str, cell: str) -> tuple[str, ...]:
    """ "cu124" → ("cu124",); "jax[cuda12] / jax[cuda13]" → ("cuda12", "cuda13"); TF → ("gpu",)."""
    if framework == "JAX":
        return tuple(dict.fromkeys(f"cuda{m}" for m in _VARIANT_TAG.findall(cell)))
    if framework == "TensorFlow":
        return ("gpu",)
    return (cell.strip(),)


def _variant_part(cell: str, variant: str) -> str:
    """The part of a cell that speaks of one variant: "CUDA 12: >=12.1; CUDA 13: >=13.0" and
    ">=525 (cuda12) / >=580 (cuda13)" give one part per CUDA major; other cells are whole."""
    major = variant.removeprefix("cuda")
    if _CUDA_LABEL.search(cell):
        for part in cell.split(";"):
            label = _CUDA_LABEL.search(part)
            if label and label.group(1) == major:
                return part[label.end() :].strip()
        return ""
    if re.search(r"\(cuda\d{2}\)", cell):
        for part in cell.split("/"):
            if f"(cuda{major})" in part:
                return part.replace(f"(cuda{major})", "").strip()
        return ""
    return cell


def _arch_cell(cell: str) -> tuple[tuple[str, ...], str | None, bool]:
    """(arch list, minimum compute capability, verified) of an architecture cell."""
    text = cell.strip()
    verified = "unverified" not in text.lower()
    if not text or text.lower().startswith("unverified"):
        return (), None, False  # "unverified (likely as 2.5: sm_37..sm_90)" lists nothing
    tokens = tuple(f"{kind}_{digits}{suffix}" for kind, digits, suffix in _ARCH_TOKEN.findall(text))
    if tokens:
        return tokens, None, verified
    floor = _SM_FLOOR.search(text)
    if floor:
        return (), floor.group(1), verified
    listed = _CC_LIST.search(text)
    if listed:
        numbers = _DECIMAL.findall(listed.group(1))
        if numbers:
            lowest = min(numbers, key=lambda n: compute_capability_of(n) or (99, 9))
            return (), lowest, verified
    return (), None, False


def _cell_version(text: str) -> str | None:
    match = _VERSION_AT_START.match(text)
    return match.group(1) if match else None


def _pypi_default(cell: str) -> bool | None:
    return {"yes": True, "no": False}.get(cell.strip().lower())


def _builds_of(row: Row) -> list[FrameworkBuild]:
    framework = row.text("framework")
    builds = []
    for variant in _variants_of(framework, row.text("variant")):
        cuda_text = _variant_part(row.text("cuda_version"), variant)
        archs, floor, verified = _arch_cell(
            _variant_part(row.optional_text("sm_archs_linux_x86_64"), variant)
        )
        driver_floor = _variant_part(row.optional_text("driver_floor_linux"), variant)
        builds.append(
            FrameworkBuild(
                framework=framework,
                version=row.text("version"),
                variant=variant,
                cuda_version=major_minor(_cell_version(cuda_text)),
                cuda_text=cuda_text,
                status=row.optional_text("variant_status"),
                pypi_default=_pypi_default(row.optional_text("pypi_default")),
                cudnn=row.optional_text("cudnn") or None,
                nccl=row.optional_text("nccl") or None,
                sm_archs=archs,
                min_compute_capability=floor,
                archs_verified=verified,
                driver_floor_linux=_cell_version(driver_floor),
                python=row.optional_text("python_supported"),
                released=row.optional_text("released"),
                notes=row.optional_text("notes"),
                source=row.text("source"),
            )
        )
    return builds


@cache
def _framework_rows() -> tuple[FrameworkBuild, ...]:
    rows = read_rows(_FRAMEWORK_FILE, _FRAMEWORK_COLUMNS)
    return tuple(build for row in rows for build in _builds_of(row))


def canonical_framework(name: str) -> str | None:
    """ "torch" / "pytorch" → "PyTorch"; "jax" → "JAX"; "tensorflow" → "TensorFlow"."""
    return _FRAMEWORK_ALIASES.get(name.strip().lower())


def framework_builds(framework: str, version: str) -> tuple[FrameworkBuild, ...]:
    """The catalog's builds of ``framework`` ``version`` ("2.5.1+cu124" → every PyTorch 2.5
    variant). PyTorch and TensorFlow match on major.minor; JAX rows are key releases, so a JAX
    version gets, per CUDA plugin, the newest row at or below it. Empty when none fits."""
    name = canonical_framework(framework)
    release = parse_version(split_local(version)[0])
    if name is None or release is None or len(release) < 2:
        return ()
    rows = [b for b in _framework_rows() if b.framework == name]
    if name == "JAX":
        return _nearest_jax_rows(rows, release)
    return tuple(b for b in rows if (parse_version(b.version) or ())[:2] == release[:2])


def _nearest_jax_rows(
    rows: list[FrameworkBuild], release: tuple[int, ...]
) -> tuple[FrameworkBuild, ...]:
    chosen: dict[str, tuple[tuple[int, ...], FrameworkBuild]] = {}
    for build in rows:
        row_release = parse_version(build.version)
        if row_release is None or _padded(row_release) > _padded(release):
            continue
        best = chosen.get(build.variant)
        if best is None or _padded(row_release) > _padded(best[0]):
            chosen[build.variant] = (row_release, build)
    return tuple(build for _, build in chosen.values())


def framework_build(framework: str, version: str, cuda_variant: str) -> FrameworkBuild | None:
    """One build: PyTorch by wheel variant ("cu124"), JAX by plugin ("cuda12"), TensorFlow
    ("gpu", its one Linux GPU build). A version's local tag wins over ``cuda_variant``."""
    local = split_local(version)[1]
    wanted = (local or cuda_variant).strip().lower()
    if canonical_framework(framework) == "JAX":
        tag = _VARIANT_TAG.search(wanted)
        wanted = f"cuda{tag.group(1)}" if tag else wanted
    builds = framework_builds(framework, version)
    if canonical_framework(framework) == "TensorFlow":
        return builds[0] if builds else None
    return next((b for b in builds if b.variant.lower() == wanted), None)
