"""explain_text on PyTorch's device checks that read nothing before (h293): the checks naming two
tensors' types or backends (Convolution.cpp's check_input_same_type_as_parameters, TensorUtils.cpp's
checkSameType / checkBackend / checkDeviceType, Utils.h's checked casts), read as
tensor-device-mismatch only where the two names sit on two devices, and the checks that fail
only for two devices (RNN.h's check_attributes, index's check_indices_on_cpu_or_selfdevice,
torch.cat's). Every wording below is the format string of the PyTorch source the module's
docstring cites, filled in as PyTorch fills it; none of the 3,860 texts of the held-out sets,
the OOM wordings and the fixtures holds one (before and after: 0 diagnoses moved)."""

from __future__ import annotations

import pytest

from gpuwarden.health.explain import match, placement
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings, causes_read, never_raise

MISMATCH = ("tensor-device-mismatch", Confidence.HIGH)


@pytest.mark.parametrize(
    "message",
    [
        # check_input_same_type_as_parameters, through torch/csrc's legacy names, ATen's own
        # (the releases that printed them), the MKLDNN overload's longer wording, and the bias
        "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) "
        "should be the same",
        "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) "
        "should be the same or input should be a MKLDNN tensor and weight is a dense tensor",
        "RuntimeError: Input type (CUDAFloatType) and weight type (CPUFloatType) should be the "
        "same",
        "RuntimeError: Input type (torch.cuda.HalfTensor) and bias type (torch.HalfTensor) "
        "should be the same",
        # checkSameType, as torchvision's roi_align calls it
        "RuntimeError: Expected tensor for argument #1 'input' to have the same type as tensor "
        "for argument #2 'rois'; but type torch.cuda.FloatTensor does not equal "
        "torch.FloatTensor (while checking arguments for ROIAlign_forward_cuda)",
        # Utils.h's checked cast (PyTorch 0.4-1.0)
        "RuntimeError: Expected object of type torch.cuda.FloatTensor but found type "
        "torch.FloatTensor for argument #2 'weight'",
        # checkBackend, checkDeviceType and bmm's checkOnCPU
        "RuntimeError: Expected tensor to have CUDA Backend, but got tensor with CPU Backend "
        "(while checking arguments for cudnn_convolution)",
        "RuntimeError: Expected tensor to have CUDA DeviceType, but got tensor with CPU "
        "DeviceType (while checking arguments for cudnn_batch_norm)",
        "RuntimeError: Expect tensor to have CPU backend, but got tensor with CUDA Backend "
        "(while checking arguments for bmm",
        # RNN.h's check_attributes (parameters, hidden state) and PyTorch 1.0's check_device
        "RuntimeError: Input and parameter tensors are not at the same device, found input "
        "tensor at cuda:0 and parameter tensor at cpu",
        "RuntimeError: Input and hidden tensors are not at the same device, found input tensor "
        "at cpu and hidden tensor at cuda:0",
        "RuntimeError: Input and hidden CUDA tensors are not at the same GPU, found input tensor "
        "at CUDA:0 and hidden tensor at CUDA:1",
        # the index check and torch.cat's two
        "RuntimeError: indices should be either on cpu or on the same device as the indexed "
        "tensor (cpu)",
        "RuntimeError: All input tensors must be on the same device. Received cuda:0 and cpu",
        "RuntimeError: torch.cat(): all input tensors and out must be on the same device, but "
        "inputs are on cuda:1 and out is on cuda:0",
    ],
)
def test_each_device_check_is_read_high(message: str) -> None:
    assert cause_readings(message) == [MISMATCH]


def test_a_check_inside_a_traceback_is_read_once_and_high() -> None:
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 41, in <module>\n'
        "    out = model(x)\n"
        '  File "/usr/lib/python3/site-packages/torch/nn/modules/conv.py", line 443, in forward\n'
        "    return self._conv_forward(input, self.weight, self.bias)\n"
        "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) "
        "should be the same or input should be a MKLDNN tensor and weight is a dense tensor\n"
    )
    assert cause_readings(traceback) == [MISMATCH]


def test_the_evidence_names_each_type_with_the_device_it_sits_on() -> None:
    votes = placement.placement_votes(
        "Input type (MPSFloatType) and weight type (torch.FloatTensor) should be the same"
    )
    assert [(v.cause, v.weight) for v in votes] == [(placement.MISMATCH, placement.STATED)]
    assert "MPSFloatType on mps, torch.FloatTensor on cpu" in votes[0].evidence


