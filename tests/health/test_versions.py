"""The version rules over node environments built from real facts: devices parsed from real
nvidia-smi captures, versions and texts from real hosts (tests/data/environment/SOURCES.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.versions import (
    _branch_end_of_life,
    evaluate_versions,
    version_checks,
    version_findings,
)
from gpuwarden.telemetry.smi.detect import parse_smi_output
from gpuwarden.types.environment import (
    ContainerContext,
    CudaCompatLibrary,
    FabricManagerState,
    FrameworkInstall,
    NodeEnvironment,
    SmiStatus,
)
from gpuwarden.types.health import Check, CheckStatus, Confidence, Evidence, Finding, Severity
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample

CHECK_NAMES = ("driver-cuda", "framework-arch", "nvml-driver", "fabric-manager", "container")


def _capture(fixtures: Path, name: str) -> tuple[DeviceSample, ...]:
    path = fixtures / "nvidia-smi" / name
    return parse_smi_output(path.read_text(encoding="utf-8"), str(path), 0.0)[-1].samples


def _infos(samples: tuple[DeviceSample, ...]) -> tuple[DeviceInfo, ...]:
    return tuple(s.info for s in samples)


def _smi_ok(samples: tuple[DeviceSample, ...]) -> SmiStatus:
    info = samples[0].info
    return SmiStatus(
        present=True,
        returncode=0,
        gpu_count=len(samples),
        smi_version=info.driver_version,
        driver_version=info.driver_version,
        cuda_version=info.cuda_driver_version,
    )


def _torch(version: str, runtime: str | None = None) -> FrameworkInstall:
    """torch as the probe reports it: the local tag, or the PyPI wheel's runtime dependency."""
    public, _, tag = version.partition("+")
    if tag.startswith("cu"):
        cuda = f"{tag[2:-1]}.{tag[-1]}"
        return FrameworkInstall("torch", "torch", version, tag, False, cuda, None, f"+{tag}")
    if tag == "cpu":
        return FrameworkInstall("torch", "torch", version, "cpu", True, None, None, "+cpu")
    assert runtime is not None
    major, minor = runtime.split(".")[:2]
    return FrameworkInstall(
        "torch", "torch", public, f"cu{major}{minor}", False, f"{major}.{minor}",
        f"nvidia-cuda-runtime-cu{major} {runtime}", "requires nvidia-cuda-runtime",
    )  # fmt: skip


def _env(
    samples: tuple[DeviceSample, ...] = (),
    *,
    kernel: str | None = None,
    frameworks: tuple[FrameworkInstall, ...] = (),
    **changes: object,
) -> NodeEnvironment:
    env = NodeEnvironment(
        platform="linux",
        machine="x86_64",
        kernel_module_version=kernel,
        kernel_module_source="/proc/driver/nvidia/version" if kernel else None,
        smi=_smi_ok(samples) if samples else SmiStatus(present=False),
        frameworks=frameworks,
        container=ContainerContext(in_container=False),
    )
    return replace(env, **changes)  # type: ignore[arg-type]


def _above_info(findings: tuple[Finding, ...]) -> list[Finding]:
    return [f for f in findings if f.severity is not Severity.INFO]


