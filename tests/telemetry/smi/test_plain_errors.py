"""The smi parsers raise plainly (the line and the problem, never the input's name); the entry
point that knows the input names it once: ``parse_*`` for a caller with a name, doctor for its
captures. What a user reads stays what it was, less the name said twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import (
    parse_smi_output,
    parse_topology,
    read_smi_output,
    read_topology,
)
from gpuwarden.telemetry.smi.cells import SmiOutputError

DATA = Path(__file__).resolve().parents[2] / "data"
# real outputs each parser refuses (their SOURCES.md say where they come from)
P2P_MATRIX = DATA / "topo_public3" / "p2p__club-3090-1360__2-gpu-p2p-rw-ok.txt"
ESCAPED_XML = (
    DATA
    / "smi_heldout16"
    / "xml__1panel-11910__rtx-4090-html-escaped-email-reply__v13__591.74.fragment.xml"
)
NO_PID_CSV = (
    DATA / "smi_heldout20" / "csv-compute-apps__dcgm-exporter-94__gpu-uuid-process-name-3-vgpu.txt"
)
BANNER_ONLY = (
    DATA / "smi_heldout21" / "table__gpustresstest-13__b200-banner-only__570.133.20.fragment.txt"
)
HEALTHY_L4 = DATA / "smi_public" / "table__speaches-438__l4__570.133.20.partial.txt"

P2P_PROBLEM = "line 2: row GPU0: 'OK' is a peer-access status: a `topo -p2p` matrix, not `topo -m`"


@pytest.mark.parametrize(
    ("path", "plain"),
    [
        (
            ESCAPED_XML,
            "line 1: not a supported nvidia-smi format: not recognised "
            "('*@*.***:/mnt/d/openclaw/1Panel-dev-v2# n')",
        ),
        (
            NO_PID_CSV,
            "line 1: a --query-compute-apps CSV without its pid column: a process list whose "
            "processes cannot be told apart, and no GPU reading",
        ),
        (BANNER_ONLY, "an nvidia-smi screen without any GPU row"),
    ],
)
def test_a_refused_output_says_its_line_and_problem_and_its_name_once(
    path: Path, plain: str
) -> None:
    """``read_smi_output`` says where and what, not which file; ``parse_smi_output`` puts the
    name in front once, as "file, line N: ..." (or "file: ..." with no line)."""
    text = path.read_text(encoding="utf-8")
    with pytest.raises(SmiOutputError) as plainly:
        read_smi_output(text, 0.0)
    assert plainly.value.message == plain
    assert plainly.value.reference == "smi-output-unreadable"
    with pytest.raises(CorruptInputError) as named:
        parse_smi_output(text, path.name, 0.0)
    separator = ", " if plain.startswith("line ") else ": "
    assert named.value.message == f"{path.name}{separator}{plain}"
    assert named.value.hint == plainly.value.hint


def test_a_topology_refusal_keeps_its_own_hint() -> None:
    text = P2P_MATRIX.read_text(encoding="utf-8")
    with pytest.raises(SmiOutputError) as plainly:
        read_topology(text)
    assert plainly.value.message == P2P_PROBLEM
    assert "topo -m" in (plainly.value.hint or "")
    with pytest.raises(CorruptInputError) as named:
        parse_topology(text, "p2p.txt")
    assert named.value.message == f"p2p.txt, {P2P_PROBLEM}"
    assert named.value.hint == plainly.value.hint


def test_the_input_name_is_the_readings_source_set_by_the_entry_point() -> None:
    """The Snapshot's ``source`` is data: the plain reader leaves it to its caller."""
    text = HEALTHY_L4.read_text(encoding="utf-8")
    (plain,) = read_smi_output(text, 0.0)
    (named,) = parse_smi_output(text, "l4.txt", 0.0)
    assert (plain.source, named.source) == (None, "l4.txt")
    assert named.samples == plain.samples


def test_doctor_lists_a_refused_capture_of_a_bundle_without_its_name_twice(
    tmp_path: Path,
) -> None:
    """A capture of a folder its reader refuses is listed after its name with the reader's
    plain message ("skipped p2p.txt: line 2: ..."), not "p2p.txt: p2p.txt, line 2: ..."."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "p2p.txt").write_text(P2P_MATRIX.read_text(encoding="utf-8"), encoding="utf-8")
    (bundle / "l4.txt").write_text(HEALTHY_L4.read_text(encoding="utf-8"), encoding="utf-8")
    report = diagnose_captures([str(bundle)], DoctorOptions(read_kernel_log=False))
    assert [(Path(s.path).name, s.reason) for s in report.skipped] == [("p2p.txt", P2P_PROBLEM)]


def test_doctor_refuses_a_capture_named_alone_with_its_name_once() -> None:
    with pytest.raises(CorruptInputError) as refused:
        diagnose_captures([str(P2P_MATRIX)], DoctorOptions(read_kernel_log=False))
    assert refused.value.message == f"{P2P_MATRIX}, {P2P_PROBLEM}"
