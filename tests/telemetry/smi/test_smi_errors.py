"""Bad nvidia-smi input: a CorruptInputError naming the file and the line, never a traceback."""

from __future__ import annotations

import io
import os
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError, EnvironmentProblemError, GpuwardenError
from gpuwarden.telemetry.backend import Backend
from gpuwarden.telemetry.smi import open_smi, parse_smi_output
from gpuwarden.telemetry.smi.query_csv import QUERY_GPU_EXTRA, QUERY_GPU_FIELDS

SMI = "nvidia-smi"
P100_XML = "netdata__tesla-p100.xml"
H100_CSV = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.query-gpu.csv"
H100_Q = "linux-x86_64__nvidia-h100-mig__590.48.01.load.q.txt"
H100_DMON = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.idle.dmon.txt"
APPS = "windows-x86_64__nvidia-geforce-rtx-2080-super__610.62.load.query-compute-apps.csv"


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _fixture(fixtures: Path, name: str) -> str:
    return (fixtures / SMI / name).read_text()


def test_garbage_names_the_file_and_the_formats(tmp_path: Path) -> None:
    path = _write(tmp_path, "garbage.txt", "hello world\nthis is not nvidia-smi\n")
    with pytest.raises(CorruptInputError) as err:
        open_smi(path)
    assert err.value.reference == "smi-output-unreadable"
    assert "garbage.txt, line 1: not a supported nvidia-smi format" in err.value.message
    assert err.value.hint is not None and "--query-gpu" in err.value.hint


HELDOUT28 = Path(__file__).parents[2] / "data" / "smi_heldout28"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        (
            "failure__negativo17-nvidia-driver-171__nvml-mismatch-library-version-570.86-"
            "under-prompt.txt",
            "'Failed to initialize NVML: Driver/library version mismatch'",
        ),
        (
            "failure__open-gpu-kernel-modules-774__gh200-nvl2-no-devices-after-570-open-"
            "install.txt",
            "'No devices were found'",
        ),
    ],
)
def test_nvidia_smis_own_failure_is_named_when_refused(name: str, said: str) -> None:
    """A pasted failure of nvidia-smi (smi_heldout28) was refused as "not recognised": it is
    named, with its line, and pointed at the doctor, which reads it (telemetry/smi/failure.py:
    the phrases the doctor's probe reads, kept once below both)."""
    with pytest.raises(CorruptInputError) as err:
        open_smi(str(HELDOUT28 / name))
    assert f"nvidia-smi's own failure message ({said}): it read no GPU" in err.value.message
    assert "`gpuwarden doctor --from` reads it" in err.value.message


def test_a_long_text_quoting_nvidias_failure_is_not_named_as_one(tmp_path: Path) -> None:
    """nvidia-smi prints its failure in a line or three: a log quoting it among other lines is
    some other text, refused as not recognised."""
    lines = [f"step {n}: loss 0.{n}" for n in range(10)]
    lines.insert(4, "Failed to initialize NVML: Driver/library version mismatch")
    path = _write(tmp_path, "train.log", "\n".join(lines) + "\n")
    with pytest.raises(CorruptInputError) as err:
        open_smi(path)
    assert "not recognised ('step 0: loss 0.0')" in err.value.message


def test_truncated_xml_names_the_line(fixtures: Path, tmp_path: Path) -> None:
    """Cut before its GPU's name: nothing is left to read (h184: a document cut later is read up
    to the cut, tests/telemetry/smi/test_xml_cut.py)."""
    text = _fixture(fixtures, P100_XML)
    cut = text[: text.index("<product_name>") + 20]
    path = _write(tmp_path, "cut.xml", cut)
    with pytest.raises(
        CorruptInputError, match=r"cut\.xml, line \d+: the nvidia-smi -q -x document is cut short"
    ):
        open_smi(path)


def test_xml_with_entities_is_refused(tmp_path: Path) -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaa"><!ENTITY b "&a;&a;&a;">]>'
        "<nvidia_smi_log>&b;</nvidia_smi_log>"
    )
    with pytest.raises(CorruptInputError, match="declares entities"):
        open_smi(_write(tmp_path, "bomb.xml", bomb))


def test_csv_with_a_wrong_column_count_names_the_line(fixtures: Path, tmp_path: Path) -> None:
    header, row = _fixture(fixtures, H100_CSV).splitlines()[:2]
    short = row.rsplit(",", 3)[0]
    path = _write(tmp_path, "short.csv", f"{header}\n{row}\n{short}\n")
    with pytest.raises(CorruptInputError, match=r"short\.csv, line 3: \d+ cells, the header has"):
        open_smi(path)


