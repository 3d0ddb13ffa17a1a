"""The node probe, against fake hosts built from real outputs (tests/data/environment/SOURCES.md,
the shared nvidia-smi captures and kernel logs), and once against this machine."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.environment import (
    OUTPUT_LIMIT_BYTES,
    CommandResult,
    InstalledPackage,
    LocalHost,
    cuda_of_variant,
    parse_fabric_manager_version,
    parse_nvrm_version,
    parse_smi_versions,
    parse_unit_state,
    probe_environment,
    read_kernel_log,
    soname_version,
)
from gpuwarden.health.versions import evaluate_versions
from gpuwarden.telemetry.smi.failure import classify_smi_failure
from gpuwarden.types.health import Severity
from tests.conftest import FIXTURES

DATA = Path(__file__).resolve().parents[1] / "data" / "environment"
SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash", "cmd", "powershell"}


def _data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


@dataclass
class FakeHost:
    """A host made of files, directories, command outputs and installed packages."""

    files: dict[str, str] = field(default_factory=dict)
    dirs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    commands: dict[tuple[str, ...], CommandResult] = field(default_factory=dict)
    packages: dict[str, InstalledPackage] = field(default_factory=dict)
    environ: dict[str, str] = field(default_factory=dict)
    system: str = "linux"
    arch: str | None = "x86_64"
    calls: list[tuple[tuple[str, ...], float, int]] = field(default_factory=list)

    @property
    def env(self) -> Mapping[str, str]:
        return self.environ

    @property
    def platform(self) -> str:
        return self.system

    @property
    def machine(self) -> str | None:
        return self.arch

    def read_text(self, path: str) -> str | None:
        return self.files.get(path)

    def list_dir(self, path: str) -> tuple[str, ...] | None:
        return self.dirs.get(path)

    def run(
        self, argv: Sequence[str], timeout_s: float, max_output_bytes: int = OUTPUT_LIMIT_BYTES
    ) -> CommandResult | None:
        self.calls.append((tuple(argv), timeout_s, max_output_bytes))
        result = self.commands.get(tuple(argv))
        if result is None:
            return None
        data = result.stdout.encode()
        if len(data) <= max_output_bytes:
            return result
        tail = data[-max_output_bytes:].decode(errors="replace")
        return CommandResult(result.returncode, tail, result.stderr, True)

    def package(self, name: str) -> InstalledPackage | None:
        return self.packages.get(name)


def _capture_section(fixtures: Path, capture: str, command: str) -> str:
    """The output of ``command`` in a shared nvidia_gpu_exporter capture."""
    text = (fixtures / "nvidia-smi" / "captures" / capture).read_text(encoding="utf-8")
    marker = f"# $ {command}\n"
    start = text.index(marker) + len(marker)
    body = text[start:].split("\n", 1)[1]  # the closing #### line
    return body.split("\n####", 1)[0].strip("\n") + "\n"


def _error_text(fixtures: Path, example_id: str) -> str:
    for line in (fixtures / "errors" / "examples.jsonl").read_text().splitlines():
        example = json.loads(line)
        if example["id"] == example_id:
            return str(example["error_text"])
    raise AssertionError(example_id)


H100_CAPTURE = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"
NO_SYSTEMD = CommandResult(1, "", _data("systemctl.no-systemd.stderr.txt"))
DMESG_DENIED = CommandResult(1, "", _data("dmesg.not-permitted.stderr.txt"))
NO_JOURNAL = CommandResult(0, "-- No entries --\n", "")


def _torch_pypi(version: str, requires_file: str) -> InstalledPackage:
    requires = tuple(_data(requires_file).splitlines())
    return InstalledPackage("torch", version, requires, "pip")


def _h100_host(fixtures: Path) -> FakeHost:
    """The H100 VM of the shared capture, with PyPI's torch 2.6.0 and its CUDA runtime wheel."""
    return FakeHost(
        commands={
            ("nvidia-smi", "-L"): CommandResult(
                0, _capture_section(fixtures, H100_CAPTURE, "nvidia-smi -L"), ""
            ),
            ("nvidia-smi", "--version"): CommandResult(
                0, _capture_section(fixtures, H100_CAPTURE, "nvidia-smi --version"), ""
            ),
            ("systemctl", "is-active", "nvidia-fabricmanager"): NO_SYSTEMD,
            ("dmesg",): DMESG_DENIED,
            ("journalctl", "-k", "-b", "-n", "20", "-q", "--no-pager"): NO_JOURNAL,
        },
        packages={
            "torch": _torch_pypi("2.6.0", "torch-2.6.0.requires.txt"),
            "nvidia-cuda-runtime-cu12": InstalledPackage("nvidia-cuda-runtime-cu12", "12.4.127"),
        },
        files={"/proc/1/cgroup": _data("cgroup.host-v1.txt")},
        dirs={"/dev": ("nvidia0", "nvidiactl", "nvidia-uvm", "null")},
    )


