"""Held-out set 24: nvidia-smi outputs of the newest GPUs (B200, RTX 5080, H200) that the pages
corpus, then the issues corpus, quote, in the order they came (tests/data/smi_heldout24/:
SOURCES.md lists the 24 searches, what was kept and skipped and why; expected.json holds the
values read off each sample by hand before gpuwarden ran). The frame is thin: 6 outputs, most of
the in-frame issue outputs being held by earlier sets. Healthy GPUs get nothing above info.

Measured before any change: 4 of 6 read as the engineer reads them. The screen piped through
`cat -n` was refused as not recognised (fixed here: cat's line numbers are taken off); the grep
of an H200's `-q` stays refused (a strict xfail below, with its reason).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.telemetry.smi import parse_smi_output, parse_topology
from gpuwarden.telemetry.smi.paste import strip_terminal
from gpuwarden.types.topology import Topology
from tests.telemetry.smi.heldout import (
    load_set,
    mixed_set_checks,
    sample_ids,
    sample_text,
    samples_read_as,
)

DATA, SAMPLES = load_set("smi_heldout24")

_GREP_OF_Q = "q-grep__mig-parted-120__h200-identity-rows.fragment.txt"
_GREP_REASON = (
    "grep kept six rows of one GPU's -q report, without a section name or its 'GPU <bus id>' "
    "line: the -q reader takes a report without that line only by two or more of -q's own "
    "section names (q_text._MIN_SECTIONS), so that a few 'Key : value' lines of another tool are "
    "never read as a GPU; reading grep's selection would need a rule for -q rows alone"
)
# Samples a parser still cannot read, and why.
READ_XFAIL: dict[str, str] = {_GREP_OF_Q: _GREP_REASON}
# Samples doctor cannot judge as an engineer does yet, and why: the same one, refused as input.
DOCTOR_XFAIL: dict[str, str] = {_GREP_OF_Q: _GREP_REASON}

(
    test_the_set_is_the_one_described,
    test_reads_the_printed_values,
    test_what_holds_no_gpu_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = mixed_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=6)

TOPO = samples_read_as(SAMPLES, "topo")


def _affinity(topology: Topology, label: str) -> list[Any]:
    (gpu,) = [g for g in topology.gpus if g.label == label]

    def ranges(value: Any) -> Any:
        return None if value is None else [list(r) for r in value]

    return [ranges(gpu.cpu_affinity), ranges(gpu.numa_affinity), gpu.numa_id]


@pytest.mark.parametrize("sample", TOPO, ids=sample_ids(TOPO))
def test_reads_the_matrix_rows_the_text_holds(sample: dict[str, Any]) -> None:
    topology = parse_topology(sample_text(DATA, sample), sample["file"])
    assert (len(topology.gpus), len(topology.nics)) == (sample["gpus"], sample["nics"])
    read = [
        [a, b, link.code if (link := topology.link(a, b)) else None] for a, b, _ in sample["cells"]
    ]
    assert read == sample["cells"]
    assert {label: _affinity(topology, label) for label in sample["affinity"]} == sample["affinity"]
    assert sorted(topology.missing_rows) == sorted(sample["missing_rows"])


# --- `cat -n`: each line's number right-aligned in six columns, then a tab (GNU coreutils cat.c)

_CAT_N = "table__chia-gigahorse-364__rtx-5080-cat-n-cut-in-gpu0__580.119.02.partial.txt"


def _numbered(lines: list[str], first: int = 1) -> str:
    return "".join(f"{n:6d}\t{line}\n" for n, line in enumerate(lines, start=first))


def test_the_screen_cat_numbered_reads_as_the_screen() -> None:
    """Fails before h188: refused as not recognised."""
    (reading,) = parse_smi_output((DATA / _CAT_N).read_text(), _CAT_N, 0.0)
    (gpu,) = reading.samples
    assert (gpu.info.name, gpu.temperature_gpu_celsius, gpu.power_draw_watts) == (
        "NVIDIA GeForce RTX 5080",
        53.0,
        290.0,
    )
    assert (gpu.power_limit_watts, gpu.info.driver_version) == (360.0, "580.119.02")


def test_cat_s_numbers_come_off_every_line_and_only_theirs() -> None:
    """The numbers of a whole CSV (its empty line numbered too) come off; the typed command
    above them stays the command."""
    body = ["index, temperature.gpu", "0, 40", "", "1, 41"]
    paste = strip_terminal.__wrapped__(
        "$ nvidia-smi --query-gpu=index,temperature.gpu --format=csv | cat -n\n" + _numbered(body)
    )
    assert paste.text.splitlines()[1:] == body
    assert paste.command == "nvidia-smi --query-gpu=index,temperature.gpu --format=csv | cat -n"


@pytest.mark.parametrize(
    "text",
    [
        # numbers that do not follow one another: no cat -n
        "     1\tGPU0\n     3\tGPU1\n     4\tGPU2\n",
        # not right-aligned in six columns
        "1\ta\n2\tb\n3\tc\n",
        "  1\ta\n  2\tb\n  3\tc\n",
        # a tab-separated topo -m: its rows start with a label, not a number
        "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n",
    ],
)
def test_lines_cat_did_not_number_keep_their_text(text: str) -> None:
    """(An indentation common to every line still comes off, as any paste's does.)"""
    kept = strip_terminal.__wrapped__(text).text.splitlines()
    assert [line.strip() for line in kept] == [line.strip() for line in text.splitlines()]


def test_a_number_wider_than_six_columns_is_cat_s_too() -> None:
    """Past 999999 cat's number takes more columns, still followed by its tab."""
    body = ["index, temperature.gpu", "0, 40"]
    paste = strip_terminal.__wrapped__(_numbered(body, first=999_999))
    assert paste.text.splitlines() == body
