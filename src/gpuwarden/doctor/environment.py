"""The doctor's probe of the node's software: driver module and libraries, nvidia-smi, the ML
frameworks' builds, CUDA forward compatibility, Fabric Manager, the container context and
kernel-log access. The only doctor code that runs processes or reads system files.

Everything goes through ``HostAccess`` (tests pass a fake host built from real outputs). Every
process runs without a shell, with a timeout and a bound on what it may print; a missing binary
or file is a ``None``, never an exception. Frameworks are read from their installed metadata,
never imported (importing torch takes seconds).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, NamedTuple, Protocol

from gpuwarden.catalog.compat import major_minor, parse_version, split_local
from gpuwarden.telemetry.smi.failure import NVML_LIBRARY, classify_smi_failure
from gpuwarden.types.environment import (
    ContainerContext,
    CudaCompatLibrary,
    FabricManagerState,
    FrameworkInstall,
    KernelLogText,
    NodeEnvironment,
    SmiStatus,
)

READ_LIMIT_BYTES = 1 << 20  # a /proc or /etc file: a few hundred bytes in practice
OUTPUT_LIMIT_BYTES = 1 << 20  # what a probe command may print before we keep only its tail
ERROR_LIMIT_BYTES = 64 << 10
KERNEL_LOG_LIMIT_BYTES = 16 << 20  # the kernel ring buffer is at most a few MiB by default
SMI_TIMEOUT_S = 20.0  # nvidia-smi initialises NVML for every GPU: seconds on an 8-GPU node
QUICK_TIMEOUT_S = 5.0  # systemctl, nv-fabricmanager --version
KERNEL_LOG_TIMEOUT_S = 20.0


# ---------------------------------------------------------------------------------------------
# The seam
# ---------------------------------------------------------------------------------------------


class CommandResult(NamedTuple):
    """What a process did: ``returncode`` None when it was killed at its timeout."""

    returncode: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool = False  # only the tail of stdout was kept


@dataclass(frozen=True, slots=True)
class InstalledPackage:
    """A Python distribution's metadata, as ``importlib.metadata`` has it."""

    name: str
    version: str
    requires: tuple[str, ...] = ()  # Requires-Dist lines, markers included
    installer: str | None = None  # the INSTALLER file: "pip", "uv", "conda"


class HostAccess(Protocol):
    """Everything the probe reads from the machine."""

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def platform(self) -> str: ...  # sys.platform: "linux", "win32", "darwin"

    @property
    def machine(self) -> str | None: ...  # "x86_64", "aarch64"

    def read_text(self, path: str) -> str | None:
        """The file's text (bounded), None when it does not exist or cannot be read."""
        ...

    def list_dir(self, path: str) -> tuple[str, ...] | None:
        """The directory's entry names, None when it does not exist or cannot be read."""
        ...

    def run(
        self, argv: Sequence[str], timeout_s: float, max_output_bytes: int = OUTPUT_LIMIT_BYTES
    ) -> CommandResult | None:
        """Run ``argv`` (no shell); None when the program is not there."""
        ...

    def package(self, name: str) -> InstalledPackage | None:
        """An installed Python distribution's metadata, None when it is not installed."""
        ...


class _Tail:
    """Keeps the last ``limit`` bytes written to it (or the first, for ``head=True``)."""

    def __init__(self, limit: int, *, head: bool = False) -> None:
        self.limit, self.head = limit, head
        self.data = bytearray()
        self.dropped = False

    def add(self, chunk: bytes) -> None:
        if self.head:
            room = self.limit - len(self.data)
            self.data += chunk[: max(room, 0)]
            self.dropped = self.dropped or len(chunk) > room
            return
        self.data += chunk
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]
            self.dropped = True


def _drain(stream: IO[bytes] | None, sink: _Tail) -> None:
    if stream is None:
        return
    for chunk in iter(lambda: stream.read(65536), b""):
        sink.add(chunk)


