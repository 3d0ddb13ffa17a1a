"""Issue 13, ninth pass: the newest readers on hostile text.

Real captures as seeds, grown or damaged: `nvidia-smi topo -m` of hundreds of GPUs (bridged pairs,
NVSwitch meshes), `nvlink -s` of 18 links × 1,000 GPUs, `<inactive>` mixed with link rates in odd
units, `nvlink -c` listings (refused saying what they are, also cut or with CRLF) and the PCIe AER
lines of kernel logs repeated to 10 MB. The promise: no exit 70 nor traceback, a strict JSON
document, bounded time and memory, and no finding above info on a healthy seed however large.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.test_fuzz_verbs import Outcome, problem, run_in_process
from tests.cli.test_hostile_inputs3 import _run_all
from tests.telemetry.store import verb_fuzz

DATA = Path(__file__).resolve().parents[1] / "data"
MB = 10**6
DOCTOR = ("doctor", "--from")
GB200_18_LINKS = DATA / "topo_public" / "nvlink__k8s-test-infra-371__gb200-18-links.partial.txt"
H100_PCIE_BRIDGED = (
    DATA / "topo_public" / "nvlink__hpe-e-learning__2x-h100-pcie-bridged-indented.txt"
)
NV3_BRIDGE = DATA / "topo_public" / "topo__nccl-557__2-gpu-nv3-bridge.partial.txt"
CAPABILITIES = sorted((DATA / "nvlink_counters_public3").glob("0[24]__*capabilities*"))
AER_SEEDS = [
    DATA
    / "pcie_aer_public"
    / "01__open-gpu-kernel-modules-1229__egpu-nonfatal-cmpltto-nvidia-cant-recover-xid31.log",
    DATA
    / "pcie_aer_public"
    / "02__martins3-gpu-passthrough-notes__vfio-pci-10de-nonfatal-unsupreq-recovered.log",
    DATA / "pcie_aer_public" / "03__dmesg-notes-oom-then-one-correctable-timeout-nvidia-1cb3.log",
]


class _TookTooLongError(Exception):
    pass


@contextlib.contextmanager
def _budget(seconds: float) -> Iterator[None]:
    """Interrupt a reading that takes longer than ``seconds`` (between two Python steps), so a
    super-linear one fails here instead of holding the suite for hours."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise _TookTooLongError(f"more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _doctor(path: Path, text: str | bytes, budget_s: float) -> Outcome:
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8", newline="")
    else:
        path.write_bytes(text)
    with _budget(budget_s):
        outcome = run_in_process([*DOCTOR, str(path), "--json"])
    assert problem(outcome) is None, problem(outcome)
    return outcome


def _findings(outcome: Outcome) -> list[tuple[str, str]]:
    assert outcome.code == 0, outcome.err[-500:]
    return [(f["severity"], f["code"]) for f in json.loads(outcome.out)["findings"]]


def _above_info(outcome: Outcome) -> list[tuple[str, str]]:
    return [(severity, code) for severity, code in _findings(outcome) if severity != "info"]


# --- nvidia-smi nvlink -s: 18 links × 1,000 GPUs ------------------------------------------------


def _gpu_blocks(seed: Path) -> tuple[str, list[str]]:
    """The seed's text before its first GPU line, and each GPU's block (its line and links)."""
    lines = seed.read_text(encoding="utf-8").splitlines(keepends=True)
    starts = [k for k, line in enumerate(lines) if line.lstrip().startswith("GPU ")]
    ends = [*starts[1:], len(lines)]
    return "".join(lines[: starts[0]]), [
        "".join(lines[a:b]) for a, b in zip(starts, ends, strict=True)
    ]


_UUID_LAST_GROUP = re.compile(r"[0-9a-f]{12}\)")  # "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"


