"""Held-out ``nvidia-smi -q -x`` captures, set 3 (tests/data/smi_xml_public3/: SOURCES.md says
where each comes from, expected.json holds the values read off each file by hand): Microsoft
OpenPAI's, Guance DataKit's, vertex's, llamaland's and an nvidia_smi_exporter's test data — DTD
v9 to v12 and a file with no declaration, drivers 384 to 575, Kepler to Ampere, a six-GPU mining
rig on x1 risers, Azure K80s with retired pages, a DGX-2 V100 with a pending retirement. Every
file reads to the values printed in it, ``snapshot --json`` prints the same values, and
``doctor`` gives exactly the findings above info that the file shows: none for a healthy GPU.
"""

from __future__ import annotations

import pytest

from gpuwarden.telemetry.smi import parse_smi_output
from tests.telemetry.smi.heldout import (
    load_set,
    sample_named,
    sample_text,
    xml_set_checks,
)

DATA, SAMPLES = load_set("smi_xml_public3")


(
    test_the_set_is_the_one_described,
    test_the_file_is_a_complete_capture_of_its_schema,
    test_reads_the_printed_values,
    test_snapshot_json_prints_the_same_values,
    test_doctor_finds_what_the_file_shows_and_nothing_else,
    test_a_cut_or_spliced_capture_reads_or_is_refused_clearly,
) = xml_set_checks(DATA, SAMPLES)


@pytest.mark.parametrize("printed", ["Not Found", "N/A", "XXX.XX"])
def test_a_cuda_version_that_is_no_version_number_is_not_reported(printed: str) -> None:
    """nvidia-smi prints "Not Found" as the CUDA version when it finds no CUDA driver library
    (the Azure K80 capture); the -q and table readers already read a version only where one is
    printed, and the XML reader reads it alike instead of reporting the words as a version."""
    sample = sample_named(SAMPLES, "pai__4x-tesla-k80-azure__v10__430.26.xml")
    text = sample_text(DATA, sample)
    old = "<cuda_version>Not Found</cuda_version>"
    assert text.count(old) == 1
    spelt = text.replace(old, f"<cuda_version>{printed}</cuda_version>")
    gpus = parse_smi_output(spelt, sample["file"], 0.0)[0].samples
    assert {d.info.cuda_driver_version for d in gpus} == {None}


def test_the_cuda_version_r615_prints_as_cuda_umd_version_is_read_after_not_found() -> None:
    """Where <cuda_version> holds no version, the R615 spelling <cuda_umd_version> is read."""
    sample = sample_named(SAMPLES, "pai__4x-tesla-k80-azure__v10__430.26.xml")
    text = sample_text(DATA, sample).replace(
        "<cuda_version>Not Found</cuda_version>",
        "<cuda_version>Not Found</cuda_version>\n    <cuda_umd_version>10.2</cuda_umd_version>",
    )
    gpus = parse_smi_output(text, sample["file"], 0.0)[0].samples
    assert {d.info.cuda_driver_version for d in gpus} == {"10.2"}
