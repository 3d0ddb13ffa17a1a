"""CUDA error 34, cudaErrorStubLibrary / CUDA_ERROR_STUB_LIBRARY (CUDA ≥ 11.1): "This indicates
that the CUDA driver that the application has loaded is a stub library" (the CUDA runtime API's
and the driver API's error types; cuda-python's driver.Result) — the toolkit's stubs/libcuda.so,
for linking only, loaded in place of the driver's: a stubs folder on LD_LIBRARY_PATH or in an
rpath ahead of the driver's libcuda, or no driver at all. Read as library-conflict (medium) with
driver-not-loaded (low); what decides names the loader's libcuda, LD_LIBRARY_PATH, nvidia-smi."""

from __future__ import annotations

import pytest

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence, Diagnosis

# the documented wordings: the string (cudaGetErrorString / cuGetErrorString), the names, the
# number in PyTorch's, AMReX's, Warp's, cuda-python's and Numba's forms
WORDINGS = (
    "RuntimeError: CUDA error: CUDA driver is a stub library",
    "cudaErrorStubLibrary",
    "CUDA_ERROR_STUB_LIBRARY",
    "cuda.bindings.driver.CUresult.CUDA_ERROR_STUB_LIBRARY",
    "(<CUresult.CUDA_ERROR_STUB_LIBRARY: 34>,)",
    "(<cudaError_t.cudaErrorStubLibrary: 34>, 0)",
    "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run "
    "some cuda functions before calling NumCudaDevices() that might have already set an error? "
    "Error 34: CUDA driver is a stub library",
    # the same warning cut after the number (an issue title)
    "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run "
    "some cuda functions before calling NumCudaDevices() that might have already set an error? "
    "Error 34",
    "amrex::Abort::3::CUDA error 34 in file AMReX_GpuDevice.cpp line 164: CUDA driver is a stub "
    "library !!!",
    "Warp CUDA error: Failed to get driver entry point 'cuInit' (CUDA error 34)",
    "RuntimeError: cuda runtime error (34)",
    "numba.cuda.cudadrv.driver.CudaAPIError: [34]",
    "numba.cuda.cudadrv.driver.CudaAPIError: [34] Call to cuInit results in "
    "CUDA_ERROR_STUB_LIBRARY",
)


def _readings(text: str) -> tuple[Diagnosis, ...]:
    return explain_text(text).diagnoses


@pytest.mark.parametrize("text", WORDINGS)
def test_error_34_reads_the_stub_libcuda_first_and_no_driver_second(text: str) -> None:
    first, second, *rest = _readings(text)
    assert (first.cause, first.confidence) == ("library-conflict", Confidence.MEDIUM)
    assert (second.cause, second.confidence) == ("driver-not-loaded", Confidence.LOW)
    assert rest == []


@pytest.mark.parametrize("text", WORDINGS)
def test_error_34_says_what_decides_and_fixes_the_stubs_folder_first(text: str) -> None:
    for diagnosis in _readings(text):
        decides = diagnosis.decides or ""
        assert "ldconfig -p | grep libcuda" in decides
        assert "echo $LD_LIBRARY_PATH" in decides
        assert "nvidia-smi" in decides
    conflict = _readings(text)[0]
    assert "stubs" in conflict.fixes[0]
    assert "LD_LIBRARY_PATH" in conflict.fixes[0]


def test_the_text_weighs_more_than_the_bare_number() -> None:
    worded = _readings("RuntimeError: CUDA error: CUDA driver is a stub library")[0].score
    numbered = _readings("RuntimeError: cuda runtime error (34)")[0].score
    both = _readings("CUDA error 34: CUDA driver is a stub library")[0].score
    assert numbered < worded < both


@pytest.mark.parametrize(
    "text",
    [
        # other numbers, and the stubs folder named where nothing failed
        "numba.cuda.cudadrv.driver.CudaAPIError: [340]",
        "numba.cuda.cudadrv.driver.CudaAPIError: [3] Call to cuInit results in "
        "CUDA_ERROR_NOT_INITIALIZED",
        "cuda runtime error (341)",
        "-- Found CUDA_CUDA_LIBRARY: /usr/local/cuda/lib64/stubs/libcuda.so",
        "nvcc -L/usr/local/cuda/lib64/stubs -lcuda main.cu -o main",
    ],
)
def test_neither_another_number_nor_linking_against_the_stubs_reads_as_error_34(text: str) -> None:
    evidence = " ".join(e for d in _readings(text) for e in d.evidence)
    assert "stub" not in evidence.lower()
    assert "library-conflict" not in {d.cause for d in _readings(text)}
