"""A page carrying a DCGM counter both as ``X`` and as ``X_total`` on one GPU: two exporter
releases (or an exporter and an OpenMetrics re-export of it: Prometheus' expfmt encoder, an
OpenTelemetry Collector's add_metric_suffixes) scraped onto one page.

Both are the one counter dcgm-exporter declares ("# TYPE X counter"): the Prometheus text format
names a counter's sample by its family's name, OpenMetrics by ``<family>_total``. Equal values
are one reading; two values are two readings of one field at two times (or of two exporters),
and which is the GPU's is unknown: the field is left out and the page's events say both, as for
a field DCGM 4.6 renamed given under both names.

Measured before the fix: the first of the two was read and the other dropped without a word
(energy 4742.776 J with the twin at 4763214 mJ after it; PCIe replays 0 with the twin at 3),
whether the twin came in the family's own block or at the page's end."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.types.telemetry import DeviceSample, EventKind, Snapshot

DATA = Path(__file__).resolve().parents[2] / "data"
# a real dcgm-exporter 4.x page of one L4 (tests/data/dcgm_public/SOURCES.md, row 08)
PAGE = DATA / "dcgm_public" / "08__k8s-ai-conformance-kops__l4-580.105.08-fb-reserved-remap.prom"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
REPLAYS = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
PAGE_ENERGY_MJ = 4742776
LATER_ENERGY_MJ = 4763214  # the counter read a little later: 20.4 J on, ~1.2 s at 16.4 W
LATER_REPLAYS = 3


def _series_line(text: str, family: str) -> str:
    [line] = [ln for ln in text.splitlines() if ln.startswith(family + "{")]
    return line


def _twin(text: str, family: str, value: int) -> str:
    """The page's ``family`` sample as ``family_total`` with ``value``."""
    line = _series_line(text, family)
    labels = line[len(family) : line.rindex(" ")]
    return f"{family}_total{labels} {value}"


def _in_block(text: str, twins: dict[str, int]) -> str:
    """Each twin right after its family's own sample (under "# TYPE X counter")."""
    for family, value in twins.items():
        line = _series_line(text, family)
        text = text.replace(line, f"{line}\n{_twin(text, family, value)}")
    return text


def _at_end(text: str, twins: dict[str, int]) -> str:
    """Each twin at the page's end, without metadata (a second exporter's series)."""
    return text.rstrip("\n") + "\n" + "\n".join(_twin(text, f, v) for f, v in twins.items()) + "\n"


def _read(text: str) -> tuple[DeviceSample, Snapshot]:
    snapshot = parse_scrape(text, "page.prom", 0.0).snapshot
    [sample] = snapshot.samples
    return sample, snapshot


def _messages(snapshot: Snapshot) -> list[str]:
    return [e.message for e in snapshot.events if e.kind is EventKind.BACKEND_ERROR]


@pytest.mark.parametrize("placed", [_in_block, _at_end])
def test_equal_twins_are_one_reading(placed: object) -> None:
    text = PAGE.read_text()
    plain, plain_snapshot = _read(text)
    assert plain.energy_consumed_joules == pytest.approx(PAGE_ENERGY_MJ / 1000)
    assert callable(placed)
    twinned, snapshot = _read(placed(text, {ENERGY: PAGE_ENERGY_MJ, REPLAYS: 0}))
    assert twinned == plain
    assert _messages(snapshot) == _messages(plain_snapshot) == []


@pytest.mark.parametrize("placed", [_in_block, _at_end])
def test_twins_that_differ_are_left_out_and_said(placed: object) -> None:
    """Failed before: energy 4742.776 J and 0 replays, read silently from the first."""
    text = PAGE.read_text()
    assert callable(placed)
    sample, snapshot = _read(placed(text, {ENERGY: LATER_ENERGY_MJ, REPLAYS: LATER_REPLAYS}))
    assert sample.energy_consumed_joules is None
    assert sample.pcie_replay_total is None
    assert sample.power_draw_watts == pytest.approx(16.365)  # the rest of the page stands
    messages = _messages(snapshot)
    assert len(messages) == 2
    energy, replays = messages
    assert energy.startswith(f"{ENERGY}_total = {LATER_ENERGY_MJ} contradicts {ENERGY} = ")
    assert f"{ENERGY} = {PAGE_ENERGY_MJ}" in energy
    assert replays.startswith(f"{REPLAYS}_total = {LATER_REPLAYS} contradicts {REPLAYS} = 0")
    assert all(m.endswith("not reported (null)") for m in messages)
