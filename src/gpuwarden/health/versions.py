"""The driver → CUDA → framework chain, Fabric Manager and the container context, judged from what
the doctor's probe read (``NodeEnvironment``) and the devices NVML / nvidia-smi listed.

Pure: the facts come from ``catalog.compat``; nothing here reads the machine. Unknown versions give
no finding: the check says what it could not read ("torch not installed"). One finding per
GPU model, not per GPU: eight H100s without sm_90 code are one problem.

Sources: NVIDIA CUDA Compatibility guide (minor-version and forward compatibility), the CUDA C++
Programming Guide (binary compatibility), the Fabric Manager user guide (NVSwitch systems need the
service at the driver's exact version; GPUs register with the fabric: "In Progress" means FM is not
running), NVML (nvmlReturn_t codes that nvidia-smi exits with), and the NVIDIA Container Toolkit
(NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from gpuwarden.catalog.compat import (
    R580_EDITION_SOURCE,
    R580_EDITION_SUPPORTED,
    build_runs_on,
    driver_branch,
    driver_supports_cuda,
    framework_build,
    gpu_arch_for,
    max_cuda_for_driver,
    parse_version,
    retired_unlisted_branch,
    version_at_least,
)
from gpuwarden.catalog.gpu_names import SUPERCHIP_NAME
from gpuwarden.catalog.gpus import gpu_by_smi_name
from gpuwarden.catalog.nvml_enums import NVML_ERROR_GPU_IS_LOST
from gpuwarden.catalog.pci_bus import normalize_pci_bus_id
from gpuwarden.health.checks import check_of
from gpuwarden.health.devices import MASKED_UUID
from gpuwarden.health.rules.codes import CODES, CodeInfo
from gpuwarden.types.environment import (
    ArchSupport,
    CompatAnswer,
    CompatVerdict,
    FrameworkBuild,
    FrameworkInstall,
    NodeEnvironment,
)
from gpuwarden.types.health import (
    Check,
    CheckStatus,
    Confidence,
    DeviceRef,
    Evidence,
    Finding,
    Severity,
)
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample, real_uuid

# ---------------------------------------------------------------------------------------------
# The codes: what each means and what fixes it (diagnosis.md §1/§2). Rules add the numbers.
# Added here beyond diagnosis.md: driver-branch-eol (info), cuda-minor-version-compat (info),
# driver-versions-differ (info).
# ---------------------------------------------------------------------------------------------


VERSION_CODES = {
    "driver-too-old": CodeInfo(
        Severity.CRITICAL,
        "the NVIDIA driver supports an older CUDA than the runtime the framework was built with: "
        "CUDA initialisation fails ('CUDA driver version is insufficient for CUDA runtime "
        "version', error 35)",
        "upgrade the driver to at least the version named, or install a framework build for "
        "the CUDA the driver supports",
    ),
    "cuda-minor-version-compat": CodeInfo(
        Severity.INFO,
        "the framework's CUDA runtime is newer than the driver's CUDA but in the same major "
        "family: it runs through minor-version compatibility, except PTX JIT compilation and "
        "APIs that need the newer driver",
        "nothing needed for cubin-only workloads; upgrade the driver to the toolkit's own to "
        "lift the limits",
    ),
    "gpu-arch-unsupported": CodeInfo(
        Severity.CRITICAL,
        "the framework build has no kernels for this GPU's compute capability (no cubin for "
        "its major architecture at or below it, and no PTX to JIT-compile): 'no kernel image "
        "is available for execution on the device'",
        "install a build that includes the architecture (a newer CUDA variant of the "
        "framework), or hide the GPU from the job (CUDA_VISIBLE_DEVICES with "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID)",
    ),
    "cpu-only-build": CodeInfo(
        Severity.WARNING,
        "the framework was installed without CUDA: it cannot use the node's GPUs "
        "('Torch not compiled with CUDA enabled', torch.cuda.is_available() False)",
        "install the CUDA build (pip --index-url of the matching CUDA, e.g. "
        "https://download.pytorch.org/whl/cu124), then check torch.version.cuda",
    ),
    "nvml-driver-mismatch": CodeInfo(
        Severity.CRITICAL,
        "the user-space driver libraries (NVML, libcuda) and the loaded kernel module are "
        "different versions, usually after a driver upgrade without a reboot: nvidia-smi fails "
        "with 'Driver/library version mismatch' and new CUDA processes cannot start",
        "reboot (or unload and reload the nvidia modules when the GPUs are idle); pin the "
        "driver packages so unattended upgrades do not replace them under a loaded module",
    ),
    "driver-not-loaded": CodeInfo(
        Severity.CRITICAL,
        "the NVIDIA kernel module is not loaded, or not built for the running kernel: "
        "'NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver'",
        "rebuild the module for the running kernel (dkms autoinstall, or reinstall the "
        "driver), keep unattended upgrades from changing the kernel under it, reboot; "
        "`lsmod | grep nvidia` and `dkms status` tell what is there",
    ),
    "forward-compat-unsupported": CodeInfo(
        Severity.CRITICAL,
        "a CUDA forward-compatibility libcuda (the cuda-compat package) is in use where it "
        "cannot work: it is supported only on data-center GPUs (and select NGC-ready RTX "
        "boards, Jetson) with an older driver branch than its own",
        "use a host driver that supports the application's CUDA natively and drop the compat "
        "directory from LD_LIBRARY_PATH / ld.so.conf, or use an image built for an older CUDA",
    ),
    # nvidia-smi's lost GPU is the same fault as the rules' and Xid 79's: one meaning, one remedy
    "gpu-lost": CODES["gpu-lost"],
    "fabric-manager-down": CodeInfo(
        Severity.CRITICAL,
        "NVSwitch systems need the NVIDIA Fabric Manager running at the driver's exact version "
        "to set up the NVLink fabric; without it CUDA fails with error 802 'system not yet "
        "initialized' and GPUs stay in fabric state 'In Progress'",
        "install nvidia-fabricmanager at exactly the driver's version and `systemctl enable "
        "--now nvidia-fabricmanager` (Blackwell HGX also needs NVLSM); check with `nvidia-smi "
        "-q | grep -A2 Fabric`; reset the GPUs or reboot if FM was restarted",
    ),
    "container-driver-capabilities": CodeInfo(
        Severity.CRITICAL,
        "the container was given the GPU device but not the driver libraries it needs "
        "(NVIDIA_DRIVER_CAPABILITIES without compute or utility), or was told to get no GPU "
        "(NVIDIA_VISIBLE_DEVICES void/none)",
        "run it with NVIDIA_DRIVER_CAPABILITIES=compute,utility and NVIDIA_VISIBLE_DEVICES=all "
        "(or the GPUs it should have), or base the image on nvidia/cuda which sets both",
    ),
    "driver-branch-eol": CodeInfo(
        Severity.INFO,
        "NVIDIA supports each data-center driver branch until its end of life; after it the "
        "branch gets no security or bug fixes",
        "plan the move to a supported long-term support or production branch",
    ),
    "driver-versions-differ": CodeInfo(
        Severity.INFO,
        "the GPU readings carry more than one driver version; the GPUs of one host all answer "
        "through its one loaded kernel module, so the readings come from several hosts or from "
        "both sides of a driver change (an upgrade, a module reload)",
        "judge each host's captures apart; on one node, take new readings and check they all "
        "carry the driver that should be loaded; across a fleet, roll one driver out",
    ),
}

# Findings said once per driver the inputs carry (a node-level finding is otherwise one per
# code): node.py keys them by their driver.
PER_DRIVER_CODES = frozenset({"driver-branch-eol"})


# ---------------------------------------------------------------------------------------------
# The node as the rules see it
# ---------------------------------------------------------------------------------------------

_PROBE = "probe"
_CATALOG = "catalog"
# NVIDIA's consumer brands: never data-center parts, never NGC-ready RTX, so never forward
# compatible (CUDA Compatibility guide, "Forward Compatibility").
_CONSUMER_BRANDS = ("geforce", "titan")
# A driver branch as "550"; Jetson/L4T versions ("35.3.1") are not driver branches.
_MIN_DRIVER_BRANCH = 100
# GPUs that sit behind NVSwitches in 8-GPU HGX/DGX boards: SXM/HGX modules of Ampere and newer
# (8× V100 SXM2 (DGX-1) are a cube mesh without NVSwitch; 4-GPU boards link directly).
_NVSWITCH_BOARD_GPUS = 8
_NVSWITCH_MIN_CAPABILITY = (8, 0)
_FABRIC_OK_STATE = "completed"
_FABRIC_NO_FABRIC = "not-supported"


@dataclass(frozen=True, slots=True)
class _Node:
    env: NodeEnvironment
    gpus: tuple[DeviceInfo, ...]  # physical GPUs (MIG instances dropped)
    samples: tuple[DeviceSample, ...]
    driver: str | None  # the driver version the rules compare
    driver_evidence: Evidence | None
    # every distinct driver version the GPU readings carry, oldest first: one on any real node
    gpu_drivers: tuple[_DriverGroup, ...]
    # "YYYY-MM" of the run (the caller's clock), None when the caller gives none: whether a
    # branch is still supported is a question of now, whenever the capture was taken
    this_month: str | None

    @property
    def os(self) -> str:
        return "windows" if self.env.platform.startswith(("win", "cygwin")) else "linux"

    @property
    def has_gpu(self) -> bool:
        smi_count = self.env.smi.gpu_count or 0
        return bool(self.gpus) or smi_count > 0 or self.env.kernel_module_version is not None


def _node(
    env: NodeEnvironment,
    devices: Sequence[DeviceInfo],
    samples: Sequence[DeviceSample],
    this_month: str | None,
) -> _Node:
    gpus = tuple(d for d in devices if d.mig_parent_uuid is None)
    driver, proof = _driver_version(env, gpus)
    drivers = () if env.tegra else _gpu_drivers(gpus)
    return _Node(env, gpus, tuple(samples), driver, proof, drivers, this_month)


def _driver_version(
    env: NodeEnvironment, gpus: tuple[DeviceInfo, ...]
) -> tuple[str | None, Evidence | None]:
    """The kernel module's version first (what CUDA talks to), then NVML's, then nvidia-smi's."""
    candidates = [
        (env.kernel_module_version, f"{_PROBE}:{env.kernel_module_source or 'kernel module'}"),
        (next((g.driver_version for g in gpus if g.driver_version), None), "devices"),
        (env.smi.driver_version, f"{_PROBE}:nvidia-smi --version"),
    ]
    for version, source in candidates:
        if _is_driver_branch(version) and not env.tegra:
            return version, Evidence("driver_version", version, source)
    return None, None


