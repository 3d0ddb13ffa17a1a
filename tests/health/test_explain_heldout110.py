"""explain_text on the hundred-and-tenth held-out set (tests/data/explain/heldout110.jsonl,
SOURCES.md, notes/heldout110.md): GitHub issues opened 2020-2026 in talking-head, lip-sync,
face-swap and face-restoration tools on NVIDIA GPUs (Rudrabha/Wav2Lip, OpenTalker/SadTalker,
KwaiVGI/LivePortrait — the corpus names it KlingAIResearch/LivePortrait —, TMElyralab/MuseTalk,
fudan-generative-vision/hallo, Zejun-Yang/AniPortrait, facefusion/facefusion, iperov/DeepFaceLab
and DeepFaceLive, TencentARC/GFPGAN, sczhou/CodeFormer were the ones the searches gave) whose
text holds a GPU error, every in-frame text the issues corpus gave in its order, labelled from
the thread before explain was run on them.
26 texts: 14 labelled (oom-too-big 7, illegal-memory-access 3, gpu-arch-unsupported 2,
device-assert, driver-too-old), 12 `unknown` (onnxruntime-gpu's "CUDA_PATH is set but CUDA
wasn't able to be loaded" three times and its LoadLibrary error 126 twice, cuFFT's
CUFFT_INTERNAL_ERROR, PyTorch's "CUDA driver initialization failed" warning and "No CUDA GPUs
are available" after hours on an RTX 4090D, cuDNN's "FIND was unable to find an engine", a
"CUDA error: out of memory" on a GPU the reporter saw idle, Wav2Lip's own "Image too big to run
face detection on GPU", and three errors listed at once)."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h272/measure.py): labelled 11/14 right (no answer 1/14, wrong
# 2/14), unknown texts given a high cause 0/12. No miss is a documented wording the code lacks
# (see the reasons below), so nothing was changed: the figures after are the same.
MIN_ACCURACY = 0.75
KNOWN_MISSES: dict[str, str] = {
    "deepfacelab-build-cuda-11-0-old-driver-tf-cudagetdevice-init-error-title-dfl-5242": (
        "TensorFlow's 'cudaGetDevice() failed. Status: initialization error' is CUDA's "
        "cudaErrorInitializationError (3), documented only as 'the CUDA driver and runtime could "
        "not be initialized'; a driver older than the runtime is cudaErrorInsufficientDriver "
        "(35). The thread settles it by the build's bundled CUDA 11.0, which the text does not show"
    ),
    "gfpgan-windows-6gb-oom-1-96-gib-batch-norm-gfp-146": (
        "labelled by the set's rule (an OOM is oom-too-big unless the thread says otherwise; "
        "this one has no answer), while its numbers leave 2.25 GiB of the 6 GiB outside "
        "PyTorch (total − reserved − free), which the vocabulary reads as another process's: "
        "on a Windows desktop the thread never says whose the bytes are"
    ),
    "codeformer-gtx1650-oom-930-mib-3-82-gib-cf-78": (
        "938.75 MiB free is 8.75 MiB more than the 930 MiB tried, so explain reads a pool or "
        "limit (low) rather than a job at the card's edge; the reporter's fix (a smaller image) "
        "settles it as too big, but no documented wording says how close to free a cudaMalloc "
        "may fail, so no threshold was added"
    ),
}

HELDOUT110 = load_set("heldout110")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT110,
    sets_before(110),
    size=(15, 30),
    min_unknown=12,
    min_causes=5,
    min_repositories=11,
    min_categories=26,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)

WINDOWS_OOM = "gfpgan-windows-6gb-oom-1-96-gib-batch-norm-gfp-146"
NEAR_FREE_OOM = "codeformer-gtx1650-oom-930-mib-3-82-gib-cf-78"


def test_the_windows_oom_keeps_too_big_as_a_reading() -> None:
    # a known miss above: the job being too big stays among the readings, below another holder
    readings = cause_readings(text_of(HELDOUT110, WINDOWS_OOM))
    assert readings[0] == ("oom-other-process", Confidence.HIGH)
    assert ("oom-too-big", Confidence.LOW) in readings


def test_an_oom_with_free_just_above_the_request_gets_no_confident_cause() -> None:
    # a known miss above: 8.75 MiB of slack decides nothing, so no reading is high
    readings = cause_readings(text_of(HELDOUT110, NEAR_FREE_OOM))
    assert readings
    assert all(confidence is not Confidence.HIGH for _, confidence in readings)
