"""The four `nvlink` / `topo` edges the ninth hostile pass found (r9), on real captures.

1. an `nvlink -c` paste cut inside its first capability line is still named as `nvlink -c`;
2. the telemetry reader (`snapshot --backend smi --from`) names an `nvlink -c` listing and an
   `nvlink -e` counters output as what they are, not as an `nvidia-smi -L` list or link states;
3. a link rate too large for a float (5,000 digits, "1e308 GB/s") is refused, one rule for both,
   instead of reading as infinity (which cleared a bridge as fully up);
4. a link rate is read in the unit nvidia-smi prints (GB/s, decimal) and refused, naming the
   unit, in any other ("KB/s" and "MB/s" were read, "TB/s" and "GiB/s" refused without a word).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import open_smi
from gpuwarden.telemetry.smi.nvlink_counters import parse_nvlink_counters
from gpuwarden.telemetry.smi.topo import (
    is_link_state,
    lists_nvlink_capabilities,
    read_nvlink_status,
)
from tests.cli.test_fuzz_verbs import run_in_process

DATA = Path(__file__).resolve().parents[2] / "data"
CAPABILITIES = sorted((DATA / "nvlink_counters_public3").glob("0[24]__*capabilities*"))
# `nvidia-smi nvlink -s` of two bridged H100 PCIe: "Link 0: 26.562 GB/s" (line 3), 12 links up
H100_PCIE_BRIDGED = (
    DATA / "topo_public" / "nvlink__hpe-e-learning__2x-h100-pcie-bridged-indented.txt"
)
H100_PCIE_STATUS = next((DATA / "nvlink_counters_public3").glob("01__*"))
NVLINK_E = next((DATA / "nvlink_counters_public").glob("nvlink-e__*"))
# a GB300 node's `nvlink -e`, its GPU lines without a UUID
GB300_NVLINK_E = next((DATA / "topo_public2").glob("nvlink-e__srt-slurm-307__*"))
# `nvlink -s` then `nvlink -e` of two RTX A6000, pasted one under the other
S_THEN_E = next((DATA / "nvlink_counters_public2").glob("06__*"))
PRINTED_RATE = "26.562 GB/s"


def _first_capability(seed: Path) -> tuple[str, str]:
    """The seed's text before its first capability line, and that line (without its newline)."""
    lines = seed.read_text(encoding="utf-8").splitlines(keepends=True)
    first = next(k for k, line in enumerate(lines) if ", P2P is supported:" in line)
    return "".join(lines[:first]), lines[first].rstrip("\n")


# --- 1. an `nvlink -c` paste cut inside its first capability line -------------------------------


@pytest.mark.parametrize("seed", CAPABILITIES, ids=lambda p: p.name[:12])
def test_a_capability_listing_cut_anywhere_after_its_link_comma_is_named(seed: Path) -> None:
    """Failed before at every cut short of ": true" / ": false" whole."""
    head, line = _first_capability(seed)
    comma = line.index(",") + 1
    for end in range(comma, len(line) + 1):
        assert lists_nvlink_capabilities(head + line[:end]), line[:end]


def test_a_link_state_listing_cut_inside_a_line_is_not_taken_for_capabilities() -> None:
    """No false naming: an `nvlink -s` paste cut anywhere is never `nvlink -c`; nor is a
    whole capability line's start followed by a newline (a line that ended there)."""
    text = H100_PCIE_BRIDGED.read_text(encoding="utf-8")
    assert not any(lists_nvlink_capabilities(text[:end]) for end in range(len(text) + 1))
    head, line = _first_capability(CAPABILITIES[0])
    assert not lists_nvlink_capabilities(head + line[: line.index(":")] + "\n")
    assert not lists_nvlink_capabilities(head + line[: line.index(":")] + ": maybe")


@pytest.mark.parametrize("seed", CAPABILITIES, ids=lambda p: p.name[:12])
def test_doctor_names_a_capability_listing_cut_in_its_first_line(
    tmp_path: Path, seed: Path
) -> None:
    head, line = _first_capability(seed)
    path = tmp_path / "cut.txt"
    path.write_text(head + line[: -len(": true")], encoding="utf-8")
    outcome = run_in_process(["doctor", "--from", str(path), "--json"])
    assert outcome.code == 2
    message = json.loads(outcome.err)["message"]
    assert message.startswith(str(path)) and "nvidia-smi nvlink -c prints what each link" in message


# --- 2. the telemetry reader names what an `nvlink` output is ----------------------------------