@dataclass(frozen=True, slots=True)
class _DriverGroup:
    """One driver version and the GPUs whose readings carry it."""

    version: str
    gpus: tuple[DeviceInfo, ...]

    @property
    def carriers(self) -> str:
        """The GPUs in words, by model (two hosts' GPU 0 are two GPUs: a lone GPU is named
        with its UUID, the evidence names every one)."""
        return "; ".join(_carrier_label(group) for group in _models(self.gpus).values())

    @property
    def evidence(self) -> Evidence:
        uuids = ", ".join(filter(None, (_shown_uuid(g) for g in self.gpus)))
        return Evidence("driver_version", self.version, "devices", uuids or self.carriers)


def _carrier_label(group: Sequence[DeviceInfo]) -> str:
    uuid = _shown_uuid(group[0])
    if len(group) == 1 and uuid is not None:
        return f"GPU {group[0].index} ({group[0].name}, {uuid})"
    return _gpus_label(group)


def _shown_uuid(gpu: DeviceInfo) -> str | None:
    """A GPU's UUID when it identifies one (not a backend's "index:N", not a redacted one)."""
    uuid = real_uuid(gpu.uuid)
    return None if uuid == MASKED_UUID else uuid


def _is_driver_branch(version: str | None) -> TypeGuard[str]:
    parsed = parse_version(version)
    return bool(version and parsed and parsed[0] >= _MIN_DRIVER_BRANCH)


