"""explain_text on the hundred-and-seventh held-out set (tests/data/explain/heldout107.jsonl,
SOURCES.md, notes/heldout107.md): GitHub issues and pull requests opened 2019-2026 of
reinforcement-learning libraries and their GPU simulators on NVIDIA GPUs (ray-project/ray's
RLlib, NVIDIA-Omniverse/IsaacGymEnvs — the corpus names it isaac-sim/IsaacGymEnvs —,
thu-ml/tianshou, pytorch/rl (TorchRL) and google-deepmind/acme were the ones the searches gave)
whose text holds a GPU error, every in-frame text the issues corpus gave in its order, labelled
from the thread before explain was run on them.
16 texts: 6 labelled (tensor-device-mismatch 3, illegal-memory-access 2, gpu-arch-unsupported),
10 `unknown` (RLlib's TensorFlow ResourceExhaustedError on Windows and its "GPUs were assigned
to this worker by Ray, but TensorFlow reports GPU acceleration is disabled" twice, PyTorch's
"cudnn RNN backward can only be called in training mode" from RLlib's multi-GPU towers, "can't
convert cuda:0 device type tensor to numpy", Isaac Gym on a machine without a GPU
(libcuda.so.1), PhysX's PxgCudaDeviceMemoryAllocator failure, headless camera buffers' CUDA
error 101, Vulkan's "No DRI3 support detected", and acme's CUBLAS_STATUS_ALLOC_FAILED)."""

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

# Measured before any change (/tmp/h265/measure.py): labelled 5/6 right (no answer 1/6, wrong
# 0/6), unknown texts given a high cause 0/10. After the fix (JAX's jit refusing arguments on
# different devices, "Received incompatible devices for jitted computation. Got … and …", read
# as tensor-device-mismatch: high where both sides it names are arguments): 6/6; 0/10.
MIN_ACCURACY = 1.0
KNOWN_MISSES: dict[str, str] = {}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT107 = load_set("heldout107")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT107,
    sets_before(107),
    size=(15, 30),
    min_unknown=10,
    min_causes=3,
    min_repositories=5,
    min_categories=16,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

BRAX_ENV_DEVICES = "torchrl-05-braxenv-ant-jax-cuda12-incompatible-devices-gpu-cpu-trl-2319"
MISMATCH = "tensor-device-mismatch"

# JAX's message as jax/_src/pjit.py builds it (_device_assignment_mismatch_error), with the
# sides pxla.DeviceAssignmentMismatch prints: two arguments (jax.Array.committed's example,
# one array put on the GPU and one on the CPU), an argument against the jit's context mesh, and
# the message alone
JAX_PREFIX = "ValueError: Received incompatible devices for jitted computation."
TWO_ARGUMENTS = (
    f"{JAX_PREFIX} Got argument x1 of jax.numpy.add with shape int32[3] and device ids [0] on "
    "platform GPU and argument x2 of jax.numpy.add with shape int32[3] and device ids [0] on "
    "platform CPU"
)
ARGUMENT_AND_MESH = (
    f"{JAX_PREFIX} Got argument x of _identity_fn with shape bfloat16[64,128] and device ids "
    "[0, 1, 2, 3] on platform GPU and jit's context mesh with device ids [0] on platform CPU"
)


def test_torchrl_brax_envs_jax_device_mismatch_is_read_as_stated() -> None:
    readings = cause_readings(text_of(HELDOUT107, BRAX_ENV_DEVICES))
    assert readings[0] == (MISMATCH, Confidence.HIGH)


@pytest.mark.parametrize(
    ("text", "confidence"),
    [
        (TWO_ARGUMENTS, Confidence.HIGH),
        (TWO_ARGUMENTS.replace("jitted", "pjitted"), Confidence.HIGH),
        (ARGUMENT_AND_MESH, Confidence.MEDIUM),
        (JAX_PREFIX, Confidence.MEDIUM),
    ],
    ids=["two-arguments", "pjit", "argument-and-mesh", "message-alone"],
)
def test_jax_device_mismatch_is_stated_only_when_it_names_two_arguments(
    text: str, confidence: Confidence
) -> None:
    assert cause_readings(text)[0] == (MISMATCH, confidence)


def test_jax_device_mismatch_gives_jaxs_own_fixes_first() -> None:
    diagnosis = explain_text(TWO_ARGUMENTS).diagnoses[0]
    assert "jax.device_put" in diagnosis.fixes[0]
    assert "NamedSharding" in diagnosis.fixes[1]


def test_jax_device_mismatch_against_a_mesh_names_what_decides() -> None:
    diagnosis = explain_text(ARGUMENT_AND_MESH).diagnoses[0]
    assert diagnosis.decides is not None and "x.devices()" in diagnosis.decides


@pytest.mark.parametrize(
    "text",
    [
        # other "incompatible" device wordings are not JAX's jit refusing its arguments
        "RuntimeError: CUDA error: incompatible device type for this operation",
        "warning: devices are incompatible with the requested precision",
        "Received incompatible devices for jitted",
    ],
)
def test_other_incompatible_device_wordings_are_no_device_mismatch(text: str) -> None:
    assert MISMATCH not in causes_read(text)


test_the_new_readings_never_raise = never_raise(
    [
        JAX_PREFIX,
        " Got ARG_SHARDING with device ids [0] on platform GPU and",
        "argument x of f with shape f32[8] and device ids [" + "0, " * 300,
        "as AbstractMesh of size 8",
        JAX_PREFIX * 20,
    ]
)
