"""A ninth held-out set of `nvidia-smi topo -m` matrices, pasted in GitHub issues opened 2016-2020
(tests/data/topo_public9/: SOURCES.md says where each comes from and how the set was sampled,
expected.json holds the values read off each sample by hand): a 2016 `topo --matrix` of six K80
GPUs with SOC cells, a header spaced by single blanks and the R352-era legend ("Path traverses
..."); eight GTX 1080 Ti in PIX pairs pasted as a Markdown indented block; eight RTX 2080 Ti in
PIX quads with an `mlx4_0` NIC column and row; four T4s across two sockets without a legend;
four GPUs in NV2 pairs with two mlx5 NICs, pasted with its spacing broken; and a Summit node's
six V100s bonded NV2 in two triads with four mlx5 NICs, its header's last two NIC names run
together ("mlx5_2mlx5_3").
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import GpuwardenError
from gpuwarden.telemetry.smi import parse_topology
from gpuwarden.telemetry.smi.topo import _names_in
from tests.telemetry.smi.heldout import assert_reads_or_refused_clearly, load_set, topo_set_checks

DATA, SAMPLES = load_set("topo_public9")

# Samples the code cannot take yet, and why.
XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_matrix,
    test_reads_the_links,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = topo_set_checks(DATA, SAMPLES, XFAIL)


def _matrix(nic_header: str, nics: list[str]) -> str:
    """Two GPUs bonded NV2 and the NICs ``nics`` below a tab-separated header whose NIC columns
    read ``nic_header``: each NIC PIX to GPU0, SYS to GPU1, PIX to the other NICs."""
    lines = [f"\tGPU0\tGPU1\t{nic_header}\tCPU Affinity"]
    for gpu, links in (("GPU0", ["X", "NV2"]), ("GPU1", ["NV2", "X"])):
        cell = "PIX" if gpu == "GPU0" else "SYS"
        lines.append("\t".join([gpu, *links, *[cell] * len(nics), "0-7"]))
    for i, nic in enumerate(nics):
        lines.append(
            "\t".join([nic, "PIX", "SYS", *["X" if j == i else "PIX" for j in range(len(nics))]])
        )
    return "\n".join(lines) + "\n"


SUMMIT = "topo__ucx-py-616__6x-v100-summit-nv2-triads-4-mlx5-glued-header-jsrun.partial.txt"


def test_the_summit_header_runs_two_nic_names_together_and_reads_four_nics() -> None:
    """ucx-py#616's header prints "mlx5_2mlx5_3": its rows print ten link cells and its NIC rows
    are labelled mlx5_2 and mlx5_3, so the header's names are the four NICs the rows prove."""
    text = (DATA / SUMMIT).read_text()
    assert "mlx5_2mlx5_3" in text
    topology = parse_topology(text, SUMMIT)
    assert [n.name for n in topology.nics] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    link = topology.link("GPU5", "mlx5_3")
    assert link is not None and link.code == "NODE"


@pytest.mark.parametrize(
    "names",
    # the device names older drivers print as NIC columns: Mellanox mlx4 / mlx5, Broadcom
    # bnxt_re, Intel Omni-Path hfi1
    [["mlx5_2", "mlx5_3"], ["mlx4_0", "mlx4_1"], ["bnxt_re0", "bnxt_re1"], ["hfi1_0", "hfi1_1"]],
)
def test_nic_names_by_device_run_together_are_split_into_their_columns(names: list[str]) -> None:
    topology = parse_topology(_matrix("".join(names), names), "glued.txt")
    assert [n.name for n in topology.nics] == names
    codes = {
        (gpu, nic): link.code
        for gpu in ("GPU0", "GPU1")
        for nic in names
        if (link := topology.link(gpu, nic))
    }
    assert codes == {**{("GPU0", n): "PIX" for n in names}, **{("GPU1", n): "SYS" for n in names}}


def test_one_device_name_whose_digits_run_into_letters_stays_one_column() -> None:
    """The nearest look-alike: a single name with a digit followed by a letter (a RoCE device
    "rocep1s0f0") is one NIC, not three names."""
    topology = parse_topology(_matrix("rocep1s0f0", ["rocep1s0f0"]), "roce.txt")
    assert [n.name for n in topology.nics] == ["rocep1s0f0"]


def test_names_of_two_device_kinds_run_together_are_not_split_and_the_rows_are_refused() -> None:
    """Only names of one device kind numbered apart are split: "mlx5_0bnxt_re0" stays one
    column, and the rows that print two NIC cells are refused naming the file, never read
    against guessed columns."""
    with pytest.raises(GpuwardenError) as caught:
        parse_topology(_matrix("mlx5_0bnxt_re0", ["mlx5_0", "bnxt_re0"]), "mixed.txt")
    assert caught.value.exit_code == 2 and caught.value.hint
    assert "mixed.txt" in str(caught.value)


@settings(max_examples=200, deadline=None)
@given(token=st.text(alphabet=st.sampled_from("mlx5_0123abcN I\t-/"), max_size=60))
def test_any_nic_header_token_reads_or_is_refused_clearly(token: str) -> None:
    assert_reads_or_refused_clearly(
        lambda text: parse_topology(text, "fuzz.txt"),
        _matrix(token, ["mlx5_0", "mlx5_1"]),
        0.0,
        "",
        "fuzz.txt",
    )


def test_a_100_kb_header_token_of_names_run_together_costs_its_length() -> None:
    """10,000 NIC names run together in one 100 KB header token are split back; the
    rows, printing two NIC cells, are then refused."""
    names = [f"mlx5_{i}" for i in range(10_000, 20_000)]
    token = "".join(names)
    assert len(token) == 100_000
    assert _names_in(token) == names
    with pytest.raises(GpuwardenError):
        parse_topology(_matrix(token, ["mlx5_0", "mlx5_1"]), "long.txt")