@pytest.mark.parametrize(
    ("name", "device"),
    [
        ("torch.cuda.FloatTensor", "cuda"),
        ("torch.cuda.sparse.FloatTensor", "cuda"),
        ("torch.FloatTensor", "cpu"),
        ("torch.sparse.LongTensor", "cpu"),
        ("CUDAFloatType", "cuda"),
        ("CPUBFloat16Type", "cpu"),
        ("MkldnnCPUFloatType", "cpu"),
        ("SparseCUDADoubleType", "cuda"),
        ("MPSHalfType", "mps"),
        ("XPUFloatType", "xpu"),
        ("CUDA", "cuda"),
        ("SparseCPU", "cpu"),
        # no device: a tensor without storage, bare scalar types, a word that only looks like it
        ("MetaFloatType", None),
        ("c10::Half", None),
        ("float", None),
        ("torch.cuda", None),
        ("CPUs", None),
    ],
)
def test_the_device_of_a_type_or_backend_name(name: str, device: str | None) -> None:
    assert placement._device_of(name) == device


@pytest.mark.parametrize(
    ("other_backend", "its_check"),
    [
        (
            "RuntimeError: Input type (XPUFloatType) and weight type (torch.FloatTensor) should "
            "be the same",
            "RuntimeError: Expected all tensors to be on the same device, but found at least two "
            "devices, xpu:0 and cpu!",
        ),
        (
            "RuntimeError: Input type (MPSFloatType) and weight type (torch.FloatTensor) should "
            "be the same",
            "RuntimeError: Expected all tensors to be on the same device, but found at least two "
            "devices, mps:0 and cpu!",
        ),
    ],
)
def test_other_backends_read_as_the_same_device_check_reads_them(
    other_backend: str, its_check: str
) -> None:
    assert cause_readings(other_backend) == cause_readings(its_check) == [MISMATCH]


@pytest.mark.parametrize(
    "message",
    [
        # one device, two dtypes (uint8 images into a float model; AMP's half input)
        "RuntimeError: Input type (torch.cuda.ByteTensor) and weight type (torch.cuda.FloatTensor) "
        "should be the same",
        "RuntimeError: Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) "
        "should be the same",
        "RuntimeError: Input type (CPUBFloat16Type) and weight type (torch.FloatTensor) should be "
        "the same",
        "RuntimeError: Input type (c10::Half) and bias type (float) should be the same",
        "RuntimeError: Expected tensor for argument #1 'input' to have the same type as tensor "
        "for argument #2 'weight'; but type torch.cuda.HalfTensor does not equal "
        "torch.cuda.FloatTensor (while checking arguments for cudnn_convolution)",
        # an MKLDNN CPU tensor against a dense CPU weight: a layout, not a device
        "RuntimeError: Input type (MkldnnCPUFloatType) and weight type (torch.FloatTensor) should "
        "be the same or input should be a MKLDNN tensor and weight is a dense tensor",
        # weights never materialised (Meta) are not a device the input can be moved to
        "RuntimeError: Input type (MetaFloatType) and weight type (torch.cuda.FloatTensor) should "
        "be the same",
        # dtype checks of the same functions and their neighbours
        "RuntimeError: Input and parameter tensors are not the same dtype, found input tensor "
        "with Double and parameter tensor with Float",
        "RuntimeError: expected scalar type Long but found Float",
        "RuntimeError: Expected object of scalar type Float but got scalar type Double for "
        "argument #2 'mat2'",
        "RuntimeError: Expected tensor for argument #1 'indices' to have one of the following "
        "scalar types: Long, Int; but got torch.cuda.FloatTensor instead (while checking "
        "arguments for embedding)",
        "RuntimeError: Expected tensor for argument #1 'indices' to have scalar type Long; but "
        "got torch.cuda.IntTensor instead (while checking arguments for embedding)",
        # a type name broken by a space is not the one PyTorch prints
        "Input type (torch.FloatTensor) and weight type (torch.cuda. FloatTensor) should be the "
        "same",
        # prose naming a check as what a change fixed or avoids
        'Fixed the "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) '
        'should be the same" error by moving the batch with .to(device).',
        "This PR fixes RuntimeError: Input and parameter tensors are not at the same device, "
        "found input tensor at cpu and parameter tensor at cuda:0",
        "Move pad_sequence's output to the predictions' device to avoid: indices should be either "
        "on cpu or on the same device as the indexed tensor (cpu)",
    ],
)
def test_look_alikes_are_not_read_as_a_device_mismatch(message: str) -> None:
    assert "tensor-device-mismatch" not in causes_read(message)


