"""Review r28 of the thirteenth stop's explain readings: their nearest look-alikes, the failures
a capped warning must not hide, and the cost of their patterns."""

from __future__ import annotations

import re

import pytest

from gpuwarden.health.explain import ptx_jit, signatures
from gpuwarden.health.explain.text import read_paste
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings, match_after_repeated_prefixes, never_raise

ARCH = "gpu-arch-unsupported"
NOT_ADVERTISED = "k8s-gpu-not-advertised"
PROBE_FAILED = "driver-probe-failed"


def _torch_warning(sm: str, archs: str) -> str:
    """PyTorch's incompatible_device_warn (torch/cuda/__init__.py, _check_cubins) for one GPU."""
    return (
        f"UserWarning: \nNVIDIA GeForce RTX 5090 with CUDA capability {sm} is not compatible "
        "with the current PyTorch installation.\nThe current PyTorch install supports CUDA "
        f"capabilities {archs}.\nIf you want to use the NVIDIA GeForce RTX 5090 GPU with "
        "PyTorch, please check the instructions at https://pytorch.org/get-started/locally/"
    )


# a build whose PTX (compute_90) the sm_120 GPU JIT-compiles: the warning alone is capped at low
RUNNABLE_PTX = _torch_warning("sm_120", "sm_50 sm_80 sm_86 sm_90 compute_90")


@pytest.mark.parametrize(
    "failure",
    [
        # CUDA error 98: "The requested device function does not exist or is not compiled for
        # the proper device architecture" (CUDA Runtime API, cudaError) — PyTorch's wording,
        # and the enum's name
        "RuntimeError: CUDA error: invalid device function",
        "cudaErrorInvalidDeviceFunction",
        # CUDA error 209 / 48 by its names and by number, not by its string
        "cudaErrorNoKernelImageForDevice",
        "CUresult CUDA_ERROR_NO_BINARY_FOR_GPU",
        "RuntimeError: CUDA error 209 at csrc/ops.cu:42",
        # a compiler for this GPU's own architecture that does not know it (Triton's bundled
        # ptxas, NVRTC behind PyTorch's jiterator): not the build's PTX, which the cap is about
        "ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'",
        "nvrtc: error: invalid value for --gpu-architecture (-arch)",
        # a library's own kernels without this architecture (ggml, SageAttention)
        "ERROR: CUDA kernel mul_mat_q has no device code compatible with CUDA arch 900.",
        "ValueError: Unsupported CUDA architecture: sm120",
    ],
)
def test_a_failure_read_as_the_architecture_lifts_the_ptx_cap(failure: str) -> None:
    assert cause_readings(f"{RUNNABLE_PTX}\n{failure}")[0] == (ARCH, Confidence.HIGH)


@pytest.mark.parametrize(
    "aside",
    [
        # the warning's own readings in other words: the capability-range warning (a newer
        # major), a CUDA older than the GPU named beside it — the same build, the same PTX
        "Found GPU0 NVIDIA GeForce RTX 5090 which is of cuda capability 12.0.\nMinimum and "
        "Maximum cuda capability supported by this version of PyTorch is (5.0) - (9.0)",
        "torch 2.5.1+cu124, CUDA 12.4, NVIDIA GeForce RTX 5090",
        # a failure read as the architecture only as a side candidate (cuBLAS's catch-all)
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( "
        "handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
    ],
)
def test_the_warning_s_other_readings_stay_capped(aside: str) -> None:
    readings = dict(cause_readings(f"{RUNNABLE_PTX}\n{aside}"))
    assert readings[ARCH] == Confidence.LOW


def test_the_warning_quoted_twice_stays_capped() -> None:
    # a log repeating the warning per worker: its quoted phrase is no failure
    assert cause_readings(f"{RUNNABLE_PTX}\n{RUNNABLE_PTX}")[0] == (ARCH, Confidence.LOW)


# --- KubeVirt's resources ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "resource",
    [
        # an NVSwitch bound to vfio-pci for a passed-through HGX board: pci.ids names it
        # "GH100 [H100 NVSwitch]" (10de:22a3), "GA100 [A100 NVSwitch]" (10de:1af1), which the
        # device plugin's getDeviceName makes GH100_H100_NVSWITCH — not a GPU
        "nvidia.com/GH100_H100_NVSWITCH",
        "nvidia.com/GA100_A100_NVSWITCH",
        "nvidia.com/GH100_H100_NVSwitch",
        # a GPU's audio function, NVIDIA's network resources
        "nvidia.com/GP104_HIGH_DEFINITION_AUDIO_CONTROLLER",
        "nvidia.com/rdma_shared_device_a",
        "nvidia.com/hostdev",
    ],
)
def test_kubevirt_resources_that_are_no_gpu_read_nothing(resource: str) -> None:
    text = f"0/3 nodes are available: 3 Insufficient {resource}. preemption: 0/3 nodes"
    assert NOT_ADVERTISED not in dict(cause_readings(text))


