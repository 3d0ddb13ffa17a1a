"""Held-out ``nvidia-smi -q -x`` captures, set 2 (tests/data/smi_xml_public2/: SOURCES.md says
where each comes from, expected.json holds the values read off each file by hand): netdata's,
rai-project's, a0s's and lampaa's test data — DTD v7 to v12 and an inline DTD (`--dtd`), drivers
352 to 580, Kepler to Blackwell, a trimmed file, N/A blocks. Every file reads to the values
printed in it, ``snapshot --json`` prints the same values, and ``doctor`` gives exactly the
findings above info that the file shows: none for a healthy GPU.
"""

from __future__ import annotations

import pytest

from gpuwarden.telemetry.smi import parse_smi_output
from tests.telemetry.smi.heldout import (
    load_set,
    sample_named,
    sample_text,
    xml_set_checks,
)

DATA, SAMPLES = load_set("smi_xml_public2")


(
    test_the_set_is_the_one_described,
    test_the_file_is_a_complete_capture_of_its_schema,
    test_reads_the_printed_values,
    test_snapshot_json_prints_the_same_values,
    test_doctor_finds_what_the_file_shows_and_nothing_else,
    test_a_cut_or_spliced_capture_reads_or_is_refused_clearly,
) = xml_set_checks(DATA, SAMPLES)


def test_a_report_naming_its_driver_only_by_kmd_version_reads_the_same_versions() -> None:
    """R615 prints kmd_version / cuda_umd_version beside driver_version / cuda_version and says
    the old two go away with CUDA 14.0; the GB200 capture spelt the new way reads alike."""
    sample = sample_named(SAMPLES, "k8s-test-infra__4x-gb200-nvl__v13__580.173.02.xml")
    text = sample_text(DATA, sample)
    renamed = text.replace("<driver_version>580.173.02</driver_version>", "").replace(
        "<cuda_version>13.0</cuda_version>",
        "<kmd_version>580.173.02</kmd_version>\n\t<cuda_umd_version>13.0</cuda_umd_version>",
    )
    assert renamed.count("kmd_version") == 2 and "driver_version" not in renamed
    (snap,) = parse_smi_output(renamed, sample["file"], 0.0)
    versions = {(d.info.driver_version, d.info.cuda_driver_version) for d in snap.samples}
    assert versions == {("580.173.02", "13.0")}


@pytest.mark.parametrize(("printed", "pending"), [("No", False), ("Yes", True), ("N/A", None)])
def test_pending_blacklist_is_the_pending_retirement_flag(
    printed: str, pending: bool | None
) -> None:
    """R418-R440 drivers print the pending-retirement flag as pending_blacklist, the GTX 1050's
    WDDM driver only that one (N/A there); the 1050 Ti capture spelt that way reads the flag."""
    sample = sample_named(SAMPLES, "lampaa__gtx-1050-ti-plex__v10__418.56.xml")
    text = sample_text(DATA, sample)
    old = "<pending_retirement>N/A</pending_retirement>"
    assert text.count(old) == 1
    spelt = text.replace(old, f"<pending_blacklist>{printed}</pending_blacklist>")
    (snap,) = parse_smi_output(spelt, sample["file"], 0.0)
    assert [d.retired_pages_pending for d in snap.samples] == [pending]
