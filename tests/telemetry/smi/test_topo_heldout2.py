"""A second held-out set of `nvidia-smi topo -m` / `nvlink -s` outputs pasted in public threads
(tests/data/topo_public2/: SOURCES.md says where each comes from, expected.json holds the values
read off each sample by hand). Each sample reads to the values printed in it, `doctor` gives
exactly the findings above info the sample shows (none for a healthy node), and an output
gpuwarden does not read (`nvlink -e`) is refused with exit 2 and a hint.
"""

from __future__ import annotations

from tests.telemetry.smi.heldout import load_set, topo_set_checks

DATA, SAMPLES = load_set("topo_public2")

# Samples the code cannot take yet, and why.
XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_matrix,
    test_reads_the_links,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = topo_set_checks(DATA, SAMPLES, XFAIL)
