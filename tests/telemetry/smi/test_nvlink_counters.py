"""`nvidia-smi nvlink -e` (`--errorcounters`) read per GPU, per link, every counter: the held-out
set of real outputs (tests/data/nvlink_counters_public, its SOURCES.md says where each comes
from, expected.json what was read off each by hand), the layouts of other drivers (separate CRC
flit/data counts, NVLink 5's long listing with its FEC histogram and BER values, GPU headers by
bus id), what is not `nvlink -e` (`-s` states, `-gt` throughput, `-R` peers), and any text cut,
spliced or made up: it reads or is refused as bad input (exit 2, a hint), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError, GpuwardenError
from gpuwarden.telemetry.smi.nvlink_counters import (
    counter_key,
    looks_like_nvlink_counters,
    parse_nvlink_counters,
)
from gpuwarden.types.nvlink_counters import NvLinkCounters

DATA = Path(__file__).resolve().parents[2] / "data"
SET = json.loads((DATA / "nvlink_counters_public" / "expected.json").read_text())["samples"]


def _text(sample: dict[str, Any]) -> str:
    return (DATA / sample["path"]).read_text()


def _count(counters: NvLinkCounters, gpu: int, link: int, key: str) -> int | None:
    found = next(g for g in counters.gpus if g.index == gpu)
    return next(x for x in found.links if x.link == link).counts.get(key)


@pytest.mark.parametrize("sample", SET, ids=[Path(s["path"]).name for s in SET])
def test_the_held_out_set_reads_as_read_by_hand(sample: dict[str, Any]) -> None:
    text = _text(sample)
    assert looks_like_nvlink_counters(text)
    counters = parse_nvlink_counters(text)
    assert [[g.index, g.name, g.uuid] for g in counters.gpus] == sample["gpus"]
    for gpu in counters.gpus:
        assert [link.link for link in gpu.links] == sample["links"]
        assert all(sorted(link.counts) == sample["keys"] for link in gpu.links)
        assert all(link.values == {} for link in gpu.links)
    for gpu, link, key, count in sample["counters"]:
        assert _count(counters, gpu, link, key) == count
    assert sorted(counters.labels.values()) == ["CRC Errors", "Recovery Errors", "Replay Errors"]


def test_the_set_is_the_one_described() -> None:
    listed = (DATA / "nvlink_counters_public" / "SOURCES.md").read_text()
    assert all(Path(s["path"]).name in listed for s in SET)
    here = {p.name for p in (DATA / "nvlink_counters_public").glob("*.txt")}
    assert here <= {Path(s["path"]).name for s in SET}


# ---- other drivers' layouts ----------------------------------------------------------------------

# The counter names of older drivers (CRC flit and data apart, as DCGM's FLIT/DATA fields count
# them) and of NVLink 5 (the names DCGM_FI_DEV_NVLINK_COUNT_* and nvidia-bug-report readers list;
# a FEC histogram, BER values as printed), under a GPU named by its bus id.
OLDER = """GPU 1: Tesla V100-SXM2-16GB (UUID: GPU-6e3b1f2a-0c1d-4e5f-8a9b-0c1d2e3f4a5b)
\t Link 0: Replay Errors: 3
\t Link 0: Recovery Errors: 0
\t Link 0: CRC Flit Errors: 17
\t Link 0: CRC Data Errors: 0
"""
NVLINK5 = """GPU 00000008:06:00.0
\t Link 4: Tx packets: 18446744073
\t Link 4: Malformed packet Errors: 0
\t Link 4: Rx remote Errors: 0
\t Link 4: Link recovery failed events: 2
\t Link 4: Effective Errors: 0
\t Link 4: Effective BER: 15e-255
\t Link 4: FEC Errors - 0: 36140749276
\t Link 4: FEC Errors - 15: 0
"""


def test_separate_crc_flit_and_data_counts() -> None:
    counters = parse_nvlink_counters(OLDER)
    (gpu,) = counters.gpus
    uuid = "GPU-6e3b1f2a-0c1d-4e5f-8a9b-0c1d2e3f4a5b"
    assert (gpu.index, gpu.name, gpu.uuid) == (1, "Tesla V100-SXM2-16GB", uuid)
    assert gpu.links[0].counts == {
        "replay_errors": 3,
        "recovery_errors": 0,
        "crc_flit_errors": 17,
        "crc_data_errors": 0,
    }
    assert counters.labels["crc_flit_errors"] == "CRC Flit Errors"


def test_nvlink5_counters_every_one_kept() -> None:
    counters = parse_nvlink_counters(NVLINK5)
    (gpu,) = counters.gpus
    assert (gpu.index, gpu.uuid, gpu.pci_bus_id, gpu.label) == (
        None,
        None,
        "00000008:06:00.0",
        "GPU 00000008:06:00.0",
    )
    (link,) = gpu.links
    assert link.link == 4
    assert link.counts["tx_packets"] == 18446744073
    assert link.counts["link_recovery_failed_events"] == 2
    assert link.counts["fec_errors_0"] == 36140749276
    assert link.counts["fec_errors_15"] == 0
    assert link.values == {"effective_ber": "15e-255"}
    assert looks_like_nvlink_counters(NVLINK5)


def test_a_gpu_listed_per_link_is_one_gpu_and_a_gpu_without_links_keeps_its_sentence() -> None:
    text = (
        "GPU 0: NVIDIA B200 (UUID: GPU-1)\n\t Link 0: Replay Errors: 0\n"
        "GPU 0: NVIDIA B200 (UUID: GPU-1)\n\t Link 1: Replay Errors: 4\n"
        "GPU 1: NVIDIA B200 (UUID: GPU-2)\n"
        "NVML: Unable to retrieve NVLink information as all links are inActive\n"
    )
    counters = parse_nvlink_counters(text)
    assert [(g.index, [x.link for x in g.links], g.message) for g in counters.gpus] == [
        (0, [0, 1], None),
        (1, [], "NVML: Unable to retrieve NVLink information as all links are inActive"),
    ]


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Replay Errors", "replay_errors"),
        ("CRC Flit Errors", "crc_flit_errors"),
        ("FEC Errors - 3", "fec_errors_3"),
        ("Link recovery successful events", "link_recovery_successful_events"),
        ("Rx General Errors", "rx_general_errors"),
        ("Tx discards", "tx_discards"),
    ],
)
def test_counter_keys_are_stable_snake_case(name: str, key: str) -> None:
    assert counter_key(name) == key


# ---- what is not `nvlink -e` -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # `nvlink -s`: link states
        "GPU 0: NVIDIA H100 PCIe (UUID: GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9)\n"
        "         Link 0: 26.562 GB/s\n         Link 4: <inactive>\n",
        # `nvlink -R`: the remote end of each link (HPE e-learning guide, DL380a Gen11)
        "GPU 0: NVIDIA H100 PCIe (UUID: GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9)\n"
        "         Link 0: Remote Device 00000000:D5:00.0: Link 0\n",
        # `nvlink -gt d`: throughput
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1)\n\t Link 0: Data Tx: 1024 KiB\n",
        # `nvidia-smi -L`
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-fde0a018-ad1a-bbec-ccf6-50a9f64bd178)\n",
    ],
)
def test_other_listings_are_not_taken_for_error_counters(text: str) -> None:
    assert not looks_like_nvlink_counters(text)


def test_a_link_state_is_refused_as_nvlink_s_output() -> None:
    text = "GPU 0: NVIDIA GB300\n\t Link 0: Replay Errors: 0\n\t Link 1: 53.125 GB/s\n"
    with pytest.raises(CorruptInputError, match=r"line 3: a link state.*nvlink -s") as caught:
        parse_nvlink_counters(text)
    assert caught.value.exit_code == 2 and "nvlink -e" in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no `nvidia-smi nvlink -e` error counter"),
        ("Failed to initialize NVML: Driver/library version mismatch\n", "no `nvidia-smi nvlink"),
        ("\t Link 0: Replay Errors: 0\n", "a link line before any GPU line"),
        (
            "GPU 0: X (UUID: GPU-1)\n\t Link 0: Replay Errors: 0\n\t Link 0: Replay Errors: 2\n",
            "twice",
        ),
    ],
)
def test_what_holds_no_counters_is_refused_clearly(text: str, problem: str) -> None:
    with pytest.raises(CorruptInputError, match=problem) as caught:
        parse_nvlink_counters(text)
    assert caught.value.reference == "nvlink-counters-unreadable" and caught.value.hint


# ---- fuzz --------------------------------------------------------------------------------------


def _reads_or_refused(text: str) -> None:
    refused: GpuwardenError | None = None
    try:
        counters = parse_nvlink_counters(text)
    except GpuwardenError as exc:
        refused = exc
    if refused is not None:
        assert refused.exit_code == 2 and refused.hint
        return
    assert any(g.links for g in counters.gpus)
    looks_like_nvlink_counters(text)


SAMPLES = [_text(s) for s in SET] + [OLDER, NVLINK5]


@settings(max_examples=150, deadline=None)
@given(
    sample=st.sampled_from(SAMPLES),
    cut=st.floats(0.0, 1.0),
    end=st.floats(0.0, 1.0),
    noise=st.text(max_size=40),
)
def test_a_cut_or_spliced_sample_reads_or_is_refused_clearly(
    sample: str, cut: float, end: float, noise: str
) -> None:
    at, to = sorted((int(len(sample) * cut), int(len(sample) * end)))
    _reads_or_refused(sample[:at] + noise + sample[to:])
    _reads_or_refused(sample[:at])


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=300))
def test_any_text_reads_or_is_refused_clearly(text: str) -> None:
    _reads_or_refused(text)
    _reads_or_refused("GPU 0: NVIDIA H100 (UUID: GPU-1)\n\t Link 0: " + text)


@settings(max_examples=100, deadline=None)
@given(
    lines=st.lists(
        st.sampled_from(
            [
                "GPU 0: NVIDIA GB200 (UUID: GPU-2)",
                "GPU 00000009:01:00.0",
                "GPU 3: NVIDIA GB300",
                "\t Link 1: Replay Errors: 7",
                "\t Link 2: Link recovery failed events: 1",
                "\t Link 2: Symbol BER: 15e-255",
                "\t Link 3: <inactive>",
                "\t Link 9: FEC Errors - 2: 99999999999999999999999",
                "[...]",
                "=== GPU 1 NVLink Errors ===",
                "",
            ]
        ),
        max_size=14,
    )
)
def test_any_order_of_real_lines_reads_or_is_refused_clearly(lines: list[str]) -> None:
    _reads_or_refused("\n".join(lines))