# --- parsers, on real texts


@pytest.mark.parametrize(
    ("name", "version", "flavor", "tegra"),
    [
        ("proc-version.proprietary-384.98.txt", "384.98", "proprietary", False),
        ("proc-version.proprietary-550.90.07.txt", "550.90.07", "proprietary", False),
        ("proc-version.proprietary-580.173.02.txt", "580.173.02", "proprietary", False),
        ("proc-version.open-525.60.11.txt", "525.60.11", "open", False),
        ("proc-version.open-565.57.01.txt", "565.57.01", "open", False),
        ("proc-version.open-555.58.txt", "555.58", "open", False),
        ("proc-version.jetson-35.3.1.txt", "35.3.1", "open", True),
    ],
)
def test_proc_driver_nvidia_version(name: str, version: str, flavor: str, tegra: bool) -> None:
    module = parse_nvrm_version(_data(name))
    assert module is not None
    assert (module.version, module.open, module.tegra) == (version, flavor == "open", tegra)
    assert module.arch in {"x86_64", "aarch64"}
    host = FakeHost(files={"/proc/driver/nvidia/version": _data(name)})
    env = probe_environment(host)
    assert (env.kernel_module_version, env.kernel_module_flavor, env.tegra) == (
        version,
        flavor,
        tegra,
    )


def test_sys_module_version_is_the_bare_version() -> None:
    module = parse_nvrm_version("550.54.15\n")
    assert module is not None
    assert (module.version, module.open) == ("550.54.15", None)
    assert parse_nvrm_version("GCC version:  gcc version 12.2.0 (GCC)") is None


@pytest.mark.parametrize(
    "capture",
    sorted(p.name for p in (FIXTURES / "nvidia-smi" / "captures").glob("*.txt")),
)
def test_nvidia_smi_version_of_every_capture(fixtures: Path, capture: str) -> None:
    driver = re.search(r"__(\d+\.\d+(?:\.\d+)?)\.txt$", capture)
    assert driver is not None
    versions = parse_smi_versions(_capture_section(fixtures, capture, "nvidia-smi --version"))
    assert versions["smi_version"] == driver.group(1)
    assert versions["driver_version"] == driver.group(1)  # "KMD version" from R610
    # "CUDA UMD version" from R610: the same number `nvidia-smi -q` prints in that capture
    query = _capture_section(fixtures, capture, "nvidia-smi -q")
    cuda = re.search(r"CUDA (?:UMD )?Version\s*:\s*(\d+\.\d+)", query)
    assert cuda is not None
    assert versions["cuda_version"] == cuda.group(1)


@pytest.mark.parametrize(
    ("example_id", "returncode", "failure"),
    [
        ("hw-smi-failed-kernel-upgrade-gce-18", 9, "driver-not-loaded"),
        ("ver-nvml-mismatch-shine-30", 18, "version-mismatch"),
        ("hw-no-devices-rebar-862", 6, "no-devices"),
    ],
)
def test_nvidia_smi_failures_from_real_reports(
    fixtures: Path, example_id: str, returncode: int, failure: str
) -> None:
    text = _error_text(fixtures, example_id)
    assert classify_smi_failure(returncode, text) == failure
    assert classify_smi_failure(returncode, "") == failure  # the exit code alone says it too
    assert classify_smi_failure(0, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)") is None
    assert classify_smi_failure(None, "") == "timeout"


def test_small_parsers_on_real_outputs() -> None:
    fm = _data("nv-fabricmanager.version-535.161.08.txt")
    assert parse_fabric_manager_version(fm) == "535.161.08"
    assert parse_unit_state("active\n") == "active"
    assert parse_unit_state(_data("systemctl.no-systemd.stderr.txt")) is None
    assert soname_version("libnvidia-ml.so.550.54.15") == "550.54.15"
    assert soname_version("libnvidia-ml.so.1") is None
    assert soname_version("libcuda.so.580.65.06") == "580.65.06"
    assert (cuda_of_variant("cu124"), cuda_of_variant("cu118"), cuda_of_variant("cu92")) == (
        "12.4",
        "11.8",
        "9.2",
    )
    assert cuda_of_variant("cpu") is None


