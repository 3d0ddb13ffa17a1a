"""The driver → CUDA → framework chain: real rows of the catalog, checked against NVIDIA's numbers
and against what real nvidia-smi captures printed."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog.compat import (
    build_runs_on,
    compute_capability_of,
    driver_branch,
    driver_supports_cuda,
    first_cuda_for_major,
    framework_build,
    framework_builds,
    gpu_arch_for,
    max_cuda_for_driver,
    parse_version,
    version_at_least,
)
from gpuwarden.telemetry.smi.detect import parse_smi_output
from gpuwarden.types.environment import ArchSupport, CompatVerdict, FrameworkBuild

PACKAGE_DATA = Path(__file__).resolve().parents[2] / "src" / "gpuwarden" / "catalog" / "data"


# --- the package data is the shared catalog


@pytest.mark.parametrize("name", ["cuda_driver.csv", "framework_cuda.csv", "gpu_arch.csv"])
def test_package_data_is_a_copy_of_the_shared_catalog(fixtures: Path, name: str) -> None:
    assert (PACKAGE_DATA / name).read_bytes() == (fixtures / "catalog" / name).read_bytes()


def test_every_gpu_row_has_an_sm_that_is_its_compute_capability(fixtures: Path) -> None:
    with (fixtures / "catalog" / "gpu_arch.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        assert compute_capability_of(row["sm"]) == compute_capability_of(
            row["compute_capability"]
        ), row["gpu"]


# --- driver ↔ CUDA


@pytest.mark.parametrize(
    ("driver", "verdict"),
    [
        ("550.54.15", CompatVerdict.YES),  # ≥ 550.54.14, the 12.4 GA toolkit driver
        ("550.54.14", CompatVerdict.YES),
        ("550.54.13", CompatVerdict.MINOR),
        ("530.30.02", CompatVerdict.MINOR),
        ("525.60.13", CompatVerdict.MINOR),  # the 12.x family floor
        ("525.60.12", CompatVerdict.NO),
        ("470.256.02", CompatVerdict.NO),
        ("590.48.01", CompatVerdict.YES),  # newer drivers run older CUDA
    ],
)
def test_cuda_12_4_needs_550_54_14_or_the_525_60_13_floor(
    driver: str, verdict: CompatVerdict
) -> None:
    answer = driver_supports_cuda(driver, "12.4")
    assert answer.verdict is verdict
    assert answer.toolkit_driver_min == "550.54.14"
    assert answer.minor_compat_min == "525.60.13"
    assert answer.source_row == "cuda_driver.csv: 12.4.0 (12.4 GA)"
    assert answer.supported is (verdict is not CompatVerdict.NO)


def test_minor_version_compatibility_says_its_caveats() -> None:
    answer = driver_supports_cuda("535.104.05", "12.8")
    assert answer.verdict is CompatVerdict.MINOR
    assert answer.toolkit_driver_min == "570.26"
    assert any("PTX" in caveat for caveat in answer.caveats)


def test_an_update_and_a_runtime_wheel_version_pick_their_rows() -> None:
    assert driver_supports_cuda("550.54.14", "12.4.1").verdict is CompatVerdict.MINOR
    assert driver_supports_cuda("550.54.15", "12.4.1").toolkit_driver_min == "550.54.15"
    # nvidia-cuda-runtime-cu12 12.4.127 is a component version: the 12.4 release family
    assert driver_supports_cuda("550.54.14", "12.4.127").verdict is CompatVerdict.YES
    # a release the driver table does not list: its runfile's driver
    assert driver_supports_cuda("545.23.08", "12.3.2").toolkit_driver_min == "545.23.08"


def test_cuda_11_and_13_families() -> None:
    assert driver_supports_cuda("450.80.02", "11.8").verdict is CompatVerdict.MINOR
    assert driver_supports_cuda("450.51.05", "11.0").verdict is CompatVerdict.YES
    assert driver_supports_cuda("418.39", "11.0").verdict is CompatVerdict.NO
    assert driver_supports_cuda("575.57.08", "13.0").verdict is CompatVerdict.NO
    assert driver_supports_cuda("580.65.06", "13.0").verdict is CompatVerdict.YES
    assert driver_supports_cuda("580.82.07", "13.1").verdict is CompatVerdict.MINOR
    # 13.4's Linux toolkit driver is unverified: only the R580 floor is known
    answer = driver_supports_cuda("590.48.01", "13.4")
    assert (answer.verdict, answer.toolkit_driver_min) == (CompatVerdict.MINOR, None)


def test_windows_uses_the_windows_columns() -> None:
    answer = driver_supports_cuda("551.61", "12.4", os="windows")
    assert (answer.verdict, answer.toolkit_driver_min) == (CompatVerdict.YES, "551.61")
    assert driver_supports_cuda("528.33", "12.4", os="windows").verdict is CompatVerdict.MINOR
    # the table lists no Windows driver for 13.x
    assert driver_supports_cuda("591.86", "13.1", os="windows").verdict is CompatVerdict.UNKNOWN


def test_unknown_cuda_and_garbage_are_unknown_never_an_error() -> None:
    assert driver_supports_cuda("550.54.15", "10.2").verdict is CompatVerdict.UNKNOWN
    assert driver_supports_cuda("not a driver", "12.4").verdict is CompatVerdict.UNKNOWN
    assert driver_supports_cuda("550.54.15", "twelve").supported is None


def test_every_toolkit_row_is_supported_by_its_own_driver(fixtures: Path) -> None:
    with (fixtures / "catalog" / "cuda_driver.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    checked = 0
    for row in rows:
        toolkit = row["toolkit_driver_linux_min"].removeprefix(">=")
        if parse_version(toolkit) is None:
            continue
        assert driver_supports_cuda(toolkit, row["cuda_version"]).verdict is CompatVerdict.YES
        checked += 1
    assert checked >= 50


# --- what nvidia-smi prints as "CUDA Version"


def _captured_devices(fixtures: Path) -> list[tuple[str, str | None, str | None]]:
    folder = fixtures / "nvidia-smi"
    files = [*sorted(folder.glob("*.idle.q.txt")), *sorted(folder.glob("netdata__*.xml"))]
    found = []
    for path in files:
        snapshot = parse_smi_output(path.read_text(encoding="utf-8"), str(path), 0.0)[-1]
        info = snapshot.samples[0].info
        found.append((path.name, info.driver_version, info.cuda_driver_version))
    return found


def test_max_cuda_matches_every_captured_nvidia_smi(fixtures: Path) -> None:
    captured = _captured_devices(fixtures)
    assert len(captured) >= 10
    for name, driver, cuda in captured:
        assert driver and cuda, name
        assert max_cuda_for_driver(driver) == cuda, name


def test_max_cuda_per_branch() -> None:
    assert max_cuda_for_driver("535.104.05") == "12.2"
    assert max_cuda_for_driver("535.43.02") == "12.2"  # per branch, not per release
    assert max_cuda_for_driver("565.57.01") == "12.7"  # R565 shipped with no toolkit
    assert max_cuda_for_driver("570.26") == "12.8"
    assert max_cuda_for_driver("440.33") is None  # before the catalog's first row (11.0)
    assert max_cuda_for_driver("") is None


def test_driver_branch_end_of_life() -> None:
    branch = driver_branch("535.104.05")
    assert branch is not None
    assert (branch.end_of_life, branch.designation) == ("2026-06", "long-term support branch")
    assert driver_branch("590.48.01") is None


# --- GPUs


def test_gpu_arch_by_name_and_pci_id_agrees_with_captured_compute_cap(fixtures: Path) -> None:
    seen = 0
    for path in sorted((fixtures / "nvidia-smi").glob("*.idle.query-gpu.csv")):
        lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
        rows = list(csv.reader(lines))
        header = [h.strip() for h in rows[0]]
        for raw in rows[1:]:
            row = dict(zip(header, (c.strip() for c in raw), strict=False))
            by_name = gpu_arch_for(row["name"])
            assert by_name is not None, row["name"]
            assert by_name.compute_capability == row["compute_cap"]
            by_id = gpu_arch_for(row["pci.device_id"])
            assert by_id is None or by_id.compute_capability == row["compute_cap"]
            seen += 1
    assert seen >= 5


@pytest.mark.parametrize(
    ("query", "capability", "matched_by"),
    [
        ("NVIDIA H100 80GB HBM3", "9.0", "name"),
        ("0x233010DE", "9.0", "pci-id"),
        ("2330", "9.0", "pci-id"),
        ("Tesla T4", "7.5", "name"),
        ("NVIDIA GeForce RTX 5090", "12.0", "name"),
        ("NVIDIA GeForce RTX 5060 Ti", "12.0", "name"),
        ("NVIDIA A100-SXM4-80GB", "8.0", "name"),
        ("Tesla P100-PCIE-16GB", "6.0", "gpus.csv"),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", "8.9", "family"),
        ("NVIDIA GH200 480GB", "9.0", "gpus.csv"),
        ("NVIDIA GB10", "12.1", "name"),
    ],
)
def test_gpu_arch_for(query: str, capability: str, matched_by: str) -> None:
    arch = gpu_arch_for(query)
    assert arch is not None
    assert (arch.compute_capability, arch.matched_by) == (capability, matched_by)


def test_unknown_gpus_are_none() -> None:
    assert gpu_arch_for("Quadro RTX 6000") is None  # Turing; not the RTX 6000 Ada
    assert gpu_arch_for("NVIDIA GeForce GTX 1080") is None
    assert gpu_arch_for("") is None
    assert gpu_arch_for("0xFFFF10DE") is None


def test_volta_ends_with_cuda_12() -> None:
    arch = gpu_arch_for("Tesla V100-SXM2-16GB")
    assert arch is not None
    assert (arch.sm, arch.first_cuda, arch.last_cuda) == ("sm_70", "9.0", "12.9")


# --- framework builds


def _torch(version: str, variant: str) -> FrameworkBuild:
    build = framework_build("torch", version, variant)
    assert build is not None, (version, variant)
    return build


def test_torch_2_1_cu121_has_sm_90() -> None:
    build = _torch("2.1.2", "cu121")
    assert "sm_90" in build.sm_archs
    assert "sm_37" not in build.sm_archs  # dropped from CUDA 12 builds
    assert (build.cuda_version, build.driver_floor_linux) == ("12.1", "525.60.13")
    h100 = gpu_arch_for("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    assert build_runs_on(build, h100.compute_capability).support is ArchSupport.CUBIN


def test_rtx_5060_ti_is_not_supported_by_torch_cu126() -> None:
    gpu = gpu_arch_for("NVIDIA GeForce RTX 5060 Ti")
    assert gpu is not None
    match = build_runs_on(_torch("2.7.1", "cu126"), gpu.compute_capability)
    assert (match.support, match.target) == (ArchSupport.NONE, None)
    assert build_runs_on(_torch("2.7.1", "cu128"), "12.0").target == "sm_120"


def test_h100_is_not_supported_by_torch_1_13_cu116() -> None:
    assert build_runs_on(_torch("1.13.1", "cu116"), "9.0").support is ArchSupport.NONE
    assert build_runs_on(_torch("2.0.1", "cu118"), "9.0").support is ArchSupport.CUBIN


def test_binary_compatibility_within_a_major_architecture() -> None:
    cu102 = _torch("1.12.1", "cu102")  # sm_37 sm_50 sm_60 sm_70
    t4 = build_runs_on(cu102, "7.5")
    assert (t4.support, t4.target) == (ArchSupport.CUBIN, "sm_70")  # sm_70 cubins run on 7.5
    assert build_runs_on(cu102, "8.0").support is ArchSupport.NONE  # never across majors
    cu124 = _torch("2.5.1", "cu124")
    assert build_runs_on(cu124, "8.9").target == "sm_86"
    cu128 = _torch("2.8.0", "cu128")
    assert build_runs_on(cu128, "12.1").target == "sm_120"  # GB10 on sm_120 cubins
    assert build_runs_on(cu128, "10.3").target == "sm_100"  # B300 on sm_100 cubins


def test_first_cuda_of_a_major_is_its_first_sm_s() -> None:
    # sm_80 came with CUDA 11.0; the RTX 4090's sm_89 only with 11.8, yet 11.0's cubins run on it
    assert gpu_arch_for("NVIDIA GeForce RTX 4090").first_cuda == "11.8"  # type: ignore[union-attr]
    assert first_cuda_for_major(8) == "11.0"
    assert (first_cuda_for_major(9), first_cuda_for_major(12)) == ("11.8", "12.8")
    assert first_cuda_for_major(3) is None  # Kepler: not in the catalog


def test_ptx_and_arch_specific_targets() -> None:
    cu130 = _torch("2.9.0", "cu130")  # ... sm_120 compute_120
    assert build_runs_on(cu130, "13.0").support is ArchSupport.PTX
    assert build_runs_on(_torch("2.8.0", "cu128"), "13.0").support is ArchSupport.NONE  # no PTX
    specific = replace(cu130, sm_archs=("sm_90a",))
    assert build_runs_on(specific, "9.0").support is ArchSupport.CUBIN
    assert build_runs_on(specific, "10.0").support is ArchSupport.NONE  # 'a': that GPU only


def test_unverified_arch_lists_are_flagged_or_unknown() -> None:
    assert not _torch("2.6.0", "cu126").archs_verified
    assert _torch("2.6.0", "cu126").sm_archs[-1] == "sm_90"
    unknown = _torch("2.15.0", "cu132")
    assert unknown.sm_archs == ()
    assert build_runs_on(unknown, "9.0").support is ArchSupport.UNKNOWN


def test_torch_versions_match_on_major_minor_and_the_local_tag_wins() -> None:
    variants = {b.variant for b in framework_builds("pytorch", "2.5.1+cu124")}
    assert variants == {"cu118", "cu121", "cu124"}
    build = framework_build("torch", "2.7.1+cu126", "cu128")
    assert build is not None
    assert build.variant == "cu126"
    assert framework_build("torch", "2.99.0", "cu124") is None


def test_jax_plugins_take_the_newest_key_release_at_or_below() -> None:
    builds = {b.variant: b for b in framework_builds("jax", "0.7.2")}
    assert builds["cuda13"].version == "0.7.2"
    assert builds["cuda12"].version == "0.7.1"
    split = {b.variant: b for b in framework_builds("jax", "0.11.0")}
    assert split["cuda12"].driver_floor_linux == "525"
    assert split["cuda13"].driver_floor_linux == "580"
    assert split["cuda13"].min_compute_capability == "7.5"
    assert framework_builds("jax", "0.4.20") == ()  # before the first key release listed


def test_jax_cuda13_needs_turing() -> None:
    build = framework_build("jax", "0.12.0", "cuda13")
    assert build is not None
    assert build_runs_on(build, "7.0").support is ArchSupport.NONE  # V100
    assert build_runs_on(build, "7.5").support is ArchSupport.DECLARED
    cuda12 = framework_build("jax", "0.12.0", "jax-cuda12-plugin")
    assert cuda12 is not None
    assert build_runs_on(cuda12, "7.0").support is ArchSupport.DECLARED


def test_tensorflow_matches_its_release_line() -> None:
    build = framework_build("tensorflow", "2.16.2", "gpu")
    assert build is not None
    assert (build.version, build.cuda_version, build.min_compute_capability) == (
        "2.16.1",
        "12.3",
        "3.5",
    )


# --- garbage never raises

_TEXT = st.text(max_size=40)


@settings(max_examples=150, deadline=None)
@given(driver=_TEXT, cuda=_TEXT, os=st.sampled_from(["linux", "windows", "Win32", ""]))
def test_version_questions_never_raise(driver: str, cuda: str, os: str) -> None:
    answer = driver_supports_cuda(driver, cuda, os=os)
    assert answer.verdict in set(CompatVerdict)
    max_cuda_for_driver(driver)
    driver_branch(driver)
    version_at_least(driver, cuda)


@settings(max_examples=150, deadline=None)
@given(query=_TEXT, capability=_TEXT, framework=st.sampled_from(["torch", "jax", "tf", "x"]))
def test_lookups_never_raise(query: str, capability: str, framework: str) -> None:
    gpu_arch_for(query)
    for build in framework_builds(framework, query):
        build_runs_on(build, capability)
    framework_build(framework, query, capability)


@settings(max_examples=100, deadline=None)
@given(st.from_regex(r"\A[0-9]{1,4}(\.[0-9]{1,4}){0,4}\Z"))
def test_numeric_versions_parse_and_compare(text: str) -> None:
    parsed = parse_version(text)
    assert parsed is not None
    assert version_at_least(text, text) is True