@pytest.mark.parametrize(
    ("resource", "reading"),
    [
        ("nvidia.com/GRID_T4-1Q", (NOT_ADVERTISED, Confidence.HIGH)),
        ("nvidia.com/NVIDIA_A100-4-20C", (NOT_ADVERTISED, Confidence.HIGH)),
        ("nvidia.com/GH100_H100_SXM5_80GB", (NOT_ADVERTISED, Confidence.HIGH)),
        # KubeVirt's permittedHostDevices name as an admin writes it (mixed case)
        ("nvidia.com/TU104GL_Tesla_T4", (NOT_ADVERTISED, Confidence.HIGH)),
        # the container plugin's resources keep their own readings, once
        ("nvidia.com/gpu.shared", (NOT_ADVERTISED, Confidence.HIGH)),
        ("nvidia.com/mig-1g.10gb", ("mig-no-instances", Confidence.MEDIUM)),
    ],
)
def test_kubevirt_gpu_resources_read_once(resource: str, reading: tuple[str, Confidence]) -> None:
    text = f"0/3 nodes are available: 3 Insufficient {resource}."
    readings = cause_readings(text)
    assert readings[0] == reading
    assert [cause for cause, _ in readings].count(reading[0]) == 1


def test_the_resource_name_in_a_node_s_listing_reads_nothing() -> None:
    # a healthy node's Allocatable: the name without the scheduler's "Insufficient"
    text = (
        "Allocatable:\n  cpu: 64\n  nvidia.com/GRID_T4-1Q: 4\n  nvidia.com/GH100_H100_SXM5_80GB: 8"
    )
    assert cause_readings(text) == []


# --- RmInitAdapter, Mooncake, TensorIterator: look-alikes ---------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        # the banner's words in prose without the function's prefix or the bail-out
        "the driver cannot initialize GSP firmware RM on this card, says the forum post",
        "NVRM: GPU0 RmInitAdapter: Initialized GSP firmware RM successfully",
        # Mooncake built with nvidia-peermem: its healthy start names the module
        "I0101 rdma_context.cpp:88] RDMA device mlx5_0 opened, GPU RDMA via nvidia-peermem",
        # TensorIterator's check naming one device twice (1.2's dtype mismatch)
        "RuntimeError: expected device cuda:0 and dtype Float but got device cuda:0 and dtype Long",
        "RuntimeError: output with device cuda:1 doesn't match the desired device cuda:1",
    ],
)
def test_look_alikes_of_the_new_readings_read_nothing_new(text: str) -> None:
    readings = dict(cause_readings(text))
    assert PROBE_FAILED not in readings
    assert "gpudirect-rdma-unavailable" not in readings
    assert "tensor-device-mismatch" not in readings