def _gpu_drivers(gpus: Sequence[DeviceInfo]) -> tuple[_DriverGroup, ...]:
    """The driver versions the GPUs report, each with its GPUs, oldest first (whatever order
    the inputs came in)."""
    groups: dict[str, list[DeviceInfo]] = {}
    for gpu in gpus:
        if _is_driver_branch(gpu.driver_version):
            groups.setdefault(gpu.driver_version, []).append(gpu)
    ordered = sorted(groups, key=lambda v: (parse_version(v) or (), v))
    return tuple(_DriverGroup(version, tuple(groups[version])) for version in ordered)


def _models(gpus: Sequence[DeviceInfo]) -> dict[str, tuple[DeviceInfo, ...]]:
    models: dict[str, list[DeviceInfo]] = {}
    for gpu in gpus:
        models.setdefault(gpu.name, []).append(gpu)
    return {name: tuple(group) for name, group in models.items()}


def _device_ref(group: Sequence[DeviceInfo]) -> DeviceRef | None:
    if not group:
        return None
    if len(group) == 1:
        gpu = group[0]
        return DeviceRef(gpu.index, real_uuid(gpu.uuid), gpu.pci_bus_id, gpu.name)
    return DeviceRef(name=group[0].name)


def _gpus_label(group: Sequence[DeviceInfo]) -> str:
    indices = ", ".join(str(g.index) for g in group)
    if len(group) == 1:
        return f"GPU {indices} ({group[0].name})"
    return f"{len(group)}× {group[0].name} (GPUs {indices})"


def driver_of(finding: Finding) -> str | None:
    """The driver a per-driver finding is about (``PER_DRIVER_CODES``), else None."""
    if finding.code not in PER_DRIVER_CODES:
        return None
    said = (e.value for e in finding.evidence if e.field == "driver_version")
    return next((str(value) for value in said if value is not None), None)


def _finding(
    code: str,
    title: str,
    evidence: Sequence[Evidence],
    *,
    device: DeviceRef | None = None,
    severity: Severity | None = None,
    confidence: Confidence = Confidence.HIGH,
    remedy: str | None = None,
    references: tuple[str, ...] = (),
) -> Finding:
    row = VERSION_CODES[code]
    return Finding(
        code=code,
        severity=severity or row.severity,
        title=title,
        cause=row.cause,
        remedy=remedy or row.remedy,
        device=device,
        evidence=tuple(evidence),
        action=row.action,
        confidence=confidence,
        references=references,
    )


@dataclass(frozen=True, slots=True)
class _Outcome:
    check: Check
    findings: tuple[Finding, ...] = ()


def _outcome(name: str, findings: Sequence[Finding], detail: str) -> _Outcome:
    return _Outcome(check_of(name, findings, detail), tuple(findings))


def _skip(name: str, why: str) -> _Outcome:
    return _Outcome(Check(name, CheckStatus.SKIP, why))


@dataclass(frozen=True, slots=True)
class _Verdict:
    """One framework (on one GPU model): its finding, its line in the check, and whether the
    catalog could decide at all (a check where nothing was decided is a skip, not a pass)."""

    finding: Finding | None
    line: str
    decided: bool


# ---------------------------------------------------------------------------------------------
# driver-cuda: the driver runs the frameworks' CUDA runtimes; forward compat; branch end of life
# ---------------------------------------------------------------------------------------------


def _cuda_frameworks(env: NodeEnvironment) -> list[FrameworkInstall]:
    return [f for f in env.frameworks if f.without_cuda is False]


def _build_of(framework: FrameworkInstall) -> FrameworkBuild | None:
    if framework.variant is None:
        return None
    return framework_build(framework.name, framework.version, framework.variant)


def _framework_cuda(framework: FrameworkInstall) -> tuple[str | None, Evidence | None]:
    """The CUDA a framework's runtime is: the installed runtime wheel, else its build's."""
    if framework.cuda_version:
        return framework.cuda_version, Evidence(
            f"{framework.name}.cuda",
            framework.cuda_version,
            f"{_PROBE}:importlib.metadata {framework.distribution}",
            framework.evidence,
        )
    build = _build_of(framework)
    if build is None or build.cuda_version is None:
        return None, None
    return build.cuda_version, Evidence(
        f"{framework.name}.cuda",
        build.cuda_version,
        f"{_CATALOG}:framework_cuda.csv {build.framework} {build.version} {build.variant}",
        build.cuda_text,
    )


def driver_cuda_findings(node: _Node) -> _Outcome:
    """driver-too-old / cuda-minor-version-compat per CUDA framework, forward compat, EOL."""
    name = "driver-cuda"
    if node.env.tegra:
        return _skip(name, "Jetson/Tegra: the CUDA driver comes with JetPack, not a driver branch")
    if node.driver is None or node.driver_evidence is None:
        return _skip(name, "driver version unknown: no kernel module, NVML or nvidia-smi read")
    driver, driver_proof = node.driver, node.driver_evidence
    frameworks = _cuda_frameworks(node.env)
    extra = [
        *_forward_compat(node, driver, driver_proof),
        *_ends_of_life(node, driver, driver_proof),
        *_drivers_differ(node),
    ]
    if not frameworks:
        why = _no_cuda_framework_reason(node.env)
        if extra:
            return _outcome(name, extra, f"driver {node.driver}; {why}")
        return _skip(name, why)
    verdicts = [_framework_driver(node, framework, driver_proof) for framework in frameworks]
    findings = [*extra, *(v.finding for v in verdicts if v.finding)]
    detail = "; ".join(v.line for v in verdicts)
    if not any(v.decided for v in verdicts) and not findings:
        return _skip(name, detail)
    return _outcome(name, findings, detail)


