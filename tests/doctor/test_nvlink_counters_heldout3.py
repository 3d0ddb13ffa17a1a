"""Held-out `nvidia-smi nvlink` outputs, set 3 (tests/data/nvlink_counters_public3: real outputs
sampled as the searches gave them, read by hand into expected.json before gpuwarden ran on them):
the link states read as written, `nvlink -c` / `--capabilities` listings (what each link supports:
neither a state nor a counter) refused as bad input with a hint, and doctor's findings on each
alone - none above info on a healthy output. What the code cannot do yet is a strict xfail with
the reason (SOURCES.md measures it)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.health.topology import topology_findings
from gpuwarden.telemetry.smi import parse_nvlink_status
from gpuwarden.types.health import CheckStatus
from tests.telemetry.smi.heldout import (
    assert_doctor_finds,
    assert_set_is_described,
    load_set,
    nvlink_states,
    sample_param,
    samples_read_as,
)

DATA, SAMPLES = load_set("nvlink_counters_public3")

# what doctor does not find as an engineer would yet, and why
# (01, one H100 PCIe's `nvlink -s -i 0`: 12 links up, 5 <inactive>, read nvlink-down critical
# before health/topology.py's _bridge_fully_up: its 12 links carry the datasheet's 600 GB/s, the
# 5 are links its bridges do not wire)
DOCTOR_XFAIL: dict[str, str] = {}


def test_the_set_is_the_one_described() -> None:
    assert_set_is_described(DATA, SAMPLES)
    assert 3 <= len(SAMPLES) <= 8


@pytest.mark.parametrize(
    "sample", [sample_param(s, {}) for s in samples_read_as(SAMPLES, "nvlink")]
)
def test_reads_the_links_as_written(sample: dict[str, Any]) -> None:
    status = parse_nvlink_status((DATA / sample["file"]).read_text(), sample["file"])
    assert nvlink_states(status) == sample["nvlink"]


@pytest.mark.parametrize("sample", [sample_param(s, DOCTOR_XFAIL) for s in SAMPLES])
def test_doctor_finds_what_the_output_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    """A state listing: exactly the codes above info written down (none on a healthy one); a
    capabilities listing: refused, exit 2 with a hint (``doctor_codes`` null)."""
    assert_doctor_finds(DATA / sample["file"], sample["doctor_codes"])


def test_two_pcie_cards_without_bridges_are_no_lost_links() -> None:
    """03: two A100 PCIe with no NVLink bridge ("非NVLINK構成"), each "all links are inActive":
    no GPU of the model has a link up, so none lost one - no finding, the check passes."""
    name = "03__hpe-e-learning-a100__2x-a100-pcie-no-bridge-all-inactive-indented.txt"
    status = parse_nvlink_status((DATA / name).read_text(), name)
    found, (check,) = topology_findings((), (status,))
    assert (list(found), check.status) == ([], CheckStatus.PASS)