def _many_gpus(seed: Path, count: int) -> str:
    """The seed's first GPU repeated ``count`` times, each with its own index and UUID."""
    head, blocks = _gpu_blocks(seed)
    first = blocks[0]
    assert "GPU 0:" in first and _UUID_LAST_GROUP.search(first)
    return head + "".join(
        _UUID_LAST_GROUP.sub(f"{k:012x})", first.replace("GPU 0:", f"GPU {k}:"), count=1)
        for k in range(count)
    )


@pytest.mark.parametrize("seed", [GB200_18_LINKS, H100_PCIE_BRIDGED], ids=lambda p: p.name[:30])
def test_the_nvlink_status_of_1000_healthy_gpus_raises_no_alarm(tmp_path: Path, seed: Path) -> None:
    text = _many_gpus(seed, 1_000)
    assert text.count("Link 17:") == 1_000  # 18 links each, up or unwired by the bridge
    outcome = _doctor(tmp_path / "nvlink-s.txt", text, budget_s=10)
    assert _above_info(outcome) == []


def _steps_taken(path: Path, text: str) -> int:
    """The lines of Python doctor runs reading ``text`` from ``path`` (each run of a loop's body
    counts), and the functions it calls: its work, counted the same on a loaded runner as on an
    idle one."""
    path.write_text(text, encoding="utf-8", newline="")
    steps = 0

    def count(frame: FrameType, event: str, arg: object) -> Callable[..., object]:
        nonlocal steps
        steps += 1
        return count

    previous = sys.gettrace()
    sys.settrace(count)
    try:
        outcome = run_in_process([*DOCTOR, str(path), "--json"])
    finally:
        sys.settrace(previous)
    assert problem(outcome) is None and _above_info(outcome) == []
    return steps


@pytest.mark.parametrize("seed", [GB200_18_LINKS, H100_PCIE_BRIDGED], ids=lambda p: p.name[:30])
def test_the_nvlink_status_of_more_gpus_costs_the_same_work_per_gpu(
    tmp_path: Path, seed: Path
) -> None:
    """Checked without a clock (a wall-clock bound fails under load): the steps doctor takes
    for each 200 more GPUs stay the same (within 10 %; they are equal today), as a reading
    linear in the GPUs takes them. A step that scans every GPU read so far for each GPU or link
    (topo -m's link lookups did: hours for 1,000 GPUs) makes each 200 cost more than the 200
    before (a copy of the GPUs read so far at each link line: 1.4 times)."""
    _steps_taken(tmp_path / "warm.txt", _many_gpus(seed, 10))  # imports and caches, once
    taken = [_steps_taken(tmp_path / f"{n}.txt", _many_gpus(seed, n)) for n in (200, 400, 600)]
    assert taken[2] - taken[1] <= 1.1 * (taken[1] - taken[0]), taken


# --- `<inactive>` mixed with link rates in odd units -------------------------------------------

ODD_RATES = (
    "<inactive>",
    "<INACTIVE>",
    "<inactive",
    "26.562 TB/s",
    "26562 MB/s",
    "26.562 KB/s",
    "26.562 Gb/s",
    "26.562 GiB/s",
    "26,562 GB/s",
    "26.562GB/s",
    "1e308 GB/s",
    "-26.562 GB/s",
    "nan GB/s",
    "inf GB/s",
    "7" * 5_000 + " GB/s",
    "0 GB/s",
    "26.562",
    "N/A",
    "26.562 GB/s <inactive>",
    "<inactive> 26.562 GB/s",
    "26.562 GB/s\r",
)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    rates=st.dictionaries(st.integers(0, 17), st.sampled_from(ODD_RATES), min_size=1, max_size=6),
    line_ending=st.sampled_from(["\n", "\r\n"]),
)
def test_link_rates_in_odd_units_keep_the_promise(
    tmp_path: Path, rates: dict[int, str], line_ending: str
) -> None:
    """Read or refused (exit 2 naming the file), never a traceback; a refusal names the line."""
    lines = H100_PCIE_BRIDGED.read_text(encoding="utf-8").splitlines()
    for k, line in enumerate(lines):
        name, _, _ = line.partition(": ")
        number = name.strip().removeprefix("Link ")
        if number.isdecimal() and int(number) in rates:
            lines[k] = f"{name}: {rates[int(number)]}"
    path = tmp_path / "nvlink-s.txt"
    outcome = _doctor(path, line_ending.join(lines) + line_ending, budget_s=5)
    assert outcome.code in (0, 2)
    if outcome.code == 2:
        message = json.loads(outcome.err)["message"]
        assert str(path) in message and len(message) < 1_000