class LocalHost:
    """The machine gpuwarden runs on."""

    def __init__(self) -> None:
        self._env = dict(os.environ)

    @property
    def env(self) -> Mapping[str, str]:
        return self._env

    @property
    def platform(self) -> str:
        return sys.platform

    @property
    def machine(self) -> str | None:
        # platform and importlib.metadata load only when this host is probed: doctor --from
        # reads captures and never does (importlib.metadata alone is ~8 ms of start-up)
        import platform

        return platform.machine() or None

    def read_text(self, path: str) -> str | None:
        try:
            with open(path, "rb") as handle:
                return handle.read(READ_LIMIT_BYTES).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return None

    def list_dir(self, path: str) -> tuple[str, ...] | None:
        try:
            return tuple(sorted(os.listdir(path)))
        except (OSError, ValueError):
            return None

    def run(
        self, argv: Sequence[str], timeout_s: float, max_output_bytes: int = OUTPUT_LIMIT_BYTES
    ) -> CommandResult | None:
        # C locale: the failure texts we read ("Operation not permitted") are the English ones
        env = {**self._env, "LC_ALL": "C", "LANG": "C"}
        try:
            child = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError):
            return None
        except OSError as exc:
            return CommandResult(None, "", f"could not start: {exc}")
        out, err = _Tail(max_output_bytes), _Tail(ERROR_LIMIT_BYTES, head=True)
        readers = [
            threading.Thread(target=_drain, args=(child.stdout, out), daemon=True),
            threading.Thread(target=_drain, args=(child.stderr, err), daemon=True),
        ]
        for reader in readers:
            reader.start()
        returncode: int | None
        try:
            returncode = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            returncode = None
        for reader in readers:
            reader.join(timeout=1.0)
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        return CommandResult(
            returncode,
            out.data.decode("utf-8", errors="replace"),
            err.data.decode("utf-8", errors="replace"),
            out.dropped,
        )

    def package(self, name: str) -> InstalledPackage | None:
        import importlib.metadata

        for candidate in dict.fromkeys((name, name.replace("-", "_"))):
            try:
                dist = importlib.metadata.distribution(candidate)
            except (importlib.metadata.PackageNotFoundError, ValueError, OSError):
                continue
            version = dist.version
            if not version:
                return None
            installer = (dist.read_text("INSTALLER") or "").strip() or None
            return InstalledPackage(name, version, tuple(dist.requires or ()), installer)
        return None


# ---------------------------------------------------------------------------------------------
# Parsers (pure; fuzzed)
# ---------------------------------------------------------------------------------------------

_NVRM = re.compile(
    r"NVRM version:\s*NVIDIA UNIX\s+(?P<open>Open\s+)?(?:(?P<arch>\S+)\s+)?Kernel Module"
    r"(?:\s+for\s+(?P<arch_for>\S+))?\s+(?P<version>\d+(?:\.\d+)+)"
)
_PLAIN_VERSION = re.compile(r"^\s*(\d+(?:\.\d+)+)\s*$")
# Driver branches are three digits; Jetson/L4T kernel modules print L4T releases ("35.3.1").
_MIN_DRIVER_BRANCH = 100


@dataclass(frozen=True, slots=True)
class KernelModule:
    version: str
    open: bool | None  # "Open Kernel Module": the open GPU kernel modules
    arch: str | None

    @property
    def tegra(self) -> bool:
        parsed = parse_version(self.version)
        return parsed is not None and parsed[0] < _MIN_DRIVER_BRANCH


def parse_nvrm_version(text: str) -> KernelModule | None:
    """``/proc/driver/nvidia/version``: "NVRM version: NVIDIA UNIX x86_64 Kernel Module
    550.54.15 ..." (proprietary) or "... UNIX Open Kernel Module for x86_64  565.57.01 ...".
    Also takes ``/sys/module/nvidia/version`` (the bare version)."""
    match = _NVRM.search(text)
    if match:
        return KernelModule(
            match.group("version"),
            match.group("open") is not None,
            match.group("arch_for") or match.group("arch"),
        )
    plain = _PLAIN_VERSION.match(text.split("\n", 1)[0])
    return KernelModule(plain.group(1), None, None) if plain else None


_SMI_VERSION_KEYS = {
    "nvidia-smi version": "smi_version",
    "nvml version": "nvml_version",
    "driver version": "driver_version",
    "kmd version": "driver_version",
    "cuda version": "cuda_version",
    "cuda umd version": "cuda_version",
}