def _no_cuda_framework_reason(env: NodeEnvironment) -> str:
    if not env.frameworks:
        return "torch, jax and tensorflow are not installed"
    unknown = [f"{f.name} {f.version}" for f in env.frameworks if f.without_cuda is None]
    if unknown:
        return f"the CUDA of {', '.join(unknown)} is not in its metadata (source build?)"
    return "every framework installed is a build without CUDA"


def _framework_driver(node: _Node, framework: FrameworkInstall, driver_proof: Evidence) -> _Verdict:
    driver = str(driver_proof.value)
    label = f"{framework.name} {framework.version}"
    cuda, cuda_proof = _framework_cuda(framework)
    if cuda is None or cuda_proof is None:
        return _Verdict(None, f"{label}: CUDA version unknown", False)
    answer = driver_supports_cuda(driver, cuda, os=node.os)
    proof = (driver_proof, cuda_proof, _answer_evidence(answer))
    supported = _driver_cuda(node, driver)
    if answer.verdict is CompatVerdict.YES:
        line = f"{label} (CUDA {cuda}): driver {driver} ≥ {answer.toolkit_driver_min}"
        return _Verdict(None, line, True)
    if answer.verdict is CompatVerdict.UNKNOWN:
        # no toolkit row (Windows 13.x): the driver's own CUDA version still decides a "yes"
        if version_at_least(supported, cuda):
            return _Verdict(None, f"{label} (CUDA {cuda}): driver supports CUDA {supported}", True)
        return _Verdict(None, f"{label} (CUDA {cuda}): no catalog facts for it on {node.os}", False)
    if answer.verdict is CompatVerdict.MINOR:
        title = (
            f"{label} uses CUDA {cuda} on driver {driver} (CUDA {supported or '?'}) through "
            f"minor-version compatibility (full support from "
            f"{answer.toolkit_driver_min or 'an unknown driver'})"
        )
        line = f"{label} (CUDA {cuda}): minor-version compatibility"
        return _Verdict(_finding("cuda-minor-version-compat", title, proof), line, True)
    need = answer.toolkit_driver_min or answer.minor_compat_min
    title = (
        f"driver {driver} is too old for {label}: CUDA {cuda} needs ≥ "
        f"{answer.minor_compat_min or need} (minor-version compatibility) or ≥ "
        f"{answer.toolkit_driver_min or need} (its toolkit driver)"
    )
    remedy = (
        f"upgrade the driver to ≥ {need} (CUDA {cuda}'s toolkit driver), or install a "
        f"{framework.name} build for CUDA {supported or 'the driver supports'}"
    )
    finding = _finding("driver-too-old", title, proof, remedy=remedy)
    return _Verdict(finding, f"{label} (CUDA {cuda}): driver {driver} too old", True)


def _driver_cuda(node: _Node, driver: str) -> str | None:
    """The CUDA the driver supports: as NVML / nvidia-smi reported it, else the catalog's."""
    reported = next((g.cuda_driver_version for g in node.gpus if g.cuda_driver_version), None)
    return reported or node.env.smi.cuda_version or max_cuda_for_driver(driver)


def _answer_evidence(answer: CompatAnswer) -> Evidence:
    return Evidence(
        "cuda_driver_minimum",
        answer.toolkit_driver_min or answer.minor_compat_min,
        f"{_CATALOG}:{answer.source_row or 'cuda_driver.csv'}",
        f"toolkit driver {answer.toolkit_driver_min}, minor-version floor "
        f"{answer.minor_compat_min}: {answer.verdict.value}",
    )


def _forward_compat(node: _Node, driver: str, driver_proof: Evidence) -> Iterator[Finding]:
    """A cuda-compat libcuda in use on a consumer GPU (error 804), or older than the kernel
    module (error 803: the compat libcuda must be newer than the driver it runs over)."""
    for compat in (c for c in node.env.cuda_compat if c.in_use):
        proof = Evidence(
            "cuda_compat_libcuda",
            compat.version,
            f"{_PROBE}:{compat.via}",
            f"libcuda.so.{compat.version} in {compat.directory}",
        )
        consumer = [g for g in node.gpus if any(b in g.name.lower() for b in _CONSUMER_BRANDS)]
        if consumer:
            yield _finding(
                "forward-compat-unsupported",
                f"CUDA forward compatibility (libcuda {compat.version}) is in use on "
                f"{_gpus_label(consumer)}: consumer GPUs fail with error 804 'forward "
                "compatibility was attempted on non supported HW'",
                (proof, Evidence("name", consumer[0].name, "devices")),
                device=_device_ref(consumer),
                confidence=Confidence.MEDIUM,  # the job's own environment may differ
            )
        elif version_at_least(compat.version, driver) is False:
            yield _finding(
                "forward-compat-unsupported",
                f"the CUDA forward-compatibility libcuda {compat.version} is older than the "
                f"driver {driver}: CUDA fails with error 803 'system has unsupported "
                "display driver / cuda driver combination'",
                (proof, driver_proof),
                confidence=Confidence.MEDIUM,
            )


# A branch's end of life is a finding from this many months before it: about the time NVIDIA
# gives between a new production branch and the next, i.e. one driver roll-out of a fleet. A
# long-term branch years from its end is no finding (R580 until 2028 is not news on every node).
EOL_NOTICE_MONTHS = 6


def _months_until(this_month: str, end_month: str) -> int:
    """Whole months from one "YYYY-MM" to another (negative once past)."""
    (y0, m0), (y1, m1) = (map(int, month.split("-")) for month in (this_month, end_month))
    return (y1 - y0) * 12 + (m1 - m0)


