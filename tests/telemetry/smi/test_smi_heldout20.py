"""Held-out set 20: every `nvidia-smi --query-gpu` / `--query-compute-apps` CSV output that GitHub
issue threads of 2019-2026 paste, in the order the issues corpus gave them, as its stored excerpts
hold them (tests/data/smi_heldout20/: SOURCES.md lists the searches, what was kept and what was
skipped and why; expected.json holds the values read off each sample by hand). Healthy GPUs get
nothing above info.

Also here: a `--query-compute-apps` CSV whose header has no pid (``gpu_uuid, process_name``) is
a process list, not one row per GPU; the poster's shell comment ("# Output") between the command
and a `noheader` CSV is not a row of it; what another command printed after the CSV, past a
blank line (`time`'s report, a second run), is not a row of it either.
"""

from __future__ import annotations

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from tests.telemetry.smi.heldout import load_set, mixed_set_checks, sample_text

DATA, SAMPLES = load_set("smi_heldout20")

# Samples a parser still cannot read or doctor cannot judge as an engineer does, and why: none.
READ_XFAIL: dict[str, str] = {}
DOCTOR_XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_printed_values,
    test_what_holds_no_gpu_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = mixed_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=6)

_BY_FILE = {s["file"]: s for s in SAMPLES}


def test_a_compute_apps_csv_without_pid_is_no_gpu_per_row() -> None:
    """Fails before h107: the header 'gpu_uuid, process_name' (nvidia-smi prints the "name"
    field of --query-compute-apps as process_name) was taken for a --query-gpu CSV, and its 3
    processes for 3 GPUs, one UUID twice."""
    sample = _BY_FILE["csv-compute-apps__dcgm-exporter-94__gpu-uuid-process-name-3-vgpu.txt"]
    with pytest.raises(CorruptInputError, match="pid"):
        parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)


def test_a_compute_apps_csv_with_pid_still_lists_its_processes() -> None:
    text = "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\nGPU-1, 42, python, 100 MiB\n"
    (snap,) = parse_smi_output(text, "apps.csv", 0.0)
    (device,) = snap.samples
    assert [(p.pid, p.name) for p in device.processes or ()] == [(42, "python")]


@pytest.mark.parametrize("comment", ["# Output", "# output:", "#  result"])
def test_a_shell_comment_between_command_and_noheader_rows_is_not_a_row(comment: str) -> None:
    """Fails before h107: the line was read as the value of utilization.gpu."""
    text = f"$ nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader\n{comment}\n1 %\n"
    (snap,) = parse_smi_output(text, "util.csv", 0.0)
    assert [d.gpu_utilization_percent for d in snap.samples] == [1.0]


def test_what_another_command_printed_after_a_blank_line_ends_the_csv() -> None:
    """Fails before h107: `time`'s "real\t0m0,022s" (a decimal comma) after the rows was read
    as a row of 2 cells, and the whole CSV refused."""
    sample = _BY_FILE[
        "csv__bpytop-26__gtx-1080-ti-and-gtx-1060-under-time-second-run-cut.partial.txt"
    ]
    (snap,) = parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)
    assert [d.info.name for d in snap.samples] == ["GeForce GTX 1080 Ti", "GeForce GTX 1060 6GB"]


def test_rows_after_a_blank_line_are_still_rows() -> None:
    """A loop's readings pasted with blank lines between them read as before."""
    text = "index, temperature.gpu\n0, 40\n\n0, 41\n"
    assert [s.samples[0].temperature_gpu_celsius for s in parse_smi_output(text, "l.csv", 0.0)] == [
        40.0,
        41.0,
    ]