def parse_smi_versions(text: str) -> dict[str, str]:
    """``nvidia-smi --version``: "NVIDIA-SMI version  : 595.71.05", "DRIVER version : ..."; R610
    prints 'DRIVER version : Deprecated, see "KMD version" instead' and "KMD version"."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        field_name = _SMI_VERSION_KEYS.get(" ".join(key.split()).lower())
        version = value.strip()
        if sep and field_name and parse_version(version) and field_name not in found:
            found[field_name] = version.split()[0]
    return found


_FM_VERSION = re.compile(r"Fabric Manager version is\s*:?\s*(\d+(?:\.\d+)+)", re.IGNORECASE)


def parse_fabric_manager_version(text: str) -> str | None:
    """``nv-fabricmanager --version``: "Fabric Manager version is : 535.161.08"."""
    match = _FM_VERSION.search(text)
    return match.group(1) if match else None


_UNIT_STATES = frozenset(
    {
        "active",
        "inactive",
        "failed",
        "activating",
        "deactivating",
        "reloading",
        "refreshing",
        "maintenance",
        "unknown",
    }
)


def parse_unit_state(stdout: str) -> str | None:
    """``systemctl is-active UNIT`` prints one state word; anything else (no systemd: "System
    has not been booted with systemd ...") says nothing about the unit."""
    first = stdout.strip().split("\n", 1)[0].strip().lower()
    return first if first in _UNIT_STATES else None


_SONAME_VERSION = re.compile(r"^lib(?:nvidia-ml|cuda)\.so\.(\d+\.\d+(?:\.\d+)?)$")


def soname_version(file_name: str) -> str | None:
    """The version in a library's file name: "libnvidia-ml.so.550.54.15" → "550.54.15"; None
    for the soname links ("libcuda.so.1")."""
    match = _SONAME_VERSION.match(file_name)
    return match.group(1) if match else None


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""


def cuda_of_variant(variant: str) -> str | None:
    """The CUDA of a wheel variant: "cu124" → "12.4", "cu92" → "9.2"; None for "cuda12" (a
    major only) and anything else."""
    match = re.fullmatch(r"cu(\d)(\d+)?(\d)", variant.strip().lower())
    if match is None:
        return None
    major = match.group(1) + (match.group(2) or "")
    return f"{major}.{match.group(3)}"


# ---------------------------------------------------------------------------------------------
# Probing
# ---------------------------------------------------------------------------------------------


@dataclass
class _Notes:
    lines: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        self.lines.append(line)


def _is_linux(host: HostAccess) -> bool:
    return host.platform.startswith("linux")


def _first_line(*texts: str) -> str | None:
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                return line.strip()[:300]
    return None


_PROC_VERSION = "/proc/driver/nvidia/version"
_SYS_VERSION = "/sys/module/nvidia/version"


def _kernel_module(host: HostAccess, notes: _Notes) -> tuple[KernelModule | None, str | None]:
    for path in (_PROC_VERSION, _SYS_VERSION):
        text = host.read_text(path)
        if text is None:
            continue
        module = parse_nvrm_version(text)
        if module is not None:
            return module, path
        notes.add(f"{path}: no driver version in {_first_line(text)!r}")
    if _is_linux(host):
        notes.add(f"no NVIDIA kernel module loaded ({_PROC_VERSION} absent)")
    return None, None


# Where distributions, the container toolkit and the GPU operator put libnvidia-ml.so.X.Y.Z
_LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/local/nvidia/lib64",  # GKE and other hosted Kubernetes
    "/run/nvidia/driver/usr/lib/x86_64-linux-gnu",  # GPU operator's driver container
    "/run/nvidia/driver/usr/lib64",
)


def _nvml_libraries(host: HostAccess) -> dict[str, str]:
    """Every libnvidia-ml.so.<version> on the usual paths: version → directory."""
    found: dict[str, str] = {}
    for directory in _LIBRARY_DIRS:
        for name in host.list_dir(directory) or ():
            version = soname_version(name) if name.startswith("libnvidia-ml") else None
            if version:
                found.setdefault(version, directory)
    return found