def _ends_of_life(node: _Node, driver: str, driver_proof: Evidence) -> Iterator[Finding]:
    """The node's driver's end of life; where the GPU readings carry several drivers, each
    one's, named with its GPUs (which one is "the" driver must not decide what is said)."""
    if len(node.gpu_drivers) < 2:
        yield from _branch_end_of_life(driver, driver_proof, node.this_month)
        return
    judged = {group.version for group in node.gpu_drivers}
    if driver not in judged:  # the kernel module, when no GPU reading carries its version
        yield from _branch_end_of_life(driver, driver_proof, node.this_month)
    for group in node.gpu_drivers:
        yield from _branch_end_of_life(
            group.version, group.evidence, node.this_month, carriers=group.carriers
        )


def _drivers_differ(node: _Node) -> Iterator[Finding]:
    if len(node.gpu_drivers) < 2:
        return
    said = "; ".join(f"{group.version} on {group.carriers}" for group in node.gpu_drivers)
    yield _finding(
        "driver-versions-differ",
        f"the GPU readings carry {len(node.gpu_drivers)} driver versions ({said}): "
        "several hosts, or readings from both sides of a driver change",
        tuple(group.evidence for group in node.gpu_drivers),
    )


def _branch_end_of_life(
    driver: str, driver_proof: Evidence, this_month: str | None, *, carriers: str = ""
) -> Iterator[Finding]:
    """The branch's end of life once it is near (``EOL_NOTICE_MONTHS``), said as past once
    ``this_month`` is after its month; without a month, said as a date."""
    branch = driver_branch(driver)
    if branch is None:
        yield from _unlisted_end_of_life(driver, driver_proof, carriers)
        return
    if this_month is not None and _months_until(this_month, branch.end_of_life) > EOL_NOTICE_MONTHS:
        return
    life = (
        f"end of life was {branch.end_of_life}: it gets no security or bug fixes now"
        if this_month is not None and this_month > branch.end_of_life
        else f"end of life is {branch.end_of_life}"
    )
    on = f" (on {carriers})" if carriers else ""
    yield _finding(
        "driver-branch-eol",
        f"driver {driver}{on} is on R{branch.branch}, a {branch.designation} whose {life}",
        (
            driver_proof,
            Evidence("end_of_life", branch.end_of_life, f"{_CATALOG}:{branch.source}"),
        ),
        references=(branch.source,),
    )


def _unlisted_end_of_life(driver: str, driver_proof: Evidence, carriers: str) -> Iterator[Finding]:
    """A branch NVIDIA's R580 edition leaves out of its table, which it says is end of life."""
    retired = retired_unlisted_branch(driver)
    if retired is None:
        return
    on = f" (on {carriers})" if carriers else ""
    listed = ", ".join(f"R{b}" for b in R580_EDITION_SUPPORTED)
    yield _finding(
        "driver-branch-eol",
        f"driver {driver}{on} is on R{retired}, past its end of life: NVIDIA's R580 table of "
        f"supported data-center branches lists {listed}, and every other branch before "
        f"R{R580_EDITION_SUPPORTED[-1]} as end of life (no security or bug fixes)",
        (
            driver_proof,
            Evidence("end_of_life", "past (no month given)", f"{_CATALOG}:{R580_EDITION_SOURCE}"),
        ),
        references=(R580_EDITION_SOURCE,),
    )


# ---------------------------------------------------------------------------------------------
# framework-arch: the builds have code for the GPUs; CPU-only builds on a GPU node
# ---------------------------------------------------------------------------------------------


def framework_arch_findings(node: _Node) -> _Outcome:
    name = "framework-arch"
    findings = list(_cpu_only_builds(node))
    frameworks = _cuda_frameworks(node.env)
    if not frameworks:
        why = _no_cuda_framework_reason(node.env)
        return _outcome(name, findings, why) if findings else _skip(name, why)
    if not node.gpus:
        why = "no GPU list (NVML / nvidia-smi) to check the builds against"
        return _outcome(name, findings, why) if findings else _skip(name, why)
    lines, decided = [], False
    for framework in frameworks:
        build = _build_of(framework)
        if build is None:
            lines.append(f"{framework.name} {framework.version}: build not in the catalog")
            continue
        for model, group in _models(node.gpus).items():
            verdict = _arch_verdict(node, framework, build, model, group)
            lines.append(verdict.line)
            decided = decided or verdict.decided
            findings.extend([verdict.finding] if verdict.finding else [])
    detail = "; ".join(lines)
    if not findings and not decided:
        return _skip(name, detail)
    return _outcome(name, findings, detail)


def _arch_verdict(
    node: _Node,
    framework: FrameworkInstall,
    build: FrameworkBuild,
    model: str,
    group: tuple[DeviceInfo, ...],
) -> _Verdict:
    label = f"{framework.name} {framework.version}"
    arch = gpu_arch_for(model)
    if arch is None:
        return _Verdict(None, f"{label} on {model}: compute capability unknown", False)
    match = build_runs_on(build, arch.compute_capability)
    where = f"{build.framework} {build.version} {build.variant}"
    proof = (
        Evidence("name", model, "devices", f"compute capability {arch.compute_capability}"),
        Evidence(
            f"{framework.name}.archs",
            " ".join(build.sm_archs) or f"SM >= {build.min_compute_capability}",
            f"{_CATALOG}:framework_cuda.csv {where}",
            match.detail,
        ),
    )
    if match.support is ArchSupport.UNKNOWN:
        return _Verdict(None, f"{label} on {model}: {match.detail}", False)
    if match.support is ArchSupport.NONE:
        sure = build.archs_verified and arch.matched_by != "family"
        title = (
            f"{label} has no code for {_gpus_label(group)}, compute capability "
            f"{arch.compute_capability} ({arch.sm}): {match.detail}"
        )
        finding = _finding(
            "gpu-arch-unsupported",
            title,
            proof,
            device=_device_ref(group),
            confidence=Confidence.HIGH if sure else Confidence.MEDIUM,
        )
        return _Verdict(finding, f"{label} on {model}: no code for {arch.sm}", True)
    if match.support is ArchSupport.PTX:
        jit = _ptx_only(node, label, build, group, proof)
        return _Verdict(jit, f"{label} on {model}: runs by PTX JIT ({match.detail})", True)
    return _Verdict(None, f"{label} on {model}: runs ({match.detail})", True)


