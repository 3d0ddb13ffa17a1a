"""Held-out set 18: every nvidia-smi output that blog posts, tutorials and how-tos of the pages
corpus paste (CSDN and its copies, cnblogs, personal blogs, a vendor's wiki), in the order the
corpus gave them, as its stored copies hold them (tests/data/smi_heldout18/: SOURCES.md lists
the 31 searches, what was kept and what was skipped and why; expected.json holds the values read
off each sample by hand). Healthy GPUs get nothing above info.

Also here: a default table a web page stored with its line breaks lost (its lines joined onto
one, the blanks collapsed) reads as the table it was; and a fan cell nvidia-smi prints as "ERR!"
(NVML returned an error for that field) is no reading and no finding.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import DeviceSample
from tests.telemetry.smi.heldout import (
    DATA_ROOT,
    doctor_codes_above_info,
    load_set,
    matrix_check,
    mixed_set_checks,
    sample_text,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout18")

# Samples a parser still cannot read or doctor cannot judge as an engineer does, and why: none.
READ_XFAIL: dict[str, str] = {}
DOCTOR_XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_printed_values,
    test_what_holds_no_gpu_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = mixed_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=7)


test_reads_the_matrix = matrix_check(DATA, SAMPLES)


# --- a table a web page joined onto one line

# Real screens whose every block a joined copy must give back: smi_heldout10's R570 A100 in MIG
# mode (GPU rows of 3 columns, MIG devices of 4, Processes of 1, a date line above) and
# smi_heldout12's R580 8x B200 with vLLM's process rows.
_WHOLE_SCREENS = [
    DATA_ROOT / "smi_heldout10" / "table__openshift-dra-readme__a100-80gb-pcie-mig__570.148.08.txt",
    DATA_ROOT
    / "smi_heldout12"
    / "table__nemo-agent-dynamo-readme__8x-b200-vllm-memory-cut__580.65.06.txt",
]


def _joined(text: str, *, collapse_blanks: bool) -> str:
    """``text`` as a web page stores a <pre> block it renders as one paragraph."""
    line = " ".join(text.splitlines())
    return re.sub(r"\s+", " ", line).strip() if collapse_blanks else line


def _reading(text: str, source: str) -> list[DeviceSample]:
    (snapshot,) = parse_smi_output(text, source, 0.0)
    return list(snapshot.samples)


def _what_a_screen_says(samples: list[DeviceSample]) -> list[tuple[Any, ...]]:
    return [
        (
            table_values(d),
            d.power_limit_watts,
            d.info.driver_version,
            d.info.pci_bus_id,
            [(m.gpu_instance_id, m.memory_used_bytes) for m in d.mig_devices or ()],
            [(p.pid, p.used_memory_bytes) for p in d.processes or ()],
        )
        for d in samples
    ]


@pytest.mark.parametrize("collapse_blanks", [False, True], ids=["blanks-kept", "blanks-collapsed"])
@pytest.mark.parametrize("path", _WHOLE_SCREENS, ids=[p.name for p in _WHOLE_SCREENS])
def test_a_table_joined_onto_one_line_reads_as_the_table_it_was(
    path: Path, collapse_blanks: bool
) -> None:
    """Fails before h92: a line holding the whole table was "not a supported nvidia-smi format"."""
    text = path.read_text()
    joined = _joined(text, collapse_blanks=collapse_blanks)
    assert "\n" not in joined
    original = _what_a_screen_says(_reading(text, path.name))
    assert _what_a_screen_says(_reading(joined, path.name)) == original
    assert any(mig for *_, mig, _ in original) or any(procs for *_, procs in original)


@pytest.mark.parametrize("path", _WHOLE_SCREENS, ids=[p.name for p in _WHOLE_SCREENS])
def test_doctor_judges_a_joined_table_as_the_table_it_was(path: Path, tmp_path: Path) -> None:
    """Fails before h92: doctor skipped the joined copy as not a capture it reads."""
    joined = tmp_path / path.name
    joined.write_text(_joined(path.read_text(), collapse_blanks=True))
    assert doctor_codes_above_info(joined) == doctor_codes_above_info(path)


def test_a_line_whose_bars_do_not_make_whole_rows_is_not_taken_for_a_joined_table() -> None:
    """The GPU rows under a 3-column border must hold 4 "|" each; with one missing and more of
    the table after it, the line is not a joined table: refused clearly, not misread."""
    text = sample_text(DATA, SAMPLES[1])  # chegva.com's joined B200 table
    broken = text.replace("| 0 NVIDIA B200 On |", "| 0 NVIDIA B200 On", 1)
    with pytest.raises(CorruptInputError) as caught:
        parse_smi_output(broken, "joined.txt", 0.0)
    assert "joined.txt" in str(caught.value) and caught.value.hint


# --- a fan reading nvidia-smi printed as "ERR!"

_FAN_ERR = next(s for s in SAMPLES if "fan-err" in s["file"])


def test_a_fan_printed_as_err_is_no_reading_and_no_finding() -> None:
    """nvidia-smi prints "ERR!" where NVML returned an error for a field ("[Unknown Error]" in
    CSV). fan.speed is the speed the fan is intended to run at, not a measurement, and no code of
    the vocabulary names an unreadable field: GPU 3, whose temperature and power read normal, gets
    what its neighbours get (persistence-off, information) and nothing about its fan."""
    samples = _reading(sample_text(DATA, _FAN_ERR), _FAN_ERR["file"])
    # GPU 6, listed from its cut first row (the lead's convention of 2026-11-28), reads no fan
    assert [d.fan_speed_percent for d in samples] == [30.0, 30.0, 30.0, None, 30.0, 30.0, None]
    report = diagnose_captures([str(DATA / _FAN_ERR["file"])], DoctorOptions())
    by_gpu = {
        index: sorted(f.code for f in report.findings if f.device and f.device.index == index)
        for index in range(6)
    }
    assert by_gpu[3] == by_gpu[2] == ["persistence-off"]


def test_many_joined_table_lines_are_restored_in_one_pass() -> None:
    """A hostile file of 320,000 lines that each hold two borders: every line is split, and the
    work grows with the file (before, each split line was inserted into the list in place,
    shifting the rest: quadratic, ~20 s here)."""
    from gpuwarden.telemetry.smi.paste import strip_terminal

    line = " +---+ +---+ | a |"
    started = time.process_time()
    paste = strip_terminal("\n".join([line] * 320_000))
    elapsed = time.process_time() - started
    assert paste.text.count("+---+") == 640_000
    assert elapsed < 10.0, f"{elapsed:.1f} s of CPU"