def _library_version(
    host: HostAccess, smi: SmiStatus, notes: _Notes
) -> tuple[str | None, str | None, tuple[str, ...]]:
    libraries = _nvml_libraries(host) if _is_linux(host) else {}
    versions = tuple(sorted(libraries, key=lambda v: parse_version(v) or ()))
    if len(versions) == 1:
        only = versions[0]
        return only, f"libnvidia-ml.so.{only} in {libraries[only]}", versions
    if len(versions) > 1:
        notes.add(f"several NVML libraries installed: {', '.join(versions)}")
        if smi.smi_version in libraries:
            return smi.smi_version, "nvidia-smi --version (NVIDIA-SMI version)", versions
        return None, None, versions
    if smi.smi_version:
        return smi.smi_version, "nvidia-smi --version (NVIDIA-SMI version)", versions
    return None, None, versions


def _nvidia_smi(host: HostAccess, notes: _Notes) -> SmiStatus:
    listed = host.run(["nvidia-smi", "-L"], SMI_TIMEOUT_S)
    if listed is None:
        notes.add("nvidia-smi not found on PATH")
        return SmiStatus(present=False)
    text = f"{listed.stdout}\n{listed.stderr}"
    failure = classify_smi_failure(listed.returncode, text)
    gpus = sum(1 for line in listed.stdout.splitlines() if re.match(r"GPU \d+:", line))
    library = NVML_LIBRARY.search(text)
    versions: dict[str, str] = {}
    if failure is None:
        shown = host.run(["nvidia-smi", "--version"], SMI_TIMEOUT_S)
        if shown is not None and shown.returncode == 0:
            versions = parse_smi_versions(shown.stdout)
    else:
        notes.add(f"nvidia-smi -L failed ({failure}): {_first_line(listed.stdout, listed.stderr)}")
    return SmiStatus(
        present=True,
        returncode=listed.returncode,
        failure=failure,
        message=_first_line(listed.stdout, listed.stderr) if failure else None,
        gpu_count=gpus if failure is None else None,
        nvml_library_version=library.group(1) if library else None,
        **versions,
    )


# --- frameworks

# The CUDA runtime wheels a framework's metadata pins (CUDA 13 wheels dropped the -cuXX suffix;
# recent torch pins the cuda-toolkit metapackage instead).
_RUNTIME_WHEELS = (
    "nvidia-cuda-runtime-cu13",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu11",
    "nvidia-cuda-runtime",
    "cuda-toolkit",
)
# PyPI's torch wheels for Windows and macOS are CPU builds without a local tag.
_CPU_ONLY_PYPI_PLATFORMS = ("win32", "cygwin", "darwin")
_PIP_INSTALLERS = frozenset({"pip", "uv"})


def _runtime_wheel(host: HostAccess, names: Sequence[str]) -> InstalledPackage | None:
    for name in names:
        if name in _RUNTIME_WHEELS and (installed := host.package(name)) is not None:
            return installed
    return None


def _torch(host: HostAccess) -> FrameworkInstall | None:
    torch = host.package("torch")
    if torch is None:
        return None
    _, local = split_local(torch.version)
    tagged = _from_local_tag("torch", torch, local)
    if tagged is not None:
        return tagged
    wheel = _runtime_wheel(host, [_requirement_name(r) for r in torch.requires])
    if wheel is not None:
        cuda = major_minor(wheel.version)
        variant = f"cu{cuda.replace('.', '')}" if cuda else None
        return FrameworkInstall(
            "torch", "torch", torch.version, variant, False, cuda,
            f"{wheel.name} {wheel.version}", f"requires {wheel.name}, installed {wheel.version}",
        )  # fmt: skip
    if host.platform.startswith(_CPU_ONLY_PYPI_PLATFORMS) and torch.installer in _PIP_INSTALLERS:
        return FrameworkInstall(
            "torch", "torch", torch.version, "cpu", True, None, None,
            f"PyPI's {host.platform} wheels are CPU-only: no +cuXXX tag, no CUDA runtime wheel",
            inferred=True,
        )  # fmt: skip
    return FrameworkInstall(
        "torch", "torch", torch.version, None, None, None, None,
        "no +cuXXX tag and no CUDA runtime wheel (a source, conda or container build?)",
    )  # fmt: skip