def test_csv_with_a_bad_value_names_line_and_column(fixtures: Path, tmp_path: Path) -> None:
    header, row = _fixture(fixtures, H100_CSV).splitlines()[:2]
    bad = row.replace("81559 MiB", "lots MiB", 1)
    path = _write(tmp_path, "bad.csv", f"{header}\n{bad}\n")
    with pytest.raises(CorruptInputError, match=r"bad\.csv, line 2: column memory\.total"):
        open_smi(path)


def test_noheader_csv_is_refused_with_the_reason(fixtures: Path, tmp_path: Path) -> None:
    row = _fixture(fixtures, H100_CSV).splitlines()[1]
    with pytest.raises(CorruptInputError, match="without a header row"):
        open_smi(_write(tmp_path, "noheader.csv", row + "\n"))


def test_noheader_csv_reads_with_the_field_list(fixtures: Path) -> None:
    header, row = _fixture(fixtures, "netdata__tesla-p100.csv").splitlines()[:2]
    names = [h.strip().split(" [")[0] for h in header.split(",")]
    (snap,) = parse_smi_output(row, "p100-noheader", 0.0, query_fields=names)
    assert snap.samples[0].info.name == "Tesla P100-PCIE-16GB"
    assert snap.samples[0].memory_free_bytes == 16280 << 20  # the header's MiB unit is gone: MiB


def test_bad_q_text_value_names_its_line(fixtures: Path, tmp_path: Path) -> None:
    lines = _fixture(fixtures, H100_Q).splitlines()
    number = next(i for i, line in enumerate(lines) if "Replays Since Reset" in line)
    lines[number] = lines[number].replace(": 9", ": nine")
    path = _write(tmp_path, "bad.q.txt", "\n".join(lines))
    with pytest.raises(CorruptInputError, match=rf"bad\.q\.txt, line {number + 1}: "):
        open_smi(path)


def test_dmon_row_with_missing_cells(fixtures: Path, tmp_path: Path) -> None:
    lines = _fixture(fixtures, H100_DMON).splitlines()
    lines[3] = " ".join(lines[3].split()[:-2])
    with pytest.raises(
        CorruptInputError, match=r"d\.txt, line 4: 10 cells, the dmon header has 12"
    ):
        open_smi(_write(tmp_path, "d.txt", "\n".join(lines)))


def test_mixed_up_files_are_refused(fixtures: Path, tmp_path: Path) -> None:
    mixed = _fixture(fixtures, P100_XML) + _fixture(fixtures, "netdata__tesla-p100.csv")
    with pytest.raises(CorruptInputError, match="not well-formed"):
        open_smi(_write(tmp_path, "mixed.xml", mixed))
    mixed = _fixture(fixtures, H100_CSV) + _fixture(fixtures, APPS)
    with pytest.raises(CorruptInputError, match="cells, the header has"):
        open_smi(_write(tmp_path, "mixed.csv", mixed))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CorruptInputError, match="no such file"):
        open_smi(str(tmp_path / "nope.xml"))


# --- fuzz: mutations of the real fixtures give a result or a GpuwardenError --------------------

SEEDS = (
    P100_XML,
    H100_CSV,
    H100_Q,
    H100_DMON,
    APPS,
    "netdata__a100-sxm4-mig.xml",
    "linux-x86_64__nvidia-h100-mig__590.48.01.load.table.txt",
)


def _parse_or_gpuwarden_error(text: str) -> None:
    """Snapshots, or the smi input error; any other exception fails the test."""
    reference = None
    try:
        parse_smi_output(text, "fuzz", 0.0)
    except GpuwardenError as exc:
        reference = exc.reference
    assert reference in (None, "smi-output-unreadable")


@pytest.fixture(scope="module")
def seed_texts(fixtures: Path) -> list[str]:
    return [(fixtures / SMI / name).read_text() for name in SEEDS]


_FUZZ = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_FUZZ
@given(which=st.integers(0, len(SEEDS) - 1), cut=st.floats(0, 1))
def test_fuzz_truncations(seed_texts: list[str], which: int, cut: float) -> None:
    text = seed_texts[which]
    _parse_or_gpuwarden_error(text[: int(len(text) * cut)])