def _besides_end_of_life(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """The findings a test is about: an unlisted branch before R580 (550, 510, 565 here) is also
    past its end of life (``driver-branch-eol``, info), which its own tests check."""
    return tuple(f for f in findings if f.code != "driver-branch-eol")


def _check(
    env: NodeEnvironment,
    devices: tuple[DeviceInfo, ...],
    name: str,
    samples: tuple[DeviceSample, ...] = (),
) -> Check:
    return next(c for c in version_checks(env, devices, samples) if c.name == name)


H100 = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.idle.q.txt"
H100_MIG = "linux-x86_64__nvidia-h100-mig__590.48.01.idle.q.txt"
RTX2080S = "linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04.idle.q.txt"
RTX4080S = "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.idle.q.txt"
A100 = "netdata__a100-sxm4-mig.xml"  # driver 510.47.03 (CUDA 11.6)
P100 = "netdata__tesla-p100.xml"  # driver 510.47.03
RTX3060 = "netdata__rtx-3060.xml"  # driver 515.65.01 (CUDA 11.7)

# Builds each captured host runs: its driver is the toolkit's or newer, the wheel has its sm.
CLEAN = [
    (H100, _torch("2.6.0", "12.4.127")),
    (H100_MIG, _torch("2.9.0+cu128")),
    (RTX2080S, _torch("2.9.0+cu130")),
    (RTX4080S, _torch("2.5.1+cu124")),
    (A100, _torch("1.13.1+cu116")),
    (P100, _torch("1.13.1+cu116")),
    (RTX3060, _torch("1.13.1+cu117")),
]


@pytest.mark.parametrize(("capture", "torch"), CLEAN, ids=[c for c, _ in CLEAN])
def test_clean_captured_hosts_give_nothing_above_info(
    fixtures: Path, capture: str, torch: FrameworkInstall
) -> None:
    samples = _capture(fixtures, capture)
    env = _env(samples, frameworks=(torch,))
    checks, findings = evaluate_versions(env, _infos(samples), samples)
    assert _above_info(findings) == []
    assert [c.name for c in checks] == list(CHECK_NAMES)
    by_name = {c.name: c for c in checks}
    assert by_name["driver-cuda"].status is CheckStatus.PASS
    assert by_name["framework-arch"].status is CheckStatus.PASS
    assert by_name["nvml-driver"].status is CheckStatus.PASS
    assert all(c.status is not CheckStatus.FAIL for c in checks)


def test_h100_with_the_pypi_wheel_reads_its_runtime_and_fabric(fixtures: Path) -> None:
    samples = _capture(fixtures, H100)
    env = _env(samples, frameworks=(_torch("2.6.0", "12.4.127"),))
    checks, findings = evaluate_versions(env, _infos(samples), samples)
    by_name = {c.name: c for c in checks}
    assert "driver 590.48.01 ≥ 550.54.14" in by_name["driver-cuda"].detail
    assert "sm_90 cubins run on 9.0" in by_name["framework-arch"].detail
    # the single-GPU VM registered with the fabric: FM runs elsewhere (the host), not a problem
    assert by_name["fabric-manager"].status is CheckStatus.PASS
    assert "registered" in by_name["fabric-manager"].detail
    assert findings == ()


# --- driver-too-old / minor-version compatibility


def test_driver_510_is_too_old_for_a_cuda_12_4_wheel(fixtures: Path) -> None:
    samples = _capture(fixtures, P100)
    env = _env(samples, frameworks=(_torch("2.6.0", "12.4.127"),))
    findings = version_findings(env, _infos(samples), samples)
    (finding,) = [f for f in findings if f.code == "driver-too-old"]
    assert finding.severity is Severity.CRITICAL
    assert "driver 510.47.03" in finding.title
    assert "525.60.13" in finding.title and "550.54.14" in finding.title
    assert "CUDA 11.6" in finding.remedy  # what the driver supports
    sources = {e.source for e in finding.evidence}
    assert "catalog:cuda_driver.csv: 12.4.0 (12.4 GA)" in sources
    assert _check(env, _infos(samples), "driver-cuda").status is CheckStatus.FAIL


def test_minor_version_compatibility_is_an_info_line() -> None:
    # 550.90.07: the module version of a real host (tests/data/environment); torch 2.7 cu128
    env = _env(kernel="550.90.07", frameworks=(_torch("2.7.1+cu128"),))
    (finding,) = _besides_end_of_life(version_findings(env, ()))
    assert (finding.code, finding.severity) == ("cuda-minor-version-compat", Severity.INFO)
    assert "CUDA 12.4" in finding.title and "570.26" in finding.title
    assert _check(env, (), "driver-cuda").status is CheckStatus.PASS


def test_cuda_13_wheels_need_r580(fixtures: Path) -> None:
    samples = _capture(fixtures, RTX3060)  # 515.65.01
    env = _env(samples, frameworks=(_torch("2.11.0+cu130"),))
    codes = [f.code for f in _besides_end_of_life(version_findings(env, _infos(samples)))]
    assert codes == ["driver-too-old"]


def test_driver_branch_end_of_life_is_info() -> None:
    env = _env(kernel="535.104.05", frameworks=(_torch("2.5.1+cu121"),))
    findings = version_findings(env, ())
    eol = [f for f in findings if f.code == "driver-branch-eol"]
    assert len(eol) == 1
    assert eol[0].severity is Severity.INFO
    assert "2026-06" in eol[0].title
    assert _above_info(findings) == []


@pytest.mark.parametrize(
    ("this_month", "said"),
    [("2026-08", "end of life is 2026-08"), ("2026-09", "end of life was 2026-08: it gets no")],
)
def test_a_branch_past_its_end_of_life_is_said_to_be_past(this_month: str, said: str) -> None:
    """R610 (a new feature branch) ended in 2026-08: a capture read in 2026-09 or later is on
    an unsupported branch, said so (still info: the driver works), whatever its own date."""
    proof = Evidence("driver", "610.57.04", "nvidia-smi")
    [finding] = _branch_end_of_life("610.57.04", proof, this_month)
    assert said in finding.title and finding.severity is Severity.INFO


@pytest.mark.parametrize(
    ("this_month", "said"),
    [
        (None, "end of life is 2026-06"),
        ("2026-06", "end of life is 2026-06"),
        ("2026-07", "end of life was 2026-06: it gets no"),
    ],
)
def test_the_month_of_the_run_is_the_callers(this_month: str | None, said: str) -> None:
    """The rules read no clock: the caller (doctor, at its run) says which month it is; without
    one, the end of life is said without past or future."""
    env = _env(kernel="535.104.05", frameworks=(_torch("2.5.1+cu121"),))
    _, findings = evaluate_versions(env, (), this_month=this_month)
    [eol] = [f for f in findings if f.code == "driver-branch-eol"]
    assert said in eol.title


@pytest.mark.parametrize(
    ("driver", "branch"),
    [("550.54.15", 550), ("470.141.10", 470), ("575.51.03", 575), ("510.47.03", 510)],
)
def test_a_branch_the_r580_table_leaves_out_is_past_its_end_of_life(
    driver: str, branch: int
) -> None:
    """NVIDIA's R580 edition lists R535, R570 and R580 and calls every other branch before
    R580 end of life, with no month: an R470 or R550 node is told so (info: the driver works)
    in any month, and the table is the reference."""
    proof = Evidence("driver", driver, "nvidia-smi")
    for this_month in (None, "2026-11"):
        [finding] = _branch_end_of_life(driver, proof, this_month)
        assert finding.severity is Severity.INFO
        assert f"R{branch}, past its end of life" in finding.title
        assert "R535, R570, R580" in finding.title
        assert "supported-drivers-and-cuda-toolkit-versions" in finding.references[0]


@pytest.mark.parametrize("driver", ["590.44.01", "580.95.05", "535.104.05", "not-a-driver"])
def test_listed_and_newer_branches_are_not_called_retired(driver: str) -> None:
    """R580 and newer branches (R590 is not in the R580 table: it came later) and listed ones
    keep their own months; an unreadable version says nothing."""
    proof = Evidence("driver", driver, "nvidia-smi")
    said = [f.title for f in _branch_end_of_life(driver, proof, "2025-01")]
    assert not any("past its end of life" in title for title in said)


# --- gpu-arch-unsupported / cpu-only-build


def _error_example(fixtures: Path, example_id: str) -> dict[str, str]:
    for line in (fixtures / "errors" / "examples.jsonl").read_text().splitlines():
        example: dict[str, str] = json.loads(line)
        if example["id"] == example_id:
            return example
    raise AssertionError(example_id)


def test_rtx_5060_ti_on_a_cu126_wheel(fixtures: Path) -> None:
    # the GPU and the arch list of a real report (errors/examples.jsonl): no sm_120 code
    text = _error_example(fixtures, "ver-sm120-wyoming-xtts-1")["error_text"]
    assert "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90" in text
    gpu = DeviceInfo(
        index=0, uuid="GPU-0", name="NVIDIA GeForce RTX 5060 Ti", driver_version="570.133.07"
    )
    env = _env(kernel="570.133.07", frameworks=(_torch("2.6.0+cu126"),))
    findings = version_findings(env, (gpu,))
    (finding,) = [f for f in findings if f.code == "gpu-arch-unsupported"]
    assert finding.severity is Severity.CRITICAL
    assert finding.confidence is Confidence.MEDIUM  # the 2.6 arch list is marked unverified
    assert "12.0 (sm_120)" in finding.title
    assert finding.device is not None and finding.device.index == 0


def test_h100s_on_torch_1_13_are_one_finding(fixtures: Path) -> None:
    base = _capture(fixtures, H100)[0].info
    gpus = tuple(replace(base, index=i, uuid=f"GPU-{i}") for i in range(8))
    env = _env(kernel="590.48.01", frameworks=(_torch("1.13.1+cu116"),))
    findings = [f for f in version_findings(env, gpus) if f.code == "gpu-arch-unsupported"]
    assert len(findings) == 1
    assert findings[0].confidence is Confidence.HIGH
    assert "8× NVIDIA H100 80GB HBM3 (GPUs 0, 1, 2, 3, 4, 5, 6, 7)" in findings[0].title
    assert findings[0].device is not None and findings[0].device.index is None


def test_a_gpu_the_catalog_does_not_know_is_skipped_not_flagged() -> None:
    gpu = DeviceInfo(index=0, uuid="GPU-0", name="NVIDIA H20")
    env = _env(kernel="570.133.07", frameworks=(_torch("2.6.0+cu126"),))
    check = _check(env, (gpu,), "framework-arch")
    assert check.status is CheckStatus.SKIP
    assert "compute capability unknown" in check.detail


def test_cpu_wheel_on_a_gpu_node(fixtures: Path) -> None:
    samples = _capture(fixtures, H100)
    env = _env(samples, frameworks=(_torch("2.13.0+cpu"),))
    (finding,) = version_findings(env, _infos(samples), samples)
    assert (finding.code, finding.severity, finding.confidence) == (
        "cpu-only-build",
        Severity.WARNING,
        Confidence.HIGH,
    )
    # on a node without NVIDIA GPUs a CPU build is right
    assert version_findings(_env(frameworks=(_torch("2.13.0+cpu"),)), ()) == ()


def test_windows_cuda_13_is_judged_by_the_drivers_own_cuda(fixtures: Path) -> None:
    # the release notes give no Windows driver for 13.x; the driver says it runs CUDA 13.1
    samples = _capture(fixtures, "windows-x86_64__nvidia-geforce-rtx-2080-super__591.86.idle.q.txt")
    env = _env(samples, frameworks=(_torch("2.9.0+cu130"),), platform="win32")
    check = _check(env, _infos(samples), "driver-cuda", samples)
    assert check.status is CheckStatus.PASS
    assert "driver supports CUDA 13.1" in check.detail
    newer = _env(samples, frameworks=(_torch("2.12.0+cu132"),), platform="win32")
    assert _check(newer, _infos(samples), "driver-cuda", samples).status is CheckStatus.SKIP


def test_cpu_wheel_where_only_the_kernel_module_shows_a_gpu() -> None:
    env = _env(kernel="565.57.01", frameworks=(_torch("2.13.0+cpu"),))
    assert [f.code for f in _besides_end_of_life(version_findings(env, ()))] == ["cpu-only-build"]
    assert _check(env, (), "framework-arch").status is CheckStatus.WARN


def test_a_jax_without_its_cuda_plugin_is_a_line_of_information(fixtures: Path) -> None:
    samples = _capture(fixtures, H100)
    jax = FrameworkInstall(
        "jax", "jax", "0.7.2", "cpu", True, None, None, "no plugin", inferred=True
    )
    (finding,) = version_findings(_env(samples, frameworks=(jax,)), _infos(samples), samples)
    assert (finding.code, finding.severity) == ("cpu-only-build", Severity.INFO)


def test_windows_pypi_torch_is_cpu_with_medium_confidence(fixtures: Path) -> None:
    samples = _capture(fixtures, "windows-x86_64__nvidia-geforce-rtx-2080-super__591.86.idle.q.txt")
    torch = FrameworkInstall(
        "torch", "torch", "2.5.1", "cpu", True, None, None, "PyPI win32 wheel", inferred=True
    )
    env = _env(samples, frameworks=(torch,), platform="win32")
    (finding,) = version_findings(env, _infos(samples), samples)
    assert (finding.code, finding.confidence) == ("cpu-only-build", Confidence.MEDIUM)


# --- nvml-driver


def test_truenas_library_580_178_over_module_580_173_02(fixtures: Path) -> None:
    smi = SmiStatus(
        present=True,
        returncode=18,
        failure="version-mismatch",
        message="Failed to initialize NVML: Driver/library version mismatch",
        nvml_library_version="580.178",
    )
    env = _env(kernel="580.173.02", smi=smi)
    (finding,) = [f for f in version_findings(env, ()) if f.code == "nvml-driver-mismatch"]
    assert finding.severity is Severity.CRITICAL
    assert "580.173.02" in finding.title and "580.178" in finding.title
    assert _check(env, (), "nvml-driver").codes == ("nvml-driver-mismatch",)


def test_mismatch_from_versions_alone() -> None:
    # oddmario/NVIDIA-Ubuntu-Driver-Guide#4: packages at 550.107.02, module still 550.90.07
    env = _env(kernel="550.90.07", library_version="550.107.02", library_version_source="lib")
    codes = [f.code for f in _besides_end_of_life(version_findings(env, ()))]
    assert codes == ["nvml-driver-mismatch"]
    # NVML prints major.minor only: 570.124 agrees with 570.124.06 (R570's end of life is a
    # finding of its own, tests/catalog/test_driver_branches.py)
    same = _env(kernel="570.124.06", library_version="570.124")
    assert "nvml-driver-mismatch" not in [f.code for f in version_findings(same, ())]


def test_driver_not_loaded(fixtures: Path) -> None:
    text = _error_example(fixtures, "hw-smi-failed-kernel-upgrade-gce-18")["error_text"]
    message = text.splitlines()[-1]
    smi = SmiStatus(present=True, returncode=9, failure="driver-not-loaded", message=message)
    (finding,) = version_findings(_env(smi=smi), ())
    assert finding.code == "driver-not-loaded"
    assert "couldn't communicate with the NVIDIA driver" in finding.title


def test_gpu_lost_names_the_bus_and_is_sure_only_when_nvml_says_lost() -> None:
    # dcgm-exporter#604 (tests/data/smi_heldout6): the handle fails with "Unknown Error"
    handle = "Unable to determine the device handle for GPU 0000:BA:00.0: Unknown Error"
    smi = SmiStatus(present=True, returncode=255, failure="gpu-lost", message=handle)
    # the module and library agree: the GPU is lost all the same
    env = _env(kernel="550.54.15", library_version="550.54.15", smi=smi)
    (finding,) = _besides_end_of_life(version_findings(env, ()))
    assert (finding.code, finding.severity) == ("gpu-lost", Severity.CRITICAL)
    assert finding.device is not None and finding.device.pci_bus_id == "0000:ba:00.0"
    assert finding.confidence is Confidence.MEDIUM  # the kernel log (Xid 79) decides
    assert _check(env, (), "nvml-driver").codes == ("gpu-lost",)
    lost = SmiStatus(
        present=True,
        returncode=15,
        failure="gpu-lost",
        message="Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  "
        "Reboot the system to recover this GPU",
    )
    (sure,) = version_findings(_env(smi=lost), ())
    assert sure.confidence is Confidence.HIGH and sure.device is not None
    assert sure.device.pci_bus_id == "0000:3b:00.0"  # as the kernel log spells it


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.builds(
            "Unable to determine the device handle for GPU {}: {}".format,
            st.from_regex(r"[0-9A-Fa-f]{3,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", fullmatch=True),
            st.sampled_from(["Unknown Error", "GPU is lost", ""]),
        ),
    ),
    st.sampled_from([None, 15, 255]),
)
def test_any_lost_gpu_message_gives_one_gpu_lost_finding(
    message: str, returncode: int | None
) -> None:
    smi = SmiStatus(present=True, returncode=returncode, failure="gpu-lost", message=message)
    (finding,) = version_findings(_env(smi=smi), ())
    assert finding.code == "gpu-lost" and finding.severity is Severity.CRITICAL
    if finding.device is not None:
        assert finding.device.pci_bus_id == finding.device.pci_bus_id.lower()