# --- whole hosts


def test_h100_capture_host(fixtures: Path) -> None:
    host = _h100_host(fixtures)
    env = probe_environment(host)
    assert env.smi.present and env.smi.returncode == 0 and env.smi.failure is None
    assert env.smi.gpu_count == 1
    assert (env.smi.driver_version, env.smi.cuda_version, env.smi.nvml_version) == (
        "590.48.01",
        "13.1",
        "590.48",
    )
    assert env.library_version == "590.48.01"
    assert env.library_version_source == "nvidia-smi --version (NVIDIA-SMI version)"
    (torch,) = env.frameworks
    assert (torch.version, torch.variant, torch.cuda_version, torch.without_cuda) == (
        "2.6.0",
        "cu124",
        "12.4",
        False,
    )
    assert torch.cuda_runtime == "nvidia-cuda-runtime-cu12 12.4.127"
    assert env.container.in_container is False
    assert env.fabric_manager.service_state is None
    assert env.kernel_log_source is None
    assert any("Operation not permitted" in note for note in env.notes)
    assert any("has not been booted with systemd" in note for note in env.notes)
    for argv, timeout_s, limit in host.calls:
        assert argv[0] not in SHELLS
        assert 0 < timeout_s <= 60
        assert 0 < limit <= OUTPUT_LIMIT_BYTES
    # and the rules find nothing wrong with it
    checks, findings = evaluate_versions(env, ())
    assert [f for f in findings if f.severity is not Severity.INFO] == []
    assert {c.name: c.status.value for c in checks}["driver-cuda"] == "pass"


def test_truenas_mismatch_host() -> None:
    host = FakeHost(
        files={"/proc/driver/nvidia/version": _data("proc-version.proprietary-580.173.02.txt")},
        commands={
            ("nvidia-smi", "-L"): CommandResult(18, _data("smi.version-mismatch-580.178.txt"), "")
        },
    )
    env = probe_environment(host)
    assert env.kernel_module_version == "580.173.02"
    assert (env.smi.failure, env.smi.nvml_library_version) == ("version-mismatch", "580.178")
    assert env.smi.message == "Failed to initialize NVML: Driver/library version mismatch"
    assert ("nvidia-smi", "--version") not in {c[0] for c in host.calls}  # not after a failure
    _, findings = evaluate_versions(env, ())
    assert [f.code for f in findings if f.severity is Severity.CRITICAL] == ["nvml-driver-mismatch"]


def test_library_file_names_give_the_user_space_version() -> None:
    # oddmario/NVIDIA-Ubuntu-Driver-Guide#4: packages upgraded to 550.107.02 under module 550.90.07
    host = FakeHost(
        files={"/proc/driver/nvidia/version": _data("proc-version.proprietary-550.90.07.txt")},
        dirs={
            "/usr/lib/x86_64-linux-gnu": (
                "libnvidia-ml.so",
                "libnvidia-ml.so.1",
                "libnvidia-ml.so.550.107.02",
            )
        },
    )
    env = probe_environment(host)
    assert env.library_version == "550.107.02"
    assert env.library_version_source == "libnvidia-ml.so.550.107.02 in /usr/lib/x86_64-linux-gnu"
    assert env.smi.present is False
    _, findings = evaluate_versions(env, ())
    # R550 is also past its end of life (NVIDIA's R580 table): an info of its own
    assert [f.code for f in findings] == ["driver-branch-eol", "nvml-driver-mismatch"]


def test_two_nvml_libraries_defer_to_nvidia_smi() -> None:
    host = FakeHost(
        dirs={"/usr/lib64": ("libnvidia-ml.so.535.104.05", "libnvidia-ml.so.550.54.15")},
        commands={
            ("nvidia-smi", "-L"): CommandResult(0, "GPU 0: Tesla T4 (UUID: GPU-1)\n", ""),
            ("nvidia-smi", "--version"): CommandResult(0, "NVIDIA-SMI version  : 550.54.15\n", ""),
        },
    )
    env = probe_environment(host)
    assert env.library_versions_found == ("535.104.05", "550.54.15")
    assert env.library_version == "550.54.15"


