"""`gpuwarden export --once` over real captures: dcgm-exporter's names, units, labels and values as
the capture states them, nothing for what it does not state, no false alarm, and promtool's lint
of the exposition down to the lints dcgm-exporter's own names cause."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.export.helpers import Scrape, read_scrape

from gpuwarden.cli.main import main

H100 = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
H100_MIG = "linux-x86_64__nvidia-h100-mig__590.48.01"
CAPTURES = (
    "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05",
    "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05",
    H100,
    H100_MIG,
    "windows-x86_64__nvidia-geforce-rtx-2080-super__610.62",
)
XMLS = ("netdata__a100-sxm4-mig.xml", "netdata__rtx-3060.xml", "netdata__tesla-p100.xml")
# What promtool says of dcgm-exporter's own naming (fleet.md §1.2): camelCase labels (modelName,
# Hostname), counters without _total, a counter called ..._COUNTER. Nothing else is accepted.
DCGM_LINTS = (
    re.compile(r"^(DCGM_FI_\w+|gpuwarden_\w+) label names should be written in 'snake_case' "
               r"not 'camelCase'$"),
    re.compile(r'^DCGM_FI_\w+ counter metrics should have "_total" suffix$'),
    re.compile(r"^DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'$"),
)  # fmt: skip


def export_once(capsys: pytest.CaptureFixture[str], *args: str) -> Scrape:
    assert main(["export", *args, "--once"]) == 0
    return read_scrape(capsys.readouterr().out)


def q_value(text: str, section: str, field: str) -> float:
    """A number from an ``nvidia-smi -q`` capture, read here independently of the parsers."""
    block = text.split(section, 1)[1]
    match = re.search(rf"^\s*{re.escape(field)}\s*:\s*([-\d.]+)", block, re.MULTILINE)
    assert match, (section, field)
    return float(match.group(1))


def test_h100_under_load_as_the_q_capture_states_it(capsys, fixtures):
    path = fixtures / "nvidia-smi" / f"{H100}.load.q.txt"
    text = path.read_text()
    scrape = export_once(capsys, "--backend", "smi", "--from", str(path))
    gpu = {"gpu": "0", "UUID": "GPU-00000000-0000-0000-0000-000000000000"}
    assert scrape.one("DCGM_FI_DEV_FB_USED", **gpu) == q_value(text, "FB Memory Usage", "Used")
    assert scrape.one("DCGM_FI_DEV_FB_FREE", **gpu) == q_value(text, "FB Memory Usage", "Free")
    assert scrape.one("DCGM_FI_DEV_FB_RESERVED", **gpu) == q_value(
        text, "FB Memory Usage", "Reserved"
    )
    assert scrape.one("DCGM_FI_DEV_FB_TOTAL", **gpu) == q_value(text, "FB Memory Usage", "Total")
    power = q_value(text, "GPU Power Readings", "Average Power Draw")
    assert scrape.one("DCGM_FI_DEV_POWER_USAGE", **gpu) == pytest.approx(power)  # W
    assert scrape.one("DCGM_FI_DEV_GPU_TEMP", **gpu) == q_value(
        text, "Temperature", "GPU Current Temp"
    )
    assert scrape.one("DCGM_FI_DEV_MEMORY_TEMP", **gpu) == q_value(
        text, "Temperature", "Memory Current Temp"
    )
    assert scrape.one("DCGM_FI_DEV_GPU_TEMP_LIMIT", **gpu) == q_value(
        text, "Temperature", "GPU T.Limit Temp"
    )
    assert scrape.one("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", **gpu) == q_value(
        text, "    PCI\n", "Replays Since Reset"
    )
    assert scrape.one("DCGM_FI_DEV_SM_CLOCK", **gpu) == q_value(text, "    Clocks\n", "SM")
    assert scrape.one("DCGM_FI_DEV_GPU_UTIL", **gpu) == q_value(text, "Utilization", "GPU")
    # labels as dcgm-exporter writes them; a capture file names no host: no Hostname label
    labels = scrape.series("DCGM_FI_DEV_GPU_TEMP")[0][0]
    assert labels == {
        "gpu": "0",
        "UUID": "GPU-00000000-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:00:09.0",
        "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "DCGM_FI_DRIVER_VERSION": "590.48.01",
    }
    assert scrape.types["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"] == "counter"
    assert scrape.types["DCGM_FI_DEV_POWER_USAGE"] == "gauge"
    assert scrape.one("gpuwarden_gpu_lost", **gpu) == 0
    assert {lab["reason"] for lab, _ in scrape.series("gpuwarden_clock_event_active")} == {
        "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
        "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
        "display_clock_setting",
    }  # fmt: skip
    assert scrape.one("gpuwarden_exporter_info", backend="smi", simulated="false") == 1


def test_fields_a_capture_does_not_state_are_absent_never_zero(capsys, fixtures):
    # An nvidia-smi capture has no DCGM profiling pillars and no Xid history; the GeForce card
    # has no ECC, no memory temperature and no row remapper.
    path = (
        fixtures
        / "nvidia-smi"
        / "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.load.q.txt"
    )
    scrape = export_once(capsys, "--backend", "smi", "--from", str(path))
    names = scrape.names()
    for absent in (
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    ):
        assert absent not in names
    assert "DCGM_FI_DEV_GPU_TEMP" in names and "DCGM_FI_DEV_FAN_SPEED" in names


def test_mig_instances_are_series_of_their_own_with_dcgm_labels(capsys, fixtures):
    path = fixtures / "nvidia-smi" / "netdata__a100-sxm4-mig.xml"
    text = path.read_text()
    scrape = export_once(capsys, "--backend", "smi", "--from", str(path))
    used = {
        lab["GPU_I_ID"]: v for lab, v in scrape.series("DCGM_FI_DEV_FB_USED") if "GPU_I_ID" in lab
    }
    instances = re.findall(
        r"<gpu_instance_id>(\d+)</gpu_instance_id>.*?<fb_memory_usage>.*?<used>(\d+) MiB</used>",
        text,
        re.DOTALL,
    )
    assert used == {gi: float(mib) for gi, mib in instances}
    profiles = {
        lab["GPU_I_PROFILE"] for lab, _ in scrape.series("DCGM_FI_DEV_FB_USED") if "GPU_I_ID" in lab
    }
    assert profiles == {"3g.20gb"}
    # MIG mode: the parent's utilization is N/A in the capture, so absent (never a 0)
    assert "DCGM_FI_DEV_GPU_UTIL" not in scrape.names()


@pytest.mark.parametrize("state", ["idle", "load"])
@pytest.mark.parametrize("capture", CAPTURES)
def test_no_false_alarm_on_healthy_captures(capsys, fixtures, capture, state):
    for kind in ("q.txt", "query-gpu.csv", "dmon.txt"):
        path = fixtures / "nvidia-smi" / f"{capture}.{state}.{kind}"
        scrape = export_once(capsys, "--backend", "smi", "--from", str(path))
        findings = scrape.series("gpuwarden_finding")
        assert all(labels["severity"] == "info" for labels, _ in findings), (path.name, findings)
        assert scrape.one("gpuwarden_collection_errors_total", backend="smi") == 0


@pytest.mark.parametrize("name", XMLS)
def test_no_false_alarm_on_healthy_xml_captures(capsys, fixtures, name):
    scrape = export_once(capsys, "--backend", "smi", "--from", str(fixtures / "nvidia-smi" / name))
    assert all(lab["severity"] == "info" for lab, _ in scrape.series("gpuwarden_finding"))


def _lints(text: str) -> list[str]:
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian's prometheus package) is installed by scripts/install"
    result = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    lines = (result.stdout + result.stderr).splitlines()
    return [line for line in lines if line.strip()]


@pytest.mark.parametrize(
    ("kind", "source"),
    [("smi", f"nvidia-smi/{H100}.load.q.txt"), ("smi", f"nvidia-smi/{H100_MIG}.load.q.txt"),
     ("smi", "nvidia-smi/netdata__a100-sxm4-mig.xml"),
     ("dcgm", "dcgm/datadog-integrations-core__tesla-t4__metrics.prom"),
     ("dcgm", "dcgm/issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom"),
     ("sim", None)],
)  # fmt: skip
def test_promtool_finds_only_dcgm_exporters_own_naming(capsys, fixtures, kind, source):
    args = ["--backend", kind] + (["--from", str(fixtures / source)] if source else ["--gpus", "2"])
    scrape = export_once(capsys, *args)
    unexpected = [
        line for line in _lints(scrape.text) if not any(p.match(line) for p in DCGM_LINTS)
    ]
    assert unexpected == []


def test_a_lint_outside_dcgms_naming_would_be_caught(tmp_path: Path):
    # the filter above is not a blanket pass: a gpuwarden counter without _total is reported
    bad = "# HELP gpuwarden_bad a counter\n# TYPE gpuwarden_bad counter\ngpuwarden_bad 1\n"
    unexpected = [line for line in _lints(bad) if not any(p.match(line) for p in DCGM_LINTS)]
    assert unexpected == ['gpuwarden_bad counter metrics should have "_total" suffix']
