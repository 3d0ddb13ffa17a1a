"""Held-out `nvidia-smi nvlink -s` / `nvlink -e` outputs, set 2 (tests/data/nvlink_counters_public2:
real outputs sampled as the searches gave them, their links read by hand into expected.json
before gpuwarden ran on them): the link states read as written, and doctor's findings on each
alone — none above info on a healthy output. What the code cannot take yet is a strict xfail
with the reason (SOURCES.md measures it). 06, one block of `nvlink -s` then `nvlink -e` under
"### nvidia-smi nvlink ..." labels, was refused (taken for `nvlink -e`): its states now read,
and its `nvlink -e` part (three counter lines with no GPU line) is listed as unread."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.health.topology import topology_findings
from gpuwarden.telemetry.smi import parse_nvlink_status
from gpuwarden.types.health import CheckStatus, Severity
from tests.telemetry.smi.heldout import (
    assert_doctor_finds,
    assert_set_is_described,
    load_set,
    nvlink_states,
    sample_param,
)

DATA, SAMPLES = load_set("nvlink_counters_public2")

# nvidia-smi prints a GPU's line above its links, in `nvlink -s` as in `nvlink -e`: two link
# lines with none above them are a poster's cut. They are one GPU's (its links numbered from 0),
# but which GPU is not said, and NvLinkStatus / GpuNvLinks (types/topology.py) hold links only
# under a GPU index, the findings naming it ("GPU 0: ..."): reading them would invent a GPU 0.
_NO_GPU_LINE = (
    "two link lines with no GPU line above them: the links of one GPU the paste does not name; "
    "GpuNvLinks.index is an int and every nvlink finding names its GPU by it, so they are "
    "refused rather than read as an invented GPU 0 (its inactive link 1 goes unseen)"
)
# what the code cannot read yet, and why
READ_XFAIL = {
    "03__wsl-2080ti-postmortem__link-1-inactive-two-lines-no-gpu-line.txt": _NO_GPU_LINE,
}
# what doctor does not find as an engineer would yet, and why
DOCTOR_XFAIL = {
    "03__wsl-2080ti-postmortem__link-1-inactive-two-lines-no-gpu-line.txt": _NO_GPU_LINE,
}


def test_the_set_is_the_one_described() -> None:
    assert_set_is_described(DATA, SAMPLES)
    assert 3 <= len(SAMPLES) <= 8


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SAMPLES])
def test_reads_the_links_as_written(sample: dict[str, Any]) -> None:
    status = parse_nvlink_status((DATA / sample["file"]).read_text(), sample["file"])
    assert nvlink_states(status) == sample["nvlink"]


@pytest.mark.parametrize("sample", [sample_param(s, DOCTOR_XFAIL) for s in SAMPLES])
def test_doctor_finds_what_the_output_shows_and_nothing_else(sample: dict[str, Any]) -> None:
    assert_doctor_finds(DATA / sample["file"], sample["doctor_codes"])


def test_a_pcie_card_without_a_bridge_beside_bridged_peers_is_info_not_a_lost_link() -> None:
    """04: of three RTX A6000s a 2-way bridge joins two; GPU 2 has none ("all links are
    inActive"). Was nvlink-down critical, as on an SXM board where every NVLink is wired; a PCIe
    card's links are its bridge's: an info finding that says to reseat a bridge if it has one."""
    name = "04__nvlink-notes-readme__3x-rtx-a6000-gpu2-unbridged-all-inactive.txt"
    status = parse_nvlink_status((DATA / name).read_text(), name)
    found, (check,) = topology_findings((), (status,))
    assert [(f.code, f.severity, f.device and f.device.index) for f in found] == [
        ("nvlink-down", Severity.INFO, 2)
    ]
    assert "reseat" in found[0].remedy and check.status is CheckStatus.PASS


def test_the_same_on_a_board_wired_module_is_a_lost_link() -> None:
    """The same listing with the GPUs named A100-SXM4-40GB: every NVLink of a module is wired
    by its board, so no link up beside peers with theirs up is a lost link, critical."""
    name = "04__nvlink-notes-readme__3x-rtx-a6000-gpu2-unbridged-all-inactive.txt"
    text = (DATA / name).read_text().replace("NVIDIA RTX A6000", "NVIDIA A100-SXM4-40GB")
    found, (check,) = topology_findings((), (parse_nvlink_status(text, name),))
    assert [(f.code, f.severity) for f in found] == [("nvlink-down", Severity.CRITICAL)]
    assert check.status is CheckStatus.FAIL


def test_the_s_then_e_block_reads_its_states_and_lists_its_counters_as_unread() -> None:
    """06: the states under "### nvidia-smi nvlink -s" are read (the label is no error), and the
    `nvlink -e` part under its own label is a part of the file read by the counters' reader,
    which refuses it (three counter lines, no GPU line above them): listed as unread with why,
    the states still judged."""
    name = "06__iplane-0007-live-gpu-validation__2x-rtx-a6000-elided-s-then-e.txt"
    path = str(DATA / name)
    report = diagnose_captures([path], DoctorOptions())
    assert [(i.source, i.kind, i.detail) for i in report.inputs] == [
        (path, "nvlink-status", "2 GPU(s)")
    ]
    (unread,) = report.skipped
    assert unread.path == f"{path}#nvlink -e"
    assert unread.reason == "line 12: a link line before any GPU line"  # its path said once
    (check,) = [c for c in report.checks if c.name == "nvlink-topology"]
    assert (check.status, check.detail) == (CheckStatus.PASS, "5 NVLink(s) active, none lost")
