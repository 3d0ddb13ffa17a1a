"""explain_text on the hundred-and-eighteenth held-out set (tests/data/explain/heldout118.jsonl,
SOURCES.md, notes/heldout118.md): GitHub issues and pull requests opened 2022-2026 of text-to-3D
and image-to-3D generation tools on NVIDIA GPUs (VAST-AI-Research/TripoSR, microsoft/TRELLIS,
Tencent/Hunyuan3D-2, ashawkey/stable-dreamfusion, dreamgaussian/dreamgaussian, xxlong0/Wonder3D,
MrForExample/ComfyUI-3D-Pack, cvlab-columbia/zero123, threestudio-project/threestudio,
Stability-AI/stable-fast-3d and TencentARC/InstantMesh were the ones the searches gave) whose
text holds a GPU error, every in-frame text the issues corpus gave in its order, labelled from
the thread before explain was run on them. 20 texts: 7 labelled (oom-too-big 3,
extension-build-toolkit 3, gpu-arch-unsupported), 13 `unknown` (out-of-memory texts whose threads
settle nothing — a bare title, absurd 780 GiB and 987 GiB requests, a CUDA error's out of memory
in a worker and in texture generation, a README's resolution that no longer fits, ComfyUI's cut
"Allocation on device" — cuDNN / cuBLAS not initialized on a full card, a cuDNN plan warning
beside black images, nvcc's failures with their reason cut, a texture baker without its CUDA
kernel, and torchmcubes built without CUDA)."""

from __future__ import annotations

import pytest

from gpuwarden.health.explain import build_toolkit
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    causes_read,
    heldout_set_checks,
    load_set,
    match_after_repeated_prefixes,
    never_raise,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h281/measure.py): labelled 5/7 right (no answer 2/7), unknown
# texts given a high cause 1/13. The two misses were wordings their printing programs document —
# PyTorch's CMake package stopping a build against a CUDA PyTorch without a toolkit
# (cmake/Caffe2Config.cmake.in: "Your installed Caffe2 version uses CUDA but I cannot find the
# CUDA libraries") and CMake's check_language(CUDA) finding no CUDA compiler
# (Modules/CheckLanguage.cmake: "Looking for a CUDA compiler - NOTFOUND") — now read as
# extension-build-toolkit (medium), with TripoSR's own "torchmcubes was not compiled with CUDA
# support" that its README reads as a CPU-only torchmcubes build; those rows are calibration.
# After: labelled 7/7 right, unknown read high 1/13; no earlier diagnosis moved (every set, the
# OOM files and the fixtures dumped before and after: 3 diffs, all this set's).
MIN_ACCURACY = 1.0
KNOWN_MISSES: dict[str, str] = {}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {
    "trellis-diff-gaussian-rasterization-oom-780gib-request-24gib-3": (
        "PyTorch's message shows one request (780 GiB) far above the card (24 GiB), which explain "
        "reads as a job too big for the GPU (oom-too-big, high), as earlier sets label such "
        "requests; this thread does not settle it, and other users run TRELLIS on the same 24 GB "
        "cards, so a rasterizer build that computes a wrong buffer size is as likely"
    ),
}

HELDOUT118 = load_set("heldout118")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT118,
    sets_before(118),
    size=(15, 25),
    min_unknown=13,
    min_causes=3,
    min_repositories=11,
    min_categories=20,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

TOOLKIT = "extension-build-toolkit"
CMAKE_NO_CUDA_COMPILER = "triposr-torchmcubes-wheel-cmake-cuda-compiler-notfound-cpu-only-108"
CAFFE2_NO_CUDA = "triposr-torchmcubes-cmake-caffe2-uses-cuda-cannot-find-cuda-libraries-147"
TORCHMCUBES_CPU_ONLY = "triposr-torchmcubes-not-compiled-with-cuda-support-title-66"


@pytest.mark.parametrize(
    "example_id", [CMAKE_NO_CUDA_COMPILER, CAFFE2_NO_CUDA, TORCHMCUBES_CPU_ONLY]
)
def test_the_calibration_rows_read_the_build_toolkit_unsure(example_id: str) -> None:
    # each read nothing before the change; none of the wordings says which toolkit is missing
    assert cause_readings(text_of(HELDOUT118, example_id)) == [(TOOLKIT, Confidence.MEDIUM)]


