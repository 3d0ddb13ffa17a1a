"""PyTorch's device-index assertion (set 72) with a payload no device index or count has.

Its numbers were read with int(), which refuses a run of more than 4,300 digits: a hostile paste
made explain exit 70 ("internal-error ... ValueError"). They are read as every other count in
explain is (sizes.whole_number, at most sizes.MAX_DIGITS digits): such a payload is not read.
"""

from __future__ import annotations

import pytest

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import cause_readings

_ASSERT = "device >= 0 && device < num_gpus INTERNAL ASSERT FAILED at CUDAContext.cpp:50. "
_DIGITS = "9" * 5000


@pytest.mark.parametrize(
    "payload",
    [f"device={_DIGITS}, num_gpus=1", f"device=1, num_gpus={_DIGITS}"],
    ids=["index", "count"],
)
def test_an_index_assertion_with_thousands_of_digits_is_not_read(payload: str) -> None:
    assert "device-ordinal-invalid" not in {cause for cause, _ in cause_readings(_ASSERT + payload)}


def test_an_index_past_the_visible_gpus_still_reads() -> None:
    text = _ASSERT + "device=3, num_gpus=2"
    assert ("device-ordinal-invalid", Confidence.HIGH) in cause_readings(text)