def _ptx_only(
    node: _Node,
    label: str,
    build: FrameworkBuild,
    group: tuple[DeviceInfo, ...],
    proof: tuple[Evidence, ...],
) -> Finding | None:
    """PTX JIT needs a driver at least as new as the toolkit that wrote the PTX: minor-version
    compatibility does not cover it (CUDA Compatibility guide)."""
    if node.driver is None or node.driver_evidence is None or build.cuda_version is None:
        return None
    answer = driver_supports_cuda(node.driver, build.cuda_version, os=node.os)
    if answer.verdict is not CompatVerdict.MINOR:
        return None
    return _finding(
        "driver-too-old",
        f"{label} runs on {_gpus_label(group)} only by JIT-compiling its CUDA "
        f"{build.cuda_version} PTX, which driver {node.driver} cannot do (needs ≥ "
        f"{answer.toolkit_driver_min}, the toolkit's driver)",
        (*proof, node.driver_evidence, _answer_evidence(answer)),
        device=_device_ref(group),
        confidence=Confidence.MEDIUM,
        remedy=f"upgrade the driver to ≥ {answer.toolkit_driver_min}, or install a build with "
        "cubins for this GPU",
    )


def _cpu_only_builds(node: _Node) -> Iterator[Finding]:
    """A framework without CUDA on a node that has NVIDIA GPUs (on a CPU node it is right).

    torch without CUDA on a GPU node is the classic mistake; a JAX or TensorFlow CPU install
    known only from what is missing (no CUDA plugin) is often a dependency nobody runs on the
    GPU, so it is a line of information."""
    if not node.has_gpu:
        return
    for framework in node.env.frameworks:
        if framework.without_cuda is not True:
            continue
        incidental = framework.inferred and framework.name != "torch"
        yield _finding(
            "cpu-only-build",
            f"{framework.name} {framework.version} is a build without CUDA "
            f"({framework.variant or 'no CUDA'}) on a node with NVIDIA GPUs",
            (
                Evidence(
                    f"{framework.name}.version",
                    framework.version,
                    f"{_PROBE}:importlib.metadata {framework.distribution}",
                    framework.evidence,
                ),
            ),
            severity=Severity.INFO if incidental else None,
            confidence=Confidence.MEDIUM if framework.inferred else Confidence.HIGH,
        )


# ---------------------------------------------------------------------------------------------
# nvml-driver: the kernel module and the user-space libraries are one version
# ---------------------------------------------------------------------------------------------


def _same_release(a: str, b: str) -> bool | None:
    """Equal on the components both state ("570.124" and "570.124.06" agree): NVML prints its
    own version as major.minor only."""
    left, right = parse_version(a), parse_version(b)
    if left is None or right is None:
        return None
    width = min(len(left), len(right))
    return left[:width] == right[:width]


def nvml_driver_findings(node: _Node) -> _Outcome:
    name = "nvml-driver"
    env, smi = node.env, node.env.smi
    kernel, library = env.kernel_module_version, env.library_version or smi.nvml_library_version
    kernel_proof = Evidence(
        "kernel_module_version", kernel, f"{_PROBE}:{env.kernel_module_source or 'kernel'}"
    )
    library_proof = Evidence(
        "library_version", library, f"{_PROBE}:{env.library_version_source or 'nvidia-smi'}"
    )
    smi_proof = Evidence(
        "nvidia-smi", smi.returncode, f"{_PROBE}:nvidia-smi", smi.message or smi.failure or ""
    )
    differs = kernel and library and _same_release(kernel, library) is False
    if smi.failure == "version-mismatch" or differs:
        title = (
            f"kernel module {kernel or '?'} and user-space driver library {library or '?'} are "
            "different versions"
            + (": nvidia-smi says 'Driver/library version mismatch'" if smi.message else "")
        )
        finding = _finding("nvml-driver-mismatch", title, (kernel_proof, library_proof, smi_proof))
        return _outcome(name, (finding,), title)
    if smi.failure == "driver-not-loaded" and kernel is None:
        title = f"the NVIDIA kernel module is not loaded: {smi.message or 'nvidia-smi failed'}"
        return _outcome(name, (_finding("driver-not-loaded", title, (smi_proof,)),), title)
    if smi.failure == "gpu-lost":
        return _gpu_lost(name, smi.message, smi.returncode, smi_proof)
    if kernel and library:
        return _outcome(name, (), f"kernel module {kernel} = user-space library {library}")
    if smi.failure:
        return _Outcome(
            Check(name, CheckStatus.WARN, f"nvidia-smi failed ({smi.failure}): {smi.message}")
        )
    if smi.returncode == 0:
        return _outcome(name, (), f"nvidia-smi works (driver {smi.driver_version or '?'})")
    if not smi.present and kernel is None:
        return _skip(name, "no NVIDIA driver here (no kernel module, no nvidia-smi)")
    return _skip(name, "only one of the kernel module and library versions was read")


# nvidia-smi names the GPU it lost by its bus id as NVML prints it ("GPU 0000:3B:00.0", some
# builds with 3 domain digits, pastes sometimes redacted)
_LOST_BUS_ID = re.compile(r"for GPU\s*([0-9A-Fa-f]{3,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")


def _gpu_lost(name: str, message: str | None, returncode: int | None, proof: Evidence) -> _Outcome:
    """nvidia-smi could not reach one GPU. "GPU is lost" (exit 15) is NVML saying so; "Unable to
    determine the device handle … Unknown Error" is the usual face of the same fault, but a
    driver in a bad state prints it too: the kernel log (Xid 79) decides, hence medium."""
    text = message or ""
    bus = _LOST_BUS_ID.search(text)
    certain = returncode == NVML_ERROR_GPU_IS_LOST or "gpu is lost" in text.lower()
    where = bus.group(1) if bus else "?"
    title = f"GPU {where} does not answer: nvidia-smi says '{text.strip() or 'GPU is lost'}'"
    finding = _finding(
        "gpu-lost",
        title,
        (proof,),
        # the spelling the kernel log's gpu-lost uses, so one GPU is one device in the report
        device=DeviceRef(pci_bus_id=normalize_pci_bus_id(bus.group(1))) if bus else None,
        confidence=Confidence.HIGH if certain else Confidence.MEDIUM,
    )
    return _outcome(name, (finding,), title)


