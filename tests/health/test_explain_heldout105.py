"""explain_text on the hundred-and-fifth held-out set (tests/data/explain/heldout105.jsonl,
SOURCES.md, notes/heldout105.md): GitHub issues and pull requests opened 2019-2025 of vector
search and approximate-nearest-neighbour libraries and databases on NVIDIA GPUs
(facebookresearch/faiss and the faiss-gpu-cu11 wheels of Di-Is/faiss-gpu-wheels, NVIDIA/cuvs,
NVIDIA/raft, milvus-io/milvus, milvus-io/knowhere and cuML's NearestNeighbors were the ones the
searches gave) whose text holds a GPU error, every in-frame text the issues corpus gave in its
order, labelled from the thread before explain was run on them.
25 texts: 8 labelled (gpu-arch-unsupported 3, illegal-memory-access 3, device-assert,
kernel-shared-memory-exceeded), 17 `unknown` (faiss's cudaMalloc / cudaHostAlloc failures of its
temporary-memory reservation with nothing settling what held the GPU, two CUDA error 9 launches,
cuBLAS status 13 and a cuBLAS-handle assertion, Milvus's "cuda error:35", its exit-time "driver
shutting down" and cudaFree "invalid argument", faiss's unsupported PQ code length, knowhere's
uninitialised GPU resource manager and a build's "CUDA >= 8.0 is required")."""

from __future__ import annotations

import pytest

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    causes_read,
    heldout_set_checks,
    load_set,
    never_raise,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h261/measure.py): labelled 6/8 right (no answer 2/8, wrong
# 0/8), unknown texts given a high cause 1/17. After the fixes (faiss's GPU IVFPQ check "Device
# N has X bytes of shared memory, while ... requires Y bytes" read with its two numbers; CUDA's
# device-assert printf read by its "block: [..], thread: [..] Assertion `..` failed" when a
# templated kernel's signature puts the file and line far before it): 8/8; 1/17.
MIN_ACCURACY = 1.0
KNOWN_MISSES: dict[str, str] = {}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {
    "milvus-060-source-1050ti-gpu-card-number-cuda-error-35-mv-1124": (
        "CUDA runtime error 35 is cudaErrorInsufficientDriver (the driver older than the "
        "runtime), so driver-too-old is the number's documented meaning; the thread does not "
        "settle it (the reporter's driver 435 is new enough for the CUDA 10.1 he names, and he "
        "rebuilt from source without an outcome), which is why the label stays unknown"
    ),
}

HELDOUT105 = load_set("heldout105")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT105,
    sets_before(105),
    size=(15, 30),
    min_unknown=17,
    min_causes=4,
    min_repositories=6,
    min_categories=25,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

FAISS_IVFPQ_SHARED_MEMORY = "milvus-0100-ivf-pq-m64-shared-memory-49152-65536-mv-2792"
RAFT_SCAN_ASSERTION = "raft-2404-cagra-test-v100-ivf-flat-scan-assertion-max-samples-rft-2599"
SHARED_MEMORY = "kernel-shared-memory-exceeded"

# faiss/gpu/GpuIndexIVFPQ.cu's check as later releases print it (verifyPQSettings_, the device
# from config_): the same wording
FAISS_IVFPQ_96 = (
    "RuntimeError: Error in void faiss::gpu::GpuIndexIVFPQ::verifyPQSettings_() const at "
    "/project/faiss/faiss/gpu/GpuIndexIVFPQ.cu:607: Error: 'requiredSmemSize <= "
    "getMaxSharedMemPerBlock(config_.device)' failed: Device 0 has 49152 bytes of shared memory, "
    "while 8 bits per code and 96 sub-quantizers requires 98304 bytes. Consider "
    "useFloat16LookupTables and/or reduce parameters"
)
# CUDA's device-side assert printf (CUDA C++ Programming Guide, Assertion): the short form the
# file:line reading already read, and a templated kernel whose signature is long
SHORT_DEVICE_ASSERT = (
    "test.cu:19: void testAssert(): block: [0,0,0], thread: [0,0,0] Assertion `should_be_one` "
    "failed."
)
LONG_SIGNATURE = "void kernel<" + ", ".join(f"int P{i} = {i}" for i in range(60)) + ">()"
LONG_DEVICE_ASSERT = (
    f"/src/scan.cuh:42: {LONG_SIGNATURE}: block: [3,0,0], thread: [64,0,0] Assertion "
    "`offset < size` failed."
)


def test_faiss_ivfpq_over_the_blocks_shared_memory_is_read_with_its_numbers() -> None:
    assert cause_readings(text_of(HELDOUT105, FAISS_IVFPQ_SHARED_MEMORY)) == [
        (SHARED_MEMORY, Confidence.HIGH)
    ]
    assert cause_readings(FAISS_IVFPQ_96) == [(SHARED_MEMORY, Confidence.HIGH)]


def test_faiss_ivfpq_reading_gives_faiss_own_advice_first() -> None:
    diagnosis = explain_text(FAISS_IVFPQ_96).diagnoses[0]
    assert "useFloat16LookupTables" in diagnosis.fixes[0]
    assert "sub-quantizers" in diagnosis.fixes[1]


def test_faiss_ivfpq_numbers_that_fit_are_no_confident_reading() -> None:
    fits = FAISS_IVFPQ_96.replace("requires 98304 bytes", "requires 32768 bytes")
    assert (SHARED_MEMORY, Confidence.HIGH) not in cause_readings(fits)


def test_faiss_ivfpqs_other_checks_are_not_shared_memory() -> None:
    # the same verifySettings_ refuses an unsupported code length: a parameter limit, no
    # shared memory named
    code_length = text_of(HELDOUT105, "milvus-ivf-pq-m128-unsupported-pq-code-length-mv-509")
    assert SHARED_MEMORY not in causes_read(code_length)


@pytest.mark.parametrize(
    "text",
    [SHORT_DEVICE_ASSERT, LONG_DEVICE_ASSERT],
    ids=["short-signature", "templated-signature"],
)
def test_cudas_device_assert_printf_is_read_whatever_the_kernels_signature(text: str) -> None:
    assert cause_readings(text)[0] == ("device-assert", Confidence.HIGH)


def test_raft_scan_kernels_assertion_is_read_as_a_device_assert() -> None:
    readings = cause_readings(text_of(HELDOUT105, RAFT_SCAN_ASSERTION))
    assert readings[0] == ("device-assert", Confidence.HIGH)


@pytest.mark.parametrize(
    "text",
    [
        # a host assertion (glibc's assert: no block or thread) and a block/thread printout
        # without an assertion are not a kernel's assert
        "python: /src/host.cpp:12: int main(): Assertion `n > 0' failed.",
        "block: [0,131,0], thread: [126,0,0] sample_offset=5 list_length=3",
    ],
)
def test_block_and_thread_without_a_kernels_assertion_are_no_device_assert(text: str) -> None:
    assert "device-assert" not in causes_read(text)


test_the_new_readings_never_raise = never_raise(
    [
        "Device 0 has 49152 bytes of shared memory, while 8 bits per code and 64 "
        "sub-quantizers requires 65536 bytes",
        "bytes of shared memory, while" * 40,
        "block: [0,0,0], thread: [0,0,0] Assertion `x` failed." * 30,
        "block: [" + "1," * 3000,
    ]
)
