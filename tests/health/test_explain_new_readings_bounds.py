"""Review r4a: the readings added for CUDA graph capture, the host's OOM killer and the extension
build's toolkit on hostile and look-alike texts — linear on a megabyte of their own trigger words
(no timed assertion: a backtracking pattern would take minutes at this size), and a capture that
is no CUDA graph's or stream's is not read as one."""

from __future__ import annotations

import re

import pytest

from gpuwarden.health.explain import (
    build_toolkit,
    capture,
    explain_text,
    gpudirect,
    host_oom,
    imex,
    placement,
    vgpu_license,
)
from gpuwarden.health.explain.match import cuda_number_votes, first_tier, signature_votes
from gpuwarden.health.explain.text import Paste, read_paste
from gpuwarden.types.health import Confidence

_MEGABYTE = 1 << 20


def _repeated(word: str) -> str:
    return word * (_MEGABYTE // len(word))


@pytest.mark.parametrize(
    ("word", "host_oom_weights"),
    [
        ("capture ", []),
        ("captur not allowed during ", []),
        ("stream captur ", []),
        ("Killed ", []),
        ("1 Killed ", [host_oom.SIGNAL]),  # bash's "318 Killed  cmd", on one long line
        ("exit code ", []),
        ("Out of memory: Kill process ", []),  # without the pid the kernel prints
        ("nvcc ", []),
        ("detected CUDA version (1.", []),
        ("unsupported GNU version! gcc versions later than 1", []),
    ],
)
def test_a_megabyte_of_trigger_words_is_read_in_linear_time(
    word: str, host_oom_weights: list[float]
) -> None:
    # the modules' own entry points, past explain's SCAN_CHARS bound on the paste
    raw = _repeated(word)
    flat = " ".join(raw.split())
    paste = Paste(raw=raw, flat=flat, truncated=False, lowered=flat.lower())
    assert capture.capture_votes(flat) == []
    assert build_toolkit.build_toolkit_votes(flat) == []
    assert [vote.weight for vote in host_oom.host_oom_votes(paste)] == host_oom_weights


@pytest.mark.parametrize(
    "text",
    [
        "Warning: screen capture not supported on Wayland",
        "nsys: GPU metrics capture is not supported on this device",
        "Packet capture not permitted: run as root",
    ],
)
def test_a_capture_that_is_no_graph_or_stream_capture_is_not_read(text: str) -> None:
    causes = [d.cause for d in explain_text(text).diagnoses]
    assert capture.CAUSE not in causes


def test_a_library_refusing_graph_capture_is_still_the_usual_reading() -> None:
    for text in ("CUDA graph capture is not supported for this op", "stream capture not allowed"):
        votes = capture.capture_votes(text)
        assert [(v.cause, v.weight) for v in votes] == [(capture.CAUSE, capture.WORDED)]


def test_first_tier_takes_the_strongest_tier_that_matches() -> None:
    tiers = ((re.compile("strong"), 0.9), (re.compile("weak"), 0.6))
    assert first_tier("weak and strong", tiers) == ("strong", 0.9)
    assert first_tier("only weak", tiers) == ("weak", 0.6)
    assert first_tier("neither", tiers) is None


@pytest.mark.parametrize(
    "text",
    [
        "app-1 exited with code 137 after docker stop app-1 (the 10 s grace period ran out)",
        "$ docker kill trainer\ntrainer\n$ docker ps -a\ntrainer   Exited (137) 3 seconds ago",
    ],
)
def test_a_sigkill_sent_by_docker_stop_or_kill_is_not_read_as_host_oom(text: str) -> None:
    """`docker stop` sends SIGKILL after its grace period and `docker kill` at once: exit 137
    there names its sender, as a time limit or a liveness probe does."""
    assert host_oom.host_oom_votes(read_paste(text)) == []
    oom = text + "\n[ 812.5] Out of memory: Killed process 4123 (python) total-vm:912345kB"
    assert [v.cause for v in host_oom.host_oom_votes(read_paste(oom))] == [host_oom.CAUSE]


def _paste_of(raw: str) -> Paste:
    flat = " ".join(raw.split())
    return Paste(raw=raw, flat=flat, truncated=False, lowered=flat.lower())


def _causes_read_by_the_new_readers(paste: Paste) -> list[tuple[str, float]]:
    votes = [
        *gpudirect.gpudirect_votes(paste.flat),
        *imex.imex_votes(paste),
        *vgpu_license.vgpu_license_votes(paste.flat),
        *placement.placement_votes(paste.flat),
    ]
    return [(vote.cause, vote.weight) for vote in votes]


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        # one unbroken token: the path's tail was an unbounded \S* (quadratic: minutes at 1 MB)
        ("/dev/nvidia-caps-imex-channels", []),
        ("/dev/nvidia-caps-imex-channels/channel0 ", []),
        ("nvidia-imex.service - a b c ", []),
        ("cuMemCreate not_permitted ", []),
        ("could not load module x", []),
        ("GPU buffer Couldn't allocate ", []),
        ("NET/IB : GPU Direct RDMA Disabled for HCA ", [(gpudirect.CAUSE, gpudirect.USUAL)]),
        ("License Status : ", []),
        ("THCudaCheck FAIL ", []),
        ("CUDA_VISIBLE_DEVICES=", []),
        (
            "Expected all tensors to be on the same device, but found at least two devices, ",
            [(placement.MISMATCH, placement.STATED)],
        ),
    ],
)
def test_a_megabyte_of_the_later_readers_trigger_words_is_read_in_linear_time(
    word: str, expected: list[tuple[str, float]]
) -> None:
    assert _causes_read_by_the_new_readers(_paste_of(_repeated(word))) == expected