def test_the_seed_with_every_link_up_or_unwired_raises_no_alarm(tmp_path: Path) -> None:
    """The healthy reading the odd units are measured against: the two H100 PCIe cards' six
    `<inactive>` links are the ones their bridges do not wire (12 of 18)."""
    outcome = _doctor(tmp_path / "seed.txt", H100_PCIE_BRIDGED.read_text(encoding="utf-8"), 5)
    assert _above_info(outcome) == []


# --- nvidia-smi topo -m of hundreds of GPUs ------------------------------------------------------


def _matrix(count: int, cell: str, odd: dict[tuple[int, int], str] | None = None) -> str:
    """A `topo -m` matrix laid out as the seed's (tab-separated, CPU and NUMA affinity columns),
    ``cell`` between every two GPUs, ``odd`` cells (row, column) in both orders."""
    odd = {**(odd or {}), **{(b, a): c for (a, b), c in (odd or {}).items()}}
    head = "\t" + "\t".join(f"GPU{k}" for k in range(count)) + "\tCPU Affinity\tNUMA Affinity\n"
    rows = [
        f"GPU{a}\t"
        + "\t".join(" X " if a == b else odd.get((a, b), cell) for b in range(count))
        + "\t0-47\t\tN/A\n"
        for a in range(count)
    ]
    legend = NV3_BRIDGE.read_text(encoding="utf-8").partition("\n\nLegend:")[2]
    return head + "".join(rows) + "\nLegend:" + legend


def test_the_seed_matrix_layout_is_read_as_the_seed() -> None:
    seed = NV3_BRIDGE.read_text(encoding="utf-8")
    assert _matrix(2, "NV3").split() == seed.split()


def test_a_200_gpu_mesh_is_judged_in_linear_time(tmp_path: Path) -> None:
    """Each GPU's sum of NV# asked for its cells one by one, each lookup a scan of every cell
    (GPUs to the fourth power): 100 GPUs took 7 s, 200 about two minutes, 1,000 most of a day.
    Now linear in the cells; and the one GPU pair short of a link still stands out."""
    healthy = _doctor(tmp_path / "mesh.txt", _matrix(200, "NV18"), budget_s=10)
    assert _above_info(healthy) == []
    one_short = _matrix(200, "NV18", {(7, 8): "NV17"})
    weak = _doctor(tmp_path / "short.txt", one_short, budget_s=10)
    assert _above_info(weak) == [("warning", "nvlink-down")] * 2  # GPU7 and GPU8, its peer


def test_bridged_pairs_of_200_gpus_with_one_unbridged_card(tmp_path: Path) -> None:
    """Two-card bridges (NV4) between 2k and 2k+1; GPU 199 alone: the card without a bridge (an
    info finding), not a lost link."""
    pairs = {(a, a + 1): "NV4" for a in range(0, 198, 2)}
    outcome = _doctor(tmp_path / "pairs.txt", _matrix(200, "SYS", pairs), budget_s=10)
    assert _above_info(outcome) == []
    assert ("info", "nvlink-down") in _findings(outcome)


# --- nvidia-smi nvlink -c: refused saying what it is ---------------------------------------------


