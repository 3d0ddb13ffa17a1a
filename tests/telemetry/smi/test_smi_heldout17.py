"""Held-out set 17: every nvidia-smi output that Q&A pages (Stack Overflow, the NVIDIA developer
forum, the PyTorch forum, Reddit, Ask Ubuntu, Unix & Linux SE) paste, in the order the pages
corpus gave them, as its stored copies hold them (tests/data/smi_heldout17/: SOURCES.md lists the
56 searches, what was kept and what was skipped and why; expected.json holds the values read off
each sample by hand). The corpus holds few such pages that earlier sets had not taken: one output
was new. Healthy GPUs get nothing above info.
"""

from __future__ import annotations

from tests.telemetry.smi.heldout import load_set, mixed_set_checks

DATA, SAMPLES = load_set("smi_heldout17")

# Samples a parser still cannot read or doctor cannot judge as an engineer does, and why: none.
READ_XFAIL: dict[str, str] = {}
DOCTOR_XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_printed_values,
    test_what_holds_no_gpu_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = mixed_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=1)
