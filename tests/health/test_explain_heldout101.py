"""explain_text on the hundred-and-first held-out set (tests/data/explain/heldout101.jsonl,
SOURCES.md, notes/heldout101.md): GitHub issues and pull requests opened 2019-2026 of
recommender-system and ads-ranking stacks on NVIDIA GPUs (meta-pytorch/torchrec, pytorch/FBGEMM,
NVIDIA-Merlin/HugeCTR, NVIDIA-Merlin/NVTabular, DeepRec-AI/DeepRec, NVIDIA/DeepLearningExamples'
DLRM and facebookresearch/dlrm were the ones the searches gave) whose text holds a GPU error,
every in-frame text the issues corpus gave in its order, labelled from the thread before explain
was run on them.
21 texts: 13 labelled (illegal-memory-access 5, oom-too-big 4, gpu-arch-unsupported 2,
oom-framework-pool, device-assert), 8 `unknown` (torchrec's forked-worker initialization error
and a nightly's missing fbgemm CUDA kernel, FBGEMM's invalid device function in a broken test and
a missing libcudart.so.12, HugeCTR's two CUDNN_STATUS_MAPPING_ERROR titles and its RMM CNMEM pool
exhausted, NVTabular's RMM out of memory on a GPU already full)."""

from __future__ import annotations

import pytest

from tests.health.explain_sets import (
    cause_readings,
    causes_read,
    heldout_set_checks,
    load_set,
    never_raise,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h254/measure.py): labelled 9/13 right (no answer 3/13, wrong
# 1/13), unknown texts given a high cause 0/8. One change, HugeCTR's documented wording (below):
# after, 10/13 right (no answer 2/13, wrong 1/13), unknown high 0/8.
MIN_ACCURACY = 0.75
KNOWN_MISSES: dict[str, str] = {
    "hugectr-221-criteo-parquet-illegal-memory-access-title-hctr-41": (
        "the title's 'Runtime error: Illegal Memory Access' is the user's shorthand of CUDA's "
        "'an illegal memory access was encountered' (HugeCTR prints cudaGetErrorString whole); "
        "the error itself is in a screenshot"
    ),
    "dle-dlrm-pytorch-embedding-64-illegal-memory-access-title-dle-830": (
        "the title's 'Cuda error: illegal memory access' shortens PyTorch's 'CUDA error: an "
        "illegal memory access was encountered'; the error line is past the excerpt's cut"
    ),
    "nvtabular-keras-sequence-loader-p40-rmm-oom-tf-pool-nvt-967": (
        "RMM's bare cudaErrorMemoryAllocation reads oom-too-big (low) first; TensorFlow holding "
        "the GPU's free memory is the maintainer's reading, not in the text"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT101 = load_set("heldout101")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT101,
    sets_before(101),
    size=(15, 30),
    min_unknown=8,
    min_causes=5,
    min_repositories=7,
    min_categories=21,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

HUGECTR_GENERAL_BUFFER_OOM = "hugectr-dlrm-terabyte-1gpu-general-buffer-out-of-memory-title-hctr-30"
# CK_CUDA_THROW_ as internal_runtime_error's what() prints it (the "[HCDEBUG][ERROR] " prefix,
# cudaGetErrorString, the file and line, a trailing space)
HUGECTR_THROWN_OOM = (
    "terminate called after throwing an instance of 'HugeCTR::internal_runtime_error'\n"
    "  what():  [HCDEBUG][ERROR] Runtime error: out of memory "
    "/hugectr/HugeCTR/src/embeddings/sparse_embedding_functors.cu:212 "
)


def test_hugectrs_cuda_check_out_of_memory_is_a_gpu_out_of_memory() -> None:
    for text in (text_of(HELDOUT101, HUGECTR_GENERAL_BUFFER_OOM), HUGECTR_THROWN_OOM):
        readings = cause_readings(text)
        assert readings[0][0] == "oom-too-big"
        assert {cause for cause, _ in readings} == {
            "oom-too-big",
            "oom-other-process",
            "oom-fragmentation",
        }


@pytest.mark.parametrize(
    "text",
    [
        # host runtimes' own words (Rust's abort, Go's panic), no source file and line after them
        "fatal runtime error: out of memory",
        "panic: runtime error: out of memory",
        "Runtime error: out of memory",
        # a line number is not a source file's
        "Runtime error: out of memory at step 12:30",
    ],
)
def test_a_host_runtimes_out_of_memory_is_not_read_as_the_gpus(text: str) -> None:
    assert causes_read(text) == set()


test_the_new_readings_never_raise = never_raise(
    [
        HUGECTR_THROWN_OOM,
        "Runtime error: out of memory ",
        "Runtime error: out of memory a.hpp:",
        "Runtime error: out of memory " + "x" * 400 + ".cu:1",
    ]
)
