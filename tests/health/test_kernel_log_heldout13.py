"""A thirteenth held-out set of kernel logs (tests/data/xid_heldout13), sampled as the search gave
them: every kernel-log excerpt of 2019-2023 threads of the GPU projects (open-gpu-kernel-modules,
nvidia-docker, tensorflow) that no earlier set cites. What came holds no Xid: the GSP firmware
failing to start on an engine set it did not know (missing NVDEC0), kernel oopses in the NVIDIA
modules, a soft lockup's module list, a failed resume, and five excerpts without a fault
(nvidia-drm's modeset-ownership and registration errors, the module loader's taint notices, an
assertion per ACPI event, Nv04Unmap noise). Each is read as written down; ``doctor --from`` gives
the codes written down and nothing above info where the thread shows no fault. Three are kernel
logs doctor/captures.py does not yet take for one (strict xfails; h74b_report.md). 05 showed one
RmInitAdapter failure counted twice (its osinit.c and nv.c lines): now counted once."""

from __future__ import annotations

import pytest

from gpuwarden.health.driver_messages import GSP_INIT_KIND, driver_message_findings
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.types.health import Confidence, Severity
from tests.health.kernel_log_sets import (
    ExcerptSet,
    sampled_set_checks,
    sets_before,
)

SET = ExcerptSet("xid_heldout13")
EXCERPT = SET.excerpts()
EARLIER_SETS = sets_before(13)


(
    test_the_set_is_new_sampled_and_names_its_sources,
    test_no_excerpt_repeats_a_line_of_another_set,
    test_scanner_finds_exactly_what_was_read,
    test_severity_is_the_catalogs,
    test_doctor_gives_the_codes,
    test_the_worst_severity_is_the_rows,
    test_cut_and_spliced_excerpts_read_consistently,
    test_an_excerpt_fed_in_chunks_reads_as_it_does_whole,
) = sampled_set_checks(SET, EARLIER_SETS, 9)


def test_a_gsp_rm_that_cannot_start_in_the_early_nvrm_form_is_a_probe_failure() -> None:
    """05: 515.43's "NVRM kgspInitRm_IMPL: missing NVDEC0 engine, ..." then "NVRM RmInitAdapter:
    Cannot initialize GSP firmware RM" (no colon after NVRM, the open modules' early form) and
    the RmInitAdapter failure: the driver could not take the GPU because GSP-RM did not start."""
    report = scan_kernel_log(EXCERPT["05"])
    assert (GSP_INIT_KIND, 1) in report.other
    [finding] = driver_message_findings(report, source="kernel-log:05")
    assert (finding.code, finding.severity, finding.confidence) == (
        "driver-probe-failed",
        Severity.CRITICAL,
        Confidence.MEDIUM,
    )
    assert "GSP firmware" in finding.cause and "nouveau" not in finding.remedy
    # one failure: osinit.c's "RmInitAdapter failed!" and nv.c's "rm_init_adapter failed"
    assert finding.title == (
        "the driver could not take a GPU "
        "(the GSP firmware did not boot ×1, RmInitAdapter failed ×1)"
    )


RM_INIT_FAILED = "[ {t}.1] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)\n"
RM_INIT_SAID_AGAIN = "[ {t}.2] NVRM: rm_init_adapter failed, device minor number 0\n"


@pytest.mark.parametrize(
    ("lines", "failures"),
    [
        ([RM_INIT_FAILED, RM_INIT_SAID_AGAIN] * 3, 3),  # each failure in its two lines
        ([RM_INIT_SAID_AGAIN, RM_INIT_FAILED, RM_INIT_SAID_AGAIN], 2),  # the paste cut one line
        ([RM_INIT_FAILED, RM_INIT_SAID_AGAIN, RM_INIT_FAILED], 2),  # ... at either edge
        ([RM_INIT_SAID_AGAIN], 1),  # nv.c's line alone still names the failure
    ],
)
def test_a_failure_of_rm_init_adapter_counts_once_for_its_two_lines(
    lines: list[str], failures: int
) -> None:
    text = "".join(line.format(t=20 + n) for n, line in enumerate(lines))
    assert scan_kernel_log(text).other == (("rm-init-adapter-failed", failures),)


@pytest.mark.parametrize("prefix", ["02", "03", "04"])
def test_an_oops_in_an_nvidia_module_names_no_gpu_event(prefix: str) -> None:
    """A page fault whose RIP is in nvidia / nvidia_modeset, a soft lockup's module list: the
    kernel's own records, no driver message the scanner reads; no Xid, no GPU lost."""
    report = scan_kernel_log(EXCERPT[prefix])
    assert (report.groups, report.fallen_off_bus, report.other) == ((), (), ())
    # the oopses' RIP lines are crashes in an NVIDIA module (h75a); the module list is none
    assert bool(report.driver_crashes) == (prefix != "04")