# ---------------------------------------------------------------------------------------------
# fabric-manager: NVSwitch systems need FM at the driver's version
# ---------------------------------------------------------------------------------------------


def _nvswitch_board_gpus(gpus: Sequence[DeviceInfo]) -> list[DeviceInfo]:
    out = []
    for gpu in gpus:
        spec = gpu_by_smi_name(gpu.name)
        arch = gpu_arch_for(gpu.name)
        module = spec is not None and spec.variant.upper().startswith(("SXM", "HGX"))
        capability = parse_version(arch.compute_capability) if arch else None
        if module and capability and capability[:2] >= _NVSWITCH_MIN_CAPABILITY:
            out.append(gpu)
    return out


# Superchips (GH200, GB200, GB300) sit in NVLink Switch racks (NVL32, NVL72) as well as alone,
# and their fabric is managed from the switch trays: only the GPUs' own fabric state (nvidia-smi
# -q "Fabric", NVML) tells. A GPU the capture does not name tells nothing either.
_UNTOLD_SYSTEM = (
    "cannot tell whether this is an NVSwitch system (superchips' NVLink domain shows in the "
    "GPUs' fabric state, which this capture does not report; unnamed GPUs say nothing)"
)


def _all_named_boards(gpus: Sequence[DeviceInfo]) -> bool:
    """Every GPU named, none a superchip (the catalog's variant, or the name where the catalog
    lacks it)."""
    for gpu in gpus:
        if not gpu.name:
            return False
        spec = gpu_by_smi_name(gpu.name)
        if SUPERCHIP_NAME.search(gpu.name) or (
            spec and spec.variant.lower().startswith("superchip")
        ):
            return False
    return True


def fabric_manager_findings(node: _Node) -> _Outcome:
    name = "fabric-manager"
    fm = node.env.fabric_manager
    fabric = [s for s in node.samples if s.fabric_state and s.fabric_state != _FABRIC_NO_FABRIC]
    board = _nvswitch_board_gpus(node.gpus)
    switches = fm.nvswitch_count or 0
    if fabric:
        return _by_fabric_state(node, fabric)
    if switches == 0 and len(board) < _NVSWITCH_BOARD_GPUS:
        if fm.nvswitch_count == 0 or (node.gpus and not board and _all_named_boards(node.gpus)):
            return _outcome(name, (), "not an NVSwitch system (no NVSwitch, no SXM board GPUs)")
        return _skip(name, _UNTOLD_SYSTEM)
    why = (
        f"{switches} NVSwitch device(s) in /proc/driver/nvidia-nvswitch/devices"
        if switches
        else f"{len(board)} SXM GPUs of an 8-GPU NVSwitch board ({board[0].name})"
    )
    return _by_service(node, why, Confidence.HIGH if switches else Confidence.MEDIUM)


def _service_evidence(node: _Node) -> list[Evidence]:
    fm = node.env.fabric_manager
    proof = [
        Evidence(
            "nvidia-fabricmanager",
            fm.service_state,
            f"{_PROBE}:systemctl is-active nvidia-fabricmanager",
        )
    ]
    if fm.version:
        proof.append(
            Evidence("fabric_manager_version", fm.version, f"{_PROBE}:nv-fabricmanager --version")
        )
    return proof


def _by_fabric_state(node: _Node, fabric: Sequence[DeviceSample]) -> _Outcome:
    """Hopper and newer report their fabric registration: "completed" means FM (on this host,
    or on the hypervisor for a VM) set the fabric up."""
    name = "fabric-manager"
    fm = node.env.fabric_manager
    pending = [
        s
        for s in fabric
        if s.fabric_state != _FABRIC_OK_STATE or (s.fabric_status or "success").lower() != "success"
    ]
    proof = [
        Evidence(
            "fabric_state",
            s.fabric_state,
            "devices",
            f"GPU {s.info.index}: status {s.fabric_status or '?'}",
        )
        for s in (pending or fabric)[:8]
    ]
    if pending:
        first = pending[0]
        title = (
            f"{len(pending)} of {len(fabric)} GPUs are not registered with the NVLink fabric "
            f"(GPU {first.info.index}: state '{first.fabric_state}', status "
            f"'{first.fabric_status or '?'}'): Fabric Manager is not running or failed"
        )
        finding = _finding("fabric-manager-down", title, [*proof, *_service_evidence(node)])
        return _outcome(name, (finding,), title)
    if fm.service_state not in (None, "active"):
        title = (
            f"the GPUs are registered with the NVLink fabric, but nvidia-fabricmanager is "
            f"'{fm.service_state}': a GPU reset or a new partition will not register again"
        )
        finding = _finding(
            "fabric-manager-down",
            title,
            [*proof, *_service_evidence(node)],
            severity=Severity.WARNING,
            confidence=Confidence.MEDIUM,
        )
        return _outcome(name, (finding,), title)
    return _outcome(name, (), f"all {len(fabric)} fabric GPUs registered (state completed)")


