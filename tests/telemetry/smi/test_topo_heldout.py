"""Held-out `nvidia-smi topo -m` and `nvidia-smi nvlink -s` outputs pasted in public threads and
docs (tests/data/topo_public/: SOURCES.md says where each comes from, expected.json holds the
values read off each sample by hand). Each sample reads to the values printed in it, and `doctor`
gives exactly the findings above info the sample shows: none for a healthy node.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_topology
from gpuwarden.types.topology import Topology
from tests.telemetry.smi.heldout import (
    CUT,
    NOISE,
    assert_reads_the_links,
    assert_reads_the_matrix,
    assert_set_is_described,
    assert_topo_sample_reads_or_refused_clearly,
    doctor_codes_above_info,
    load_set,
    sample_param,
    sample_text,
)

DATA, SAMPLES = load_set("topo_public")

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


@pytest.mark.parametrize("sample", TOPO + NVLINK)
def test_doctor_finds_what_the_sample_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    above_info = doctor_codes_above_info(DATA / sample["file"])
    assert above_info == sorted(sample["doctor_codes"])
    assert bool(above_info) == sample["fault"]


READABLE = [s for s in SAMPLES if s["file"] not in XFAIL]


@settings(max_examples=80, deadline=None)
@given(sample=st.sampled_from(READABLE), cut=CUT, noise=NOISE)
def test_a_cut_or_spliced_sample_reads_or_is_refused_clearly(
    sample: dict[str, Any], cut: float, noise: str
) -> None:
    assert_topo_sample_reads_or_refused_clearly(sample, _text(sample), cut, noise)


HEADERED = [
    _param(s)
    for s in SAMPLES
    if s["reads"] == "topo"
    and s["file"] != "topo__vllm-16336__8x-b200-gpu2-without-nvlink.partial.txt"
]


def _without_header(text: str) -> str:
    """The sample as a paste cut just above its first GPU row."""
    lines = text.splitlines()
    first_row = next(i for i, line in enumerate(lines) if re.match(r"^\s*GPU\d+\s+X\b", line))
    return "\n".join(lines[first_row:])


def _reading(topology: Topology) -> tuple[Any, ...]:
    return (
        [g.label for g in topology.gpus],
        [n.label for n in topology.nics if n.label.startswith("NIC")],
        sorted((x.a, x.b, x.code) for x in topology.links),
        [(g.cpu_affinity, g.numa_affinity) for g in topology.gpus if g.label in _rows(topology)],
    )


def _rows(topology: Topology) -> set[str]:
    return {g.label for g in topology.gpus} - set(topology.missing_rows)


# Header-less copies that must be refused: the rows cannot tell a GPU column from a NIC column.
REFUSED_WITHOUT_HEADER = {
    # DGX-1's hybrid cube mesh bonds each V100 to four others by NV1/NV2: not all-to-all, and
    # rows GPU0-GPU? do not cover the NIC columns
    "topo__vllm-5727__8x-v100-nv1-nv2-hybrid-mesh.partial.txt",
}


@pytest.mark.parametrize("sample", HEADERED)
def test_rows_without_their_header_read_the_same_or_are_refused(sample: dict[str, Any]) -> None:
    """A header-less copy of a real matrix never reads to another matrix: the same devices,
    links and affinities, or (a board whose rows cannot tell GPU columns from NIC columns) a
    clear refusal naming the file."""
    text = _text(sample)
    whole = parse_topology(text, sample["file"])
    if sample["file"] in REFUSED_WITHOUT_HEADER:
        with pytest.raises(CorruptInputError, match="cannot tell GPU columns from NIC columns"):
            parse_topology(_without_header(text), sample["file"])
        return
    cut = parse_topology(_without_header(text), sample["file"])
    if any(not n.label.startswith("NIC") for n in whole.nics):
        # an older driver names NIC columns by device (mlx5_0): a header-less copy says NIC#
        assert len(cut.nics) == len(whole.nics)
        return
    assert _reading(cut) == _reading(whole)
    named = {g.label for g in cut.gpus} | {n.label for n in cut.nics}
    assert set(cut.inferred_columns) <= named