def _from_local_tag(
    name: str, package: InstalledPackage, local: str | None
) -> FrameworkInstall | None:
    """ "+cu124" → a CUDA 12.4 build; "+cpu", "+rocm6.2", "+xpu" → builds without CUDA."""
    if not local:
        return None
    tag = local.lower()
    cuda = re.match(r"cu\d+", tag)
    if cuda:
        variant = cuda.group(0)
        return FrameworkInstall(
            name, package.name, package.version, variant, False, cuda_of_variant(variant), None,
            f"local version tag +{local}",
        )  # fmt: skip
    for prefix in ("cpu", "rocm", "xpu"):
        if tag.startswith(prefix):
            return FrameworkInstall(
                name, package.name, package.version, tag if prefix == "rocm" else prefix,
                True, None, None, f"local version tag +{local}",
            )  # fmt: skip
    return None


def _jax(host: HostAccess) -> FrameworkInstall | None:
    base = host.package("jaxlib") or host.package("jax")
    if base is None:
        return None
    for major in ("13", "12"):
        plugin = host.package(f"jax-cuda{major}-plugin")
        if plugin is not None:
            wheel = _runtime_wheel(host, (f"nvidia-cuda-runtime-cu{major}", "nvidia-cuda-runtime"))
            same_major = wheel is not None and wheel.version.startswith(f"{major}.")
            return FrameworkInstall(
                "jax", plugin.name, plugin.version, f"cuda{major}", False,
                major_minor(wheel.version) if wheel and same_major else None,
                f"{wheel.name} {wheel.version}" if wheel and same_major else None,
                f"distribution {plugin.name} installed",
            )  # fmt: skip
    legacy = re.match(r"cuda(\d{2})", split_local(base.version)[1] or "")
    if legacy:  # jaxlib before the plugins: "0.4.13+cuda12.cudnn89"
        return FrameworkInstall(
            "jax", base.name, base.version, f"cuda{legacy.group(1)}", False, None, None,
            f"local version tag +{split_local(base.version)[1]}",
        )  # fmt: skip
    if any(host.package(f"jax-rocm{v}-plugin") for v in ("60", "7")):
        return FrameworkInstall(
            "jax", base.name, base.version, "rocm", True, None, None, "distribution jax-rocm plugin"
        )
    return FrameworkInstall(
        "jax", base.name, base.version, "cpu", True, None, None,
        "no jax-cuda12/13-plugin distribution and no +cuda jaxlib", inferred=True,
    )  # fmt: skip