def test_driver_not_loaded_host(fixtures: Path) -> None:
    message = _error_text(fixtures, "hw-smi-failed-kernel-upgrade-gce-18").splitlines()[-1]
    host = FakeHost(commands={("nvidia-smi", "-L"): CommandResult(9, message + "\n", "")})
    env = probe_environment(host)
    assert (env.kernel_module_version, env.smi.failure) == (None, "driver-not-loaded")
    _, findings = evaluate_versions(env, ())
    assert [f.code for f in findings] == ["driver-not-loaded"]


def test_a_hung_nvidia_smi_is_a_timeout_not_a_hang() -> None:
    host = FakeHost(commands={("nvidia-smi", "-L"): CommandResult(None, "", "")})
    assert probe_environment(host).smi.failure == "timeout"


# --- frameworks


def test_torch_from_pypi_on_cuda_13_pins_the_cuda_toolkit() -> None:
    host = FakeHost(
        packages={
            "torch": _torch_pypi("2.14.1", "torch-2.14.1.requires.txt"),
            "cuda-toolkit": InstalledPackage("cuda-toolkit", "13.0.3"),
        }
    )
    (torch,) = probe_environment(host).frameworks
    assert (torch.variant, torch.cuda_version, torch.cuda_runtime) == (
        "cu130",
        "13.0",
        "cuda-toolkit 13.0.3",
    )


@pytest.mark.parametrize(
    ("version", "platform", "variant", "without_cuda", "inferred"),
    [
        ("2.5.1+cu124", "linux", "cu124", False, False),
        ("2.13.0+cpu", "linux", "cpu", True, False),
        ("2.4.1+rocm6.1", "linux", "rocm6.1", True, False),
        ("2.5.1", "win32", "cpu", True, True),  # PyPI's Windows wheels are CPU builds
        ("2.3.0a0+40ec155e58.nv24.03", "linux", None, None, False),  # NGC: built from source
        ("2.5.1", "linux", None, None, False),  # no runtime wheel: conda or source
    ],
)
def test_torch_builds(
    version: str, platform: str, variant: str | None, without_cuda: bool | None, inferred: bool
) -> None:
    host = FakeHost(
        system=platform, packages={"torch": InstalledPackage("torch", version, (), "pip")}
    )
    (torch,) = probe_environment(host).frameworks
    assert (torch.variant, torch.without_cuda, torch.inferred) == (variant, without_cuda, inferred)


def test_jax_and_tensorflow() -> None:
    host = FakeHost(
        packages={
            "jax": InstalledPackage("jax", "0.7.2"),
            "jaxlib": InstalledPackage("jaxlib", "0.7.2"),
            "jax-cuda12-plugin": InstalledPackage("jax-cuda12-plugin", "0.7.2"),
            "nvidia-cuda-runtime-cu12": InstalledPackage("nvidia-cuda-runtime-cu12", "12.9.79"),
            "tensorflow": InstalledPackage("tensorflow", "2.16.1"),
        }
    )
    jax, tf = probe_environment(host).frameworks
    assert (jax.variant, jax.cuda_version, jax.version) == ("cuda12", "12.9", "0.7.2")
    assert (tf.variant, tf.without_cuda, tf.cuda_version) == ("gpu", False, "12.9")
    cpu = FakeHost(
        packages={
            "jax": InstalledPackage("jax", "0.7.2"),
            "tensorflow-cpu": InstalledPackage("tensorflow-cpu", "2.16.1"),
        }
    )
    jax, tf = probe_environment(cpu).frameworks
    assert (jax.variant, jax.without_cuda, tf.variant, tf.without_cuda) == (
        "cpu",
        True,
        "cpu",
        True,
    )


# --- forward compatibility, Fabric Manager, container


def test_cuda_compat_in_ld_library_path() -> None:
    host = FakeHost(
        environ={"LD_LIBRARY_PATH": "/usr/local/cuda/compat/lib:/usr/local/nvidia/lib64"},
        dirs={
            "/usr/local/cuda/compat/lib": ("libcuda.so", "libcuda.so.1", "libcuda.so.550.54.15"),
            "/usr/local": ("bin", "cuda-12.4"),
            "/usr/local/cuda-12.4/compat": (
                "libcuda.so.550.54.15",
                "libnvidia-ptxjitcompiler.so.1",
            ),
        },
    )
    in_use, installed = probe_environment(host).cuda_compat
    assert (in_use.version, in_use.in_use, in_use.via) == ("550.54.15", True, "LD_LIBRARY_PATH")
    assert (installed.directory, installed.in_use) == ("/usr/local/cuda-12.4/compat", False)