# --- forward compatibility


def _compat(version: str) -> CudaCompatLibrary:
    return CudaCompatLibrary("/usr/local/cuda/compat/lib", version, True, "LD_LIBRARY_PATH")


def test_forward_compat_on_a_geforce_is_804(fixtures: Path) -> None:
    samples = _capture(fixtures, RTX4080S)
    env = _env(samples, kernel="595.71.05", cuda_compat=(_compat("610.43.02"),))
    (finding,) = _above_info(version_findings(env, _infos(samples), samples))
    assert finding.code == "forward-compat-unsupported"
    assert "804" in finding.title


def test_forward_compat_older_than_the_driver_is_803(fixtures: Path) -> None:
    samples = _capture(fixtures, H100)
    env = _env(samples, kernel="590.48.01", cuda_compat=(_compat("535.104.05"),))
    (finding,) = version_findings(env, _infos(samples), samples)
    assert (finding.code, finding.confidence) == ("forward-compat-unsupported", Confidence.MEDIUM)
    assert "803" in finding.title


def test_forward_compat_as_designed_is_fine(fixtures: Path) -> None:
    samples = _capture(fixtures, H100)
    # a CUDA 13.1 compat libcuda (590.44.01) over an R580 data-center driver
    env = _env(
        samples,
        kernel="580.82.07",
        cuda_compat=(_compat("590.44.01"),),
        frameworks=(_torch("2.9.0+cu130"),),
    )
    assert _above_info(version_findings(env, _infos(samples), samples)) == []


