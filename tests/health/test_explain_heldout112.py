"""explain_text on the hundred-and-twelfth held-out set (tests/data/explain/heldout112.jsonl,
SOURCES.md, notes/heldout112.md): GitHub issues and pull requests opened 2021-2026 of
robot-learning policy code on NVIDIA GPUs (Physical-Intelligence/openpi, NVIDIA/Isaac-GR00T and
huggingface/lerobot were the ones whose threads the searches gave with an error's own words)
whose text holds a GPU error, every in-frame text the issues corpus gave in its order, labelled
from the thread before explain was run on them. 12 texts (the corpus ran dry below the brief's
15: the last twenty-one searches gave no new in-frame text): 8 labelled (illegal-memory-access 2,
oom-too-big, oom-fragmentation, driver-too-old, gpu-arch-unsupported, cpu-only-build,
cuda-graph-capture-unsupported), 4 `unknown` (openpi's XLA BFC OOM with no totals, its
CUDNN_STATUS_EXECUTION_FAILED, its "ptxas too old" on an RTX 5090, and a bytes-only
RESOURCE_EXHAUSTED)."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h274/measure.py): labelled 7/8 right (wrong 1/8, no answer
# 0/8), unknown texts given a high cause 0/4. The one miss is no unread wording but a weighing of
# PyTorch's own numbers (below), so no source changed: the figures after are the same.
MIN_ACCURACY = 0.85
KNOWN_MISSES: dict[str, str] = {
    "gr00t-a100-large-dataset-oom-426mib-2-41gib-reserved-unallocated-gr-162": (
        "2.41 GiB reserved but unallocated covers the 426 MiB request (the vocabulary's "
        "fragmentation tell-tale, so labelled so), but it is 3 % of the 76 GiB reserved: explain "
        "reads the job as at the card's limit (oom-too-big, medium) with fragmentation low, as "
        "earlier sets labelled such numbers when their threads settled them; this open thread "
        "does not say which"
    ),
}

HELDOUT112 = load_set("heldout112")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT112,
    sets_before(112),
    size=(12, 30),
    min_unknown=4,
    min_causes=7,
    min_repositories=3,
    min_categories=12,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)

JETSON_NO_KERNEL = "openpi-jetson-orin-repeatbufferkernel-no-kernel-image-pi-582"
CUDNN_DRIVER = "openpi-libero-serve-cudnn-handle-cuda-driver-insufficient-pi-407"
PTXAS_TOO_OLD = "openpi-rtx5090-ptxas-no-cc-12-0-unimplemented-ptxas-too-old-pi-419"
FRAGMENTATION = "gr00t-a100-large-dataset-oom-426mib-2-41gib-reserved-unallocated-gr-162"


def test_xla_no_kernel_image_for_device_reads_the_arch_high() -> None:
    # XLA's stream_executor names cudaErrorNoKernelImageForDevice and its message itself
    readings = cause_readings(text_of(HELDOUT112, JETSON_NO_KERNEL))
    assert readings[0] == ("gpu-arch-unsupported", Confidence.HIGH)


def test_cudnn_handle_error_35_reads_the_driver_high() -> None:
    readings = cause_readings(text_of(HELDOUT112, CUDNN_DRIVER))
    assert readings[0] == ("driver-too-old", Confidence.HIGH)


def test_ptxas_older_than_the_gpu_stays_undecided() -> None:
    # as set 73 read jax#13570: XLA's fallback to the driver is no cause by itself
    assert cause_readings(text_of(HELDOUT112, PTXAS_TOO_OLD)) == []


def test_terminal_wraps_in_the_torch_oom_do_not_change_its_reading() -> None:
    # the paste wraps "this process has \n79.25 GiB" and "PYTOR\nCH_CUDA_ALLOC_CONF"
    wrapped = text_of(HELDOUT112, FRAGMENTATION)
    joined = wrapped.replace("has \n79.25", "has 79.25").replace("PYTOR\nCH", "PYTORCH")
    assert cause_readings(wrapped) == cause_readings(joined)
    assert ("oom-fragmentation", Confidence.LOW) in cause_readings(wrapped)
