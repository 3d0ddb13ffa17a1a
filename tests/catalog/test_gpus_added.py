"""The GPUs people plan on that the catalog lacked (RTX 50, RTX PRO 6000 Blackwell, B300, GB300,
GH200, GB10, A40, A30, RTX 20/30/40 cards): found by key, loose name and nvidia-smi name, memory
figures consistent with their sources, SM counts feeding the CUDA-context model, and real
nvidia-smi captures of them (tests/data/smi_new_gpus, see SOURCES.md) named from the catalog by
doctor without a false alarm."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import gpu_catalog, resolve_gpu
from gpuwarden.catalog.compat import gpu_arch_for
from gpuwarden.catalog.gpus import gpu_by_smi_name, max_resident_threads_per_sm
from gpuwarden.cli.main import main
from gpuwarden.errors import AmbiguousNameError, UnknownNameError
from gpuwarden.planner.overheads import STACK_BYTES_PER_THREAD, cuda_context
from gpuwarden.telemetry.smi.catalog_facts import architecture
from gpuwarden.units import GIB, MIB

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "smi_new_gpus"

# key → (loose forms people type, the names nvidia-smi prints)
ADDED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "rtx-5090-32gb": (
        ("RTX 5090", "rtx-5090", "RTX-5090", "5090 RTX 32GB"),
        ("NVIDIA GeForce RTX 5090",),
    ),
    "rtx-5080-16gb": (("RTX 5080", "rtx-5080"), ("NVIDIA GeForce RTX 5080",)),
    "rtx-pro-6000-ws-96gb": (
        ("RTX PRO 6000 WS", "rtx-pro-6000-ws"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition",),
    ),
    "rtx-pro-6000-maxq-96gb": (
        ("RTX PRO 6000 Max-Q", "rtx pro 6000 maxq"),
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",),
    ),
    "rtx-pro-6000-server-96gb": (
        ("RTX PRO 6000 Server", "rtx-pro-6000-server"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition",),
    ),
    "b300-hgx-288gb": (("B300", "b300 sxm6", "B300 HGX"), ("NVIDIA B300 SXM6 AC",)),
    "gb300-288gb": (("GB300", "gb300 288gb"), ("NVIDIA GB300",)),
    "gh200-96gb": (("GH200 96GB", "gh200-96gb"), ("NVIDIA GH200 480GB", "NVIDIA GH200 120GB")),
    "gh200-144gb": (("GH200 144GB", "gh200 144 GB"), ("NVIDIA GH200 144G HBM3e",)),
    "gb10-128gb": (("GB10", "gb10"), ("NVIDIA GB10",)),
    "a40-48gb": (("A40", "a40 48gb"), ("NVIDIA A40",)),
    "a30-24gb": (("A30", "a30-24gb"), ("NVIDIA A30",)),
    "rtx-3080-10gb": (("RTX 3080", "rtx-3080"), ("NVIDIA GeForce RTX 3080", "GeForce RTX 3080")),
    "rtx-3060-12gb": (("RTX 3060", "RTX 3060 12GB"), ("NVIDIA GeForce RTX 3060",)),
    "rtx-4080-16gb": (("RTX 4080", "rtx-4080"), ("NVIDIA GeForce RTX 4080",)),
    "rtx-4070-12gb": (("RTX 4070", "rtx-4070"), ("NVIDIA GeForce RTX 4070",)),
    "rtx-4060-8gb": (("RTX 4060", "rtx-4060"), ("NVIDIA GeForce RTX 4060",)),
    "rtx-2080-ti-11gb": (("RTX 2080 Ti", "rtx-2080-ti"), ("NVIDIA GeForce RTX 2080 Ti",)),
}


@pytest.mark.parametrize("key", sorted(ADDED))
def test_each_added_gpu_resolves_by_key_loose_name_and_nvidia_smi_name(key: str) -> None:
    loose, smi_names = ADDED[key]
    assert resolve_gpu(key).key == key
    for typed in loose:
        assert resolve_gpu(typed).key == key, typed
    for printed in smi_names:
        assert resolve_gpu(printed).key == key, printed
        spec = gpu_by_smi_name(printed)
        assert spec is not None and spec.key == key, printed


@pytest.mark.parametrize(
    ("typed", "key"),
    [
        # the neighbours the new rows must not capture
        ("RTX 2080", "rtx-2080-8gb"),
        ("RTX 2080 SUPER", "rtx-2080-super-8gb"),
        ("RTX 4080 SUPER", "rtx-4080-super-16gb"),
        ("NVIDIA GeForce RTX 4080 SUPER", "rtx-4080-super-16gb"),
        ("RTX 3060 Laptop", "rtx-3060-laptop-6gb"),
        ("NVIDIA GeForce RTX 3060 Laptop GPU", "rtx-3060-laptop-6gb"),
        ("RTX 6000 Ada", "rtx-6000-ada-48gb"),
        ("B200", "b200-hgx-180gb"),
        ("GB200", "gb200-186gb"),
    ],
)
def test_older_rows_keep_their_names(typed: str, key: str) -> None:
    assert resolve_gpu(typed).key == key


@pytest.mark.parametrize(
    ("typed", "variants"),
    [
        (
            "RTX PRO 6000",
            {"rtx-pro-6000-ws-96gb", "rtx-pro-6000-maxq-96gb", "rtx-pro-6000-server-96gb"},
        ),
        ("GH200", {"gh200-96gb", "gh200-144gb"}),
    ],
)
def test_families_with_several_editions_are_ambiguous(typed: str, variants: set[str]) -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve_gpu(typed)
    assert info.value.reference == "ambiguous-gpu"
    assert set(info.value.suggestions) == variants


def test_the_catalog_covers_what_it_was_asked_for() -> None:
    keys = {g.key for g in gpu_catalog()}
    assert set(ADDED) <= keys
    assert len(keys) == 31 + len(ADDED)  # the 30 earlier rows and the L20 (test_gpu_l20.py)


def test_memory_figures_are_consistent() -> None:
    for key in ADDED:
        gpu = resolve_gpu(key)
        assert gpu.nominal_memory_bytes is not None
        assert gpu.usable_bytes <= gpu.memory_bytes <= gpu.nominal_memory_bytes, key
        # a total under 92 % of the datasheet size needs a reason: ECC on GDDR6 (1/16), HBM
        # stacks not all enabled (B300 / GB300), or unified memory the OS keeps part of (GB10)
        if gpu.memory_bytes < 0.92 * gpu.nominal_memory_bytes:
            assert any(w in gpu.memory_basis for w in ("ECC", "unified")) or (
                "enabled" in gpu.notes
            ), key
        assert gpu.memory_basis and gpu.usable_basis and gpu.source, key
        assert gpu.confidence in {"high", "medium", "low"}, key
        if gpu.usable_memory_bytes is None:
            assert gpu.confidence != "high" or "not captured" in gpu.usable_basis, key


def test_usable_memory_where_a_reading_was_found() -> None:
    # (nvidia-smi total, usable) MiB, each from the reading usable_basis names: the RTX 5090's
    # nvidia-smi -q (32607 - 487), nvidia-smi totals from before R510 (A30, RTX 3080 / 3060 /
    # 2080 Ti), and torch's "total capacity of 267.69 GiB" on B300 (the lower end of its rounding)
    expected = {
        "rtx-5090-32gb": (32607, 32120),
        "a30-24gb": (24576, 24258),
        "rtx-3080-10gb": (10240, 10018),
        "rtx-3060-12gb": (12288, 12053),
        "rtx-2080-ti-11gb": (11264, 11019),
        "b300-hgx-288gb": (275040, 274110),
    }
    for key, (total, usable) in expected.items():
        gpu = resolve_gpu(key)
        assert (gpu.memory_bytes, gpu.usable_bytes) == (total * MIB, usable * MIB), key
    b300 = resolve_gpu("b300-hgx-288gb")
    assert abs(b300.usable_bytes - 267.69 * GIB) <= 0.005 * GIB
    # no reading: the planner falls back on the nvidia-smi total and says so
    for key in set(ADDED) - set(expected):
        gpu = resolve_gpu(key)
        assert gpu.usable_memory_bytes is None, key
        assert gpu.usable_basis.startswith("not captured"), key


def test_unified_memory_gpu_says_how_it_is_counted() -> None:
    gb10 = resolve_gpu("GB10")
    assert "unified" in gb10.memory_type.lower()
    assert "Not Supported" in gb10.memory_basis  # nvidia-smi prints no framebuffer total
    assert 119 * GIB <= gb10.memory_bytes <= 122 * GIB
    assert gb10.nominal_memory_bytes == 128 * GIB


def test_mig_profiles_of_the_mig_capable_additions() -> None:
    slices_by_key = {
        "b300-hgx-288gb": 7,
        "gb300-288gb": 7,
        "gh200-96gb": 7,
        "gh200-144gb": 7,
        "a30-24gb": 4,
        "rtx-pro-6000-ws-96gb": 4,
        "rtx-pro-6000-maxq-96gb": 4,
        "rtx-pro-6000-server-96gb": 4,
    }
    for key, slices in slices_by_key.items():
        profiles = resolve_gpu(key).mig_profiles
        assert profiles, key
        # the whole-GPU profile comes last and holds about the whole memory
        whole = profiles[-1]
        assert whole.startswith(f"{slices}g."), key
        gigabytes = int(whole.split(".")[1].removesuffix("gb"))
        assert (
            0.85 * resolve_gpu(key).memory_bytes
            <= gigabytes * GIB
            <= 1.1 * resolve_gpu(key).memory_bytes
        ), key
    for key in set(ADDED) - set(slices_by_key):
        assert resolve_gpu(key).mig_profiles == (), key


def test_compute_capability_agrees_with_gpu_arch() -> None:
    for key, (_, smi_names) in ADDED.items():
        gpu = resolve_gpu(key)
        arch = gpu_arch_for(smi_names[0])
        assert arch is not None, key
        assert gpu.compute_capability == arch.compute_capability, key


def test_every_row_has_an_sm_count_and_a_thread_limit() -> None:
    for gpu in gpu_catalog():
        assert gpu.sm_count is not None and 20 <= gpu.sm_count <= 200, gpu.key
        assert max_resident_threads_per_sm(gpu.compute_capability) is not None, gpu.key
        assert "SMs" in gpu.source, gpu.key  # where the count comes from


@pytest.mark.parametrize(
    ("capability", "threads"),
    [
        ("7.0", 2048),
        ("7.5", 1024),
        ("8.0", 2048),
        ("8.6", 1536),
        ("8.9", 1536),
        ("9.0", 2048),
        ("10.0", 2048),
        ("10.3", 2048),
        ("12.0", 1536),
        ("12.1", 1536),
        ("13.5", None),
        (None, None),
    ],
)
def test_threads_per_sm_follow_cuda_compute_capability_table(
    capability: str | None, threads: int | None
) -> None:
    assert max_resident_threads_per_sm(capability) == threads


@pytest.mark.parametrize(
    ("key", "sms", "threads"),
    [
        ("h100-sxm5-80gb", 132, 2048),  # the calibration GPU: unchanged
        ("h100-pcie-80gb", 114, 2048),
        ("t4-16gb", 40, 1024),
        ("rtx-5090-32gb", 170, 1536),
        ("rtx-pro-6000-ws-96gb", 188, 1536),
        ("b300-hgx-288gb", 148, 2048),
        ("gb10-128gb", 48, 1536),
    ],
)
def test_the_cuda_context_is_sized_from_the_catalog(key: str, sms: int, threads: int) -> None:
    gpu = resolve_gpu(key)
    context = cuda_context(gpu)
    assert f"{sms} SMs × {threads} threads" in context.detail
    unknown = cuda_context(dataclasses.replace(gpu, sm_count=None))
    assert "SM count unknown" in unknown.detail
    assert context.bytes - unknown.bytes == (sms - 132) * threads * STACK_BYTES_PER_THREAD


def test_plan_for_an_rtx_5090(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "Qwen3-8B", "--mode", "infer", "--gpu", "RTX-5090", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert code == 0
    assert plan["gpu"]["key"] == "rtx-5090-32gb"
    assert plan["usable_bytes"] == 32120 * MIB
    assert plan["fits"] is True  # 8.2 B bf16 weights (16.4 GB) in 31.4 GiB


# ---- real captures ------------------------------------------------------------------------------


def _doctor(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", "--from", str(path), "--json"])
    return code, json.loads(capsys.readouterr().out)


def _captures() -> list[Path]:
    return sorted(p for p in CAPTURES.glob("*.txt"))


def test_captures_are_there() -> None:
    assert {p.name for p in _captures()} >= {
        "rtx-5090__570.133.07.table.txt",
        "rtx-5090__570.124.06.q.txt",
        "b300-sxm6-ac-x7__610.57.04.table.txt",
    }


@pytest.mark.parametrize("path", _captures(), ids=lambda p: p.name)
def test_doctor_names_the_gpu_from_the_catalog_without_a_false_alarm(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = _doctor(capsys, path)
    assert code == 0
    assert doc["verdict"] == "healthy"
    assert [f["code"] for f in doc["findings"] if f["severity"] != "info"] == []
    assert doc["devices"]
    for device in doc["devices"]:
        gpu = gpu_by_smi_name(device["name"])
        assert gpu is not None, device["name"]
        # the framebuffer total the capture prints is the catalog's memory figure
        assert device["memory_total_bytes"] == gpu.memory_bytes, gpu.key
        assert architecture(device["name"]) == gpu.architecture == "Blackwell"
        reserved = device["memory_reserved_bytes"]
        if reserved is not None and path.name in gpu.usable_basis:
            assert gpu.usable_bytes == gpu.memory_bytes - reserved, gpu.key


def test_a_partial_hgx_b300_board_is_not_called_a_non_nvswitch_system(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 7 of the 8 SXM GPUs of an HGX B300 board: the catalog knows them as board GPUs, so the
    # fabric-manager check cannot say "no NVSwitch" from this capture alone (it could before the
    # B300 row existed)
    _, doc = _doctor(capsys, CAPTURES / "b300-sxm6-ac-x7__610.57.04.table.txt")
    assert len(doc["devices"]) == 7
    fabric = next(c for c in doc["checks"] if c["name"] == "fabric-manager")
    assert fabric["status"] == "skip"
    assert "not an NVSwitch system" not in fabric["detail"]


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60))
def test_any_name_resolves_or_is_refused(name: str) -> None:
    refused: UnknownNameError | None = None
    try:
        gpu = resolve_gpu(name)
    except UnknownNameError as error:
        refused = error
    else:
        assert gpu in gpu_catalog()
    if refused is not None:
        assert refused.reference in {"unknown-gpu", "ambiguous-gpu"} and refused.hint
    assert max_resident_threads_per_sm(name) in {None, 1024, 1536, 2048}


def test_a_word_only_another_rows_smi_name_shares_does_not_make_it_ambiguous() -> None:
    """ "Workstation" is in the Workstation Edition's own name and only in the Max-Q's nvidia-smi
    name ("... Max-Q Workstation Edition"): the row it names wins; "RTX PRO 6000" alone stays
    ambiguous."""
    assert resolve_gpu("RTX PRO 6000 Workstation").key == "rtx-pro-6000-ws-96gb"
    assert resolve_gpu("RTX PRO 6000 Max-Q").key == "rtx-pro-6000-maxq-96gb"
    with pytest.raises(AmbiguousNameError):
        resolve_gpu("RTX PRO 6000")


def test_a_name_the_table_cut_names_no_gpu() -> None:
    """nvidia-smi's default table cuts long names with "...": the RTX 2080 SUPER and the Ti print
    the same cut name, so none is chosen."""
    assert gpu_by_smi_name("NVIDIA GeForce RTX 2080") is not None
    assert gpu_by_smi_name("NVIDIA GeForce RTX 2080 ...") is None
    assert gpu_by_smi_name("NVIDIA GeForce RTX 2080 …") is None
