"""explain_text on the hundred-and-nineteenth held-out set (tests/data/explain/heldout119.jsonl,
SOURCES.md, notes/heldout119.md): GitHub issues and pull requests opened 2018-2026 of the
repositories of deep-learning courses, textbooks and official tutorials (fastai/fastai,
fastai/course-v3 and pytorch/tutorials were the ones the searches gave with a GPU error's own
words) whose text holds a GPU error, every in-frame text the issues corpus gave in its order,
labelled from the thread before explain was run on them. 13 texts (below the brief's 15: thirty
searches gave no more in-frame threads): 8 labelled (device-assert 4, gpu-arch-unsupported 2,
cpu-only-build, oom-too-big), 5 `unknown` (PyTorch's is_cuda() internal assertion in a fastai
callback, the THC-era "invalid argument at THCGeneral.cpp:405" and "unknown error" (30), CUDA's
unknown error under WSL2, and the tutorial's first CUDA tensor failing with "out of memory")."""

from __future__ import annotations

import pytest

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h282/measure.py): labelled 7/8 right (no answer 0/8, wrong
# 1/8), unknown texts given a high cause 0/5. The one miss is a reading of the allocator's own
# numbers against the thread's fix (below); no source changed this round, so After = before.
MIN_ACCURACY = 0.875
KNOWN_MISSES: dict[str, str] = {
    "fastai-course-v3-lesson1-pets-oom-quadro-p2000-bs64-248": (
        "PyTorch 1.0's OOM message reports 332.48 MiB 'cached' against 32.75 MiB tried; its "
        "allocator (c10/cuda/CUDACachingAllocator.cpp, the comment above the OOM error) prints "
        "as 'cached' only what stays split from blocks partly in use after cuda_malloc_retry "
        "freed the rest, so explain reads oom-fragmentation high as the program documents it; "
        "the text was labelled oom-too-big before explain ran because the thread settles on "
        "the lesson's batch size (bs = 64 → 16) for a 5 GB card with 3.85 GiB already "
        "allocated — a smaller batch fixes both readings"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT119 = load_set("heldout119")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT119,
    sets_before(119),
    size=(13, 20),
    min_unknown=5,
    min_causes=4,
    min_repositories=3,
    min_categories=13,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

THC_ERA_DEVICE_ASSERTS = [
    "fastai-lr-find-timeseries-cuda-runtime-error-59-device-side-assert-612",
    "fastai-text-classifier-fit-one-cycle-device-side-assert-classnllcriterion-972",
    "fastai-course-v3-lesson2-camvid-lr-find-device-side-assert-46",
    "fastai-thc-tensor-math-device-side-assert-after-long-training-title-1835",
]
THC_ERA_ERRORS_WITHOUT_A_MECHANISM = [
    "fastai-course-v3-fit-one-cycle-cuda-runtime-error-11-invalid-argument-thcgeneral-405-title-1566",
    "fastai-windows-gtx1060-cuda-runtime-error-30-unknown-error-thcgeneral-1945",
    "fastai-wsl2-gtx1650-fine-tune-cuda-error-unknown-error-3790",
]


@pytest.mark.parametrize("example_id", THC_ERA_DEVICE_ASSERTS)
def test_thc_era_error_59_is_read_as_a_device_assert_only(example_id: str) -> None:
    # PyTorch ≤ 1.0 printed cudaErrorAssert (59) as "cuda runtime error (59) : device-side
    # assert triggered at <THC file>": one reading, sure, and no hardware cause beside it
    assert cause_readings(text_of(HELDOUT119, example_id)) == [("device-assert", Confidence.HIGH)]


@pytest.mark.parametrize("example_id", THC_ERA_ERRORS_WITHOUT_A_MECHANISM)
def test_runtime_errors_that_name_no_mechanism_get_no_medium_or_high_cause(
    example_id: str,
) -> None:
    # "invalid argument", "unknown error" (30 / 999) name no mechanism: at most an unsure guess
    readings = cause_readings(text_of(HELDOUT119, example_id))
    assert all(confidence is Confidence.LOW for _, confidence in readings)
