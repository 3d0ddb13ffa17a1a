"""doctor --from on an `nvidia-smi nvlink -c` listing (what each link supports, never whether it
is up): refused with exit 2 saying so, and what to paste instead (it said "not a capture doctor
reads" and quoted the first line). The two real listings of nvlink_counters_public3."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.cli.main import main

SET = Path(__file__).resolve().parents[1] / "data" / "nvlink_counters_public3"


@pytest.mark.parametrize(
    "listing",
    sorted(p.name for p in SET.glob("*.txt") if "capabilities" in p.name),
)
def test_an_nvlink_capabilities_listing_is_refused_saying_what_to_paste(
    listing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--from", str(SET / listing)]) == 2
    err = capsys.readouterr().err
    assert "nvidia-smi nvlink -c prints what each link supports, not its state" in err
    assert "paste `nvidia-smi nvlink -s`" in err
