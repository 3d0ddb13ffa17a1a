"""Held-out set 22: the non-table nvidia-smi outputs gpuwarden reads (`-q`, `-q -x`, `--query-gpu`
CSV) of drivers R450-R610 that GitHub issue and pull-request threads of 2020-2026 paste, in the
order the issues corpus gave them, as its stored excerpts hold them (tests/data/smi_heldout22/:
SOURCES.md lists the searches, what was kept and what was skipped and why; expected.json holds
the values read off each sample by hand). Healthy GPUs get nothing above info.

Measured before any change: 7 of the 10 readings read to every value recorded; the noheader
CSV under its command written as Markdown code with a label's colon ("`nvidia-smi
--query-gpu=...`:") was refused (fixed here); the two `-q -x` documents cut inside an element
were refused (h184: now read up to the cut, saying where it was cut); nvidia-smi's own refusal
of a query ('Field "compute_cap" is not a valid field to query.') was refused as a CSV row that
is "not a number" (now named for what it is). No false alarm anywhere.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from tests.telemetry.smi.heldout import (
    identity_values,
    load_set,
    sample_param,
    sample_text,
    samples_read_as,
    smi_set_checks,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout22")

# Samples a parser still cannot read or doctor cannot judge as an engineer does, and why: none.
READ_XFAIL: dict[str, str] = {}
DOCTOR_XFAIL = dict(READ_XFAIL)

(
    test_the_set_is_the_one_described,
    test_what_holds_no_gpu_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = smi_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=10)

READINGS = [sample_param(s, READ_XFAIL) for s in samples_read_as(SAMPLES, "smi")]
_BY_FILE = {s["file"]: s for s in SAMPLES}


@pytest.mark.parametrize("sample", READINGS)
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    readings = parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)
    assert len(readings) == sample["readings"]
    gpus = list(readings[0].samples)
    assert [table_values(d) for d in gpus] == sample["gpus"]
    assert [d.power_limit_watts for d in gpus] == sample["power_limit_w"]
    assert [identity_values(d) for d in gpus] == sample["ids"]
    assert {d.info.driver_version for d in gpus} == {sample["driver"]}
    assert {d.info.cuda_driver_version for d in gpus} == {sample.get("cuda")}


def test_a_loop_of_csv_rows_reads_one_reading_per_row() -> None:
    sample = _BY_FILE["csv__ksysguard-gpu-27__13-loop-readings-of-gpu0-p3.txt"]
    readings = parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)
    per_row = [
        [d.temperature_gpu_celsius, d.gpu_utilization_percent, d.power_draw_watts]
        for d in (reading.samples[0] for reading in readings)
    ]
    assert per_row == sample["loop"]
    assert {reading.samples[0].fan_speed_percent for reading in readings} == {sample["fan_pct"]}


def test_the_posters_elision_under_csv_rows_is_no_gpu() -> None:
    sample = _BY_FILE["csv__nvtop-470__a100-mig-mode-current-only-two-rows-then-dots.elided.txt"]
    (reading,) = parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)
    assert [d.mig_mode for d in reading.samples] == [False, False]


# --- a noheader CSV under its command written as Markdown code with a label's colon


def test_a_noheader_csv_under_its_command_as_code_with_a_colon_reads() -> None:
    """Fails before h162: the colon after the closing backtick kept the line from being taken
    for the command, so the CSV's columns were unknown and the paste "not recognised"."""
    sample = _BY_FILE[
        "csv-noheader__akash-provider-configs-91__h100-nvl-name-pci-device-id-under-label.txt"
    ]
    (reading,) = parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)
    assert [d.info.name for d in reading.samples] == ["NVIDIA H100 NVL"]


@pytest.mark.parametrize("ending", ["`:", "`", "```"], ids=["code-colon", "code", "fence"])
def test_the_command_as_code_names_the_noheader_columns(ending: str) -> None:
    opening = "```" if ending == "```" else "`"
    command = f"{opening}nvidia-smi --query-gpu=index,temperature.gpu --format=csv,noheader{ending}"
    (reading,) = parse_smi_output(f"{command}\n\n0, 40\n1, 41\n", "label.csv", 0.0)
    assert [d.temperature_gpu_celsius for d in reading.samples] == [40.0, 41.0]


_CUT_XML = {
    "xml__netdata-10362__gtx-960-cut-in-serial__v11__495.46.partial.xml": "driver_model",
    "xml__telegraf-12996__rtx-3080-ti-wddm-cut-in-board__v12__531.41.partial.xml": "board_id",
}


@pytest.mark.parametrize("file", sorted(_CUT_XML))
def test_a_xml_document_cut_inside_an_element_says_where_it_was_cut(file: str) -> None:
    """Fails before h184 (the document was refused as not well-formed): the reading says it was
    cut after the last element closed before the cut, on the GPU it was cut in."""
    (reading,) = parse_smi_output(sample_text(DATA, _BY_FILE[file]), file, 0.0)
    (note,) = [event.message for event in reading.events]
    assert note == (
        "the nvidia-smi -q -x document is cut short: GPU 00000000:01:00.0's report ends after "
        f"<{_CUT_XML[file]}>; what came after is not reported"
    )


# --- nvidia-smi's refusal of a field it does not know


def test_a_query_nvidia_smi_refused_is_refused_as_such() -> None:
    """Fails before h162: nvidia-smi's 'Field "compute_cap" is not a valid field to query.' was
    read as a row of the CSV and refused as "column compute_cap: not a number"."""
    sample = _BY_FILE[
        "failure__inference-snaps-89__query-compute-cap-not-a-valid-field-r470-binary.txt"
    ]
    with pytest.raises(CorruptInputError, match="nvidia-smi refused the query: 'compute_cap'") as e:
        parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)
    assert "--help-query-gpu" in (e.value.hint or "")


def test_a_field_named_like_the_refusal_in_a_real_csv_still_reads() -> None:
    text = "name, temperature.gpu\nField test board, 40\n"
    (reading,) = parse_smi_output(text, "named.csv", 0.0)
    assert [d.info.name for d in reading.samples] == ["Field test board"]
