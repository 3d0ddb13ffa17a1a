"""A second held-out set of `nvidia-smi topo -m` / `nvlink -s` outputs pasted in public threads
(tests/data/topo_public2/: SOURCES.md says where each comes from, expected.json holds the values
read off each sample by hand). Each sample reads to the values printed in it, `doctor` gives
exactly the findings above info the sample shows (none for a healthy node), and an output
gpuwarden does not read (`nvlink -e`) is refused with exit 2 and a hint.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.telemetry.smi.heldout import (
    CUT,
    NOISE,
    assert_doctor_finds,
    assert_reads_the_links,
    assert_reads_the_matrix,
    assert_set_is_described,
    assert_topo_sample_reads_or_refused_clearly,
    load_set,
    sample_param,
    sample_text,
)

DATA, SAMPLES = load_set("topo_public2")

# Samples the code cannot take yet, and why.
XFAIL: dict[str, str] = {}


def _param(sample: dict[str, Any]) -> Any:
    return sample_param(sample, XFAIL)


def _text(sample: dict[str, Any]) -> str:
    return sample_text(DATA, sample)


TOPO = [_param(s) for s in SAMPLES if s["reads"] == "topo"]
NVLINK = [_param(s) for s in SAMPLES if s["reads"] == "nvlink"]


def test_the_set_is_the_one_described() -> None:
    assert_set_is_described(DATA, SAMPLES)


@pytest.mark.parametrize("sample", TOPO)
def test_reads_the_matrix(sample: dict[str, Any]) -> None:
    assert_reads_the_matrix(sample, _text(sample))


@pytest.mark.parametrize("sample", NVLINK)
def test_reads_the_links(sample: dict[str, Any]) -> None:
    assert_reads_the_links(sample, _text(sample))


@pytest.mark.parametrize("sample", [_param(s) for s in SAMPLES])
def test_doctor_finds_what_the_sample_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    assert_doctor_finds(DATA / sample["file"], sample["doctor_codes"])
    assert bool(sample["doctor_codes"]) == sample["fault"]


READABLE = [s for s in SAMPLES if s["file"] not in XFAIL and s["reads"] != "refused"]


@settings(max_examples=60, deadline=None)
@given(sample=st.sampled_from(READABLE), cut=CUT, noise=NOISE)
def test_a_cut_or_spliced_sample_reads_or_is_refused_clearly(
    sample: dict[str, Any], cut: float, noise: str
) -> None:
    assert_topo_sample_reads_or_refused_clearly(sample, _text(sample), cut, noise)