def _tensorflow(host: HostAccess) -> FrameworkInstall | None:
    cpu = host.package("tensorflow-cpu")
    if cpu is not None:
        return FrameworkInstall(
            "tensorflow", cpu.name, cpu.version, "cpu", True, None, None,
            "distribution tensorflow-cpu",
        )  # fmt: skip
    tf = host.package("tensorflow") or host.package("tensorflow-gpu")
    if tf is None:
        return None
    if not _is_linux(host):  # native Windows GPU support ended after 2.10; macOS has none
        return FrameworkInstall(
            "tensorflow", tf.name, tf.version, "cpu", True, None, None,
            f"TensorFlow has no CUDA build for {host.platform}", inferred=True,
        )  # fmt: skip
    wheel = _runtime_wheel(host, ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11"))
    return FrameworkInstall(
        "tensorflow", tf.name, tf.version, "gpu", False,
        major_minor(wheel.version) if wheel else None,
        f"{wheel.name} {wheel.version}" if wheel else None,
        "the Linux tensorflow wheel is the GPU build"
        + (f"; runtime wheel {wheel.name} {wheel.version}" if wheel else ""),
    )  # fmt: skip


def _frameworks(host: HostAccess) -> tuple[FrameworkInstall, ...]:
    found = (_torch(host), _jax(host), _tensorflow(host))
    return tuple(f for f in found if f is not None)


# --- CUDA forward compatibility


def _libcuda_versions(host: HostAccess, directory: str) -> list[str]:
    names = host.list_dir(directory) or ()
    return [v for n in names if n.startswith("libcuda.so") and (v := soname_version(n))]


def _loader_directories(host: HostAccess) -> Iterator[tuple[str, str]]:
    """(directory, how the loader is pointed at it): LD_LIBRARY_PATH, then ld.so.conf.d."""
    for directory in host.env.get("LD_LIBRARY_PATH", "").split(":"):
        if directory.strip():
            yield directory.strip().rstrip("/"), "LD_LIBRARY_PATH"
    conf_dir = "/etc/ld.so.conf.d"
    for name in host.list_dir(conf_dir) or ():
        text = host.read_text(f"{conf_dir}/{name}") if name.endswith(".conf") else None
        for line in (text or "").splitlines():
            entry = line.split("#", 1)[0].strip()
            if entry.startswith("/"):
                yield entry.rstrip("/"), f"{conf_dir}/{name}"


def _cuda_compat(host: HostAccess) -> tuple[CudaCompatLibrary, ...]:
    if not _is_linux(host):
        return ()
    found: dict[str, CudaCompatLibrary] = {}
    for directory, via in _loader_directories(host):
        if "compat" not in directory or directory in found:
            continue
        for version in _libcuda_versions(host, directory):
            found[directory] = CudaCompatLibrary(directory, version, True, via)
    installed = [f"/usr/local/{n}/compat" for n in host.list_dir("/usr/local") or ()]
    for directory in installed:
        if directory.startswith("/usr/local/cuda") and directory not in found:
            for version in _libcuda_versions(host, directory):
                found[directory] = CudaCompatLibrary(directory, version, False, "installed")
    return tuple(found.values())


# --- Fabric Manager


def _fabric_manager(host: HostAccess, notes: _Notes) -> FabricManagerState:
    if not _is_linux(host):
        return FabricManagerState()
    switches = host.list_dir("/proc/driver/nvidia-nvswitch/devices")
    unit = host.run(["systemctl", "is-active", "nvidia-fabricmanager"], QUICK_TIMEOUT_S)
    state = parse_unit_state(unit.stdout) if unit else None
    if unit is None:
        notes.add("systemctl not found: Fabric Manager's service state unknown")
    elif state is None:
        said = _first_line(unit.stdout, unit.stderr)
        notes.add(f"systemctl is-active nvidia-fabricmanager: {said}")
    shown = host.run(["nv-fabricmanager", "--version"], QUICK_TIMEOUT_S)
    version = parse_fabric_manager_version(f"{shown.stdout}\n{shown.stderr}") if shown else None
    return FabricManagerState(state, version, len(switches) if switches is not None else None)


# --- container

_CGROUP_HINTS = (
    ("kubepods", "kubernetes"),
    ("docker", "docker"),
    ("libpod", "podman"),
    ("containerd", "containerd"),
    ("lxc", "lxc"),
)


def _container(host: HostAccess) -> ContainerContext:
    env = host.env
    evidence: list[tuple[str, str]] = []  # (kind, what showed it)
    if env.get("KUBERNETES_SERVICE_HOST"):
        evidence.append(("kubernetes", "KUBERNETES_SERVICE_HOST is set"))
    if host.read_text("/.dockerenv") is not None:
        evidence.append(("docker", "/.dockerenv exists"))
    if host.read_text("/run/.containerenv") is not None:
        evidence.append(("podman", "/run/.containerenv exists"))
    cgroup = host.read_text("/proc/1/cgroup")
    for hint, kind in _CGROUP_HINTS:
        if cgroup and hint in cgroup:
            evidence.append((kind, f"/proc/1/cgroup mentions {hint}"))
            break
    if env.get("container"):
        evidence.append((env["container"], f"container={env['container']} in the environment"))
    nodes = host.list_dir("/dev")
    in_container: bool | None = bool(evidence)
    if not evidence and (not _is_linux(host) or cgroup is None):
        in_container = None
    return ContainerContext(
        in_container=in_container,
        kind=evidence[0][0] if evidence else None,
        evidence=tuple(what for _, what in evidence),
        nvidia_visible_devices=env.get("NVIDIA_VISIBLE_DEVICES"),
        nvidia_driver_capabilities=env.get("NVIDIA_DRIVER_CAPABILITIES"),
        cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
        device_nodes=tuple(n for n in nodes if n.startswith("nvidia"))
        if nodes is not None
        else None,
    )


# --- kernel log

_DMESG = ("dmesg",)
# short-iso: journalctl's default "Feb 15 17:37:45" prints no year, so Xid lines would have no time
_JOURNAL = ("journalctl", "-k", "-b", "-q", "--no-pager", "-o", "short-iso")


# journalctl's own lines, not the kernel's: "-- No entries --", "-- Logs begin at ...", "No
# journal files were found." / "... were opened due to insufficient permissions."
_JOURNAL_OWN_LINES = ("-- ", "No journal files were")


def _journal_text(stdout: str) -> str:
    """The kernel's lines of journalctl's output (its own lines and the indented "Hint: You are
    currently not seeing messages ..." block dropped)."""
    kept, in_hint = [], False
    for line in stdout.splitlines():
        in_hint = line.startswith("Hint:") or (in_hint and line[:1].isspace())
        if line.strip() and not in_hint and not line.startswith(_JOURNAL_OWN_LINES):
            kept.append(line)
    return "\n".join(kept)


def _drop_partial_first_line(text: str, truncated: bool) -> str:
    if not truncated:
        return text
    return text.split("\n", 1)[1] if "\n" in text else ""


def read_kernel_log(
    host: HostAccess, max_bytes: int = KERNEL_LOG_LIMIT_BYTES
) -> KernelLogText | None:
    """The kernel log for the Xid scanner: ``dmesg``, else ``journalctl -k`` (readable without
    root where dmesg_restrict blocks dmesg, for members of systemd-journal/adm). The newest
    ``max_bytes`` are kept. None when neither can be read (the probe's notes say why)."""
    if not _is_linux(host):
        return None
    dmesg = host.run(_DMESG, KERNEL_LOG_TIMEOUT_S, max_bytes)
    if dmesg is not None and dmesg.returncode == 0 and dmesg.stdout.strip():
        text = _drop_partial_first_line(dmesg.stdout, dmesg.stdout_truncated)
        return KernelLogText(text, "dmesg", dmesg.stdout_truncated)
    journal = host.run(_JOURNAL, KERNEL_LOG_TIMEOUT_S, max_bytes)
    if journal is not None and journal.returncode == 0:
        text = _journal_text(_drop_partial_first_line(journal.stdout, journal.stdout_truncated))
        if text:
            return KernelLogText(text, "journalctl -k", journal.stdout_truncated)
    return None


def _kernel_log_source(host: HostAccess, notes: _Notes) -> str | None:
    """Which kernel log is readable, found with bounded reads (the doctor reads it in full)."""
    if not _is_linux(host):
        return None
    dmesg = host.run(_DMESG, KERNEL_LOG_TIMEOUT_S, 4096)
    if dmesg is not None and dmesg.returncode == 0 and dmesg.stdout.strip():
        return "dmesg"
    journal = host.run(("journalctl", "-k", "-b", "-n", "20", "-q", "--no-pager"), 10.0, 4096)
    if journal is not None and journal.returncode == 0 and _journal_text(journal.stdout):
        return "journalctl"
    said = [
        f"{name}: {_first_line(r.stderr, r.stdout) or f'exit {r.returncode}'}"
        if r
        else f"{name}: not found"
        for name, r in (("dmesg", dmesg), ("journalctl -k", journal))
    ]
    notes.add("kernel log not readable (" + "; ".join(said) + ")")
    return None


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def probe_environment(host: HostAccess | None = None) -> NodeEnvironment:
    """Read the node's driver, libraries, frameworks, Fabric Manager and container context."""
    host = host or LocalHost()
    notes = _Notes()
    module, module_source = _kernel_module(host, notes)
    smi = _nvidia_smi(host, notes)
    library, library_source, libraries = _library_version(host, smi, notes)
    if module is not None and module.tegra:
        notes.add(f"kernel module {module.version} is a Jetson/L4T release, not a driver branch")
    return NodeEnvironment(
        platform=host.platform,
        machine=host.machine,
        kernel_module_version=module.version if module else None,
        kernel_module_flavor=_flavor(module),
        kernel_module_source=module_source,
        tegra=module.tegra if module else False,
        library_version=library,
        library_version_source=library_source,
        library_versions_found=libraries,
        smi=smi,
        frameworks=_frameworks(host),
        cuda_compat=_cuda_compat(host),
        fabric_manager=_fabric_manager(host, notes),
        container=_container(host),
        kernel_log_source=_kernel_log_source(host, notes),
        notes=tuple(notes.lines),
    )


def _flavor(module: KernelModule | None) -> str | None:
    if module is None or module.open is None:
        return None
    return "open" if module.open else "proprietary"
