"""Tables of numbers on a narrow terminal: numbers are never cut ("14…" of 1410 MHz), whole
columns are left out instead, least needed first; the words fold."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gpuwarden.report.columns import fitting_columns
from gpuwarden.report.snapshot import gpu_table
from gpuwarden.telemetry.open import open_backend


def _render(table: object, width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, markup=False).print(table)
    return out.getvalue()


@pytest.fixture(scope="module")
def snapshot():  # type: ignore[no-untyped-def]
    backend = open_backend("sim", scenario="ecc-double-bit", gpus=2)
    try:
        return backend.read()
    finally:
        backend.close()


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_every_number_shown_is_whole_and_the_table_fits(snapshot, width: int) -> None:  # type: ignore[no-untyped-def]
    text = _render(gpu_table(snapshot, None, width=width), width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines)
    assert "…" not in text
    for sample in snapshot.samples:
        assert f"{sample.temperature_gpu_celsius:.0f}" in text
        assert f"{sample.clock_sm_mhz:.0f}" in text or width < 120


def test_columns_are_left_out_in_the_order_given() -> None:
    headers = ["GPU", "name", "temp", "clock", "health"]
    rows = [["0", "A100-SXM4-80GB", "43", "1410", "ok"]]
    everything = fitting_columns(headers, rows, 200, words={"health"}, drop_first=["clock"])
    assert everything == [0, 1, 2, 3, 4]
    narrow = fitting_columns(headers, rows, 45, words={"health"}, drop_first=["clock", "temp"])
    assert narrow == [0, 1, 2, 4]
