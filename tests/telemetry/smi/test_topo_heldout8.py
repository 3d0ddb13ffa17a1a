"""An eighth held-out set of `nvidia-smi topo -m` matrices, sampled from cluster, benchmark and
hardware-setup texts of 2019-2026 (tests/data/topo_public8/: SOURCES.md says where each comes
from and how the set was sampled, expected.json holds the values read off each sample by hand):
a Jenkins node of eight P100s in PIX quads, a DGX-2's sixteen V100s bonded NV6 with ten NICs
named by device (mlx5_0..mlx5_9), a homelab's RTX 3090 beside two V100 SXM2 bonded NV6, a
4-GPU PCIe box in PIX pairs, two 4x Titan X machines of one thread (PHB per socket / PIX pairs
under one root), an Azure H100 NVL VM whose pair shows SYS, an H20-3e node's check_env row, four
A100s of which one pair is bonded NV12 (NICs named by device), and an NV18 node with 26 NICs.

Also here: `nvidia-smi nvlink -c` / `--capabilities` listings ("Link 0, P2P is supported:
true"), which the `nvlink -s` reader refuses plainly instead of reading a GPU without links.
"""

from __future__ import annotations

import pytest

from gpuwarden.errors import ReaderError
from gpuwarden.telemetry.smi import parse_nvlink_status
from tests.telemetry.smi.heldout import load_set, sample_text, topo_set_checks

DATA, SAMPLES = load_set("topo_public8")

# Samples the code cannot take yet, and why.
XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_matrix,
    test_reads_the_links,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = topo_set_checks(DATA, SAMPLES, XFAIL)


CAPABILITIES_DATA, CAPABILITIES_SAMPLES = load_set("nvlink_counters_public3")
# the two `nvlink -c` pastes of that set: one with its GPU line, one without
CAPABILITY_LISTINGS = [s for s in CAPABILITIES_SAMPLES if "capabilities" in s["file"]]
REFUSAL = (
    "nvidia-smi nvlink -c prints what each link supports, not its state: "
    "paste `nvidia-smi nvlink -s`"
)


def test_the_capability_listings_are_the_two_of_set_3() -> None:
    assert len(CAPABILITY_LISTINGS) == 2


@pytest.mark.parametrize(
    "sample", CAPABILITY_LISTINGS, ids=[s["file"] for s in CAPABILITY_LISTINGS]
)
def test_an_nvlink_capabilities_listing_is_refused_as_what_it_is(sample: dict[str, str]) -> None:
    with pytest.raises(ReaderError) as caught:
        parse_nvlink_status(sample_text(CAPABILITIES_DATA, sample), sample["file"])
    message = str(caught.value)
    assert message.startswith(f"{sample['file']}, line ")
    assert REFUSAL in message
    assert caught.value.exit_code == 2 and caught.value.hint


def test_a_status_listing_above_its_capabilities_command_still_reads() -> None:
    """`nvlink --status` then `nvlink --capabilities` in one paste (topo_public4's Microway
    guide): the states' part is read, the capabilities' part cut off at its command line."""
    name = "nvlink__microway-guide__dgx1-v100-no-uuid-snip-then-capabilities.txt"
    data, _ = load_set("topo_public4")
    status = parse_nvlink_status((data / name).read_text(), name)
    assert [(g.index, sum(1 for link in g.links if link.active)) for g in status.gpus] == [
        (0, 6),
        (7, 6),
    ]