def _by_service(node: _Node, why: str, confidence: Confidence) -> _Outcome:
    name = "fabric-manager"
    fm = node.env.fabric_manager
    proof = [Evidence("nvswitch_system", True, _PROBE, why), *_service_evidence(node)]
    if node.driver_evidence is not None:
        proof.append(node.driver_evidence)
    if fm.service_state is None:
        return _skip(name, f"{why}, but the service state cannot be read here (no systemd?)")
    other_version = bool(fm.version and node.driver and fm.version != node.driver)
    version_note = (
        f"Fabric Manager {fm.version} is not the driver's version {node.driver} (FM refuses "
        "to start at another version)"
    )
    if fm.service_state != "active":
        title = f"nvidia-fabricmanager is '{fm.service_state}' on an NVSwitch system ({why})"
        title += f": {version_note}" if other_version else ""
        finding = _finding("fabric-manager-down", title, proof, confidence=confidence)
        return _outcome(name, (finding,), title)
    if other_version:
        title = f"{version_note}: the running one will fail on its next start"
        finding = _finding("fabric-manager-down", title, proof, confidence=Confidence.MEDIUM)
        return _outcome(name, (finding,), title)
    return _outcome(name, (), f"nvidia-fabricmanager active ({fm.version or 'version ?'}); {why}")


# ---------------------------------------------------------------------------------------------
# container: the NVIDIA runtime's settings that reached the container
# ---------------------------------------------------------------------------------------------

_NEEDED_CAPABILITIES = {"compute": Severity.CRITICAL, "utility": Severity.WARNING}
_NO_GPU_VALUES = ("void", "none", "")


def _env_value(name: str, value: str | None) -> str:
    """An environment variable as a shell would show it: unset is not the word "None"."""
    return f"{name} unset" if value is None else f"{name}={value!r}"


def container_findings(node: _Node) -> _Outcome:
    name = "container"
    ctx = node.env.container
    if ctx.in_container is None:
        return _skip(name, "cannot tell whether this runs in a container")
    if not ctx.in_container:
        return _outcome(name, (), "not in a container")
    findings = [*_missing_capabilities(node), *_no_gpu_requested(node)]
    detail = (
        f"{ctx.kind or 'container'}: "
        f"{_env_value('NVIDIA_VISIBLE_DEVICES', ctx.nvidia_visible_devices)}, "
        f"{_env_value('NVIDIA_DRIVER_CAPABILITIES', ctx.nvidia_driver_capabilities)}, device nodes "
        f"{', '.join(ctx.device_nodes) if ctx.device_nodes else 'none'}"
    )
    outcome = _outcome(name, findings, detail)
    hidden = ctx.cuda_visible_devices is not None and ctx.cuda_visible_devices.strip() in ("", "-1")
    if hidden and outcome.check.status is CheckStatus.PASS:
        note = f"{detail}; CUDA_VISIBLE_DEVICES={ctx.cuda_visible_devices!r} hides every GPU"
        return _Outcome(Check(name, CheckStatus.WARN, note), outcome.findings)
    return outcome


def _env_evidence(variable: str, value: str | None) -> Evidence:
    return Evidence(f"env:{variable}", value, f"{_PROBE}:environment")


def _missing_capabilities(node: _Node) -> Iterator[Finding]:
    value = node.env.container.nvidia_driver_capabilities
    if value is None or not value.strip():
        return  # unset: the runtime's default (utility,compute with --gpus / CDI)
    granted = {part.strip().lower() for part in value.split(",")}
    if "all" in granted:
        return
    missing = [cap for cap in _NEEDED_CAPABILITIES if cap not in granted]
    if not missing:
        return
    severity = max((_NEEDED_CAPABILITIES[c] for c in missing), key=lambda s: s.rank)
    yield _finding(
        "container-driver-capabilities",
        f"NVIDIA_DRIVER_CAPABILITIES={value!r} lacks {' and '.join(missing)}: the runtime "
        + (
            "mounts no libcuda, so CUDA finds no driver"
            if "compute" in missing
            else "mounts no nvidia-smi / NVML"
        ),
        (_env_evidence("NVIDIA_DRIVER_CAPABILITIES", value),),
        severity=severity,
    )


def _no_gpu_requested(node: _Node) -> Iterator[Finding]:
    ctx = node.env.container
    value = ctx.nvidia_visible_devices
    if value is None or value.strip().lower() not in _NO_GPU_VALUES:
        return
    gpu_nodes = [n for n in ctx.device_nodes or () if n.removeprefix("nvidia").isdigit()]
    if gpu_nodes or ctx.device_nodes is None:
        return  # the GPUs are there anyway (privileged, CDI): the variable did not matter
    yield _finding(
        "container-driver-capabilities",
        f"NVIDIA_VISIBLE_DEVICES={value!r}: the NVIDIA runtime was told to give this container "
        "no GPU, and no /dev/nvidiaN device is present",
        (
            _env_evidence("NVIDIA_VISIBLE_DEVICES", value),
            Evidence("device_nodes", ", ".join(ctx.device_nodes or ()) or None, f"{_PROBE}:/dev"),
        ),
        severity=Severity.WARNING,
    )


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------

_RULES = (
    driver_cuda_findings,
    framework_arch_findings,
    nvml_driver_findings,
    fabric_manager_findings,
    container_findings,
)


def evaluate_versions(
    env: NodeEnvironment,
    devices: Sequence[DeviceInfo],
    samples: Sequence[DeviceSample] = (),
    *,
    this_month: str | None = None,
) -> tuple[tuple[Check, ...], tuple[Finding, ...]]:
    """Every version check (driver-cuda, framework-arch, nvml-driver, fabric-manager, container)
    and the findings behind them. ``samples`` add what only a reading has (fabric state);
    ``this_month`` ("YYYY-MM", the run's) lets a branch's end of life be said as past."""
    node = _node(env, devices, samples, this_month)
    outcomes = [rule(node) for rule in _RULES]
    return (
        tuple(o.check for o in outcomes),
        tuple(f for o in outcomes for f in o.findings),
    )


def version_findings(
    env: NodeEnvironment,
    devices: Sequence[DeviceInfo],
    samples: Sequence[DeviceSample] = (),
) -> tuple[Finding, ...]:
    return evaluate_versions(env, devices, samples)[1]


def version_checks(
    env: NodeEnvironment,
    devices: Sequence[DeviceInfo],
    samples: Sequence[DeviceSample] = (),
) -> tuple[Check, ...]:
    return evaluate_versions(env, devices, samples)[0]
