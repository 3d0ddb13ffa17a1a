"""Review r9a of the readings held-out sets 32-36 added: look-alikes that are not the cause they
name, one application check read the way its own condition is, and the quoted-in-prose gap."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.explain import explain_text, placement
from gpuwarden.health.explain.cuda_errors import CUT_TORCH_NUMBER
from gpuwarden.health.explain.text import read_paste
from gpuwarden.types.health import Confidence


def _readings(text: str) -> list[tuple[str, Confidence]]:
    return [(d.cause, d.confidence) for d in explain_text(text).diagnoses]


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("received 512 bytes instead of 1024, retrying the download", "received 512 bytes"),
        ("socket: receiving 12 bytes instead of 16 from the camera", "receiving 12 bytes"),
    ],
)
def test_a_byte_count_that_is_not_nccl_s_is_no_collective_mismatch(text: str, phrase: str) -> None:
    """'receiving N bytes instead of M' is NCCL's wording (socket.cc, bootstrap.cc); without NCCL
    or its 'Message truncated' prefix it is any program counting bytes."""
    assert "collective-mismatch" not in [cause for cause, _ in _readings(text)]
    nccl = f"NCCL WARN Message truncated : {phrase} instead of 4"
    assert _readings(nccl)[0] == ("collective-mismatch", Confidence.MEDIUM)


def test_setuptools_visual_cpp_beside_a_cuda_environment_is_not_a_cuda_extension_build() -> None:
    """pip building another C extension on a machine whose environment says CUDA: the missing
    Visual C++ is real, but nothing says a CUDA extension was being built."""
    text = (
        "Building wheel for pycocotools (pyproject.toml) ... error\n"
        "error: Microsoft Visual C++ 14.0 or greater is required. Get it with "
        '"Microsoft C++ Build Tools"\n'
        "torch 2.1.0+cu118, CUDA available: True"
    )
    assert ("extension-build-toolkit", Confidence.HIGH) not in _readings(text)
    cpp_extension = text + "\nFile torch/utils/cpp_extension.py, line 358, in build_extensions"
    assert _readings(cpp_extension)[0] == ("extension-build-toolkit", Confidence.HIGH)


def test_unsloth_s_check_in_a_container_reads_as_is_available_false_there() -> None:
    """Unsloth raises when torch.cuda.is_available() is False: in a GPU container that is the
    container's reading, as for the condition said in PyTorch's words."""
    container = "docker run --gpus all -it unsloth/unsloth\n"
    unsloth = container + "NotImplementedError: Unsloth: No NVIDIA GPU found? Unsloth currently"
    said = container + "torch.cuda.is_available() returns False"
    assert _readings(unsloth) == _readings(said)
    assert _readings(unsloth)[0][0] == "container-driver-capabilities"


@pytest.mark.xfail(
    strict=True,
    reason="explain skips a mention the words just before it name as fixed or avoided ('fixes "
    "the …', 'to prevent …': match.raised_mentions, for every signature since review r29), but "
    "not one a docs page or a 'fixed by #N:' line introduces: these still read at their weight",
)
@pytest.mark.parametrize(
    "text",
    [
        "# fixed by #4512: DefaultCPUAllocator: can't allocate memory when loading the checkpoint",
        "Fixed in 0.3.1 (was: nvcc fatal : Cannot find compiler 'cl.exe' in PATH)",
        "docs: NCCL aborts with 'Mismatched NCCL version detected' when ranks run other versions",
        "changelog: no more 'ggml was not compiled with any CUDA arch <= 610' on Pascal",
    ],
)
def test_a_message_quoted_in_prose_does_not_read_high(text: str) -> None:
    assert all(confidence is not Confidence.HIGH for _, confidence in _readings(text))


_LINE = st.text(alphabet="abc01 -=:'\"\t", max_size=30)


@settings(max_examples=100, deadline=None)
@given(value=st.sampled_from(["", "0", "1,2", "-1", "none"]), after=st.lists(_LINE, max_size=4))
def test_a_visible_devices_value_is_never_read_from_the_next_line(
    value: str, after: list[str]
) -> None:
    """h69b's per-line reading: whatever lines follow `export CUDA_VISIBLE_DEVICES=<value>`,
    the value read is the one on that line."""
    head = f"RuntimeError: No CUDA GPUs are available\nexport CUDA_VISIBLE_DEVICES={value}"
    alone = placement.placement_votes(read_paste(head).flat, read_paste(head).raw)
    text = "\n".join([head, *after])
    paste = read_paste(text)
    votes = placement.placement_votes(paste.flat, paste.raw)
    hidden = [(v.cause, v.weight) for v in votes if v.cause == placement.HIDDEN]
    assert hidden == [(v.cause, v.weight) for v in alone if v.cause == placement.HIDDEN]


@settings(max_examples=100, deadline=None)
@given(tail=st.text(alphabet=string.ascii_letters + " ", min_size=25, max_size=60))
def test_the_cut_warning_s_number_is_read_only_where_the_paste_ends(tail: str) -> None:
    """PyTorch's cudaGetDeviceCount warning: its number is read alone only where the error
    string after it was cut (the paste ends within 24 characters); a whole string is read from
    its words."""
    warning = "CUDA initialization: ... might have already set an error? Error 803: "
    assert CUT_TORCH_NUMBER.search(warning + "system ha") is not None
    assert CUT_TORCH_NUMBER.search(warning + tail) is None
