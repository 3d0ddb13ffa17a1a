"""PyTorch 2.x's "Including non-PyTorch memory, this process has S memory in use" (NVML's figure
for this process: its context, NCCL and cuBLAS workspaces, other pools) leaves total − free − S
to every other process. Before, the bytes outside PyTorch's allocator (total − reserved − free)
were read as another process whatever S said: held-out set 112's Isaac-GR00T#162 (79.32 GiB
total, 69.56 MiB free, this process 79.25 GiB) read oom-other-process medium although no other
process can hold more than the 0 bytes left. Three earlier rows dropped that candidate; no first
cause moved (every diagnosis dumped before and after).
"""

from __future__ import annotations

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence


def _causes(text: str) -> dict[str, Confidence]:
    return {d.cause: d.confidence for d in explain_text(text).diagnoses}


def _oom(total: str, free: str, this_process: str, allocated: str, cached: str) -> str:
    return (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 426.00 MiB. GPU 3 has a "
        f"total capacity of {total} of which {free} is free. Including non-PyTorch memory, this "
        f"process has {this_process} memory in use. Of the allocated memory {allocated} is "
        f"allocated by PyTorch, and {cached} is reserved by PyTorch but unallocated."
    )


def test_bytes_outside_pytorch_that_this_process_holds_are_no_other_process() -> None:
    # Isaac-GR00T#162: 79.32 − 0.07 − 79.25 = 0 GiB for anyone else
    causes = _causes(_oom("79.32 GiB", "69.56 MiB", "79.25 GiB", "73.91 GiB", "2.41 GiB"))
    assert "oom-other-process" not in causes
    assert causes["oom-too-big"] is Confidence.MEDIUM


def test_what_this_process_does_not_hold_is_still_another_process() -> None:
    # the same numbers with this process at 60 GiB: 79.32 − 0.07 − 60 ≈ 19.3 GiB elsewhere
    causes = _causes(_oom("79.32 GiB", "69.56 MiB", "60.00 GiB", "55.00 GiB", "2.41 GiB"))
    assert causes.get("oom-other-process") is Confidence.MEDIUM
