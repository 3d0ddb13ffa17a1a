"""explain_text on the hundred-and-thirty-ninth held-out set (tests/data/explain/heldout139.jsonl,
SOURCES.md, notes/heldout139.md): GitHub issues opened 2019-2026 in NVIDIA Research's model and
paper repositories (NVlabs/stylegan2-ada-pytorch, stylegan2-ada, stylegan3, tiny-cuda-nn,
nvdiffrast, instant-ngp, FoundationPose, few-shot-vid2vid and NVIDIA/cosmos, DeepLearningExamples,
flowtron, vid2vid were the ones the searches gave) whose text holds a GPU error's own words, every
in-frame text the issues corpus gave in its order, labelled from the thread before explain was run
on them. 25 texts: 8 labelled (oom-too-big, gpu-arch-unsupported, illegal-memory-access,
nccl-shm), 17 `unknown` (StyleGAN's bias_act / upfirdn2d plugins failing to build with the
compiler's error past the excerpt, tiny-cuda-nn's bindings, nvdiffrast's and FoundationPose's
CUDA errors, instant-ngp's out-of-memory texts the threads do not settle, invalid device function,
cuDNN's mapping error, NCCL's unhandled cuda error)."""

from __future__ import annotations

import re

import pytest

from gpuwarden.health.explain import signatures
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

# Measured before any change (/tmp/h310/measure.py): labelled 6/8 right, unknown texts given a
# high cause 0/17. Missed: instant-ngp#393 (its message cut short as pasted) and stylegan2-ada#10
# (no answer for nvcc's "Value 'sm_86' is not defined for option 'gpu-architecture'"). After
# signatures.py reads nvcc's option parser refusing an architecture its release does not list
# (`nvcc --help`'s allowed values for --gpu-architecture / --gpu-code): labelled 7/8 right,
# unknown read high 0/17; every earlier diagnosis dumped before and after (4,154 texts): 1 diff,
# this set's stylegan2-ada#10 (no answer → gpu-arch-unsupported medium).
MIN_ACCURACY = 7 / 8
KNOWN_MISSES: dict[str, str] = {
    "instant-ngp-testbed-70-images-4032x3024-cudamalloc-out-of-memor-2060-393": (
        "the paste ends 'failed with error out of memor': cudaMalloc's error string cut short, "
        "and tiny-cuda-nn's 'Could not allocate memory: … failed with error' wraps any CUDA "
        "error (instant-ngp#987 ends 'failed with error unknown error'), so the wrapper alone "
        "does not say out of memory"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT139 = load_set("heldout139")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT139,
    sets_before(139),
    size=(25, 25),
    min_unknown=17,
    min_causes=4,
    min_repositories=12,
    min_categories=25,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)


STYLEGAN2_ADA_SM_86 = "stylegan2-ada-tf-docker-old-cuda-nvcc-fatal-sm-86-not-defined-rtx-30x0-10"
NVCC_OPTION_PARSER = next(
    s for s in signatures.SIGNATURES if "for option '?gpu-(?:architecture" in s.pattern
)


def test_the_calibration_row_reads_nvcc_s_refusal() -> None:
    # no diagnosis at all before the change
    assert cause_readings(text_of(HELDOUT139, STYLEGAN2_ADA_SM_86)) == [
        ("gpu-arch-unsupported", Confidence.MEDIUM)
    ]


@pytest.mark.parametrize(
    "text",
    [
        # a toolkit older than the GPU (CUDA 11.0 and Ada)
        "nvcc fatal   : Value 'sm_89' is not defined for option 'gpu-architecture'",
        # a newer toolkit that dropped the architecture (CUDA 12.0 and Kepler)
        "nvcc fatal   : Value 'sm_35' is not defined for option 'gpu-architecture'",
        # a virtual architecture, and -code=
        "nvcc fatal : Value 'compute_120' is not defined for option 'gpu-architecture'",
        "nvcc fatal : Value 'sm_100a' is not defined for option 'gpu-code'",
        # cuobjdump's parser, the same words
        "cuobjdump fatal: Value 'sm_120' is not defined for option 'gpu-architecture'",
    ],
)
def test_nvcc_refusing_an_architecture_reads_as_unsupported(text: str) -> None:
    assert cause_readings(text) == [("gpu-arch-unsupported", Confidence.MEDIUM)]


@pytest.mark.parametrize(
    "text",
    [
        # values that name no architecture: options an older nvcc lacks (-arch=native before
        # CUDA 11.5), not a GPU it cannot target
        "nvcc fatal : Value 'native' is not defined for option 'gpu-architecture'",
        "nvcc fatal   : Value 'all-major' is not defined for option 'gpu-architecture'",
        # the same parser refusing a C++ dialect (a toolkit too old for the build's -std)
        "nvcc fatal : Value 'c++20' is not defined for option 'std'",
        # prose about the option, no refused value
        "See nvcc --help for the allowed values of option 'gpu-architecture' (sm_86 and up).",
    ],
)
def test_look_alikes_of_nvcc_s_refusal_do_not_read_an_architecture(text: str) -> None:
    assert "gpu-arch-unsupported" not in causes_read(text)


def test_repeated_cut_short_refusals_leave_the_match_on_the_complete_one() -> None:
    # the value is a bounded name between quotes: a search starting in a cut-short copy stops
    # in it
    option_parser = re.compile(NVCC_OPTION_PARSER.pattern, re.IGNORECASE)
    whole = "Value 'sm_86' is not defined for option 'gpu-architecture"
    prefix = "Value 'sm_86' is not defined for opt "
    assert match_after_repeated_prefixes(option_parser, prefix, whole) == whole
    flood = prefix * (100_000 // len(prefix))
    assert causes_read(flood) == set()


test_the_new_reading_never_raises = never_raise(
    [
        "nvcc fatal   : ",
        "Value 'sm_86'",
        "Value 'compute_35'",
        " is not defined for option ",
        "'gpu-architecture'",
        "'gpu-code'",
        "'native'",
    ]
)
