"""A reading's own fixes: a CPU-only build of a library that names itself (PyG's torch-scatter,
ONNX Runtime, sherpa-onnx, k2, OpenCV's DNN module, DGL, Horovod, habitat-sim, CTranslate2, JAX)
is fixed first by that library's documented CUDA build, then by the cause's generic fixes
(torch's CUDA wheel), which stay. The texts are held-out rows as they were collected."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from gpuwarden.doctor.explain import explain
from gpuwarden.health.explain import explain_text
from gpuwarden.health.explain.causes import BY_CODE
from gpuwarden.report.explain import explain_document
from gpuwarden.types.health import Confidence, Diagnosis

DATA = Path(__file__).resolve().parents[1] / "data" / "explain"
GENERIC_CPU_BUILD = BY_CODE["cpu-only-build"].fixes
GENERIC_LIBRARY_CONFLICT = BY_CODE["library-conflict"].fixes


@cache
def _rows(set_name: str) -> dict[str, str]:
    lines = (DATA / f"{set_name}.jsonl").read_text().splitlines()
    rows = (json.loads(line) for line in lines if line.strip())
    return {row["id"]: row["error_text"] for row in rows}


def _diagnosis(text: str, cause: str) -> Diagnosis:
    return next(d for d in explain_text(text).diagnoses if d.cause == cause)


# (held-out set, row id, words the first fix must hold): each library's own CUDA build
CPU_BUILD_ROWS = (
    ("heldout88", "torch-scatter-min-not-compiled-with-cuda-cu111-docker-ts-312", "data.pyg.org"),
    (
        "heldout88",
        "aligned-diffusion-bridges-torch-cluster-radius-not-compiled-cuda-adb-2",
        "data.pyg.org",
    ),
    (
        "heldout43",
        "ort-genai-phi-3-5-cuda-ep-not-enabled-in-this-build-ogai-971",
        "onnxruntime-gpu",
    ),
    (
        "heldout82",
        "optimum-gpu-guide-asked-cudaexecutionprovider-only-cpu-available-op-407",
        "onnxruntime-gpu",
    ),
    (
        "heldout90",
        "sherpa-onnx-t4-vits-cuda-please-compile-enable-gpu-fallback-to-cpu-so-1534",
        "-DSHERPA_ONNX_ENABLE_GPU=ON",
    ),
    ("heldout90", "k2-ragged-tensor-to-device-deviceguard-compiled-without-cuda-k2-1214", "k2"),
    (
        "heldout86",
        "opencv-pip-wheel-dnn-not-built-with-cuda-backend-switching-to-cpu-cv-17582",
        "-DOPENCV_DNN_CUDA=ON",
    ),
    (
        "heldout49",
        "dgl-1-0-1-torch-1-11-cu115-device-api-cuda-not-enabled-dgl-5427",
        "data.dgl.ai/wheels",
    ),
    (
        "heldout72",
        "horovod-pytorch-readyevent-gpu-not-compiled-with-cuda-851",
        "HOROVOD_GPU_OPERATIONS=NCCL",
    ),
    (
        "heldout55",
        "habitat-sim-conda-headless-must-build-with-cuda-gpu2gpu-transfer-hs-1696",
        "--with-cuda",
    ),
    (
        "heldout37",
        "faster-whisper-aarch64-ctranslate2-not-compiled-with-cuda-ct2-1908",
        "-DWITH_CUDA=ON",
    ),
)


@pytest.mark.parametrize(("set_name", "row_id", "words"), CPU_BUILD_ROWS)
def test_a_libraries_cpu_build_is_fixed_first_by_its_own_cuda_build(
    set_name: str, row_id: str, words: str
) -> None:
    fixes = _diagnosis(_rows(set_name)[row_id], "cpu-only-build").fixes
    assert words in fixes[0]
    assert "download.pytorch.org" not in fixes[0]
    # the cause's generic fixes stay, after, in their order
    assert fixes[-len(GENERIC_CPU_BUILD) :] == GENERIC_CPU_BUILD


def test_pyg_fix_names_the_wheel_index_matching_torch() -> None:
    text = "RuntimeError: Not compiled with CUDA support"
    fix = _diagnosis(text, "cpu-only-build").fixes[0]
    assert "https://data.pyg.org/whl/torch-${TORCH}+${CUDA}.html" in fix
    assert "torch-scatter" in fix


def test_pytorch_itself_keeps_the_generic_fixes() -> None:
    # torch's own CPU build: the cause's fixes are its fixes, nothing before them
    text = "AssertionError: Torch not compiled with CUDA enabled"
    assert _diagnosis(text, "cpu-only-build").fixes == GENERIC_CPU_BUILD


def test_no_cuda_build_is_offered_where_the_text_says_there_is_no_nvidia_gpu() -> None:
    # the no-GPU reading of the same message: a CUDA wheel cannot run on a Mac
    text = "RuntimeError: Not compiled with CUDA support (on my MacBook Pro M1)"
    diagnosis = _diagnosis(text, "cpu-only-build")
    assert diagnosis.fixes == GENERIC_CPU_BUILD
    assert not any("data.pyg.org" in fix for fix in diagnosis.fixes)


def test_a_reading_gives_its_fixes_only_to_the_cause_they_fix() -> None:
    # TensorFlow's loader: library-conflict gets tensorflow[and-cuda] first; its low
    # cpu-only-build candidate keeps the generic fixes
    text = (
        "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic "
        "library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file"
    )
    conflict = _diagnosis(text, "library-conflict")
    assert "tensorflow[and-cuda]" in conflict.fixes[0]
    assert conflict.fixes[-len(GENERIC_LIBRARY_CONFLICT) :] == GENERIC_LIBRARY_CONFLICT
    assert _diagnosis(text, "cpu-only-build").fixes == GENERIC_CPU_BUILD


def test_library_conflicts_whose_library_documents_its_fix() -> None:
    xformers = _rows("heldout9")["lib-xformers-hydra-torch-2-4-cu121-built-2-0-gnfactor-10"]
    assert "xformers --index-url" in _diagnosis(xformers, "library-conflict").fixes[0]
    jax = (
        "RuntimeError: Found cuDNN version 8600, but JAX was built against version 8904, "
        "which is newer."
    )
    assert "jax[cuda12]" in _diagnosis(jax, "library-conflict").fixes[0]


def test_jax_without_its_cuda_plugin_is_fixed_by_jax_s_extra() -> None:
    text = (
        "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed."
    )
    assert 'pip install -U "jax[cuda12]"' in _diagnosis(text, "cpu-only-build").fixes[0]


def test_no_fix_is_listed_twice() -> None:
    # two readings of one cause in one text (PyG's message and a +cpu torch): the generic fixes
    # once, after PyG's
    text = "torch 2.1.0+cpu\nRuntimeError: Not compiled with CUDA support"
    fixes = _diagnosis(text, "cpu-only-build").fixes
    assert len(fixes) == len(set(fixes))
    assert "data.pyg.org" in fixes[0]


def test_the_json_keeps_its_contract_a_list_of_strings_own_fix_first() -> None:
    # diagnosis.md §3: "fixes": [...] — the same field, strings, only longer
    document = explain_document(explain("RuntimeError: Not compiled with CUDA support"))
    record = next(d for d in document["diagnoses"] if d["cause"] == "cpu-only-build")
    assert isinstance(record["fixes"], list)
    assert all(isinstance(fix, str) for fix in record["fixes"])
    assert "data.pyg.org" in record["fixes"][0]
    assert record["fixes"][1:] == list(GENERIC_CPU_BUILD)


def test_a_ceiling_on_the_reading_leaves_only_the_generic_fixes() -> None:
    # the paste names only another vendor's GPU: the reading is capped, and a CUDA wheel of the
    # library is not offered first
    text = "RuntimeError: Not compiled with CUDA support\nGPU: AMD Radeon RX 7900 XTX"
    diagnosis = _diagnosis(text, "cpu-only-build")
    assert diagnosis.confidence is not Confidence.HIGH
    assert diagnosis.fixes == GENERIC_CPU_BUILD
