"""`doctor --from` on a bundle of several hosts' captures (doctor/hosts.py): real captures from
tests/data copied under one folder per host, or side by side when each states its host. Each
host's GPUs are its own (host A's GPU 0 is not host B's), each finding on its own GPU and host; a
bundle of one host's captures reads as before; hosts that cannot be told apart are said so.

Before hosts.py, the folder, syslog and bug-report bundles were judged wrong (measured on the
code of the commit before): the Xid of node-a's dmesg was put on node-b's GPU of the same bus id
(a healthy GPU blamed), and two hosts' Xid 13 on 0000:01:00.0 were one finding (×1: the other
host's ×6 gone). The one-host bundles read as they did."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from gpuwarden.doctor.captures import Capture, CaptureKind, read_capture
from gpuwarden.doctor.hosts import key_hosts, stated_host
from gpuwarden.doctor.node import UNKNOWN_HOST, DoctorOptions, DoctorReport, diagnose_captures
from gpuwarden.report.doctor import print_doctor_table
from gpuwarden.report.doctor_document import doctor_document

DATA = Path(__file__).resolve().parents[1] / "data"
# two single-GPU hosts whose GPU 0 sits on the same bus, 0000:43:00.0
GTX_1660_TI = DATA / "smi_xml_public" / "telegraf__gtx-1660-ti__418.43.xml"
QUADRO_P400 = DATA / "smi_xml_public" / "telegraf__quadro-p400__418.43.xml"
# a dmesg (no host printed) with six Xid 13 lines on 0000:43:00
XID13_DMESG = DATA / "xid_heldout3" / "02__vllm-5901__dmesg-a800-xid13-esr-burst.log"
# a dmesg with Xid 79 (no host), and a syslog of the host "Gipfeli" with Xid 13
XID79_DMESG = DATA / "xid_heldout4" / "04__gpud-870__dmesg-decode-iso-comma-xid79.log"
GIPFELI_SYSLOG = DATA / "xid_heldout3" / "01__relion-436__syslog-uptime-xid13-gpc-tpc-sm.log"
# journals of two machines, "gaming" and "home-danil", each with Xid 13 on 0000:01:00.0
GAMING_JOURNAL = DATA / "xid_public" / "15__nixpkgs-539036__journal-wrapped-xid13.log"
HOME_DANIL_JOURNAL = DATA / "xid_public" / "16__vulkan-samples-379__journal-xid13-shader-header.log"
# nvidia-bug-report prologues: "uname: Linux gpu-8-server-intesight ..." and "... shield-616-2"
GPU8_REPORT = DATA / "bug_report_public3" / "gpu8-384-xenial.prefix.log"
TITANX_REPORT = DATA / "bug_report_public3" / "titanx-352-wily.prefix.log"
# dcgm-exporter pages of two EKS nodes (Hostname labels), eight H100s each on the same buses
DCGM_NODE_1 = (
    DATA
    / "dcgm_public8"
    / "04__eks-ai-conformance-evidence__h100-x8-580.105.08-ip-100-64-sampled.prom"
)
DCGM_NODE_2 = (
    DATA
    / "dcgm_public8"
    / "05__eks-ai-conformance-evidence__h100-x8-580.105.08-nim-pod-on-gpu6-sampled.prom"
)


def _copy(source: Path, folder: Path, name: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, folder / (name or source.name))


def _judged(*paths: Path) -> DoctorReport:
    return diagnose_captures([str(p) for p in paths], DoctorOptions())


def _gpus(report: DoctorReport) -> dict[tuple[str, int], str]:
    """(host, index) → UUID of every GPU read."""
    return {
        (host, s.info.index): s.info.uuid
        for host, s in zip(report.sample_hosts, report.samples, strict=True)
    }


def _xids(report: DoctorReport) -> list[tuple[str | None, str | None, int | None]]:
    return sorted(
        (f.device.host, f.device.uuid, f.count)
        for f in report.findings
        if f.code == "xid" and f.device is not None
    )


def test_a_folder_per_host_keeps_each_hosts_gpu_0_and_its_xid_on_it(tmp_path: Path) -> None:
    _copy(GTX_1660_TI, tmp_path / "node-a", "smi.xml")
    _copy(XID13_DMESG, tmp_path / "node-a", "dmesg.log")
    _copy(QUADRO_P400, tmp_path / "node-b", "smi.xml")
    report = _judged(tmp_path)
    gpus = _gpus(report)
    assert sorted(gpus) == [("node-a", 0), ("node-b", 0)]
    assert gpus["node-a", 0] != gpus["node-b", 0]
    # the dmesg of node-a blames node-a's GTX 1660 Ti, not node-b's Quadro of the same bus id
    assert _xids(report) == [("node-a", gpus["node-a", 0], 6)]
    names = {f.device.name for f in report.findings if f.code == "xid" and f.device}
    assert names == {"Graphics Device"}  # how driver 418 names the GTX 1660 Ti
    assert report.host is None  # neither host stands for the bundle
    notes = report.environment.notes if report.environment else ()
    assert "captures of 2 hosts, each judged apart: node-a, node-b" in notes
    document = doctor_document(report)
    assert {f["device"]["host"] for f in document["findings"] if f["device"]} == {
        "node-a",
        "node-b",
    }
    assert [(d["host"], d["index"]) for d in document["devices"]] == [
        ("node-a", 0),
        ("node-b", 0),
    ]


def test_the_gpu_table_puts_a_hosts_xid_on_its_gpu_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table's verdict column matches a finding to its host's GPU: node-b's GPU 0, on the
    bus id of node-a's, stays ok (it showed node-a's xid before)."""
    _copy(GTX_1660_TI, tmp_path / "node-a", "smi.xml")
    _copy(XID13_DMESG, tmp_path / "node-a", "dmesg.log")
    _copy(QUADRO_P400, tmp_path / "node-b", "smi.xml")
    print_doctor_table(_judged(tmp_path))
    rows = {
        line.split("│")[1].strip(): line.split("│")[-2].strip()
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("│ node-")
    }
    assert rows == {"node-a": "xid", "node-b": "ok"}


