"""dcgm pages with X and X_total twins (scrape._spelled_twice, this stop) under hostile twins
(issue 13, round 8), on real pages of tests/data: whichever order the twins come in, the page
reads the same; a NaN (DCGM's blank) twin says nothing; an infinite twin is no agreement; MIG
instances' twins are each their own instance's; label order does not matter; a twin of the Xid
count family keeps the larger count; many twin lines cost what as many plain lines do.

No break was found here: these hold the reading as it is (measured on the code of this stop)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.types.telemetry import Snapshot

DATA = Path(__file__).resolve().parents[2] / "data"
L4_PAGE = DATA / "dcgm_public" / "08__k8s-ai-conformance-kops__l4-580.105.08-fb-reserved-remap.prom"
MIG_PAGE = (
    DATA / "dcgm_public" / "02__dcgm-exporter-736__rtx2000ada-a30-mig-lowercase-hostname-pods.prom"
)
XID_PAGE = DATA / "dcgm_public" / "07__dcgm-exporter-pr239__t400-xid-count-injected-xid42.prom"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
PAGE_ENERGY_MJ = 4742776


def _line(text: str, family: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(family + "{"))


def _twin(line: str, value: str, *, reverse_labels: bool = False) -> str:
    family, rest = line.split("{", 1)
    labels = rest[: rest.rindex("}")]
    if reverse_labels:
        labels = ",".join(reversed(re.findall(r'\w+="[^"]*"', labels)))
    return f"{family}_total{{{labels}}} {value}"


def _read(text: str) -> Snapshot:
    return parse_scrape(text, "page.prom", 0.0).snapshot


def _energy_and_said(text: str) -> tuple[float | None, list[str]]:
    snapshot = _read(text)
    said = [e.message for e in snapshot.events if ENERGY in e.message or "energy" in e.message]
    return snapshot.samples[0].energy_consumed_joules, said


_TWIN_VALUE = st.sampled_from(["NaN", "+Inf", "-Inf", str(PAGE_ENERGY_MJ), "4763214", "0", "-1"])


@settings(max_examples=14, deadline=None)
@given(value=_TWIN_VALUE, reverse=st.booleans())
def test_a_twin_reads_the_same_before_or_after_its_field(value: str, reverse: bool) -> None:
    page = L4_PAGE.read_text()
    line = _line(page, ENERGY)
    twin = _twin(line, value, reverse_labels=reverse)
    after, said_after = _energy_and_said(page.replace(line, f"{line}\n{twin}"))
    before, said_before = _energy_and_said(page.replace(line, f"{twin}\n{line}"))
    assert after == before
    if value in ("NaN", str(PAGE_ENERGY_MJ)):  # a blank, or the same reading: one reading
        assert after == pytest.approx(PAGE_ENERGY_MJ / 1000)
        assert said_after == said_before == []
    else:  # two readings of one field (an infinity is no agreement): left out, both named
        assert after is None
        for said in (said_after, said_before):
            [contradiction] = [s for s in said if "contradicts" in s]
            assert str(PAGE_ENERGY_MJ) in contradiction and f"{ENERGY}_total" in contradiction


def test_a_mig_instances_twin_is_that_instances_alone() -> None:
    page = MIG_PAGE.read_text()
    lines = [ln for ln in page.splitlines() if re.search(r'GPU_I_ID="\d', ln)]
    family = lines[0].split("{")[0]
    [line] = [ln for ln in lines if ln.startswith(family + "{")]
    value = float(line.rsplit(" ", 1)[1])
    base = _read(page)
    equal = _read(page.replace(line, f"{line}\n{_twin(line, line.rsplit(' ', 1)[1])}"))
    assert equal.samples == base.samples
    other = _read(page.replace(line, f"{line}\n{_twin(line, str(value + 7))}"))
    changed = [
        a.info.gpu_instance_id for a, b in zip(base.samples, other.samples, strict=True) if a != b
    ]
    assert changed == [3]  # the A30's instance 3 alone; its GPU and the other card as read


def test_a_twin_of_the_xid_count_keeps_the_larger_count_in_either_order() -> None:
    page = XID_PAGE.read_text()
    active = _line(page, "DCGM_FI_DEV_XID_ERRORS_ACTIVE")
    count = active.replace("DCGM_FI_DEV_XID_ERRORS_ACTIVE{", "DCGM_EXP_XID_ERRORS_COUNT{", 1)
    three = count.rsplit(" ", 1)[0] + " 3"
    five = _twin(three, "5")
    for pair in ((three, five), (five, three)):
        scrape = parse_scrape(page.rstrip("\n") + "\n" + "\n".join(pair) + "\n", "p", 0.0)
        assert [(c.xid, c.count) for c in scrape.xid_counts] == [(42, 5)]


def test_many_twin_lines_cost_what_as_many_plain_lines_do() -> None:
    page = L4_PAGE.read_text()
    line = _line(page, ENERGY)
    lines = 10_000

    def seconds(extra: str) -> float:
        text = page.rstrip("\n") + "\n" + "\n".join([extra] * lines) + "\n"
        start = time.process_time()
        energy, _ = _energy_and_said(text)
        assert energy == pytest.approx(PAGE_ENERGY_MJ / 1000)
        return time.process_time() - start

    plain = seconds(line)
    assert seconds(_twin(line, str(PAGE_ENERGY_MJ))) < 3 * plain + 0.2
