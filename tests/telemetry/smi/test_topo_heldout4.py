"""A fourth held-out set of `nvidia-smi topo -m` / `nvlink -s` / `nvlink -e` outputs pasted in
public threads and guides (tests/data/topo_public4/: SOURCES.md says where each comes from,
expected.json holds the values read off each sample by hand). It leans on what sets 1-3 lack:
B300 nodes (driver 610), an 18-column `mlx5_#` header and `mlx5_#` rows, a tab-separated 2018
matrix, rows pasted without their header (from GPU5 down, NIC rows included), blank CPU and NUMA
affinities, an HTML prompt line, whole check_env blocks before the matrix, a matrix and an
`nvlink -s` double-spaced by the Markdown they went through, an older driver's `nvlink -s`
whose GPU lines carry no UUID, and an `nvlink -e` error-counter listing (the `nvlink -s` reader
refuses it with a hint that says what it is; doctor reads it as `nvlink -e`).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import looks_like_nvlink_status, parse_nvlink_status
from gpuwarden.types.topology import NvLinkSupport
from tests.telemetry.smi.heldout import load_set, topo_set_checks

DATA, SAMPLES = load_set("topo_public4")

# Samples the code cannot take yet, and why.
XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_matrix,
    test_reads_the_links,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = topo_set_checks(DATA, SAMPLES, XFAIL)


REFUSED = [s for s in SAMPLES if s["reads"] == "refused"]


@pytest.mark.parametrize("sample", REFUSED, ids=[s["file"] for s in REFUSED])
def test_an_error_counter_listing_is_refused_as_what_it_is(sample: dict[str, Any]) -> None:
    """`nvlink -e` prints its counters as "Link 0: Replay Errors: 0": refused as counters of
    `nvlink -e` (not as a damaged link state), naming the file and the line."""
    with pytest.raises(CorruptInputError) as caught:
        parse_nvlink_status((DATA / sample["file"]).read_text(), sample["file"])
    message = str(caught.value)
    assert "`nvlink -e` error counters" in message and sample["file"] in message
    assert "line 3" in message and caught.value.hint


# Lines of other `nvidia-smi nvlink` listings keyed by link, as printed (the `-R` lines from the
# HPE guide whose `nvlink -s` set 1 holds): refused as per-link counters, never read as states.
@pytest.mark.parametrize(
    "line",
    [
        "               Link 8: Remote Device 00000000:C2:00.0: Link 12",
        "\t Link 0: Recovery Errors: 0",
        "\t Link 0: CRC Errors: 0",
    ],
)
def test_other_per_link_listings_are_refused_as_counters(line: str) -> None:
    text = f"GPU 0: NVIDIA H100 PCIe (UUID: GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9)\n{line}\n"
    with pytest.raises(CorruptInputError, match="per-link counter"):
        parse_nvlink_status(text, "nvlink")


# A GB300 node's `nvlink -e` (topo_public2) prints its GPU lines without the UUID; an `nvlink -s`
# of that form reads, the GPU named and its UUID not reported. A "GPU n: name" line that no link
# line follows is not taken for a GPU header.
def test_gpu_lines_without_uuid_open_a_gpu_when_links_follow() -> None:
    text = (
        "GPU 0: NVIDIA GB300\n\t Link 0: 53.125 GB/s\n\t Link 1: <inactive>\nGPU 1: NVIDIA GB300\n"
    )
    text += "NVML: Unable to retrieve NVLink information as all links are inActive\n"
    assert looks_like_nvlink_status(text)
    status = parse_nvlink_status(text, "nvlink")
    assert [(g.index, g.name, g.uuid, g.support) for g in status.gpus] == [
        (0, "NVIDIA GB300", None, NvLinkSupport.REPORTED),
        (1, "NVIDIA GB300", None, NvLinkSupport.ALL_INACTIVE),
    ]
    assert [(link.link, link.active) for link in status.gpus[0].links] == [(0, True), (1, False)]
    listing = "GPU 0: NVIDIA GB300\nGPU 1: NVIDIA GB300\n"
    assert not looks_like_nvlink_status(listing)
    with pytest.raises(CorruptInputError, match="not NVLink status"):
        parse_nvlink_status(listing, "nvlink")