# --- fabric manager


def _eight(fixtures: Path, capture: str) -> tuple[DeviceInfo, ...]:
    base = _capture(fixtures, capture)[0].info
    return tuple(replace(base, index=i, uuid=f"GPU-{i}") for i in range(8))


def test_fabric_registration_in_progress_is_fabric_manager_down(fixtures: Path) -> None:
    samples = _capture(fixtures, H100)
    stuck = tuple(replace(s, fabric_state="in-progress") for s in samples)
    env = _env(samples, fabric_manager=FabricManagerState(service_state="inactive"))
    (finding,) = version_findings(env, _infos(samples), stuck)
    assert (finding.code, finding.severity) == ("fabric-manager-down", Severity.CRITICAL)
    assert "in-progress" in finding.title


def test_registered_fabric_but_dead_service_is_a_warning(fixtures: Path) -> None:
    samples = _capture(fixtures, H100)
    env = _env(samples, fabric_manager=FabricManagerState(service_state="failed"))
    (finding,) = version_findings(env, _infos(samples), samples)
    assert (finding.code, finding.severity) == ("fabric-manager-down", Severity.WARNING)


def test_eight_a100_sxm4_behind_nvswitches_without_the_service(fixtures: Path) -> None:
    gpus = _eight(fixtures, A100)
    fm = FabricManagerState(service_state="inactive", nvswitch_count=6)
    env = _env(kernel="510.47.03", fabric_manager=fm)
    (finding,) = _besides_end_of_life(version_findings(env, gpus))
    assert (finding.code, finding.confidence) == ("fabric-manager-down", Confidence.HIGH)
    # no NVSwitch listing (in a container): eight SXM4 GPUs still point to an NVSwitch board
    guessed = _env(kernel="510.47.03", fabric_manager=FabricManagerState(service_state="failed"))
    (finding,) = _besides_end_of_life(version_findings(guessed, gpus))
    assert finding.confidence is Confidence.MEDIUM


