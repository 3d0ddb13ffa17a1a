"""vGPU guest licensing from dcgm-exporter scrapes (brief h38b): field 526
DCGM_FI_DEV_VGPU_LICENSE_STATUS (dcgm_fields.h: 0 = not licensed, 1 = licensed), read with field
500 DCGM_FI_DEV_VIRTUAL_MODE because bare-metal GPUs publish 0 as well.

The scrape lines are real (a bare-metal Tesla T4 in the shared fixtures, two vGPU guests of the
held-out dcgm sets); the one page with field 500 is such a page with a line added (no public
scrape with field 500 was found)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.telemetry.dcgm.exposition import parse_exposition
from gpuwarden.telemetry.dcgm.fields import (
    VGPU_LICENSE_FIELD,
    VIRTUAL_MODE_FIELD,
    vgpu_license_status,
)
from tests.conftest import FIXTURES

DATA = Path(__file__).resolve().parents[2] / "data"
T4_BARE_METAL = FIXTURES / "dcgm" / "datadog-integrations-core__tesla-t4__metrics.prom"  # 0
H100_20C_GUEST = (
    DATA
    / "dcgm_public3"
    / "04__vks-3.5.0-ai-conformance__h100-20c-vgpu-580.95.05-err-code-pod.prom"
)  # its line says 1
A100_8C_GUEST = (
    DATA / "dcgm_public2" / "02__vks-ai-conformance__grid-a100-8c-vgpu-580.65.06.prom"
)  # 0


def _fields(text: str, source: str) -> dict[str, float]:
    """GPU 0's values by field name, as the exposition reader reads the page."""
    return {
        s.name: s.value
        for s in parse_exposition(text, source).samples
        if s.labels.get("gpu") == "0"
    }


def _state(text: str, source: str = "page.prom") -> str | None:
    values = _fields(text, source)
    return vgpu_license_status(values.get(VGPU_LICENSE_FIELD), values.get(VIRTUAL_MODE_FIELD))


def _license_line(path: Path) -> str:
    (line,) = [x for x in path.read_text().splitlines() if x.startswith(VGPU_LICENSE_FIELD + "{")]
    return line


def test_a_licensed_guest_reads_licensed() -> None:
    assert _license_line(H100_20C_GUEST).endswith("} 1")
    assert _state(H100_20C_GUEST.read_text()) == "licensed"


@pytest.mark.parametrize("path", [T4_BARE_METAL, A100_8C_GUEST])
def test_a_zero_without_the_virtualization_mode_decides_nothing(path: Path) -> None:
    """Bare metal publishes 0 too (the T4): without field 500 a 0 is no verdict."""
    assert _license_line(path).endswith("} 0")
    assert _state(path.read_text()) is None


def test_a_zero_in_a_vgpu_guest_reads_unlicensed() -> None:
    text = A100_8C_GUEST.read_text()
    line = _license_line(A100_8C_GUEST)
    mode = line.replace(VGPU_LICENSE_FIELD, VIRTUAL_MODE_FIELD, 1).removesuffix(" 0") + " 2"
    assert _state(text + mode + "\n") == "unlicensed"
    bare = line.replace(VGPU_LICENSE_FIELD, VIRTUAL_MODE_FIELD, 1)  # mode 0: bare metal
    assert _state(text + bare + "\n") is None


def test_the_scrape_reader_sets_the_field() -> None:
    snap = parse_scrape(H100_20C_GUEST.read_text(), H100_20C_GUEST.name, 0.0).snapshot
    assert snap.samples[0].vgpu_license_status == "licensed"


_ANY = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=100, deadline=None)
@given(license_value=_ANY, mode=_ANY)
def test_any_values_read_as_a_known_state(license_value: float | None, mode: float | None) -> None:
    state = vgpu_license_status(license_value, mode)
    assert state in (None, "licensed", "unlicensed")
    if state == "unlicensed":
        assert license_value == 0 and mode == 2
    if state == "licensed":
        assert license_value == 1