def test_a_question_about_fixing_the_error_is_still_read() -> None:
    message = (
        "How to fix RuntimeError: Input type (torch.FloatTensor) and weight type "
        "(torch.cuda.FloatTensor) should be the same"
    )
    assert cause_readings(message) == [MISMATCH]


def test_a_fixed_mention_before_the_raised_one_does_not_hide_it() -> None:
    message = (
        "We fixed: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) "
        "should be the same\nbut now it says\nRuntimeError: All input tensors must be on the "
        "same device. Received cuda:0 and cpu"
    )
    assert cause_readings(message) == [MISMATCH]


@pytest.mark.parametrize(
    ("word", "causes"),
    [
        ("Input type (", []),
        ("Input type (torch.FloatTensor) and weight type (", []),
        (
            "Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should "
            "be the same ",
            [],
        ),
        ("Expected tensor for 'a' to have the same type as tensor for 'b'; but type ", []),
        ("Expect tensor to have CPU ", []),
        ("fixed ", []),
        # the RNN's and torch.cat's checks state the mismatch by their head alone
        (
            "Input and parameter tensors are not at the same device, found input tensor at ",
            [placement.MISMATCH],
        ),
        ("all input tensors must be on the same device. Received ", [placement.MISMATCH]),
    ],
)
def test_100_kb_of_a_checks_prefix_is_read_as_its_head_alone(word: str, causes: list[str]) -> None:
    # the module's own entry point on 100 KB of a prefix (or a dtype-only check) repeated, and on
    # one long word after it; the work is bounded by the patterns themselves (next tests)
    flats = [word * (100_000 // len(word)), word + "a" * 100_000]
    readings = [placement.placement_votes(flat) for flat in flats]
    assert [[v.cause for v in votes] for votes in readings] == [causes, causes]


def test_a_type_name_is_bounded_and_stays_within_its_word() -> None:
    # each name is at most 64 characters of [\w.:]: a name that runs on, or over a line break,
    # is not matched, so no match reaches past the name PyTorch prints
    long_name = "torch." + "x" * 80 + "Tensor"
    for first in (long_name, "torch.\nFloatTensor", "torch. FloatTensor"):
        text = f"Input type ({first}) and weight type (torch.cuda.FloatTensor) should be the same"
        assert [pattern.search(text) for pattern in placement._TYPE_PAIRS] == [None] * 4
    # the same message with PyTorch's names is matched, by its own pattern only
    text = (
        "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"
    )
    assert [pattern.search(text) is not None for pattern in placement._TYPE_PAIRS] == [
        True,
        False,
        False,
        False,
    ]


def test_the_work_is_the_same_for_ten_times_the_repeated_dtype_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a log repeating a dtype-only check: only its first mentions are named a device, however
    # long the log
    calls: list[str] = []
    device_of = placement._device_of

    def counted(name: str) -> str | None:
        calls.append(name)
        return device_of(name)

    monkeypatch.setattr(placement, "_device_of", counted)
    check = (
        "RuntimeError: Input type (torch.cuda.HalfTensor) and weight type "
        "(torch.cuda.FloatTensor) should be the same\n"
    )
    counts = []
    for repeats in (100, 1_000):
        calls.clear()
        assert placement.placement_votes(check * repeats) == []
        counts.append(len(calls))
    assert counts[0] == counts[1] == 2 * match._MENTIONS_READ


test_the_new_readings_never_raise = never_raise(
    [
        "Input type (",
        ") and weight type (",
        ") and bias type (",
        ") should be the same",
        "torch.cuda.FloatTensor",
        "torch.FloatTensor",
        "CUDAFloatType",
        "MkldnnCPUFloatType",
        "; but type ",
        " does not equal ",
        "Expected tensor to have ",
        " Backend, but got tensor with ",
        "Input and parameter tensors are not at the same device, found input tensor at ",
        " and parameter tensor at ",
        "indices should be either on cpu or on the same device as the indexed tensor (",
        "All input tensors must be on the same device. Received ",
        "cuda:0",
        "cpu",
        "fixed ",
        "RuntimeError: ",
    ]
)