def test_fabric_manager_at_another_version_than_the_driver(fixtures: Path) -> None:
    # NVIDIA/gpu-driver-container#735: FM 590.48.01 shipped with driver 580.126.09 (HGX H200)
    gpus = tuple(
        DeviceInfo(index=i, uuid=f"GPU-{i}", name="NVIDIA H200", driver_version="580.126.09")
        for i in range(8)
    )
    fm = FabricManagerState(service_state="failed", version="590.48.01", nvswitch_count=4)
    (finding,) = _above_info(version_findings(_env(kernel="580.126.09", fabric_manager=fm), gpus))
    assert (finding.code, finding.confidence) == ("fabric-manager-down", Confidence.HIGH)
    assert "590.48.01" in finding.title and "580.126.09" in finding.title
    # still running at the old version (the driver was upgraded under it): the next start fails
    running = replace(fm, service_state="active")
    (finding,) = _above_info(
        version_findings(_env(kernel="580.126.09", fabric_manager=running), gpus)
    )
    assert (finding.code, finding.confidence) == ("fabric-manager-down", Confidence.MEDIUM)


def test_no_nvswitch_needed() -> None:
    dgx1 = tuple(
        DeviceInfo(index=i, uuid=f"GPU-{i}", name="Tesla V100-SXM2-16GB") for i in range(8)
    )
    env = _env(kernel="470.256.02", fabric_manager=FabricManagerState(service_state="inactive"))
    check = _check(env, dgx1, "fabric-manager")  # DGX-1: a cube mesh, no NVSwitch
    assert check.status is CheckStatus.PASS
    unknown = _check(_env(), (), "fabric-manager")
    assert unknown.status is CheckStatus.SKIP


