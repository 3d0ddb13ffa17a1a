"""A fifth held-out set of `nvidia-smi topo -m` matrices pasted in 2024-2026 GitHub issues
(tests/data/topo_public5/: SOURCES.md says where each comes from and how the set was sampled,
expected.json holds the values read off each sample by hand). Taken as the searches gave them:
vLLM collect_env and sglang check_env blocks, a glued header and glued cells, ragged spacing,
strided CPU lists, A100 NV12 / H100 NV18 nodes with up to 42 NICs, and three pastes that kept
only NIC rows of the matrix (no header, no GPU row): their X places each NIC, so the columns
before NIC0 are the GPUs'.
"""

from __future__ import annotations

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import looks_like_topo, parse_topology
from gpuwarden.types.topology import LinkKind
from tests.telemetry.smi.heldout import load_set, topo_set_checks

DATA, SAMPLES = load_set("topo_public5")

# Samples the code cannot take yet, and why.
XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_matrix,
    test_reads_the_links,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = topo_set_checks(DATA, SAMPLES, XFAIL)


# Two NIC rows of an 8-GPU node with 3 NICs, as nvidia-smi prints them below the GPU rows.
NIC_ROWS = (
    "NIC1    SYS     SYS     SYS     SYS     PIX     NODE    NODE    NODE    SYS      X      PIX\n"
    "NIC2    SYS     SYS     SYS     SYS     PIX     NODE    NODE    NODE    SYS     PIX      X\n"
)


def test_nic_rows_alone_read_with_the_gpu_columns_they_prove() -> None:
    """NIC1's X in column 9 puts NIC0 in column 8: columns 0-7 are GPU0-GPU7, named without a
    header and without a row of their own (failed before: refused as "no matrix")."""
    assert looks_like_topo(NIC_ROWS)
    topology = parse_topology(NIC_ROWS, "nic-rows")
    assert [g.label for g in topology.gpus] == [f"GPU{i}" for i in range(8)]
    assert [n.label for n in topology.nics] == ["NIC0", "NIC1", "NIC2"]
    pix = topology.link("NIC1", "GPU4")
    assert pix is not None and pix.kind is LinkKind.PIX
    assert set(topology.missing_rows) == {*(f"GPU{i}" for i in range(8)), "NIC0"}
    assert "GPU0" in topology.inferred_columns and "NIC1" not in topology.inferred_columns


def test_nic_rows_that_disagree_on_the_gpu_columns_are_refused() -> None:
    """NIC1's X in column 9 says 8 GPUs, NIC2's in column 8 says 6: no reading fits both."""
    rows = NIC_ROWS.replace("NODE    SYS     PIX      X", "NODE     X      SYS     PIX")
    assert rows != NIC_ROWS
    with pytest.raises(CorruptInputError, match="the NIC rows do not fit the GPU columns"):
        parse_topology(rows, "nic-rows")


def test_a_nic_row_in_the_first_column_proves_no_gpu() -> None:
    """NIC0 with its X in column 0: no column is a GPU's, so there is no GPU to read."""
    with pytest.raises(CorruptInputError, match="no row places a GPU column"):
        parse_topology("NIC0     X      PIX\nNIC1    PIX      X\n", "nic-rows")
