"""A sixth held-out set of `nvidia-smi topo -m` matrices pasted in 2024-2026 GitHub issues
(tests/data/topo_public6/: SOURCES.md says where each comes from and how the set was sampled,
expected.json holds the values read off each sample by hand). Taken as the searches gave them,
with cloud, cluster and benchmark words beside the matrix legend's: H100 / H20 / B200 NV18
nodes with 4-16 NICs, an 8x A10G VM whose GPUs are PHB to each other and NUMA-affine to both
nodes ("0-1"), a PCIe node of PIX / PHB / SYS pairs, a tab-separated paste that starts at the
GPU4 row, and prompts, lsmod lines, a collect_env tail or a Markdown heading before the header.
"""

from __future__ import annotations

from tests.telemetry.smi.heldout import load_set, topo_set_checks

DATA, SAMPLES = load_set("topo_public6")

# Samples the code cannot take yet, and why.
XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_matrix,
    test_reads_the_links,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = topo_set_checks(DATA, SAMPLES, XFAIL)
