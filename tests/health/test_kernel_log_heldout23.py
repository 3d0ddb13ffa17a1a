"""A twenty-third held-out set of kernel logs (tests/data/xid_heldout23), sampled as the search gave
them from the GitHub threads of home-server, media-server, NVR and self-hosted AI projects on NVIDIA
GPUs (2019-2026): Jellyfin, Plex's trackers, Frigate, Immich, PhotoPrism, unraid and TrueNAS driver
packages, Proxmox LXC helpers, Tdarr, LocalAI, ollama and the like. 28 searches (27 of the issues
corpus, 1 of the pages corpus) gave two excerpts no earlier set holds (SOURCES.md): the frame's
trackers paste the application's own log (ffmpeg, Frigate, ollama, Jellyfin), nvidia-smi, compose
files and screenshots, and sets 9, 14 and 20 and the explain sets had already cited seven of the
in-frame threads the searches found (among them the kernel blocks of jellyfin-ffmpeg-fedora,
unraid-nvidia-vgpu-driver and syno_nvidia_gpu_driver). What came: the open kernel module refusing a
Pascal Tesla P4 on TrueNAS SCALE (no GSP) and failing RmInitAdapter, and a Jellyfin host's two lines
of the kernel's resource sanity check naming the nvidia module, no fault. Measured before any
change: both rows' kinds, findings and severities (2/2 scanner, 2/2 doctor). No code was changed."""

from __future__ import annotations

from gpuwarden.health.driver_messages import driver_message_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from tests.health.kernel_log_sets import ExcerptSet, line_count, sampled_set_checks, sets_before

SET = ExcerptSet("xid_heldout23")
EXCERPT = SET.excerpts()
ROWS = {row["prefix"]: row for row in SET.rows}
EARLIER_SETS = sets_before(23)


# the frame's threads gave two excerpts, one of them without a fault
(
    test_the_set_is_new_sampled_and_names_its_sources,
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
    test_an_excerpt_fed_in_chunks_reads_as_it_does_whole,
) = sampled_set_checks(SET, EARLIER_SETS, 2, min_healthy=1)


def test_the_open_module_refusing_a_gpu_without_gsp_is_one_probe_failure() -> None:
    """01: nv-pci.c's refusal ('The NVIDIA GPU 0000:03:00.0 (PCI ID: 10de:1bb3)' / 'installed in
    this system is not supported by open' / 'nvidia.ko because it does not include the required
    GPU' / 'System Processor (GSP).') is one gpu-not-supported-by-open-module (the lead's, after
    h311: the open module's refusal is a kind of its own, with its own cause and fix), the probe
    after it one RmInitAdapter
    failure (its 'rm_init_adapter failed' line the same failure said again); every line is read,
    the GPU named in the refusal's first line is not a GPU lost, and doctor's one finding is the
    driver unable to take the GPU, with both reasons as its evidence."""
    text = EXCERPT["01"]
    report = scan_kernel_log(text)
    assert report.lines_scanned == line_count(text)
    assert (report.xid_lines, report.groups, report.fallen_off_bus) == (0, (), ())
    assert sorted(report.other) == [
        ("gpu-not-supported-by-open-module", 1),
        ("rm-init-adapter-failed", 1),
    ]
    assert xid_findings(report, source="kernel-log:01") == ()
    (finding,) = driver_message_findings(report, source="kernel-log:01")
    assert (finding.code, finding.severity.value, finding.count) == (
        ROWS["01"]["doctor_codes"][0],
        ROWS["01"]["worst_severity"],
        2,
    )
    assert [e.value for e in finding.evidence] == [
        "the open kernel module does not take a GPU without a GSP ×1",
        "RmInitAdapter failed ×1",
    ]
    assert "proprietary kernel modules" in finding.remedy


def test_the_refusal_without_its_first_line_still_names_the_failure() -> None:
    """01 cut at its first kernel line (a paste that starts at the wrapped continuation, as a
    window or a grep -A may cut it): the refusal's second line still says the GPU is not
    supported, and the RmInitAdapter failure is still read; cut before the refusal's second line
    only the RmInitAdapter failure is left."""
    lines = EXCERPT["01"].splitlines(keepends=True)
    refusal_at = next(i for i, line in enumerate(lines) if "not supported by" in line)
    without_first = scan_kernel_log("".join(lines[refusal_at:]))
    assert sorted(kind for kind, _ in without_first.other) == [
        "gpu-not-supported-by-open-module",
        "rm-init-adapter-failed",
    ]
    without_refusal = scan_kernel_log("".join(lines[refusal_at + 1 :]))
    assert [kind for kind, _ in without_refusal.other] == ["rm-init-adapter-failed"]


def test_the_refusals_words_in_prose_are_not_the_drivers() -> None:
    """The nearest look-alike of 01: its refusal line's words without the driver's 'NVRM:' prefix,
    as a thread or a README says them, are no kind and no finding; with the prefix they are."""
    (said_line,) = (line for line in EXCERPT["01"].splitlines() if "not supported by" in line)
    words = said_line.split("NVRM:", 1)[1].strip()
    prose = scan_kernel_log(f"A Pascal GPU {words} nvidia.ko: use the proprietary module.\n")
    assert prose.other == ()
    assert driver_message_findings(prose, source="prose") == ()
    assert scan_kernel_log(f"NVRM: {words}\n").other == (("gpu-not-supported-by-open-module", 1),)


def test_the_resource_sanity_check_naming_the_nvidia_module_is_no_finding() -> None:
    """02: the kernel's x86 PAT check ('resource sanity check: requesting [mem ...], which spans
    more than PCI Bus 0000:00 [...]') and its 'caller _nv000720rm+0x1ad/0x200 [nvidia] mapping
    multiple BARs' line, in dmesg -H's relative stamps: both lines are read, nothing is counted,
    no finding -- the warning every nvidia load prints on such boards, not the fault the thread is
    about."""
    text = EXCERPT["02"]
    report = scan_kernel_log(text)
    assert report.lines_scanned == line_count(text) == 2
    assert (report.xid_lines, report.unparsed_xid_lines) == (0, 0)
    assert report.groups == () and report.other == () and report.fallen_off_bus == ()
    assert (report.driver_crashes, report.pcie_errors, report.iommu_faults) == ((), (), ())
    assert driver_message_findings(report, source="kernel-log:02") == ()