# --- container


def _in_container(**values: str | None) -> ContainerContext:
    nodes = values.pop("nodes", "nvidia0,nvidiactl,nvidia-uvm")
    return ContainerContext(
        in_container=True,
        kind="docker",
        nvidia_visible_devices=values.get("visible", "all"),
        nvidia_driver_capabilities=values.get("caps"),
        cuda_visible_devices=values.get("cuda"),
        device_nodes=tuple(nodes.split(",")) if nodes else (),
    )


@pytest.mark.parametrize(
    ("caps", "severity"),
    [
        ("utility", Severity.CRITICAL),
        ("compute", Severity.WARNING),
        ("video,graphics", Severity.CRITICAL),
    ],
)
def test_driver_capabilities_without_compute_or_utility(caps: str, severity: Severity) -> None:
    env = _env(container=_in_container(caps=caps))
    (finding,) = version_findings(env, ())
    assert (finding.code, finding.severity) == ("container-driver-capabilities", severity)


@pytest.mark.parametrize("caps", [None, "", "all", "compute,utility", "compute,video,utility"])
def test_driver_capabilities_that_work(caps: str | None) -> None:
    env = _env(container=_in_container(caps=caps))
    assert version_findings(env, ()) == ()
    assert _check(env, (), "container").status is CheckStatus.PASS