@pytest.mark.parametrize(
    "text",
    [
        # NCCL INFO of a healthy job using GPUDirect RDMA, and of GDR off by choice
        "NCCL INFO Channel 00/0 : 7[0] -> 8[0] [receive] via NET/IB/0/GDRDMA\nNCCL INFO GDR 0",
        "NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'\n"
        "NCCL INFO DMA-BUF is available on GPU device 0",
        # nvidia-smi -q of a licensed vGPU; nvidia-gridd acquiring one
        "vGPU Software Licensed Product Product Name : NVIDIA Virtual Compute Server "
        "License Status : Licensed (Expiry: 2025-1-27 20:39:8 GMT)",
        "nvidia-gridd: Acquiring license. (Info: api.cls.licensing.nvidia.com)\n"
        "nvidia-gridd: License acquired successfully.",
        # CUDA_VISIBLE_DEVICES in a log where CUDA found its GPU
        "+ export CUDA_VISIBLE_DEVICES=0\n+ python train.py\nEpoch 1/3 loss=0.41\nDone.",
        # TensorFlow's own device numbering; a loaded peermem; a healthy IMEX service
        "Invalid device ordinal value (1). Valid range is [0, 0].",
        "$ lsmod | grep peermem\nnvidia_peermem 16384 0\nib_core 434176 9 nvidia_peermem,ib_uverbs",
        "nvidia-imex.service - NVIDIA IMEX service Loaded: loaded; Active: active (running)",
    ],
)
def test_a_healthy_text_reads_nothing_from_the_later_readers(text: str) -> None:
    assert _causes_read_by_the_new_readers(read_paste(text)) == []
    assert explain_text(text).diagnoses == ()


def test_a_shell_refusal_before_a_fabric_call_is_not_cuda_refusing_it() -> None:
    """Only CUDA's CUDA_ERROR_NOT_PERMITTED may come before the call it refused; a shell's
    'Operation not permitted' a line earlier is another failure."""
    shell = (
        "mkdir: cannot create directory '/root/x': Operation not permitted\ncuMemCreate succeeded"
    )
    assert imex.imex_votes(read_paste(shell)) == []
    cuda = "[CUDA_ERROR_NOT_PERMITTED] operation not permitted in expression cuMemCreate(&handle)"
    assert [v.cause for v in imex.imex_votes(read_paste(cuda))] == [imex.CAUSE]


# --- review r9a: the readings of held-out sets 32-36 -------------------------------------------


def _signature_readings(paste: Paste) -> list[tuple[str, float]]:
    return [(vote.cause, vote.weight) for vote in signature_votes(paste)]


@pytest.mark.parametrize(
    ("word", "host_oom_weights", "build_toolkit_weights"),
    [
        # PyTorch's CPU allocator, with and without the size (a run of digits, no unit after)
        (
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate ",
            [host_oom.STATED],
            [],
        ),
        ("DefaultCPUAllocator: not enough memory: you tried to allocate 9", [host_oom.STATED], []),
        ("DefaultCPUAllocato", [], []),
        # Windows toolchains: cl.exe, setuptools' MSVC (alone: any C extension), cpp_extension's
        ("nvcc fatal : Cannot find compiler 'cl.exe' in PATH ", [], [build_toolkit.STATED]),
        ("Cannot find compiler 'cl.exe", [], []),
        ("Microsoft Visual C++ 14.0 or greater is required. ", [], []),
        ("Microsoft Visual C++ 14.0 is required cpp_extension ", [], [build_toolkit.STATED]),
        (
            "Error checking compiler version for cl: [WinError 2] ",
            [],
            [build_toolkit.WINDOWS_USUAL],
        ),
        ("Error checking compiler version for cl: [WinError ", [], []),
    ],
)
def test_a_megabyte_of_the_allocator_and_windows_toolchain_words_is_read_in_linear_time(
    word: str, host_oom_weights: list[float], build_toolkit_weights: list[float]
) -> None:
    paste = _paste_of(_repeated(word))
    assert [vote.weight for vote in host_oom.host_oom_votes(paste)] == host_oom_weights
    weights = [vote.weight for vote in build_toolkit.build_toolkit_votes(paste.flat)]
    assert weights == build_toolkit_weights


