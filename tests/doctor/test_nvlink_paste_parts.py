"""One paste holding `nvidia-smi nvlink -s` and `nvlink -e` outputs is read as both: the states
by the states' reader, the counters by the counters' reader, each from its part of the paste.

The texts are real: the rented 8x A100 node report (index file id 60859828466) printed
`nvlink -s -i 0` (tests/data/nvlink_counters_public2/01) and, in a loop, `nvlink -e -i N`
(tests/data/nvlink_counters_public's GPU 0 block): one GPU's two outputs, pasted one under the
other as a note would. nvidia-smi prints a GPU's line above its links in both, so the paste is
cut at the GPU lines (or at a command line between them); a reader's own checks stay as they
were: a state among a GPU's counters (or a counter among its states) is still refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.captures import CaptureKind, collect_captures
from gpuwarden.doctor.node import DoctorOptions, DoctorReport, diagnose_captures
from gpuwarden.errors import CorruptInputError, InputError
from gpuwarden.telemetry.smi import parse_nvlink_status
from gpuwarden.telemetry.smi.nvlink_counters import parse_nvlink_counters
from gpuwarden.types.health import CheckStatus
from tests.doctor.judged import assert_judged_or_refused
from tests.telemetry.smi.heldout import DATA_ROOT, nvlink_states

STATES = (
    DATA_ROOT
    / "nvlink_counters_public2"
    / ("01__brev-node-report__a100-sxm4-40gb-s-i-0-prompt-tab-indent.txt")
)
COUNTERS_LOOP = (
    DATA_ROOT
    / "nvlink_counters_public"
    / ("nvlink-e__brev-node-report__8x-a100-sxm4-535-loop-per-gpu.txt")
)
E_PROMPT = "shadeform@brev-7hpnmoj9o:~$ nvidia-smi nvlink -e -i 0\n"


def gpu0_counters() -> str:
    """GPU 0's block of the loop's output: from its GPU line to the next GPU's echo line."""
    text = COUNTERS_LOOP.read_text()
    start = text.index("GPU 0: ")
    return text[start : text.index("=== GPU 1", start)]


def _states_without_prompt() -> str:
    return STATES.read_text().split("\n", 1)[1]


def _doctor(tmp_path: Path, text: str) -> tuple[str, DoctorReport]:
    path = tmp_path / "nvlink.txt"
    path.write_text(text)
    return str(path), diagnose_captures([str(path)], DoctorOptions())


def _check(report: DoctorReport, name: str) -> tuple[CheckStatus, str]:
    (check,) = [c for c in report.checks if c.name == name]
    return check.status, check.detail


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(STATES.read_text() + gpu0_counters(), id="no-command-line-between"),
        pytest.param(STATES.read_text() + E_PROMPT + gpu0_counters(), id="prompt-between"),
        pytest.param(gpu0_counters() + _states_without_prompt(), id="counters-first"),
    ],
)
def test_a_paste_of_both_outputs_is_read_as_both(tmp_path: Path, text: str) -> None:
    """Was: taken for `nvlink -e` (its classifier is asked first) and refused at the first link
    state, "line 3: a link state ('25 GB/s')"."""
    path, report = _doctor(tmp_path, text)
    kinds = sorted((i.source, i.kind) for i in report.inputs)
    assert kinds == [(path, "nvlink-counters"), (f"{path}#nvlink -s", "nvlink-status")]
    assert report.skipped == ()
    assert _check(report, "nvlink-topology") == (CheckStatus.PASS, "12 NVLink(s) active, none lost")
    assert _check(report, "nvlink-counters") == (
        CheckStatus.PASS,
        "1 GPU(s), 12 link(s): no NVLink error counted",
    )
    assert [f for f in report.findings if f.severity.rank > 0] == []


def test_each_reader_reads_its_own_part() -> None:
    text = STATES.read_text() + gpu0_counters()
    assert nvlink_states(parse_nvlink_status(text, "paste")) == {
        "0": {"active": 12, "inactive": []}
    }
    (gpu,) = parse_nvlink_counters(text).gpus
    assert (gpu.index, len(gpu.links)) == (0, 12)
    assert {key: count for link in gpu.links for key, count in link.counts.items()} == {
        "replay_errors": 0,
        "recovery_errors": 0,
        "crc_errors": 0,
    }


def test_an_output_of_one_listing_gives_one_capture(tmp_path: Path) -> None:
    """No part where the paste holds one listing: a plain `nvlink -s` or `nvlink -e` output."""
    for text, kind in (
        (STATES.read_text(), CaptureKind.NVLINK),
        (COUNTERS_LOOP.read_text(), CaptureKind.NVLINK_COUNTERS),
    ):
        path = tmp_path / f"{kind.value}.txt"
        path.write_text(text)
        captures, skipped = collect_captures([str(path)])
        assert [(c.path, c.kind) for c in captures] == [(str(path), kind)] and skipped == ()


def test_a_state_among_a_gpus_counters_is_still_refused(tmp_path: Path) -> None:
    """The cut is at GPU lines only: one link state inside GPU 0's counters (a damaged file) is
    no second output, and the named file is refused as before."""
    broken = gpu0_counters().replace("\t Link 3: CRC Errors: 0", "\t Link 3: 25 GB/s", 1)
    with pytest.raises(CorruptInputError, match=r"a link state \('25 GB/s'\)"):
        parse_nvlink_counters(broken)
    path = tmp_path / "broken.txt"
    path.write_text(broken)
    with pytest.raises(InputError) as caught:
        diagnose_captures([str(path)], DoctorOptions())
    assert caught.value.exit_code == 2 and "nvlink -s" in str(caught.value)


def test_a_counter_among_a_gpus_states_is_still_refused() -> None:
    broken = STATES.read_text().replace("\t Link 5: 25 GB/s", "\t Link 5: Replay Errors: 0", 1)
    with pytest.raises(CorruptInputError, match=r"link 5: 'Replay Errors: 0' is a per-link"):
        parse_nvlink_status(broken, "broken.txt")


def test_a_markdown_heading_naming_the_command_is_a_label_not_output() -> None:
    """ "### nvidia-smi nvlink -s" above the output, as a note writes it (06 of set 2)."""
    text = "### nvidia-smi nvlink -s\n" + _states_without_prompt()
    assert nvlink_states(parse_nvlink_status(text, "note.md")) == {
        "0": {"active": 12, "inactive": []}
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_damaged_paste_of_both_listings_is_judged_or_refused(data: st.DataObject) -> None:
    """Real `nvlink -s` and `nvlink -e` outputs pasted together, in either order, with or
    without a prompt line between, cut or with text spliced in: a verdict with strict JSON or an
    error of the tree, never another exception (the paste is split into parts before reading)."""
    states, counters = STATES.read_text(), gpu0_counters()
    between = data.draw(st.sampled_from(["", E_PROMPT, "### nvidia-smi nvlink -e\n"]))
    text = data.draw(st.sampled_from([states + between + counters, counters + between + states]))
    at = data.draw(st.integers(0, len(text)))
    spliced = data.draw(st.text(max_size=40) | st.sampled_from(["GPU 1: X\n", "\tLink 0: "]))
    assert_judged_or_refused(text[:at] + spliced + text[at + data.draw(st.integers(0, 60)) :], "p")
