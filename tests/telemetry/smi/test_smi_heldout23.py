"""Held-out set 23: every nvidia-smi output gpuwarden reads that blog posts, tutorials, vendors'
and cloud providers' manuals and Q&A or forum pages of the pages corpus quote (not GitHub), in
the order the corpus gave them (tests/data/smi_heldout23/: SOURCES.md lists the 44 searches,
what was kept and what was skipped and why; expected.json holds the values read off each sample
by hand). The frame is thin there: two outputs, both `--query-gpu=uuid` CSVs of one blog copy
of the NVIDIA Container Toolkit's user guide. Healthy GPUs get nothing above info.

Measured before any change: the CSV under `docker run ... nvidia/cuda nvidia-smi --query-gpu=...`
was refused as "not recognised" (the launcher before nvidia-smi kept the line from being taken
for the command), and doctor refused it as bad input; the CSV under `nvidia-smi -i 3 ...` read,
but as GPU 0 (the GPU the command selects is 3). Both fixed here. No false alarm anywhere.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.smi.paste import strip_terminal
from gpuwarden.types.telemetry import Snapshot
from tests.telemetry.smi.heldout import (
    identity_values,
    load_set,
    sample_param,
    sample_text,
    samples_read_as,
    smi_set_checks,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout23")

# Samples a parser still cannot read or doctor cannot judge as an engineer does, and why: none.
READ_XFAIL: dict[str, str] = {}
DOCTOR_XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_what_holds_no_gpu_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = smi_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=2)

READINGS = [sample_param(s, READ_XFAIL) for s in samples_read_as(SAMPLES, "smi")]


@pytest.mark.parametrize("sample", READINGS)
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    """Fails before h171 for both samples: the first was refused, the second read as GPU 0."""
    readings = parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)
    assert len(readings) == sample["readings"]
    gpus = list(readings[0].samples)
    assert [table_values(d) for d in gpus] == sample["gpus"]
    assert [d.power_limit_watts for d in gpus] == sample["power_limit_w"]
    assert [identity_values(d) for d in gpus] == sample["ids"]
    assert {d.info.driver_version for d in gpus} == {sample["driver"]}


def _read(text: str) -> list[Snapshot]:
    return parse_smi_output(text, "paste.txt", 0.0)


def _indices_and_temperatures(readings: list[Snapshot]) -> list[list[tuple[int, float | None]]]:
    return [[(d.info.index, d.temperature_gpu_celsius) for d in r.samples] for r in readings]


# --- nvidia-smi run in a container: the launcher's words are not nvidia-smi's

_NOHEADER = "--query-gpu=temperature.gpu,power.draw --format=csv,noheader,nounits"


@pytest.mark.parametrize(
    "launcher",
    [
        "docker run --rm --gpus all nvidia/cuda:12.2.0-base-ubuntu22.04",
        "$ sudo docker exec -i trainer",
        "podman run --rm --device nvidia.com/gpu=all ubuntu",
        "kubectl exec -it gpu-pod -n ml --",
        "docker container run --runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=1,2 nvidia/cuda",
    ],
)
def test_the_command_run_in_a_container_names_the_noheader_columns(launcher: str) -> None:
    """Fails before h171: a line where nvidia-smi follows a container launcher was not taken for
    the command, so the header-less CSV's columns were unknown and the paste not recognised.
    Docker's own `-i` (interactive) selects no GPU: the rows stay GPUs 0 and 1."""
    text = f"{launcher} nvidia-smi {_NOHEADER}\n40, 61.20\n42, 63.05\n"
    (reading,) = _read(text)
    assert [
        (d.info.index, d.temperature_gpu_celsius, d.power_draw_watts) for d in reading.samples
    ] == [
        (0, 40.0, 61.2),
        (1, 42.0, 63.05),
    ]


def test_a_container_running_something_else_is_no_command_line() -> None:
    with pytest.raises(CorruptInputError, match="not recognised"):
        _read("docker run --rm nvidia/cuda nvcc --version\n40, 61.20\n")


def test_a_long_launcher_line_without_nvidia_smi_is_read_at_once() -> None:
    """Each of the launcher's words is taken once: a line that never reaches nvidia-smi costs
    its length, not its length squared. Checked without a clock (a wall-clock bound fails under
    load): a word is taken whole (possessive), so the launcher's words never end inside one. A
    word the engine could split ("\\S+\\s*": every split of every word tried on a line that
    never reaches nvidia-smi, exponential in its words) would end one inside an image named
    "...nvidia-smi", and read the rest as the command."""
    commands = [
        strip_terminal.__wrapped__(f"docker run --rm {image} -q\nx\n").command
        for image in ("nvidia/cuda nvidia-smi", "myimagenvidia-smi")
    ]
    assert commands == ["nvidia-smi -q", None]
    line = "docker run " + "-e A=1 " * 50_000 + "image true\n"
    with pytest.raises(CorruptInputError):
        _read(line + "40, 61.20\n")


# --- the GPU `-i N` selects: nvidia-smi's index of the row a CSV without an index column prints


def test_the_one_gpu_i_selects_is_that_index_in_every_reading_of_a_loop() -> None:
    """Fails before h171: the rows were read as GPUs 0, 1 and 2 of one reading."""
    text = "nvidia-smi -i 2 -l 1 --query-gpu=temperature.gpu --format=csv,noheader\n40\n41\n42\n"
    assert _indices_and_temperatures(_read(text)) == [[(2, 40.0)], [(2, 41.0)], [(2, 42.0)]]


@pytest.mark.parametrize("selection", ["--id=5", "-i5", "--id 5"])
def test_every_spelling_of_the_id_option_selects_the_gpu(selection: str) -> None:
    text = f"nvidia-smi {selection} --query-gpu=uuid,temperature.gpu --format=csv\n"
    text += "uuid, temperature.gpu\nGPU-0c5f2d3a-1111-2222-3333-444455556666, 38\n"
    assert _indices_and_temperatures(_read(text)) == [[(5, 38.0)]]


def test_the_index_column_printed_wins_over_the_selection() -> None:
    text = "nvidia-smi -i 2 --query-gpu=index,temperature.gpu --format=csv\n"
    text += "index, temperature.gpu\n7, 40\n"
    assert _indices_and_temperatures(_read(text)) == [[(7, 40.0)]]


# h188 changed three of these readings deliberately (test_smi_selection.py): "-i 0,2" reads the
# rows as GPUs 0 and 2 (nvidia-smi prints the GPUs a list selects in its enumeration order); one
# UUID or one bus id selects one GPU, so two rows under it are refused. A board serial may be
# shared by the GPUs of one board (nvidia-smi's man page): its rows stay in order.
@pytest.mark.parametrize("selection", ["-i 1320218012345"], ids=["a-board-serial"])
def test_an_id_that_is_not_one_index_leaves_the_rows_in_order(selection: str) -> None:
    text = f"nvidia-smi {selection} --query-gpu=temperature.gpu --format=csv,noheader\n40\n41\n"
    assert _indices_and_temperatures(_read(text)) == [[(0, 40.0), (1, 41.0)]]