def test_hosts_named_by_their_syslog_lines_keep_their_own_xids(tmp_path: Path) -> None:
    _copy(GAMING_JOURNAL, tmp_path)
    _copy(HOME_DANIL_JOURNAL, tmp_path)
    report = _judged(tmp_path)
    # one Xid 13 on gaming's GPU, six on home-danil's: same bus id, two GPUs
    assert _xids(report) == [("gaming", None, 1), ("home-danil", None, 6)]
    titles = sorted(f.title for f in report.findings if f.code == "xid")
    assert titles[0].startswith("gaming: Xid 13") and titles[1].startswith("home-danil: Xid 13")
    assert {i.detail.split(":", 1)[0] for i in report.inputs} == {
        "host gaming",
        "host home-danil",
    }


def test_dcgm_pages_of_two_nodes_keep_sixteen_gpus_each_on_its_node(tmp_path: Path) -> None:
    _copy(DCGM_NODE_1, tmp_path)
    _copy(DCGM_NODE_2, tmp_path)
    report = _judged(tmp_path)
    hosts = {"ip-100-64-171-120.ec2.internal", "ip-10-0-180-136.ec2.internal"}
    assert set(report.sample_hosts) == hosts
    assert len(_gpus(report)) == 16
    assert report.verdict is None and report.judged  # healthy pages: no false alarm


def test_a_bug_reports_uname_names_its_host_for_its_folder(tmp_path: Path) -> None:
    _copy(GPU8_REPORT, tmp_path / "a", "nvidia-bug-report.log")
    _copy(XID13_DMESG, tmp_path / "a", "dmesg.log")
    _copy(TITANX_REPORT, tmp_path / "b", "nvidia-bug-report.log")
    _copy(GTX_1660_TI, tmp_path / "b", "smi.xml")
    report = _judged(tmp_path)
    assert _xids(report) == [("gpu-8-server-intesight", None, 6)]
    assert report.sample_hosts == ("shield-616-2",)


def test_the_hosts_a_capture_states() -> None:
    def host(path: Path) -> str | None:
        capture = read_capture(str(path))
        assert isinstance(capture, Capture)
        return stated_host(capture)

    assert host(GPU8_REPORT) == "gpu-8-server-intesight"
    assert host(GAMING_JOURNAL) == "gaming"
    assert host(DCGM_NODE_1) == "ip-100-64-171-120.ec2.internal"
    assert host(XID13_DMESG) is None  # dmesg prints no host
    assert host(GTX_1660_TI) is None  # nor does nvidia-smi
    # masked in the shared copy: "uname: Linux ****-***** ...", "Jun 18 11:03:25 xxx kernel:"
    masked = DATA / "bug_report_public" / "gf7600gt-ubuntu-2010.prefix.log"
    assert "uname: Linux ****-***** " in masked.read_text(errors="replace")
    assert host(masked) is None
    assert host(DATA / "xid_public" / "32__pop-os-3363__syslog-uptime-xid79-and-fallen.log") is None


