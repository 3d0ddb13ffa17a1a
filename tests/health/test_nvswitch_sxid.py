"""NVSwitch SXid records (brief h35c): the kernel-log scanner folds "nvidia-nvswitchN: SXid
(PCI:<bus>): <n>, Fatal|Non-fatal, Link L ..." records per (switch, SXid) into
KernelLogReport.nvswitch_errors, and doctor names them ``nvswitch-error``: a fatal record is
critical (Fabric Manager user guide: the GPUs and NVSwitches need a reset), non-fatal ones are
info unless the same SXid returns in another incident (warning), a record that prints no
severity is info with low confidence.

The excerpts are real lines quoted verbatim by public repositories (sources beside each); the
held-out kernel-log sets hold two more (xid_heldout4 #15, xid_heldout6 #05), read in place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.xid import xid_findings
from gpuwarden.health.xid_groups import INCIDENT_GAP_S, REPEAT_INCIDENTS
from gpuwarden.health.xid_nvswitch import MAX_LINES_PER_SWITCH_GROUP, parse_sxid_line
from gpuwarden.types.health import Severity
from tests.health.kernel_log_sets import assert_read_alike_in_pieces
from tests.telemetry.smi.heldout import DATA_ROOT

_NVSENTINEL = (
    "https://github.com/NVIDIA/NVSentinel/blob/main/health-monitors/syslog-health-monitor/pkg/"
    "sxid/sxid_handler_test.go"
)
_GPUD = "https://github.com/leptonai/gpud/blob/main/components/accelerator/nvidia/sxid/sxid_test.go"


class Excerpt(NamedTuple):
    name: str
    source: str
    text: str
    # (sxid, switch bus, fatal records, non-fatal records, links, incidents) read by hand
    group: tuple[int, str | None, int, int, tuple[int, ...], int | None]
    severity: Severity  # doctor's finding
    doctor_exit: int  # 2: doctor does not take the excerpt for a kernel log


EXCERPTS = (
    Excerpt(
        "redhat-6619941-fatal-20034-ltssm",
        f"{_GPUD} (quoting https://access.redhat.com/solutions/6619941)",
        "[131453.740743] nvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Fatal, Link 30 LTSSM "
        "Fault Up\n"
        "[131453.740754] nvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Severity 1 Engine "
        "instance 30 Sub-engine instance 00\n"
        "[131453.740758] nvidia-nvswitch0: SXid (PCI:0000:a9:00.0): 20034, Data {0x50610002, "
        "0x10100030, 0x00000000, 0x10100030, 0x00000000, 0x00000000, 0x00000000, 0x00000000}p\n",
        (20034, "0000:a9:00.0", 1, 0, (30,), 1),
        Severity.CRITICAL,
        0,
    ),
    Excerpt(
        "nvsentinel-fatal-24007-sourcetrack",
        _NVSENTINEL,
        "[ 1108.858286] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 "
        "sourcetrack timeout error (First)\n",
        (24007, "0000:c3:00.0", 1, 0, (28,), 1),
        Severity.CRITICAL,
        0,
    ),
    Excerpt(
        "nvsentinel-nonfatal-20009-rx-short-error-rate",
        _NVSENTINEL,
        "[73309.599396] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX "
        "Short Error Rate\n",
        (20009, "0000:06:00.0", 0, 1, (4,), 1),
        Severity.INFO,
        0,
    ),
    Excerpt(
        "gpud-nonfatal-12028-egress-priv",
        _GPUD,
        "[111111111.111] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 "
        "egress non-posted PRIV error (First)\n",
        (12028, "0000:05:00.0", 0, 1, (32,), 1),
        Severity.INFO,
        0,
    ),
    Excerpt(
        "nvsentinel-nonfatal-28006-whole-second-stamp",
        _NVSENTINEL,
        "[123] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 28006, Non-fatal, Link 46 MC TS "
        "crumbstore MCTO (First)\n",
        (28006, "0000:c1:00.0", 0, 1, (46,), 1),  # "[123]": uptime 123 s
        Severity.INFO,
        0,
    ),
    Excerpt(
        "nvsentinel-soe-watchdog-no-severity-domain-0004",
        _NVSENTINEL,
        "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26008, SOE Watchdog error\n",
        (26008, "0004:00:00.0", 0, 0, (), None),
        Severity.INFO,
        0,
    ),
    Excerpt(
        "nvsentinel-severity-line-only-12033",
        _NVSENTINEL,
        "[38889.018130] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 12033, Severity 1 Engine "
        "instance 00 Sub-engine instance 00\n",
        (12033, "0000:c3:00.0", 0, 0, (), 1),
        Severity.INFO,
        0,
    ),
)
IDS = [e.name for e in EXCERPTS]


def _group_of(text: str) -> tuple[int, str | None, int, int, tuple[int, ...], int | None]:
    report = scan_kernel_log(text)
    assert report.groups == () and report.unparsed_xid_lines == 0  # an SXid is no Xid
    (g,) = report.nvswitch_errors
    return (g.sxid, g.pci_bus_id, g.fatal_count, g.non_fatal_count, g.links, g.incidents)


@pytest.mark.parametrize("excerpt", EXCERPTS, ids=IDS)
def test_the_scanner_reads_each_record(excerpt: Excerpt) -> None:
    assert _group_of(excerpt.text) == excerpt.group


@pytest.mark.parametrize("excerpt", EXCERPTS, ids=IDS)
def test_the_finding_of_each_record(excerpt: Excerpt) -> None:
    (finding,) = xid_findings(scan_kernel_log(excerpt.text), source="kernel-log:test")
    assert (finding.code, finding.severity) == ("nvswitch-error", excerpt.severity)
    assert finding.device is not None and finding.device.pci_bus_id == excerpt.group[1]
    assert (finding.action == "RESET_GPU") == (excerpt.severity is Severity.CRITICAL)
    assert str(excerpt.group[0]) in finding.title


@pytest.mark.parametrize("excerpt", EXCERPTS, ids=IDS)
def test_doctor_on_each_excerpt(
    excerpt: Excerpt, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"{excerpt.name}.log"
    path.write_text(excerpt.text)
    code = main(["doctor", "--from", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == excerpt.doctor_exit
    if code:
        assert json.loads(err)["reference"] == "capture-not-recognised"
        return
    found = [(f["code"], f["severity"]) for f in json.loads(out)["findings"]]
    assert found == [("nvswitch-error", excerpt.severity.value)]


def test_the_held_out_sets_records() -> None:
    """xid_heldout6 #05: three non-fatal 22013 records (Data / Non-fatal / Severity lines) on
    links 44-46 within 20 ms, one incident: info. xid_heldout4 #15: a Data line alone (gpud's
    quote of dmesg -x), severity not printed: info, low confidence."""
    burst = (DATA_ROOT / "xid_heldout6").glob("05__*.log")
    text = next(burst).read_text()
    assert _group_of(text) == (22013, "0000:04:00.0", 0, 3, (44, 45, 46), 1)
    (finding,) = xid_findings(scan_kernel_log(text), source="kernel-log:test")
    assert finding.severity is Severity.INFO and finding.count == 3
    data_only = next((DATA_ROOT / "xid_heldout4").glob("15__*.log")).read_text()
    assert _group_of(data_only) == (12028, "0000:84:00.0", 0, 0, (), 1)


def test_a_non_fatal_sxid_repeating_in_another_incident_is_a_warning() -> None:
    """The same real record an hour later (uptime + 3600 s): two incidents, REPEAT_INCIDENTS."""
    line = EXCERPTS[2].text
    later = line.replace("[73309.599396]", f"[{73309.599396 + 3600:.6f}]")
    assert INCIDENT_GAP_S < 3600 and REPEAT_INCIDENTS == 2
    report = scan_kernel_log(line + later)
    (group,) = report.nvswitch_errors
    assert (group.count, group.incidents) == (2, 2)
    (finding,) = xid_findings(report, source="kernel-log:test")
    assert finding.severity is Severity.WARNING
    # within the gap it is one burst: info
    soon = line.replace("[73309.599396]", "[73310.000000]")
    (burst,) = xid_findings(scan_kernel_log(line + soon), source="kernel-log:test")
    assert burst.severity is Severity.INFO


def test_records_fold_per_switch_and_sxid() -> None:
    text = "".join(e.text for e in EXCERPTS)
    report = scan_kernel_log(text)
    assert len(report.nvswitch_errors) == len(EXCERPTS)
    findings = xid_findings(report, source="kernel-log:test")
    assert [f.severity for f in findings][:2] == [Severity.CRITICAL, Severity.CRITICAL]


def test_an_sxid_beside_an_xid_keeps_both() -> None:
    xid = "[131453.740800] NVRM: Xid (PCI:0000:b3:00): 74, pid=1, name=python, NVLink: fatal\n"
    report = scan_kernel_log(EXCERPTS[0].text + xid)
    assert [g.xid for g in report.groups] == [74]
    assert [g.sxid for g in report.nvswitch_errors] == [20034]


@pytest.mark.parametrize(
    "line",
    [
        "an SXid happened somewhere",
        "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): abc, Non-fatal",
        "FooSXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04",
    ],
)
def test_lines_that_state_no_sxid(line: str) -> None:
    assert scan_kernel_log(line + "\n").nvswitch_errors == ()


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(EXCERPTS),
    st.integers(min_value=0, max_value=200),
    st.text(max_size=40),
    st.lists(st.integers(min_value=1, max_value=60), max_size=6),
)
def test_spliced_and_chunked_excerpts_never_raise(
    excerpt: Excerpt, at: int, noise: str, sizes: list[int]
) -> None:
    text = excerpt.text[:at] + noise + excerpt.text[at:]
    report = assert_read_alike_in_pieces(text, sizes)
    for group in report.nvswitch_errors:
        assert group.count >= 1 and group.first_line <= group.last_line
        assert len(group.lines) <= MAX_LINES_PER_SWITCH_GROUP


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=120))
def test_any_line_parses_or_is_none(line: str) -> None:
    record = parse_sxid_line(line)
    assert record is None or record.sxid >= 0


def test_a_non_fatal_record_without_a_time_cannot_say_repeated() -> None:
    """gpud's test line "without timestamp": one burst or a repeat cannot be told."""
    line = (
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted "
        "PRIV error\n"
    )
    (group,) = scan_kernel_log(line * 2).nvswitch_errors
    assert (group.count, group.incidents) == (2, None)
    (finding,) = xid_findings(scan_kernel_log(line * 2), source="kernel-log:test")
    assert finding.severity is Severity.INFO and "time unknown" in finding.title
