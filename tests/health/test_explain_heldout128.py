"""explain_text on the hundred-and-twenty-eighth held-out set (tests/data/explain/heldout128.jsonl,
SOURCES.md, notes/heldout128.md): GitHub issues and pull requests opened 2019-2026 of PyTorch's
domain libraries and timm (pytorch/vision, pytorch/audio and pytorch/examples were the ones the
searches gave a text of) whose text holds a GPU error, every in-frame text the issues corpus gave
in its order, labelled from the thread before explain was run on them. 7 texts: 1 labelled
(tensor-device-mismatch), 6 `unknown` (torchvision's nms without a CUDA kernel, cuDNN missing
NVRTC, torchaudio's GPU decoder failing a plane copy, NCCL's unhandled system error, torchvision
without its GPU video decoder, a CI run's CUDA invalid argument)."""

from __future__ import annotations

import re

import pytest

from gpuwarden.health.explain import placement
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

# Measured before any change (/tmp/h298/measure.py): labelled 0/1 right (no answer 1/1: PyTorch
# 1.2-1.5's TensorIterator wording "expected device cpu but got device cuda:0"), unknown texts
# given a high cause 0/6. After placement.py reads that documented wording
# (aten/src/ATen/native/TensorIterator.cpp, compute_types: an operand on another device than the
# operation's): labelled 1/1 right, unknown read high 0/6; every earlier diagnosis dumped before
# and after: of this change, 1 diff, this set's torchaudio PR#509 (no answer -> high).
MIN_ACCURACY = 1.0
KNOWN_MISSES: dict[str, str] = {}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT128 = load_set("heldout128")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT128,
    sets_before(128),
    size=(7, 7),
    min_unknown=6,
    min_causes=1,
    min_repositories=3,
    min_categories=7,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

FADE_ON_CUDA = "torchaudio-0-5-torchscript-consistency-fade-expected-device-cpu-got-cuda0-pr-509"
MISMATCH = "tensor-device-mismatch"


def test_the_calibration_row_is_read_as_a_device_mismatch() -> None:
    # no diagnosis at all before the change: the message states two devices in one operation
    assert cause_readings(text_of(HELDOUT128, FADE_ON_CUDA)) == [(MISMATCH, Confidence.HIGH)]


@pytest.mark.parametrize(
    "message",
    [
        # compute_types' out= form, two GPUs, and PyTorch 1.2's form with a dtype after each device
        "RuntimeError: output with device cpu doesn't match the desired device cuda:0",
        "RuntimeError: expected device cuda:1 but got device cuda:0",
        "RuntimeError: expected device cuda:0 and dtype Float but got device cpu and dtype Float",
        "RuntimeError: output with device cuda:0 and dtype Float doesn't match the desired device "
        "cpu and dtype Float",
    ],
)
def test_tensor_iterators_check_of_two_devices_is_a_device_mismatch(message: str) -> None:
    assert cause_readings(message)[0] == (MISMATCH, Confidence.HIGH)


@pytest.mark.parametrize(
    "message",
    [
        # PyTorch 1.2's check failing for a dtype alone: one device named twice
        "RuntimeError: expected device cpu and dtype Float but got device cpu and dtype Long",
        "RuntimeError: output with device cuda:0 and dtype Float doesn't match the desired device "
        "cuda:0 and dtype Half",
        # the message quoted in prose as what a change fixed
        "This PR fixes the error 'expected device cpu but got device cuda:0' in Fade.",
        # a device index longer than any the message prints, and a word that is no device's
        "RuntimeError: expected device cpu but got device cuda:12345",
        "expected device cpu and dtype Float but got device expected device cpu",
        # a meta tensor holds no data: not two devices' worth of tensors
        "RuntimeError: expected device cuda:0 but got device meta",
        # a GPU without its index (never printed for a tensor's device): one GPU or two?
        "RuntimeError: expected device cuda but got device cuda:0",
    ],
)
def test_look_alikes_of_tensor_iterators_check_are_not_a_device_mismatch(message: str) -> None:
    assert MISMATCH not in causes_read(message)


@pytest.mark.parametrize(
    ("pattern", "prefix", "whole"),
    [
        (
            placement._DEVICE_PAIRS[0],
            "expected device cpu and dtype Float but got device ",
            "expected device cpu but got device cuda:0",
        ),
        (
            placement._DEVICE_PAIRS[1],
            "output with device cpu doesn't match the desired device ",
            "output with device cpu doesn't match the desired device cuda:0",
        ),
    ],
)
def test_each_check_matches_only_its_whole_message(
    pattern: re.Pattern[str], prefix: str, whole: str
) -> None:
    assert match_after_repeated_prefixes(pattern, prefix, whole) == whole


def test_100_kb_of_a_cut_message_is_read_as_nothing_and_the_message_after_it_once() -> None:
    prefix = "expected device cpu and dtype Float but got device "
    flood = prefix * (100_000 // len(prefix))
    assert placement.placement_votes(flood) == []
    votes = placement.placement_votes(flood + "cuda:0")
    assert [vote.cause for vote in votes] == [MISMATCH]


test_the_new_reading_never_raises = never_raise(
    [
        "expected device ",
        "cpu",
        "cuda:0",
        " and dtype Float",
        " but got device ",
        "output with device ",
        " doesn't match the desired device ",
        "RuntimeError: ",
    ]
)