def test_visible_devices_void_without_device_nodes() -> None:
    env = _env(container=_in_container(visible="void", nodes=""))
    (finding,) = version_findings(env, ())
    assert (finding.code, finding.severity) == ("container-driver-capabilities", Severity.WARNING)
    # "none" with the devices there anyway (a privileged container): nothing to say
    assert version_findings(_env(container=_in_container(visible="none")), ()) == ()


def test_an_unset_variable_is_said_unset_not_none() -> None:
    unset = ContainerContext(in_container=True, kind="docker", device_nodes=("nvidia0",))
    detail = _check(_env(container=unset), (), "container").detail
    assert detail.startswith(
        "docker: NVIDIA_VISIBLE_DEVICES unset, NVIDIA_DRIVER_CAPABILITIES unset"
    )
    shown = _check(_env(container=_in_container(caps="compute")), (), "container").detail
    assert "NVIDIA_VISIBLE_DEVICES='all', NVIDIA_DRIVER_CAPABILITIES='compute'" in shown


def test_cuda_visible_devices_hiding_every_gpu_warns_without_a_finding() -> None:
    env = _env(container=_in_container(cuda="-1"))
    check = _check(env, (), "container")
    assert check.status is CheckStatus.WARN
    assert version_findings(env, ()) == ()


# --- what the input cannot decide


def test_nothing_known_skips_every_check() -> None:
    env = NodeEnvironment(platform="linux")
    checks, findings = evaluate_versions(env, ())
    assert findings == ()
    assert {c.name: c.status for c in checks} == {
        "driver-cuda": CheckStatus.SKIP,
        "framework-arch": CheckStatus.SKIP,
        "nvml-driver": CheckStatus.SKIP,
        "fabric-manager": CheckStatus.SKIP,
        "container": CheckStatus.SKIP,
    }


def test_jetson_modules_are_not_driver_branches() -> None:
    env = _env(kernel="35.3.1", tegra=True, frameworks=(_torch("2.5.1+cu124"),))
    check = _check(env, (), "driver-cuda")
    assert check.status is CheckStatus.SKIP
    assert _above_info(version_findings(env, ())) == []


def test_source_builds_are_skipped() -> None:
    ngc = FrameworkInstall(
        "torch", "torch", "2.3.0a0+40ec155e58.nv24.03", None, None, None, None, "no tag"
    )
    env = _env(kernel="550.54.15", frameworks=(ngc,))
    assert "source build" in _check(env, (), "driver-cuda").detail
    assert _besides_end_of_life(version_findings(env, ())) == ()


