"""A seventh held-out set of `nvidia-smi topo -m` matrices pasted in 2025-2026 GitHub issues of
serving and training stacks (tests/data/topo_public7/: SOURCES.md says where each comes from and
how the set was sampled, expected.json holds the values read off each sample by hand). Taken as
the searches gave them: vLLM "vLLM Info" and sglang check_env dumps, DeepEP / AReaL / Mooncake /
checkpoint-engine threads; H100 / H20 NV18, A100 NV12 and NV8 nodes with 4-39 NICs, a PCIe node
whose GPUs pair by PIX with 39 NICs and ragged columns, one GPU with two NICs, two RTX 3090s PHB,
tab-separated pastes, a header without the GPU NUMA ID column and prose or prompts before it.
"""

from __future__ import annotations

from tests.telemetry.smi.heldout import load_set, topo_set_checks

DATA, SAMPLES = load_set("topo_public7")

# Samples the code cannot take yet, and why.
XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_matrix,
    test_reads_the_links,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = topo_set_checks(DATA, SAMPLES, XFAIL)