_IS_AVAILABLE_FALSE_READINGS = [("cpu-only-build", 0.45), ("driver-not-loaded", 0.3)]


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        # NCCL: its version check, a truncated message (NET/Socket, bootstrap), NET/IB's size check
        ("Mismatched NCCL version detected : rank 0 version ", [("collective-mismatch", 0.9)]),
        ("NCCL WARN Message truncated : receiving 1 bytes instead of ", []),
        (
            "NCCL Message truncated : receiving 1 bytes instead of 2 ",
            [("collective-mismatch", 0.6)],
        ),
        ("collective mismatch error, local size 1 remote size ", []),
        # application checks that say torch.cuda.is_available() is False
        ("Unsloth: No NVIDIA GPU found? ", _IS_AVAILABLE_FALSE_READINGS),
        ("Unsloth currently only ", []),
        ("Torch is not able to use GPU; ", _IS_AVAILABLE_FALSE_READINGS),
        # ggml's arch abort with its number cut; the architecture gate of Triton's assert
        ("ggml was not compiled with any CUDA arch <= ", []),
        ("mma layout conversion is only supported on ", []),
        ("is only supported on Ampere ", [("gpu-arch-unsupported", 0.75)]),
        # TensorFlow: cudart_stub; dso_loader with a Windows DLL name
        (
            "Could not find cuda drivers on your machine ",
            [("cpu-only-build", 0.45), ("library-conflict", 0.3)],
        ),
        (
            "Could not load dynamic library 'cudart64_",
            [("library-conflict", 0.7), ("cpu-only-build", 0.25)],
        ),
        ("Could not load dynamic library '", []),
        # nvidia-smi as a path that no longer exists
        (
            "/usr/bin/nvidia-smi: No such file or directory ",
            [("driver-not-loaded", 0.5), ("container-driver-capabilities", 0.3)],
        ),
        ("/nvidia-smi:", []),
    ],
)
def test_a_megabyte_of_the_new_signatures_trigger_words_is_read_in_linear_time(
    word: str, expected: list[tuple[str, float]]
) -> None:
    assert _signature_readings(_paste_of(_repeated(word))) == expected


@pytest.mark.parametrize(
    ("word", "numbers"),
    [
        # PyTorch's cudaGetDeviceCount warning: the number is read only where the paste ends
        # within a few characters of it (a title cut there), never from a run of the warning
        ("might have already set an error? Error 803: ", []),
        ("might have already set an error? Error ", []),
        ("CUDA might have already set an error? Error 8", []),
    ],
)
def test_a_megabyte_of_the_cut_cuda_warning_is_read_in_linear_time(
    word: str, numbers: list[str]
) -> None:
    evidence = [vote.evidence for vote in cuda_number_votes(_paste_of(_repeated(word)))]
    assert evidence == numbers
    cut = _repeated(word) + "CUDA init: … might have already set an error? Error 803: system ha"
    assert {v.cause for v in cuda_number_votes(_paste_of(cut))} >= {"nvml-driver-mismatch"}


def test_a_megabyte_of_visible_devices_lines_is_read_in_linear_time() -> None:
    raw = "no CUDA-capable device is detected\n" + _repeated("CUDA_VISIBLE_DEVICES=\n")
    paste = _paste_of(raw)
    votes = placement.placement_votes(paste.flat, paste.raw)
    assert [(v.cause, v.weight) for v in votes] == [(placement.HIDDEN, placement.STATED)]


def test_a_megabyte_of_oom_messages_below_their_reservation_is_read_in_linear_time() -> None:
    """PyTorch's OOM whose own "this process has" is below what it reserved, repeated to a
    megabyte: read once, and another process is still no high reading."""
    message = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.14 GiB of which 1.19 GiB is free. Including non-PyTorch memory, "
        "this process has 0 bytes memory in use. Of the allocated memory 50.16 GiB is allocated "
        "by PyTorch, and 51.64 GiB is reserved by PyTorch but unallocated. "
    )
    top = explain_text(_repeated(message)).diagnoses
    assert top and all(
        d.confidence is not Confidence.HIGH for d in top if d.cause == "oom-other-process"
    )