def test_one_hosts_bundle_reads_as_before(tmp_path: Path) -> None:
    """Two folders of one node (readings before and after, the same GPU), and the same files
    side by side: one host, the same verdict, findings and GPUs, no note."""
    _copy(GTX_1660_TI, tmp_path / "folders" / "before", "smi.xml")
    _copy(XID13_DMESG, tmp_path / "folders" / "before", "dmesg.log")
    _copy(GTX_1660_TI, tmp_path / "folders" / "after", "smi.xml")
    _copy(GTX_1660_TI, tmp_path / "flat", "smi.xml")
    _copy(XID13_DMESG, tmp_path / "flat", "dmesg.log")
    folders, flat = _judged(tmp_path / "folders"), _judged(tmp_path / "flat")
    assert folders.sample_hosts == flat.sample_hosts == ()
    assert [f.title for f in folders.findings] == [f.title for f in flat.findings]
    assert [s.info.uuid for s in folders.samples] == [s.info.uuid for s in flat.samples]
    assert folders.environment is not None and flat.environment is not None
    assert folders.environment.notes == flat.environment.notes
    assert _xids(folders) == [(None, folders.samples[0].info.uuid, 6)]


def test_folders_that_cannot_be_told_apart_are_said_so(tmp_path: Path) -> None:
    """Two folders of dmesg alone (no host, no GPU UUID in either), or one that states its
    host beside one that does not: read as one host's, with a note that they may not be."""
    _copy(XID13_DMESG, tmp_path / "dmesg" / "node-a", "dmesg.log")
    _copy(XID79_DMESG, tmp_path / "dmesg" / "node-b", "dmesg.log")
    _copy(XID13_DMESG, tmp_path / "mixed" / "node-a", "dmesg.log")
    _copy(GIPFELI_SYSLOG, tmp_path / "mixed" / "node-b", "kern.log")
    for bundle in ("dmesg", "mixed"):
        report = _judged(tmp_path / bundle)
        notes = report.environment.notes if report.environment else ()
        assert any("do not show that they are one host's" in n for n in notes), notes
        assert report.sample_hosts == ()


def test_a_capture_of_no_known_host_among_several_is_judged_apart(tmp_path: Path) -> None:
    _copy(GAMING_JOURNAL, tmp_path)
    _copy(HOME_DANIL_JOURNAL, tmp_path)
    _copy(GTX_1660_TI, tmp_path)  # whose? it names no host, and no journal names its GPU
    report = _judged(tmp_path)
    assert report.sample_hosts == (UNKNOWN_HOST,)
    notes = report.environment.notes if report.environment else ()
    assert any("1 capture(s) name no host" in n and GTX_1660_TI.name in n for n in notes)
    assert _xids(report) == [("gaming", None, 1), ("home-danil", None, 6)]
    capture = read_capture(str(GTX_1660_TI))
    assert isinstance(capture, Capture) and capture.kind is CaptureKind.NVIDIA_SMI


def test_a_host_and_its_full_name_are_one_host() -> None:
    """A journal naming "gaming" and a copy of it naming "Gaming.lan" (a syslog that prints
    the fully qualified name, in capitals): one host, named "gaming"."""
    capture = read_capture(str(GAMING_JOURNAL))
    assert isinstance(capture, Capture)
    renamed = dataclasses.replace(
        capture,
        path="kern.log",
        text=capture.text.replace(" gaming kernel:", " Gaming.lan kernel:"),
    )
    assert stated_host(renamed) == "Gaming.lan"
    keys = key_hosts([capture, renamed], [capture.path, renamed.path])
    assert not keys.several
    assert set(keys.hosts.values()) == {"gaming"}


def test_two_folders_named_on_the_command_line_are_two_hosts(tmp_path: Path) -> None:
    _copy(GTX_1660_TI, tmp_path / "node-a", "smi.xml")
    _copy(XID13_DMESG, tmp_path / "node-a", "dmesg.log")
    _copy(QUADRO_P400, tmp_path / "node-b", "smi.xml")
    report = _judged(tmp_path / "node-a", tmp_path / "node-b")
    gpus = _gpus(report)
    assert _xids(report) == [("node-a", gpus["node-a", 0], 6)]
    assert [s.info.name for s in report.samples] == ["Graphics Device", "Quadro P400"]