@_FUZZ
@given(
    which=st.integers(0, len(SEEDS) - 1),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_fuzz_byte_flips(seed_texts: list[str], which: int, flips: list[tuple[float, int]]) -> None:
    data = bytearray(seed_texts[which].encode())
    for where, byte in flips:
        data[min(int(where * len(data)), len(data) - 1)] = byte
    _parse_or_gpuwarden_error(data.decode("utf-8", errors="replace"))


@_FUZZ
@given(which=st.integers(0, len(SEEDS) - 1), data=st.data())
def test_fuzz_line_shuffles(seed_texts: list[str], which: int, data: st.DataObject) -> None:
    lines = seed_texts[which].splitlines()
    shuffled = data.draw(st.permutations(lines))
    _parse_or_gpuwarden_error("\n".join(shuffled))


@_FUZZ
@given(text=st.text(max_size=300))
def test_fuzz_random_text(text: str) -> None:
    _parse_or_gpuwarden_error(text)


# --- the backend: stdin, the live binary ------------------------------------------------------


def test_stdin_source(fixtures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(_fixture(fixtures, P100_XML)))
    backend = open_smi("-")
    assert isinstance(backend, Backend)
    assert backend.name == "smi" and backend.simulated is False
    assert backend.read().samples[0].info.name == "Tesla P100-PCIE-16GB"
    assert backend.read().source == "-"


def _fake_binary(tmp_path: Path, script: str) -> None:
    binary = tmp_path / "nvidia-smi"
    binary.write_text("#!/bin/sh\n" + script)
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)


def test_live_binary_is_run_with_q_x(
    fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    xml = fixtures / SMI / "netdata__a100-sxm4-mig.xml"
    _fake_binary(tmp_path, f'[ "$1 $2" = "-q -x" ] || exit 9\ncat "{xml}"\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    backend = open_smi(None)
    snap = backend.read()
    assert snap.source == "nvidia-smi -q -x" and snap.host
    assert snap.samples[0].info.uuid == "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a"
    assert [d.name for d in backend.devices()] == ["NVIDIA A100-SXM4-40GB"]


def test_live_binary_failure_carries_its_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    _fake_binary(tmp_path, f'echo "{message}" >&2\nexit 9\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(EnvironmentProblemError) as err:
        open_smi(None).read()
    assert err.value.reference == "nvidia-smi-failed"
    assert message in err.value.message and "exit code 9" in err.value.message


def test_live_binary_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblemError) as err:
        open_smi(None).read()
    assert err.value.reference == "nvidia-smi-not-found"
    assert err.value.hint is not None and "nvidia-smi -q -x" in err.value.hint


@pytest.mark.parametrize(
    "name",
    [
        P100_XML,
        "netdata__a100-sxm4-mig.xml",
        H100_Q,
        H100_DMON,
        "linux-x86_64__nvidia-h100-mig__590.48.01.load.table.txt",
    ],
)
def test_every_value_line_made_unreadable(fixtures: Path, name: str) -> None:
    """Each line's digits turned into letters, one line at a time: every mutation gives a
    result or the smi error, and a value the parser reads must be reported, not skipped."""
    lines = _fixture(fixtures, name).splitlines()
    refused = 0
    for number, line in enumerate(lines):
        if not any(c.isdigit() for c in line):
            continue
        broken = [
            *lines[:number],
            line.translate(str.maketrans("0123456789", "oizeasgtbq")),
            *lines[number + 1 :],
        ]
        try:
            parse_smi_output("\n".join(broken), name, 0.0)
        except CorruptInputError:
            refused += 1
    assert refused >= 5


def test_every_csv_cell_made_unreadable(fixtures: Path) -> None:
    """Each numeric column the parser maps, made unreadable: an error naming line and column."""
    header, row = _fixture(fixtures, H100_CSV).splitlines()[:2]
    numeric = {
        q for q, _, reader in QUERY_GPU_FIELDS if reader.__name__ not in ("_text", "_version")
    }
    numeric |= set(QUERY_GPU_EXTRA)
    names = [h.split(" [")[0] for h in header.split(", ")]
    cells = row.split(", ")
    refused = 0
    for i, (name, cell) in enumerate(zip(names, cells, strict=True)):
        if name not in numeric or not any(c.isdigit() for c in cell):
            continue
        broken = ", ".join([*cells[:i], "x" + cell, *cells[i + 1 :]])
        with pytest.raises(CorruptInputError, match=rf"cells\.csv, line 2: column {name}"):
            parse_smi_output(f"{header}\n{broken}\n", "cells.csv", 0.0)
        refused += 1
    assert refused >= 40