# --- cost ---------------------------------------------------------------------------------------
def test_the_kubevirt_resource_match_stays_on_its_name() -> None:
    pattern = re.compile("Insufficient " + signatures.KUBEVIRT_GPU_RESOURCE, re.IGNORECASE)
    whole = "Insufficient nvidia.com/GA100_A100_PCIE_40GB"
    # the message cut short inside the chip's name, 200 times on one line, then the whole one
    cut = whole[: whole.index("_") - 1]
    assert match_after_repeated_prefixes(pattern, cut, whole) == whole
    # a name of thousands of characters: the bounded parts end the match, the line stays whole
    flood = "Insufficient nvidia.com/GA100_" + "A" * 100_000
    assert pattern.search(flood) is None


def test_a_flood_of_warnings_and_failures_reads_as_one() -> None:
    flood = f"{RUNNABLE_PTX}\nRuntimeError: CUDA error: invalid device function\n" * 260
    assert len(flood) > 100_000
    assert cause_readings(flood)[0] == (ARCH, Confidence.HIGH)


test_the_reviewed_readings_never_raise = never_raise(
    [
        "Insufficient nvidia.com/",
        "GH100_H100_",
        "NVSWITCH",
        "GRID_T4-1Q",
        "with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
        "The current PyTorch install supports CUDA capabilities",
        " sm_90 compute_90",
        "invalid device function",
        "RmInitAdapter: Cannot initialize GSP firmware RM",
        "failed, bailing out of RmInitAdapter",
    ]
)


def test_the_cap_names_the_architecture_only() -> None:
    ceiling = ptx_jit.ptx_jit_ceiling(read_paste(RUNNABLE_PTX), [])
    assert ceiling is not None
    assert ceiling.causes == frozenset({ARCH})


# --- XLA's ptxas it cannot start, in its later releases' wording --------------------------------
TOOLKIT = "extension-build-toolkit"
# asm_compiler.cc's GetToolVersionImpl (XLA from 2023): GetToolVersionString's status wrapped as
# FAILED_PRECONDITION "Couldn't get ptxas/nvlink version string: ", logged by the warning
# "Couldn't get ptxas version : " or raised to the caller (jaxlib's XlaRuntimeError)
_LATER_NO_PTXAS = (
    "Couldn't get ptxas/nvlink version string: INTERNAL: Couldn't invoke {ptxas} --version"
)


@pytest.mark.parametrize(
    "text",
    [
        "W external/org_tensorflow/tensorflow/compiler/xla/stream_executor/gpu/asm_compiler.cc:"
        "109] Couldn't get ptxas version : FAILED_PRECONDITION: "
        + _LATER_NO_PTXAS.format(ptxas="ptxas"),
        "jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: "
        + _LATER_NO_PTXAS.format(ptxas="/usr/local/cuda/bin/ptxas"),
    ],
)
def test_xla_s_later_wording_of_a_ptxas_it_cannot_start_reads_the_toolkit(text: str) -> None:
    assert cause_readings(text)[0] == (TOOLKIT, Confidence.MEDIUM)


@pytest.mark.parametrize(
    "text",
    [
        # XLA fell back to the driver's JIT: the missing ptxas only warned
        "W asm_compiler.cc:109] Couldn't get ptxas version : FAILED_PRECONDITION: "
        + _LATER_NO_PTXAS.format(ptxas="ptxas")
        + "\nW redzone_allocator.cc:317] INTERNAL: Failed to launch ptxas\nRelying on driver to "
        "perform ptx compilation.",
        # nvlink, not ptxas; a version XLA could not parse (ptxas ran)
        "Couldn't get ptxas/nvlink version string: INTERNAL: Couldn't invoke nvlink --version",
        "Couldn't parse ptxas/nvlink version in output of /usr/local/cuda/bin/ptxas --version:",
    ],
)
def test_look_alikes_of_xla_s_later_wording_read_no_toolkit(text: str) -> None:
    assert TOOLKIT not in dict(cause_readings(text))
