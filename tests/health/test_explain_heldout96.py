"""explain_text on the ninety-sixth held-out set (tests/data/explain/heldout96.jsonl, SOURCES.md,
notes/heldout96.md): GitHub issues and pull requests opened 2019-2026 of NVIDIA Jetson and
embedded GPU software (dusty-nv/jetson-inference, jetson-containers and jetson-utils,
NVIDIA-AI-IOT/torch2trt, two NVIDIA-ISAAC-ROS repositories and Qengineering/Jetson-Nano-image were
the ones the searches gave) whose text holds a GPU error, every in-frame text the issues corpus
gave in its order, labelled from the thread before explain was run on them.
22 texts: 6 labelled (gpu-arch-unsupported 2, launch-failure 2, oom-too-big 2), 16 `unknown`
(jetson-utils' CUDA error 999 four times, OpenCV's "(-217:Gpu API call) initialization error"
twice, PyTorch's cudaGetDeviceCount failure, TensorRT network-definition and binding errors,
jetson-utils' cudaAllocMapped failure, a web UI's "Torch is not able to use GPU", TensorRT 10.3's
tactic-memory warnings before a known build bug, TensorFlow's cuInit NO_DEVICE on a corrupted
Jetson image, cuBLAS and cuDNN EXECUTION_FAILED)."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h249/measure.py): labelled 5/6 right (no answer 1/6, wrong
# 0/6), unknown texts given a high cause 0/16. No change: the one miss is not a wording
# TensorRT documents as fatal (see KNOWN_MISSES).
MIN_ACCURACY = 0.8
KNOWN_MISSES = {
    "torch2trt-virtualmemorybuffer-outofmemory-6gb-laptop-t2t-771": (
        "TensorRT's builder prints '[virtualMemoryBuffer.cpp::resizePhysical] Error Code 2: "
        "OutOfMemory (no further information)' also for a tactic's workspace it cannot get and "
        "then skips, recovering by trying other tactics (the same lines precede 'Skipping tactic "
        "... due to insufficient memory' in builds that succeed); NVIDIA documents no meaning for "
        "the line, and explain reads a build OOM only with the builder's own failure ('Requested "
        "amount of GPU memory ... could not be allocated' beside 'Engine building failed'). Here "
        "only a segmentation fault follows, and the thread never answers"
    ),
}

HELDOUT96 = load_set("heldout96")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT96,
    sets_before(96),
    size=(15, 30),
    min_unknown=16,
    min_causes=3,
    min_repositories=7,
    min_categories=22,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)

JETSON_UTILS_ERROR_719 = "jetson-utils-gstencoder-unspecified-launch-failure-719-ju-215"
TENSORRT_TACTIC_SKIPS = "isaac-ros-common-trt-10-3-tactic-insufficient-memory-build-failed-irc-223"


def test_jetson_utils_error_719_reads_as_a_launch_failure() -> None:
    # jetson-utils' log line: CUDA's own words for error 719, then its number and hex code
    readings = cause_readings(text_of(HELDOUT96, JETSON_UTILS_ERROR_719))
    assert readings[0] == ("launch-failure", Confidence.MEDIUM)


def test_tensorrt_tactic_memory_skips_are_no_out_of_memory() -> None:
    # the builder recovers from a tactic it cannot give memory to: no OOM cause is named
    assert cause_readings(text_of(HELDOUT96, TENSORRT_TACTIC_SKIPS)) == []