@pytest.mark.parametrize(
    "message",
    [
        # Caffe2Config.cmake.in's message on one line, as its source writes it
        "CMake Error at /opt/libtorch/share/cmake/Caffe2/Caffe2Config.cmake:90 (message): Your "
        "installed Caffe2 version uses CUDA but I cannot find the CUDA libraries. Please set the "
        "proper CUDA prefixes and / or install CUDA.",
        # CMake before 3.17 printed the check with STATUS, without the leading "-- " of CHECK_*
        "Looking for a CUDA compiler - NOTFOUND",
        # the AttributeError TripoSR catches (its README's other wording of the same cause)
        "AttributeError: module 'torchmcubes_module' has no attribute 'mcubes_cuda'. Did you "
        "mean: 'mcubes_cpu'?",
    ],
)
def test_the_documented_wordings_read_the_build_toolkit(message: str) -> None:
    assert cause_readings(message)[0] == (TOOLKIT, Confidence.MEDIUM)


@pytest.mark.parametrize(
    "message",
    [
        # the check that found a compiler, and the same check for other languages
        "-- Looking for a CUDA compiler\n-- Looking for a CUDA compiler - /usr/local/cuda/bin/nvcc",
        "-- Looking for a HIP compiler - NOTFOUND",
        "-- Looking for a Fortran compiler - NOTFOUND",
        # Caffe2Config's other package checks, the XPU one worded like CUDA's
        "Your installed Caffe2 version uses XPU but I cannot find the XPU runtimelibraries. "
        "Please set the proper oneAPI paths and / or install oneAPI.",
        "Your installed Caffe2 version uses glog but the glog library cannot be found.",
        # torchmcubes' CPU function missing is not its CUDA part
        "AttributeError: module 'torchmcubes_module' has no attribute 'mcubes_cpu'",
    ],
)
def test_look_alikes_do_not_read_the_build_toolkit(message: str) -> None:
    assert TOOLKIT not in causes_read(message)


@pytest.mark.parametrize(
    "fragment",
    [
        "Looking for a CUDA compiler - ",
        "Your installed Caffe2 version uses CUDA but I cannot find the ",
        "torchmcubes was not compiled with CUDA ",
        "module 'torchmcubes_module' has no attribute '",
    ],
)
def test_100_kb_of_the_new_phrases_cut_short_is_read_as_nothing(fragment: str) -> None:
    # the reader's own entry point, past explain's bound on the paste it scans; what keeps it
    # quick is checked below, without a clock
    flat = fragment * (100_000 // len(fragment))
    assert build_toolkit.build_toolkit_votes(flat) == []


@pytest.mark.parametrize(
    ("pattern", "fragment", "whole"),
    [
        (
            "_CMAKE_NO_CUDA_COMPILER",
            "Looking for a CUDA compiler - ",
            "Looking for a CUDA compiler - NOTFOUND",
        ),
        (
            "_NOT_FOUND",
            "Your installed Caffe2 version uses CUDA but I cannot find the ",
            "Your installed Caffe2 version uses CUDA but I cannot find the CUDA libraries",
        ),
        (
            "_BUILT_WITHOUT_CUDA",
            "torchmcubes was not compiled with CUDA ",
            "torchmcubes was not compiled with CUDA support",
        ),
        (
            "_BUILT_WITHOUT_CUDA",
            "module 'torchmcubes_module' has no attribute '",
            "module 'torchmcubes_module' has no attribute 'mcubes_cuda'",
        ),
    ],
)
def test_the_new_phrases_match_only_their_whole_message(
    pattern: str, fragment: str, whole: str
) -> None:
    found = match_after_repeated_prefixes(getattr(build_toolkit, pattern), fragment, whole)
    assert found == whole


test_the_new_readings_never_raise = never_raise(
    [
        "-- Looking for a CUDA compiler",
        "- NOTFOUND",
        "Looking for a CUDA compiler - NOTFOUND",
        "Your installed Caffe2 version uses CUDA but I cannot find the CUDA",
        "libraries.  Please set the proper CUDA prefixes and / or install CUDA.",
        "torchmcubes was not compiled with CUDA support, use CPU version instead.",
        "module 'torchmcubes_module' has no attribute 'mcubes_cuda'",
        "NO CUDA INSTALLATION FOUND, INSTALLING CPU VERSION ONLY!",
    ]
)