@pytest.mark.parametrize(
    ("capture", "named"),
    [
        (CAPABILITIES[1], "an `nvidia-smi nvlink -c` listing"),  # was "an `nvidia-smi -L` list"
        (CAPABILITIES[0], "an `nvidia-smi nvlink -c` listing"),  # was "not recognised"
        (NVLINK_E, "`nvidia-smi nvlink -e` output"),  # was "`nvidia-smi nvlink -s` output"
        (GB300_NVLINK_E, "`nvidia-smi nvlink -e` output"),  # was "an `nvidia-smi -L` list"
        (S_THEN_E, "`nvidia-smi nvlink -s` and `nvidia-smi nvlink -e` output"),  # was "-s" alone
        (H100_PCIE_STATUS, "`nvidia-smi nvlink -s` output"),  # unchanged
    ],
    ids=lambda v: v.name[:12] if isinstance(v, Path) else None,
)
def test_the_telemetry_reader_names_an_nvlink_output(capture: Path, named: str) -> None:
    with pytest.raises(CorruptInputError) as refused:
        open_smi(str(capture))
    message = refused.value.message
    assert named in message and "nvidia-smi -L" not in message
    assert "`gpuwarden doctor --from`" in message


def test_snapshot_of_a_capability_listing_says_what_it_is(tmp_path: Path) -> None:
    """The command of the r9 report, end to end."""
    capture = CAPABILITIES[1]
    outcome = run_in_process(["snapshot", "--backend", "smi", "--from", str(capture)])
    assert outcome.code == 2
    assert "an `nvidia-smi nvlink -c` listing of what each link supports" in outcome.err
    assert "nvidia-smi -L" not in outcome.err


# --- 3 and 4. link rates: the unit nvidia-smi prints, finite ------------------------------------


def _with_link_0(rate: str) -> str:
    """The bridged H100 PCIe capture with its first GPU's link 0 printing ``rate``."""
    text = H100_PCIE_BRIDGED.read_text(encoding="utf-8")
    assert f"Link 0: {PRINTED_RATE}\n" in text
    return text.replace(f"Link 0: {PRINTED_RATE}\n", f"Link 0: {rate}\n", 1)


def test_the_printed_rate_reads_in_decimal_gigabytes() -> None:
    status = read_nvlink_status(_with_link_0(PRINTED_RATE))
    link_0 = status.gpus[0].links[0]
    assert link_0.active and link_0.speed_bytes_per_s == pytest.approx(26.562e9)
    assert sum(link.active is True for link in status.gpus[0].links) == 12


@pytest.mark.parametrize(
    ("rate", "said"),
    [
        ("7" * 5_000 + " GB/s", "beyond a float's range"),  # read as inf before
        ("1e308 GB/s", "beyond a float's range"),  # refused before, as "link 0: '1e308 GB/s'"
        ("-26.562 GB/s", "negative"),
    ],
    ids=["5000-digits", "1e308", "negative"],
)
def test_a_rate_no_link_has_is_refused_naming_it(rate: str, said: str) -> None:
    with pytest.raises(CorruptInputError) as refused:
        read_nvlink_status(_with_link_0(rate))
    message = refused.value.message
    assert message.startswith("line 3: link 0: ") and said in message and len(message) < 300
    assert "nvlink -s" in (refused.value.hint or "")


@pytest.mark.parametrize(
    "unit",
    ["KB/s", "MB/s", "TB/s", "GiB/s", "Gb/s", "gb/s"],
)
def test_a_rate_in_a_unit_nvidia_smi_does_not_print_is_refused_naming_the_unit(unit: str) -> None:
    """KB/s and MB/s (and "gb/s") were read before, scaled by 1e3 / 1e6: a link at a millionth
    of its rate, lost on a healthy card."""
    with pytest.raises(CorruptInputError) as refused:
        read_nvlink_status(_with_link_0(f"26.562 {unit}"))
    message = refused.value.message
    assert message.startswith("line 3: link 0: ")
    assert f"is in {unit}: nvidia-smi prints a link's rate in GB/s" in message


def test_doctor_refuses_an_infinite_rate_instead_of_clearing_the_bridge(tmp_path: Path) -> None:
    """Before: exit 0, the 5,000-digit rate read as inf and the bridge cleared as fully up."""
    path = tmp_path / "nvlink-s.txt"
    path.write_text(_with_link_0("7" * 5_000 + " GB/s"), encoding="utf-8")
    outcome = run_in_process(["doctor", "--from", str(path), "--json"])
    assert outcome.code == 2
    message = json.loads(outcome.err)["message"]
    assert str(path) in message and "link 0" in message and len(message) < 1_000


@pytest.mark.parametrize(
    "value", ["26.562 TB/s", "26.562 GiB/s", "26.562TB/s", "<inactive>", "<sleep>"]
)
def test_a_link_state_where_a_counter_belongs_is_named_as_one(value: str) -> None:
    """`nvlink -e` reader: any rate-shaped value is an `nvlink -s` state (was: "TB/s" and
    "GiB/s" were "not a counter"). Put below the block's first counter, so the block stays the
    counters' (a block opening with a state is an `nvlink -s` part of the paste, set aside)."""
    assert is_link_state(value)
    text = NVLINK_E.read_text(encoding="utf-8")
    counter = "Link 0: Recovery Errors: 0"
    assert counter in text
    with pytest.raises(CorruptInputError, match="`nvidia-smi nvlink -s` output, not error"):
        parse_nvlink_counters(text.replace(counter, f"Link 0: {value}", 1))
