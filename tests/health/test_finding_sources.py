"""What a finding says it rests on, and when the fabric rule judges at all (review h28c).

- A GPU on no NVLink fabric ("not-supported") gets no fabric finding, whatever health a reader
  carries; a mask read without a summary or a registration (DCGM field 174 alone) is judged.
- Evidence names no reader it did not come from: the fabric health read from nvidia-smi says
  nothing of NVML; an Xid 63's architecture found by GPU name cites the catalog.
- nvidia-smi's lost GPU is the one ``gpu-lost`` of diagnosis.md, with its NVIDIA action.

Real inputs: the H100 -q capture of the fixtures (fabric "Completed / Success", health N/A) with
its printed health rows changed as the driver prints them, and the Xid 63 header of
stas00/ml-engineering (tests/health/test_xid_findings.py).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from gpuwarden.health.evaluate import evaluate_snapshot
from gpuwarden.health.kernel_log import scan_kernel_log
from gpuwarden.health.rules.codes import CODES
from gpuwarden.health.versions import version_findings
from gpuwarden.health.xid import xid_findings
from gpuwarden.telemetry.smi.q_text import parse_q_text
from gpuwarden.types.environment import ContainerContext, NodeEnvironment, SmiStatus
from gpuwarden.types.health import Finding, Severity
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample, Snapshot

H100_IDLE_Q = "nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.idle.q.txt"


def _unhealthy_h100(fixtures: Path) -> DeviceSample:
    """The real H100 -q text with "Fabric / Health / Summary" printing Unhealthy."""
    text = (fixtures / H100_IDLE_Q).read_text()
    text, count = re.subn(r"^(\s+Summary\s+: )N/A$", r"\1Unhealthy", text, flags=re.MULTILINE)
    assert count == 1
    return parse_q_text(text, "h100.q.txt", 0.0).samples[0]


def _fabric_findings(sample: DeviceSample) -> list[Finding]:
    snap = Snapshot(sample.timestamp_s, "host-a", "smi", False, (sample,), source="/x/q.txt")
    result = evaluate_snapshot(snap)
    return [f for f in result.findings if any(e.field.startswith("fabric") for e in f.evidence)]


def test_a_gpu_on_no_fabric_gets_no_fabric_finding_whatever_its_health(fixtures: Path) -> None:
    sample = _unhealthy_h100(fixtures)
    assert sample.fabric_health_summary == "unhealthy"
    on_no_fabric = dataclasses.replace(sample, fabric_state="not-supported", fabric_status=None)
    assert _fabric_findings(on_no_fabric) == []
    # a blank state is no state: the health alone is judged (not "an unknown state ''")
    blank = dataclasses.replace(sample, fabric_state="", fabric_status=None)
    (finding,) = _fabric_findings(blank)
    assert (finding.code, finding.severity) == ("nvlink-down", Severity.CRITICAL)


def test_a_mask_read_alone_is_judged(fixtures: Path) -> None:
    # dcgm-exporter with field 174 (the mask) but neither 175 nor the Fabric Manager status
    sample = dataclasses.replace(
        _unhealthy_h100(fixtures),
        fabric_state=None,
        fabric_status=None,
        fabric_health_summary=None,
        fabric_health_issues=("route-unhealthy",),
    )
    (finding,) = _fabric_findings(sample)
    assert (finding.code, finding.severity) == ("nvlink-down", Severity.CRITICAL)
    states = [e for e in finding.evidence if e.field == "fabric_state"]
    assert [e.detail for e in states] == ["not read"]


def test_fabric_health_from_nvidia_smi_does_not_say_nvml(fixtures: Path) -> None:
    (finding,) = _fabric_findings(_unhealthy_h100(fixtures))
    assert finding.code == "nvlink-down"
    assert {e.source for e in finding.evidence} == {"smi:/x/q.txt"}
    assert not [e.detail for e in finding.evidence if "NVML" in e.detail]


def test_an_architecture_found_by_gpu_name_cites_the_catalog() -> None:
    text = "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896"  # no words: the GPU decides
    by_name = DeviceInfo(0, "GPU-v", "Tesla V100-SXM2-32GB", pci_bus_id="00000000:10:1C.0")
    (repair,) = (
        f
        for f in xid_findings(scan_kernel_log(text), source="k", devices=[by_name])
        if f.code != "xid"
    )
    assert repair.code == "retired-pages-pending"  # Volta retires pages
    (arch,) = (e for e in repair.evidence if e.field == "architecture")
    assert (arch.value, arch.source) == ("Volta", "catalog:Tesla V100-SXM2-32GB")
    named = dataclasses.replace(by_name, architecture="Volta")
    (repair,) = (
        f
        for f in xid_findings(scan_kernel_log(text), source="k", devices=[named])
        if f.code != "xid"
    )
    (arch,) = (e for e in repair.evidence if e.field == "architecture")
    assert arch.source == "device-info"


def test_nvidia_smi_lost_gpu_is_the_one_gpu_lost_code() -> None:
    handle = "Unable to determine the device handle for GPU 0000:BA:00.0: Unknown Error"
    env = NodeEnvironment(
        platform="linux",
        machine="x86_64",
        smi=SmiStatus(present=True, returncode=255, failure="gpu-lost", message=handle),
        container=ContainerContext(in_container=False),
    )
    (finding,) = version_findings(env, ())
    code = CODES["gpu-lost"]
    assert (finding.code, finding.action) == ("gpu-lost", "RESTART_BM")
    assert (finding.cause, finding.remedy) == (code.cause, code.remedy)


def test_an_xid_joined_with_another_on_one_line_reads_only_its_own_words() -> None:
    # NVSentinel's node condition strings kernel records together with ';' (kernel_log_heldout5):
    # the Xid 63's message ends where the Xid 64's record starts
    row = "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping"
    page = "NVRM: Xid (PCI:0000:10:1c): 64, pid=1896, Dynamic Page Retirement: failed"
    report = scan_kernel_log(f"kernel: [16450076.435595] {row}; kernel: [16450076.5] {page}\n")
    decoded = {g.xid: dict(g.decoded) for g in report.groups}
    assert decoded == {
        63: {"memory_repair": "row remapping"},
        64: {"memory_repair": "page retirement"},
    }
