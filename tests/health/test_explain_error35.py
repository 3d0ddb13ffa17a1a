"""CUDA error 35, cudaErrorInsufficientDriver, where nothing says which driver is there
(health/explain/stated_driver.py, ``absent_driver``): the runtime returns it for a driver older
than it needs and for no driver at all (PyTorch tells them apart only by cudaDriverGetVersion
returning 0: c10/cuda/CUDAFunctions.cpp). driver-too-old stays the reading the message states,
"no NVIDIA driver loaded" is a candidate whose ``decides`` names nvidia-smi's answer; a paste
that shows no driver reads driver-not-loaded first; a paste that shows a driver keeps its
reading."""

from __future__ import annotations

import pytest

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence, Diagnosis
from tests.health.explain_sets import cause_readings, load_set, never_raise, text_of

HIGH_TOO_OLD = ("driver-too-old", Confidence.HIGH)
NO_DRIVER_CANDIDATE = ("driver-not-loaded", Confidence.LOW)
ERROR_35 = (
    "RuntimeError: cudaGetDeviceCount failed: CUDA driver version is insufficient for CUDA "
    "runtime version"
)


def _no_driver(text: str) -> Diagnosis:
    return next(d for d in explain_text(text).diagnoses if d.cause == "driver-not-loaded")


def _says_what_nvidia_smi_decides(diagnosis: Diagnosis) -> None:
    assert diagnosis.decides is not None
    for answer in ("nvidia-smi", "Driver Version", "command not found", "couldn't communicate"):
        assert answer in diagnosis.decides, answer


def test_the_message_alone_keeps_too_old_and_adds_no_driver_with_what_decides() -> None:
    assert cause_readings(ERROR_35) == [HIGH_TOO_OLD, NO_DRIVER_CANDIDATE]
    candidate = _no_driver(ERROR_35)
    _says_what_nvidia_smi_decides(candidate)
    assert any("no NVIDIA driver installed" in e for e in candidate.evidence)


@pytest.mark.parametrize(
    "error",
    [
        # the enum names of the runtime, the driver API and cuda-python (CuTe DSL)
        "cudaErrorInsufficientDriver",
        "CUDA_ERROR_INSUFFICIENT_DRIVER",
        "CUDAError InsufficientDriver",
        # the number alone: ONNX Runtime's title, deviceQuery, THC
        "onnx runtime error 1: CUDA failure 35",
        "cudaGetDeviceCount returned 35",
        "RuntimeError: cuda runtime error (35) at THCGeneral.cpp:70",
    ],
)
def test_every_wording_of_the_runtimes_error_gets_the_candidate(error: str) -> None:
    readings = cause_readings(error)
    assert readings[0] == HIGH_TOO_OLD
    assert NO_DRIVER_CANDIDATE in readings


@pytest.mark.parametrize(
    ("name", "example_id"),
    [
        # set 86's Meshroom texts (no CUDA driver; a card without CUDA) and set 9's lora-scripts
        # (only an Intel iGPU): their threads' machines had no NVIDIA driver
        ("heldout86", "meshroom-depthmap-no-nvidia-gpu-cudagetdevicecount-insufficient-mr-1626"),
        (
            "heldout86",
            "meshroom-2019-2-windows-7-no-cuda-card-cudagetdevicecount-insufficient-mr-624",
        ),
        ("heldout9", "unk-bnb-ops-cu-driver-insufficient-intel-igpu-lora-scripts-101"),
        # a labelled old driver keeps its reading first, with the candidate below
        ("heldout12", "drv-insufficient-368-failed-to-init-device-tf-8526"),
        ("heldout66", "paddlex-gui-1050ti-cuda-error-35-driver-391-title-pdx-164"),
    ],
)
def test_held_out_texts_without_a_driver_stated_list_the_candidate(
    name: str, example_id: str
) -> None:
    text = text_of(load_set(name), example_id)
    readings = cause_readings(text)
    assert readings[0] == HIGH_TOO_OLD
    assert readings[1] == NO_DRIVER_CANDIDATE
    _says_what_nvidia_smi_decides(_no_driver(text))


@pytest.mark.parametrize(
    "no_driver",
    [
        "bash: nvidia-smi: command not found",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
        "that the latest NVIDIA driver is installed and running.",
        "AssertionError: Found no NVIDIA driver on your system. Please check that you have an "
        "NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
        "Could not load dynamic library 'libcuda.so.1'; dlerror: libcuda.so.1: cannot open shared "
        "object file: No such file or directory",
        "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic "
        "library 'nvcuda.dll'; dlerror: nvcuda.dll not found",
    ],
)
def test_a_paste_that_shows_no_driver_reads_no_driver_first(no_driver: str) -> None:
    diagnoses = explain_text(f"{no_driver}\n{ERROR_35}").diagnoses
    top, too_old = diagnoses[0], next(d for d in diagnoses if d.cause == "driver-too-old")
    assert top.cause == "driver-not-loaded"
    assert top.confidence is not Confidence.LOW
    assert too_old.confidence is Confidence.LOW
    _says_what_nvidia_smi_decides(too_old)


@pytest.mark.parametrize(
    "driver_there",
    [
        # PyTorch words it so only after cudaDriverGetVersion found a driver
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
        # a driver stated, older than the CUDA named (the stated reading: high)
        f"{ERROR_35}\ntorch 2.5.1+cu124\nDriver Version: 470.82.01",
        # deviceQuery's versions: cudaDriverGetVersion returned a driver's CUDA
        f"{ERROR_35}\nCUDA Driver Version / Runtime Version 11.4 / 12.1",
        # nvidia-container-cli compares the host driver's CUDA: a driver is there
        f"{ERROR_35}\nnvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8",
    ],
)
def test_a_paste_that_shows_a_driver_gets_no_candidate(driver_there: str) -> None:
    # guards: these read the same before and after the candidate was added
    assert cause_readings(driver_there) == [HIGH_TOO_OLD]


def test_a_container_keeps_the_container_reading() -> None:
    # guard: docker run without --gpus leaves no libcuda in the container (signatures.py)
    text = f"$ docker run -it nvcr.io/nvidia/pytorch:24.01-py3\n{ERROR_35}"
    readings = [cause for cause, _ in cause_readings(text)]
    assert readings[0] == "container-runtime-not-nvidia"
    assert "driver-not-loaded" not in readings


test_the_error_35_readings_never_raise = never_raise(
    [
        ERROR_35,
        "CUDA failure 35",
        "cudaErrorInsufficientDriver",
        "nvidia-smi: command not found",
        "nvcuda.dll not found",
        "Could not find module 'C:\\Windows\\System32\\nvcuda.dll'",
        "libcuda.so.1: cannot open shared object file",
        "CUDA Driver Version / Runtime Version 12.2 / 11.8",
        "Driver Version: 535.104.05",
        "docker run",
    ]
)
