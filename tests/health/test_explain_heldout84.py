"""explain_text on the eighty-fourth held-out set (tests/data/explain/heldout84.jsonl, SOURCES.md,
notes/heldout84.md): GitHub issues and pull requests opened 2019-2026 of ML platforms and
federated / privacy-preserving training (NVFlare, Flower, Opacus, PySyft, FedML, Determined,
ClearML, MLflow, Kubeflow's trainer and Katib, Polyaxon, Metaflow, Flyte, ZenML, SkyPilot, dstack)
whose text holds a GPU error, every in-frame text the issues corpus gave in its order, labelled
from the thread before explain was run on them.
16 texts: 7 labelled (tensor-device-mismatch 3, fabric-manager-down 1, container-toolkit-missing
1, library-conflict 1, oom-other-process 1), 9 `unknown` (TensorFlow's BFC "not a failure"
warnings in Flower's actors, ClearML switching its GPU monitor off, Ray registering no GPU for
Flower's clients, a two-slot Determined trial's OOM, NVFlare's GPU resource manager refusing 16
GiB on a T4, the NVIDIA hook finding no device in minikube, nvidia-smi missing in Docker-in-Docker,
cuDNN's execution failure under a ClearML agent, TensorFlow's ResourceExhaustedError in a Flower
server's evaluation)."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    sets_before,
)

# Measured before any change: labelled 5/7 right (no answer 2/7: ATen's "Tensor for argument #2
# 'mat1' is on CPU, but expected it to be on GPU" and dstack's "could not select device driver ""
# with capabilities: []"), unknown texts given a high cause 0/9. After the fix (placement.py reads
# ATen's checkSameGPU): 6/7, 0/9.
MIN_ACCURACY = 0.8
KNOWN_MISSES = {
    "dstack-ssh-fleet-no-container-toolkit-could-not-select-driver-ds-1947": (
        "the request carries no capabilities ([]): moby's handleDevice matches a driver by "
        "capabilities, and an empty list matches none, so Docker refuses it with or without the "
        "NVIDIA driver registered; that the toolkit was missing is the issue's own setup"
    ),
}

HELDOUT84 = load_set("heldout84")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT84,
    sets_before(84),
    size=(15, 30),
    min_unknown=8,
    min_causes=5,
    min_repositories=8,
    min_categories=16,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)

_ONE_ON_CPU = (
    "RuntimeError: Tensor for argument #{pos} '{name}' is on CPU, but expected it to be on GPU "
    "(while checking arguments for {op})"
)


def test_aten_same_gpu_check_with_one_operand_on_the_cpu_reads_as_a_device_mismatch() -> None:
    # aten/src/ATen/TensorUtils.cpp, checkSameGPU: one "Tensor for … is on CPU," clause per CPU
    # operand, so a single clause leaves the other operand on a GPU
    for pos, name, op in ((2, "mat1", "addmm"), (1, "input", "cudnn_convolution")):
        text = _ONE_ON_CPU.format(pos=pos, name=name, op=op)
        assert cause_readings(text)[0] == ("tensor-device-mismatch", Confidence.HIGH), name


def test_aten_same_gpu_check_naming_two_gpus_reads_as_a_device_mismatch() -> None:
    # checkSameGPU's second check: both operands on GPUs, but not the same one
    text = (
        "RuntimeError: Expected tensor for argument #1 'input' to have the same device as tensor "
        "for argument #2 'weight'; but device 1 does not equal 0 (while checking arguments for "
        "cudnn_convolution)"
    )
    assert cause_readings(text)[0] == ("tensor-device-mismatch", Confidence.HIGH)


def test_aten_same_gpu_check_with_both_operands_on_the_cpu_is_not_a_device_mismatch() -> None:
    # two clauses: both operands on the CPU, one device — a CUDA-only operation given CPU inputs
    for pronoun in ("it", "them"):
        text = (
            "RuntimeError: Tensor for argument #1 'input' is on CPU, Tensor for argument #2 "
            f"'weight' is on CPU, but expected {pronoun} to be on GPU (while checking arguments "
            "for cudnn_convolution)"
        )
        readings = cause_readings(text)
        assert ("tensor-device-mismatch", Confidence.HIGH) not in readings, pronoun
