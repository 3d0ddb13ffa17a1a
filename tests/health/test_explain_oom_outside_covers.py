"""A PyTorch OOM whose shortfall the bytes held outside PyTorch would cover is not surely too big.

The arithmetic (oom_torch.py): shortfall = tried − (free + cached); outside = total − reserved −
free. "Too big" (diagnosis.md: the job needs more than the device holds after the CUDA
context) is certain when the shortfall stays positive whoever else holds memory; when what is
held outside PyTorch beyond a context (1.25 GiB at most) would cover the shortfall, the same
numbers read "another process holds what it needed" (total − reserved − free ≫ a context) — both
medium, nvidia-smi's process list decides. Held-out set 106's Real-ESRGAN#437 (16 GiB card,
4 GiB tried, 0.97 GiB short, 2.68 GiB outside) read too-big high before; it is calibration from
then on.
"""

from __future__ import annotations

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence


def _readings(text: str) -> list[tuple[str, Confidence]]:
    return [(d.cause, d.confidence) for d in explain_text(text).diagnoses]


def _oom(tried: str, total: str, allocated: str, free: str, reserved: str) -> str:
    return (
        f"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried} (GPU 0; "
        f"{total} total capacity; {allocated} already allocated; {free} free; {reserved} "
        "reserved in total by PyTorch)"
    )


def test_a_shortfall_the_outside_bytes_cover_reads_two_medium_candidates() -> None:
    # 16 − 13.32 − 0 = 2.68 GiB outside; short by 4 − (0 + 3.03) = 0.97 ≤ 2.68 − 1.25
    readings = _readings(_oom("4.00 GiB", "16.00 GiB", "10.29 GiB", "0 bytes", "13.32 GiB"))
    assert set(readings[:2]) == {
        ("oom-other-process", Confidence.MEDIUM),
        ("oom-too-big", Confidence.MEDIUM),
    }
    assert all(confidence is not Confidence.HIGH for _, confidence in readings)


def test_a_shortfall_larger_than_the_outside_bytes_stays_too_big() -> None:
    # 16 − 13.32 − 0 = 2.68 GiB outside; short by 6 − 3.03 = 2.97 > 2.68 − 1.25: too big anyway
    readings = _readings(_oom("6.00 GiB", "16.00 GiB", "10.29 GiB", "0 bytes", "13.32 GiB"))
    assert readings[0] == ("oom-too-big", Confidence.HIGH)


def test_a_context_s_worth_outside_leaves_too_big_certain() -> None:
    # 3.94 − 2.38 − 0.47 = 1.09 GiB outside ≈ a context: Real-ESRGAN#314 stays too big
    readings = _readings(_oom("1.34 GiB", "3.94 GiB", "2.23 GiB", "479.00 MiB", "2.38 GiB"))
    assert readings[0] == ("oom-too-big", Confidence.HIGH)
