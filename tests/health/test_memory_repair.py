"""The R575+ repair readings (brief h54c): "Unrepairable Memory", "Channel Repair Pending" and
"TPC Repair Pending" at the end of nvidia-smi -q's "ECC Errors" (XML <unrepairable_memory>,
<channel_repair_pending>, <tpc_repair_pending> under <ecc_errors>), read into
DeviceSample.memory_unrepairable / channel_repair_pending / tpc_repair_pending, kept by the store
(schema v8, an older file migrated with its rows), and judged by the ``memory-repair`` rule:
unrepairable memory is critical (``memory-unrepairable``, field diagnostic and RMA), a pending
repair a warning (``repair-pending``, reset the GPU).

Real captures, read in place: every held capture that prints the rows (R580 to R610; GB200, H200,
H100, RTX PRO 6000 Blackwell, RTX 5080 Laptop, RTX 4080 SUPER, RTX 4000 SFF Ada, RTX 3080/3090,
RTX A5000) and one that does not (RTX 2080 SUPER on R595, Turing). None prints "Yes": the faults
are those captures with one row respelt "No" → "Yes", the spelling R615 prints on a Rubin node
(NVIDIA/k8s-test-infra hardware/qx-vrnvl72.xml, GPU 0: ``<unrepairable_memory>Yes``).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError
from gpuwarden.health.rules import CHECK_NAMES
from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.rules.common import Context
from gpuwarden.health.rules.memory_repair import REPAIR
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.store import SCHEMA_VERSION, Store
from gpuwarden.telemetry.store.schema import V8_COLUMNS
from gpuwarden.types.health import Severity
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample, DeviceState, Snapshot
from tests.conftest import FIXTURES
from tests.telemetry.smi.heldout import DATA_ROOT, doctor_codes_above_info

FIELDS = ("memory_unrepairable", "channel_repair_pending", "tpc_repair_pending")
REPAIR_CODES = {"memory-unrepairable", "repair-pending"}
Flags = tuple[bool | None, bool | None, bool | None]

SMI = FIXTURES / "nvidia-smi"
H100_Q = SMI / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
RTX4080_Q = SMI / "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.idle.q.txt"
RTX2080_Q = SMI / "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle.q.txt"
GB200_XML = DATA_ROOT / "smi_xml_public2" / "k8s-test-infra__4x-gb200-nvl__v13__580.173.02.xml"
XML1 = DATA_ROOT / "smi_xml_public"

_HEALTHY: Flags = (False, False, False)
_NO_ECC: Flags = (None, False, False)  # GeForce / workstation: "Unrepairable Memory : N/A"

# (capture, the rows as printed, per GPU: Unrepairable Memory, Channel / TPC Repair Pending)
REAL: list[tuple[Path, list[Flags]]] = [
    (H100_Q, [_HEALTHY]),
    (RTX4080_Q, [_NO_ECC]),
    (RTX2080_Q, [(None, None, None)]),  # Turing on R595 prints none of the rows
    (
        DATA_ROOT / "smi_testdata/q__nvidia-gpu-exporter__h200-mig__610.43.02.idle.partial.txt",
        [_HEALTHY],
    ),
    (
        DATA_ROOT / "smi_testdata/q__nvidia-gpu-exporter__h200-mig__580.173.02.idle.partial.txt",
        [_HEALTHY],
    ),
    (
        DATA_ROOT / "smi_heldout6/q__isaac-sim-guidance-kr__rtx-5080-laptop__580.173.02.txt",
        [_NO_ECC],
    ),
    (GB200_XML, [_HEALTHY] * 4),
    (XML1 / "telegraf__rtx-3080__v13__595.58.03.xml", [_NO_ECC]),
    (XML1 / "telegraf__rtx-3090__v13__590.44.01.xml", [_NO_ECC]),
    (XML1 / "telegraf__rtx-4000-sff-ada__v13__595.84.xml", [_NO_ECC]),
    (XML1 / "telegraf__rtx-pro-6000-blackwell-maxq__v13__590.44.01.xml", [_NO_ECC]),
    (XML1 / "telegraf__dual-rtx-a5000__v13__590.44.01.xml", [_NO_ECC] * 2),
]


def _read(text: str, name: str) -> Snapshot:
    (snap,) = parse_smi_output(text, name, 0.0)
    return snap


def _flags(sample: DeviceSample) -> Flags:
    return (sample.memory_unrepairable, sample.channel_repair_pending, sample.tpc_repair_pending)


def _context() -> Context:
    return Context(Thresholds(), None, "smi:test")


def _judge(sample: DeviceSample) -> list[tuple[str, Severity]]:
    if not REPAIR.reports(sample):
        return []
    return [(f.code, f.severity) for f in REPAIR.judge(sample, _context())]


@pytest.mark.parametrize(("path", "printed"), REAL, ids=[p.name for p, _ in REAL])
def test_each_capture_reads_the_rows_it_prints(path: Path, printed: list[Flags]) -> None:
    snap = _read(path.read_text(), path.name)
    assert [_flags(s) for s in snap.samples] == printed
    assert all(_judge(s) == [] for s in snap.samples)  # "No" and N/A: nothing to say


@pytest.mark.parametrize("path", [H100_Q, GB200_XML, RTX4080_Q], ids=lambda p: p.name)
def test_doctor_finds_no_repair_fault_on_the_real_captures(path: Path) -> None:
    assert not set(doctor_codes_above_info(path)) & REPAIR_CODES


def test_the_check_runs_in_doctor_order() -> None:
    assert CHECK_NAMES.index("memory-repair") == CHECK_NAMES.index("sram") + 1


# --- the faults: a real capture with one row as R615 prints it on a failing GPU -----------------


def _respelt(text: str, old: str, new: str, occurrence: int = 0) -> str:
    """``text`` with the ``occurrence``-th ``old`` (0 = the first) replaced by ``new``."""
    parts = text.split(old)
    assert len(parts) > occurrence + 1, old
    return old.join(parts[: occurrence + 1]) + new + old.join(parts[occurrence + 1 :])


def _doctor(tmp_path: Path, name: str, text: str) -> list[str]:
    path = tmp_path / name
    path.write_text(text)
    return doctor_codes_above_info(path)


def test_unrepairable_memory_on_one_gb200_is_critical_for_that_gpu(tmp_path: Path) -> None:
    text = _respelt(
        GB200_XML.read_text(),
        "<unrepairable_memory>No</unrepairable_memory>",
        "<unrepairable_memory>Yes</unrepairable_memory>",
        occurrence=2,
    )
    snap = _read(text, GB200_XML.name)
    assert [s.memory_unrepairable for s in snap.samples] == [False, False, True, False]
    (finding,) = REPAIR.judge(snap.samples[2], _context())
    assert (finding.code, finding.severity, finding.action) == (
        "memory-unrepairable",
        Severity.CRITICAL,
        "CONTACT_SUPPORT",
    )
    assert finding.device is not None and finding.device.uuid == snap.samples[2].info.uuid
    assert [(e.field, e.value) for e in finding.evidence] == [("memory_unrepairable", True)]
    before = set(doctor_codes_above_info(GB200_XML))
    after = set(_doctor(tmp_path, GB200_XML.name, text))
    assert after - before == {"memory-unrepairable"}


@pytest.mark.parametrize(
    ("rows", "title_says"),
    [
        (("Channel Repair Pending",), "a memory-channel repair waits"),
        (("TPC Repair Pending",), "a TPC repair waits"),
        (("Channel Repair Pending", "TPC Repair Pending"), "channel repair and a TPC repair"),
    ],
)
def test_a_pending_repair_on_the_h100_is_one_warning(
    tmp_path: Path, rows: tuple[str, ...], title_says: str
) -> None:
    text = H100_Q.read_text()
    for row in rows:
        line = next(line for line in text.splitlines() if line.strip().startswith(row))
        text = _respelt(text, line, line.replace(": No", ": Yes"))
    (sample,) = _read(text, H100_Q.name).samples
    (finding,) = REPAIR.judge(sample, _context())
    assert (finding.code, finding.severity, finding.action) == (
        "repair-pending",
        Severity.WARNING,
        "RESET_GPU",
    )
    assert title_says in finding.title
    assert len(finding.evidence) == len(rows)
    before = set(doctor_codes_above_info(H100_Q))
    assert set(_doctor(tmp_path, H100_Q.name, text)) - before == {"repair-pending"}


def test_the_code_rows_say_what_to_do() -> None:
    unrepairable, pending = CODES["memory-unrepairable"], CODES["repair-pending"]
    assert unrepairable.severity is Severity.CRITICAL and "RMA" in unrepairable.remedy
    assert pending.severity is Severity.WARNING and "nvidia-smi -r" in pending.remedy


_flag = st.sampled_from([None, False, True])


@settings(max_examples=60, deadline=None)
@given(flags=st.tuples(_flag, _flag, _flag), lost=st.booleans())
def test_a_finding_exactly_when_a_flag_says_yes(flags: Flags, lost: bool) -> None:
    sample = DeviceSample(
        DeviceInfo(0, "GPU-0", "NVIDIA GB200"),
        0.0,
        state=DeviceState.GPU_LOST if lost else DeviceState.OK,
        **dict(zip(FIELDS, flags, strict=True)),
    )
    expected = []
    if not lost and flags[0]:
        expected.append(("memory-unrepairable", Severity.CRITICAL))
    if not lost and (flags[1] or flags[2]):
        expected.append(("repair-pending", Severity.WARNING))
    assert _judge(sample) == expected
    assert REPAIR.reports(sample) == (not lost and any(f is not None for f in flags))


# --- the readers: any value in the three rows reads or is refused cleanly ---------------------

_YES_NO = {"yes": True, "no": False, "n/a": None, "[n/a]": None, "[not supported]": None}
_CELL = st.one_of(
    st.sampled_from(["Yes", "No", "N/A", "[N/A]", "[Not Supported]", "yes", " No "]),
    # printable: a control character breaks the -q line itself (str.splitlines), not the cell
    st.text(
        alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters="<>&"),
        max_size=12,
    ),
)


def _outcome(text: str, name: str, gpu: int) -> bool | str | None:
    """The cell as read, or "refused: <message>" when the reader refuses the file."""
    try:
        return _read(text, name).samples[gpu].memory_unrepairable
    except CorruptInputError as error:
        return f"refused: {error} {error.hint}"


@settings(max_examples=80, deadline=None)
@given(cell=_CELL)
def test_any_unrepairable_memory_cell(cell: str) -> None:
    q_line = next(line for line in H100_Q.read_text().splitlines() if "Unrepairable Memory" in line)
    q_text = _respelt(H100_Q.read_text(), q_line, q_line.replace(": No", f": {cell}"))
    xml = _respelt(
        GB200_XML.read_text(),
        "<unrepairable_memory>No</unrepairable_memory>",
        f"<unrepairable_memory>{cell}</unrepairable_memory>",
    )
    got = [_outcome(q_text, H100_Q.name, 0), _outcome(xml, GB200_XML.name, 0)]
    words = " ".join(cell.split()).lower()
    if words in _YES_NO:
        assert got == [_YES_NO[words]] * 2
        return
    for outcome, name in zip(got, (H100_Q.name, GB200_XML.name), strict=True):
        if isinstance(outcome, str):  # refused, naming the file and what it could not read
            assert name in outcome and "not a yes/no value" in outcome
        else:
            assert outcome is None or isinstance(outcome, bool)


# --- the store: columns of schema v8, older files migrated with their rows ---------------------


def _sample(t: float, flags: Flags) -> DeviceSample:
    (sample,) = _read(H100_Q.read_text(), H100_Q.name).samples
    return dataclasses.replace(sample, timestamp_s=t, **dict(zip(FIELDS, flags, strict=True)))


def test_the_store_keeps_the_flags(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    written = [(True, False, None), (False, True, True), (None, None, None)]
    with Store.open(path) as store:
        for k, flags in enumerate(written):
            store.write(Snapshot(1_700_000_000.0 + k, "node", "smi", False, (_sample(k, flags),)))
    with Store.open(path, readonly=True) as store:
        assert [_flags(s) for s in store.samples()] == written


def test_a_v7_file_is_migrated_keeping_every_row(tmp_path: Path) -> None:
    """A file as schema v7 wrote it (no repair columns) opens as v8: every earlier value kept,
    the repair readings None (v7 never read them), and new readings are stored."""
    path = tmp_path / "v7.db"
    t0 = 1_700_000_000.0
    with Store.open(path) as store:
        for k in range(5):
            store.write(Snapshot(t0 + k, "node", "smi", False, (_sample(t0 + k, _HEALTHY),)))
        expected = [dataclasses.replace(s, **dict.fromkeys(FIELDS)) for s in store.samples()]
    conn = sqlite3.connect(path)
    for table in ("samples", "samples_1m", "samples_1h"):
        for column in V8_COLUMNS:
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    with Store.open(path) as store:
        assert store.samples() == expected
        store.write(
            Snapshot(t0 + 9, "node", "smi", False, (_sample(t0 + 9, (True, False, False)),))
        )
        assert _flags(store.samples()[-1]) == (True, False, False)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()
    assert SCHEMA_VERSION == 8