def test_cuda_compat_through_ld_so_conf() -> None:
    host = FakeHost(
        dirs={
            "/etc/ld.so.conf.d": ("000_cuda.conf", "x.txt"),
            "/usr/local/cuda-13.1/compat": ("libcuda.so.590.44.01",),
        },
        files={"/etc/ld.so.conf.d/000_cuda.conf": "# compat\n/usr/local/cuda-13.1/compat\n"},
    )
    (compat,) = probe_environment(host).cuda_compat
    assert (compat.version, compat.via) == ("590.44.01", "/etc/ld.so.conf.d/000_cuda.conf")


def test_fabric_manager_on_a_systemd_host() -> None:
    host = FakeHost(
        dirs={"/proc/driver/nvidia-nvswitch/devices": ("0000:05:00.0", "0000:06:00.0")},
        commands={
            ("systemctl", "is-active", "nvidia-fabricmanager"): CommandResult(3, "inactive\n", ""),
            ("nv-fabricmanager", "--version"): CommandResult(
                0, _data("nv-fabricmanager.version-535.161.08.txt"), ""
            ),
        },
    )
    fm = probe_environment(host).fabric_manager
    assert (fm.service_state, fm.version, fm.nvswitch_count) == ("inactive", "535.161.08", 2)


@pytest.mark.parametrize(
    ("files", "environ", "in_container", "kind"),
    [
        ({"/.dockerenv": "", "/proc/1/cgroup": _data("cgroup.docker-v1.txt")}, {}, True, "docker"),
        (
            {"/proc/1/cgroup": _data("cgroup.kubepods-v1.txt")},
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
            True,
            "kubernetes",
        ),
        ({"/run/.containerenv": ""}, {"container": "podman"}, True, "podman"),
        ({"/proc/1/cgroup": _data("cgroup.host-v1.txt")}, {}, False, None),
        ({}, {}, None, None),
    ],
)
def test_container_detection(
    files: dict[str, str], environ: dict[str, str], in_container: bool | None, kind: str | None
) -> None:
    environ = {**environ, "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
    env = probe_environment(FakeHost(files=files, environ=environ))
    assert (env.container.in_container, env.container.kind) == (in_container, kind)
    assert env.container.nvidia_driver_capabilities == "compute,utility"


def test_other_platforms_read_no_linux_files() -> None:
    host = FakeHost(system="win32")
    env = probe_environment(host)
    assert env.platform == "win32"
    assert env.container.in_container is None
    assert env.kernel_log_source is None
    assert all(call[0][0] == "nvidia-smi" for call in host.calls)


# --- the kernel log


def test_kernel_log_from_dmesg_with_a_bound(fixtures: Path) -> None:
    log = (fixtures / "xid" / "gpud__dmesg-with-xid-119.log").read_text(encoding="utf-8")
    host = FakeHost(commands={("dmesg",): CommandResult(0, log, "")})
    full = read_kernel_log(host)
    assert full is not None
    assert (full.source, full.truncated, full.text) == ("dmesg", False, log)
    small = read_kernel_log(host, max_bytes=1000)
    assert small is not None and small.truncated
    assert len(small.text.encode()) <= 1000
    assert log.endswith(small.text)  # the newest lines, whole
    assert small.text.splitlines()[0] in log.splitlines()
    assert probe_environment(host).kernel_log_source == "dmesg"


def test_kernel_log_falls_back_to_journalctl(fixtures: Path) -> None:
    log = (fixtures / "xid" / "gpud__dmesg-decode-iso-xid13-43.log").read_text(encoding="utf-8")
    host = FakeHost(
        commands={
            ("dmesg",): DMESG_DENIED,
            ("journalctl", "-k", "-b", "-q", "--no-pager", "-o", "short-iso"): CommandResult(
                0, log, ""
            ),
            ("journalctl", "-k", "-b", "-n", "20", "-q", "--no-pager"): CommandResult(0, log, ""),
        }
    )
    text = read_kernel_log(host)
    assert text is not None
    assert text.source == "journalctl -k"
    assert "Xid (PCI:0000:38:00): 13" in text.text
    assert probe_environment(host).kernel_log_source == "journalctl"


@pytest.mark.parametrize(
    "journal",
    [NO_JOURNAL, CommandResult(0, _data("journalctl.no-permission.txt"), ""), None],
)
def test_no_readable_kernel_log(journal: CommandResult | None) -> None:
    commands: dict[tuple[str, ...], CommandResult] = {("dmesg",): DMESG_DENIED}
    if journal is not None:
        commands[("journalctl", "-k", "-b", "-q", "--no-pager")] = journal
        commands[("journalctl", "-k", "-b", "-n", "20", "-q", "--no-pager")] = journal
    host = FakeHost(commands=commands)
    assert read_kernel_log(host) is None
    env = probe_environment(host)
    assert env.kernel_log_source is None
    (note,) = [n for n in env.notes if n.startswith("kernel log not readable")]
    assert "dmesg: dmesg: read kernel buffer failed: Operation not permitted" in note


# --- the real LocalHost


def test_local_host_runs_without_a_shell_and_bounds_output() -> None:
    host = LocalHost()
    assert host.run(["gpuwarden-no-such-program-x"], 5.0) is None
    code = "import sys; sys.stdout.write('a' * 5000 + 'END'); sys.stderr.write('e')"
    result = host.run([sys.executable, "-c", code], 30.0, max_output_bytes=100)
    assert result is not None
    assert (result.returncode, result.stderr, result.stdout_truncated) == (0, "e", True)
    assert len(result.stdout) == 100 and result.stdout.endswith("END")


def test_local_host_kills_at_the_timeout() -> None:
    started = time.monotonic()
    result = LocalHost().run([sys.executable, "-c", "import time; time.sleep(30)"], 0.5)
    assert result is not None and result.returncode is None
    assert time.monotonic() - started < 10


def test_local_host_files_and_packages(tmp_path: Path) -> None:
    host = LocalHost()
    (tmp_path / "f").write_text("NVRM")
    assert host.read_text(str(tmp_path / "f")) == "NVRM"
    assert host.read_text(str(tmp_path / "missing")) is None
    assert host.list_dir(str(tmp_path)) == ("f",)
    assert host.list_dir(str(tmp_path / "missing")) is None
    pytest_dist = host.package("pytest")
    assert pytest_dist is not None and pytest_dist.version == pytest.__version__
    assert host.package("gpuwarden-no-such-distribution") is None


def test_this_machine() -> None:
    """No GPU here: the probe says so and the rules raise nothing above info."""
    env = probe_environment()
    assert env.platform == sys.platform
    if not Path("/proc/driver/nvidia/version").exists():
        assert env.kernel_module_version is None
        assert any("kernel module" in note for note in env.notes)
    checks, findings = evaluate_versions(env, ())
    assert len(checks) == 5
    assert [f for f in findings if f.severity is not Severity.INFO] == []


# --- garbage never raises

_GARBAGE = st.text(max_size=200)


@settings(max_examples=200, deadline=None)
@given(_GARBAGE, st.one_of(st.none(), st.integers(-2, 300)))
def test_parsers_never_raise(text: str, returncode: int | None) -> None:
    parse_nvrm_version(text)
    parse_smi_versions(text)
    classify_smi_failure(returncode, text)
    parse_fabric_manager_version(text)
    parse_unit_state(text)
    soname_version(text)
    cuda_of_variant(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    proc=_GARBAGE,
    smi=_GARBAGE,
    code=st.one_of(st.none(), st.integers(0, 255)),
    version=_GARBAGE,
    listing=st.lists(st.text(max_size=30), max_size=4),
    ld_path=st.text(max_size=40),
)
def test_probe_on_garbage_never_raises(
    proc: str, smi: str, code: int | None, version: str, listing: list[str], ld_path: str
) -> None:
    host = FakeHost(
        files={"/proc/driver/nvidia/version": proc, "/proc/1/cgroup": proc},
        dirs={"/usr/lib64": tuple(listing), "/dev": tuple(listing), "/usr/local": tuple(listing)},
        commands={
            ("nvidia-smi", "-L"): CommandResult(code, smi, smi),
            ("nvidia-smi", "--version"): CommandResult(0, smi, ""),
            ("systemctl", "is-active", "nvidia-fabricmanager"): CommandResult(code, smi, ""),
            ("dmesg",): CommandResult(code, smi, ""),
        },
        packages={"torch": InstalledPackage("torch", version, tuple(listing))},
        environ={"LD_LIBRARY_PATH": ld_path, "NVIDIA_DRIVER_CAPABILITIES": smi},
    )
    env = probe_environment(host)
    evaluate_versions(env, ())
    read_kernel_log(host, max_bytes=64)
