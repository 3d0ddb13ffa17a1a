"""Held-out nvidia-smi outputs pasted on forums and Q&A sites (tests/data/smi_forum/, where
SOURCES.md says where each one comes from and expected.json holds the values read off each
sample by hand). Every sample reads without a traceback to the values printed in it, or is
refused clearly when it is not telemetry, and `doctor` gives exactly the findings above info
that the sample shows: none for a healthy GPU.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from tests.telemetry.smi.heldout import (
    assert_doctor_finds,
    assert_reads_or_refused_clearly,
    assert_reads_table_values,
    assert_set_is_described,
    load_set,
    sample_ids,
)

DATA, SAMPLES = load_set("smi_forum")
SMI_SAMPLES = [s for s in SAMPLES if s["reads"] == "smi"]
REJECTED = [s for s in SAMPLES if s["reads"] == "rejected"]


def _text(sample: dict[str, Any]) -> str:
    return (DATA / sample["file"]).read_text()


def test_the_set_is_the_one_described() -> None:
    assert_set_is_described(DATA, SAMPLES)


@pytest.mark.parametrize("sample", SMI_SAMPLES, ids=sample_ids(SMI_SAMPLES))
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    assert_reads_table_values(sample, _text(sample))


@pytest.mark.parametrize("sample", REJECTED, ids=sample_ids(REJECTED))
def test_what_is_not_telemetry_is_refused_clearly(sample: dict[str, Any]) -> None:
    with pytest.raises(CorruptInputError) as caught:
        parse_smi_output(_text(sample), sample["file"], 0.0)
    assert sample["file"] in str(caught.value) and caught.value.hint


@pytest.mark.parametrize("sample", SAMPLES, ids=sample_ids(SAMPLES))
def test_doctor_finds_what_the_sample_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    assert_doctor_finds(DATA / sample["file"], sample["doctor_codes"])


@settings(max_examples=60, deadline=None)
@given(sample=st.sampled_from(SMI_SAMPLES), cut=st.floats(0.0, 1.0), noise=st.text(max_size=30))
def test_a_cut_or_spliced_sample_reads_or_is_refused_clearly(
    sample: dict[str, Any], cut: float, noise: str
) -> None:
    assert_reads_or_refused_clearly(
        lambda text: parse_smi_output(text, sample["file"], 0.0), _text(sample), cut, noise
    )


def test_a_paste_that_starts_at_the_heading_border_reads_its_gpu_rows() -> None:
    # the rows under a leading "|===" border are the GPU table even without the heading above
    rows = (
        "|===+===+===|\n"
        "|   0  Tesla T4            Off  | 00000000:00:04.0 Off |                    0 |\n"
        "| N/A   40C    P8     9W /  70W |      0MiB / 15360MiB |      0%      Default |\n"
    )
    (snap,) = parse_smi_output(rows, "pasted", 0.0)
    assert [(d.info.name, d.temperature_gpu_celsius) for d in snap.samples] == [("Tesla T4", 40)]
