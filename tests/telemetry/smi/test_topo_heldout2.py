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

from gpuwarden.telemetry.smi import parse_nvlink_status, parse_topology
from gpuwarden.types.topology import Ranges, Topology
from tests.telemetry.smi.heldout import (
    assert_doctor_finds,
    assert_reads_or_refused_clearly,
    assert_set_is_described,
    load_set,
    nvlink_states,
)

DATA, SAMPLES = load_set("topo_public2")

# Samples the code cannot take yet, and why.
XFAIL: dict[str, str] = {}


def _param(sample: dict[str, Any]) -> Any:
    reason = XFAIL.get(sample["file"])
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(sample, id=sample["file"], marks=marks)


def _text(sample: dict[str, Any]) -> str:
    return (DATA / sample["file"]).read_text()


def _ranges(value: Ranges | None) -> list[list[int]] | None:
    return None if value is None else [list(r) for r in value]


TOPO = [_param(s) for s in SAMPLES if s["reads"] == "topo"]
NVLINK = [_param(s) for s in SAMPLES if s["reads"] == "nvlink"]


def test_the_set_is_the_one_described() -> None:
    assert_set_is_described(DATA, SAMPLES)


def _cells(topology: Topology, sample: dict[str, Any]) -> list[list[str] | None]:
    return [
        [a, b, link.code] if (link := topology.link(a, b)) else None for a, b, _ in sample["cells"]
    ]


@pytest.mark.parametrize("sample", TOPO)
def test_reads_the_matrix(sample: dict[str, Any]) -> None:
    topology = parse_topology(_text(sample), sample["file"])
    assert (len(topology.gpus), len(topology.nics)) == (sample["gpus"], sample["nics"])
    assert _cells(topology, sample) == sample["cells"]
    by_label = {g.label: g for g in topology.gpus}
    affinity = {
        label: [
            _ranges(by_label[label].cpu_affinity),
            _ranges(by_label[label].numa_affinity),
            by_label[label].numa_id,
        ]
        for label in sample["affinity"]
    }
    assert affinity == sample["affinity"]
    names = {n.label: n.name for n in topology.nics if n.label in sample.get("nic_names", {})}
    assert names == sample.get("nic_names", {})


@pytest.mark.parametrize("sample", NVLINK)
def test_reads_the_links(sample: dict[str, Any]) -> None:
    status = parse_nvlink_status(_text(sample), sample["file"])
    assert nvlink_states(status) == sample["nvlink"]


@pytest.mark.parametrize("sample", [_param(s) for s in SAMPLES])
def test_doctor_finds_what_the_sample_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    assert_doctor_finds(DATA / sample["file"], sample["doctor_codes"])
    assert bool(sample["doctor_codes"]) == sample["fault"]


READABLE = [s for s in SAMPLES if s["file"] not in XFAIL and s["reads"] != "refused"]


@settings(max_examples=60, deadline=None)
@given(sample=st.sampled_from(READABLE), cut=st.floats(0.0, 1.0), noise=st.text(max_size=30))
def test_a_cut_or_spliced_sample_reads_or_is_refused_clearly(
    sample: dict[str, Any], cut: float, noise: str
) -> None:
    parse = parse_topology if sample["reads"] == "topo" else parse_nvlink_status
    assert_reads_or_refused_clearly(
        lambda text: parse(text, sample["file"]), _text(sample), cut, noise, sample["file"]
    )