# --- garbage never raises

_VERSION = st.one_of(st.none(), st.text(max_size=12), st.from_regex(r"\A\d{1,3}(\.\d{1,3}){0,2}\Z"))
_NAMES = st.sampled_from(
    [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA GeForce RTX 5090",
        "Tesla T4",
        "NVIDIA A100-SXM4-80GB",
        "?",
        "",
    ]
)


@st.composite
def _environments(draw: st.DrawFn) -> tuple[NodeEnvironment, tuple[DeviceInfo, ...]]:
    frameworks = tuple(
        FrameworkInstall(
            draw(st.sampled_from(["torch", "jax", "tensorflow"])),
            "dist",
            draw(st.text(max_size=12)),
            draw(st.one_of(st.none(), st.sampled_from(["cu124", "cuda13", "gpu", "cpu", "x"]))),
            draw(st.one_of(st.none(), st.booleans())),
            draw(_VERSION),
            None,
            "",
        )
        for _ in range(draw(st.integers(0, 2)))
    )
    env = NodeEnvironment(
        platform=draw(st.sampled_from(["linux", "win32", "darwin"])),
        kernel_module_version=draw(_VERSION),
        library_version=draw(_VERSION),
        smi=SmiStatus(
            present=draw(st.booleans()),
            returncode=draw(st.one_of(st.none(), st.integers(-1, 255))),
            failure=draw(st.one_of(st.none(), st.sampled_from(["version-mismatch", "other"]))),
            driver_version=draw(_VERSION),
        ),
        frameworks=frameworks,
        cuda_compat=tuple(
            CudaCompatLibrary("/c", v, True, "x")
            for v in draw(st.lists(st.text(max_size=8), max_size=2))
        ),
        fabric_manager=FabricManagerState(
            draw(st.one_of(st.none(), st.text(max_size=8))),
            draw(_VERSION),
            draw(st.one_of(st.none(), st.integers(0, 12))),
        ),
        container=ContainerContext(
            in_container=draw(st.one_of(st.none(), st.booleans())),
            nvidia_visible_devices=draw(st.one_of(st.none(), st.text(max_size=8))),
            nvidia_driver_capabilities=draw(st.one_of(st.none(), st.text(max_size=20))),
            cuda_visible_devices=draw(st.one_of(st.none(), st.text(max_size=4))),
            device_nodes=draw(
                st.one_of(st.none(), st.lists(st.text(max_size=8), max_size=3).map(tuple))
            ),
        ),
    )
    devices = tuple(
        DeviceInfo(index=i, uuid=f"GPU-{i}", name=draw(_NAMES), driver_version=draw(_VERSION))
        for i in range(draw(st.integers(0, 9)))
    )
    return env, devices


@settings(max_examples=150, deadline=None)
@given(_environments())
def test_any_environment_gives_every_check_once(
    case: tuple[NodeEnvironment, tuple[DeviceInfo, ...]],
) -> None:
    env, devices = case
    checks, findings = evaluate_versions(env, devices)
    assert [c.name for c in checks] == list(CHECK_NAMES)
    for check in checks:
        assert check.detail
        assert set(check.codes) <= {f.code for f in findings}
    for finding in findings:
        assert finding.evidence and finding.cause and finding.remedy


@pytest.mark.parametrize(
    ("driver", "this_month", "said"),
    [
        ("580.95.05", "2026-11", None),  # R580 (long-term) ends 2028-06: not news on every node
        ("580.95.05", "2027-12", "end of life is 2028-06"),
        ("535.104.05", "2025-11", None),  # seven months before 2026-06
        ("535.104.05", "2025-12", "end of life is 2026-06"),
        ("535.104.05", "2026-07", "end of life was 2026-06"),
    ],
)
def test_a_branch_end_of_life_is_a_finding_once_it_is_near(
    driver: str, this_month: str, said: str | None
) -> None:
    proof = Evidence("driver", driver, "nvidia-smi")
    findings = list(_branch_end_of_life(driver, proof, this_month))
    assert [f.title for f in findings if said and said in f.title] == [f.title for f in findings]
    assert len(findings) == (said is not None)
