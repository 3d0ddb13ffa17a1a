"""explain_text on the hundred-and-fifteenth held-out set (tests/data/explain/heldout115.jsonl,
SOURCES.md, notes/heldout115.md): GitHub issues and pull requests opened 2019-2026 of
model-serving platforms running models on NVIDIA GPUs (triton-inference-server/server and its
fastertransformer_backend, pytorch/serve, kserve/kserve, bentoml/BentoML and Ray Serve were the
ones the searches gave) whose text holds a GPU error, every in-frame text the issues corpus gave
in its order, labelled from the thread before explain was run on them. 14 texts (below the
brief's 15: the session's search budget ran out): 2 labelled (driver-too-old,
device-ordinal-invalid), 12 `unknown` (Triton's CNMeM pool fallbacks, FasterTransformer's and a
Triton ONNX warmup's unsettled failures, TorchServe's and TensorFlow's no-driver warnings on
hosts or runners without a GPU, ONNX Runtime's CUDA provider that could not load, a JIT link
without libcuda, an out-of-memory beside a device-side assert, and Triton's in-process start-up
warnings)."""

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

# Measured before any change (/tmp/h278/measure.py): labelled 2/2 right (no answer 0/2), unknown
# texts given a high cause 2/12. Both high readings are the message's documented meaning read
# without the thread's context (below); no source changed this round (the search budget ran out
# before the printing program's source could be cited), so After = before.
MIN_ACCURACY = 1.0
KNOWN_MISSES: dict[str, str] = {}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {
    "torchserve-oom-low-utilisation-device-side-assert-title-3114": (
        "the title quotes 'CUDA error: device-side assert triggered', which names a kernel "
        "assertion (device-assert, high); it was labelled `unknown` before explain ran because "
        "the title pairs it with an out-of-memory on a mostly free card and the thread never "
        "finds the crash's cause"
    ),
    "triton-in-process-api-pinned-memory-driver-insufficient-cudadriverhelper-7222": (
        "CUDA error 35's string reads as an old driver (driver-too-old, high), as the CUDA "
        "runtime documents it; Triton's 'CudaDriverHelper has not been initialized' beside it "
        "does not show a missing driver: its source (triton-inference-server/core "
        "src/cuda_utils.cc, CudaDriverHelper's constructor) gives up when dlopen of the "
        "unversioned 'libcuda.so', a cuMem* lookup or cuInit fails, and a working GPU prints "
        "it too (PaddleX's Triton notes call it benign); the thread does not settle it"
    ),
}

HELDOUT115 = load_set("heldout115")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT115,
    sets_before(115),
    size=(14, 20),
    min_unknown=12,
    min_causes=2,
    min_repositories=6,
    min_categories=14,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

NO_DRIVER_WARNINGS_ON_HOSTS_WITHOUT_A_GPU = [
    "torchserve-cpu-deployment-cuda-init-found-no-nvidia-driver-warning-912",
    "bentoml-pr-onnx-mlir-ci-libcuda-missing-cuinit-303-no-driver-1545",
    "ray-serve-docs-replica-tensorflow-libcuda-missing-cuinit-303-34481",
]
TRITON_CNMEM_POOL_FALLBACKS = [
    "triton-cnmem-out-of-memory-78643200-pinned-fallback-title-1765",
    "triton-python-backend-cnmem-oom-fallback-then-failed-to-copy-invalid-argument-8177",
]


@pytest.mark.parametrize("example_id", NO_DRIVER_WARNINGS_ON_HOSTS_WITHOUT_A_GPU)
def test_no_driver_warnings_without_a_gpu_get_no_confident_cause(example_id: str) -> None:
    # a CPU host or CI runner warns that it found no driver: no cause may be read high
    readings = cause_readings(text_of(HELDOUT115, example_id))
    assert all(confidence is not Confidence.HIGH for _, confidence in readings)


@pytest.mark.parametrize("example_id", TRITON_CNMEM_POOL_FALLBACKS)
def test_triton_cnmem_pool_fallback_is_not_read_as_a_gpu_out_of_memory(example_id: str) -> None:
    # Triton's own pool could not serve the request and fell back to pinned host memory: the
    # card itself was not shown full, so no out-of-memory cause is read
    causes = {cause for cause, _ in cause_readings(text_of(HELDOUT115, example_id))}
    assert not {cause for cause in causes if cause.startswith("oom-")}