def _capability_variants(seed: Path) -> dict[str, bytes]:
    text = seed.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    first = next(k for k, line in enumerate(lines) if ", P2P is supported:" in line)
    return {
        "whole": text.encode(),
        "crlf": text.replace("\n", "\r\n").encode(),
        "crlf-cut": text.replace("\n", "\r\n")[: len(text) // 2].encode(),
        "first-capability-only": "".join(lines[: first + 1]).encode(),
        "bom": b"\xef\xbb\xbf" + text.encode(),
        "utf-16": text.encode("utf-16"),
        "repeated-3000": (text * 3_000).encode(),
    }


@pytest.mark.parametrize("seed", CAPABILITIES, ids=lambda p: p.name[:12])
def test_nvlink_capability_listings_are_refused_saying_what_they_are(
    tmp_path: Path, seed: Path
) -> None:
    assert len(CAPABILITIES) == 2
    for name, data in _capability_variants(seed).items():
        path = tmp_path / f"{name}.txt"
        outcome = _doctor(path, data, budget_s=5)
        assert outcome.code == 2, name
        message = json.loads(outcome.err)["message"]
        assert str(path) in message and "nvlink -c" in message, (name, message)


@pytest.mark.parametrize("seed", CAPABILITIES, ids=lambda p: p.name[:12])
def test_a_capability_listing_cut_inside_its_first_line_says_what_it_is(
    tmp_path: Path, seed: Path
) -> None:
    lines = seed.read_text(encoding="utf-8").splitlines(keepends=True)
    first = next(k for k, line in enumerate(lines) if ", P2P is supported:" in line)
    path = tmp_path / "cut.txt"
    outcome = _doctor(path, "".join(lines[: first + 1])[: -len(": true\n")], budget_s=5)
    assert outcome.code == 2
    assert "nvlink -c" in json.loads(outcome.err)["message"]


# --- PCIe AER lines repeated to 10 MB -----------------------------------------------------------

_AER_MARKERS = ("AER", "PCIe Bus Error", "status/mask=", ":    [")


def _aer_repeated(seed: Path, size: int) -> str:
    text = seed.read_text(encoding="utf-8")
    aer = "".join(
        line for line in text.splitlines(keepends=True) if any(m in line for m in _AER_MARKERS)
    )
    return text + aer * (size // len(aer))


@pytest.mark.parametrize("seed", AER_SEEDS, ids=lambda p: p.name[:20])
def test_10_mb_of_repeated_aer_lines_keep_the_seed_verdict(tmp_path: Path, seed: Path) -> None:
    """The seed's findings, however often its lines repeat, in bounded time: no other check
    fires. A repeated corrected error may become a warning (more than DCGM's 8 a minute is a
    storm), an uncorrected one stays what it was."""
    alone = _findings(_doctor(tmp_path / "seed.log", seed.read_text(encoding="utf-8"), 5))
    repeated = _findings(_doctor(tmp_path / "storm.log", _aer_repeated(seed, 10 * MB), 8))
    assert {code for _, code in repeated} == {code for _, code in alone}
    assert ("warning", "pcie-errors") in repeated


def test_10_mb_of_aer_lines_of_thousands_of_devices_run_in_bounded_memory(tmp_path: Path) -> None:
    """The reader keeps MAX_DEVICES groups, whatever the log names: read in a child under the
    first harness's address-space limit, its peak RSS measured."""
    line = (
        "[ 1.0] nvidia 0000:{:02x}:{:02x}.0: PCIe Bus Error: severity=Corrected, "
        "type=Physical Layer, (Receiver ID)\n"
    )
    path = tmp_path / "devices.log"
    path.write_text(
        "".join(line.format(k % 256, k // 256 % 32) for k in range(10 * MB // len(line))),
        encoding="utf-8",
    )
    found, peak_mb = _run_all([[*DOCTOR, str(path), "--json"]], tmp_path, budget_s=30)
    assert found == []
    assert peak_mb < verb_fuzz.PEAK_RSS_LIMIT_MB
