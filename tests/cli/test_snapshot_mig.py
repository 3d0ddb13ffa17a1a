"""`gpuwarden snapshot`'s table in MIG mode: one row per MIG device under its parent GPU, read
from real captures (nvidia-smi table/-q/-q -x, dcgm-exporter scrapes, the fake NVML built from
the H100 MIG capture), checked against the capture's own text."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from gpuwarden.report.snapshot import print_snapshot_table
from gpuwarden.telemetry.nvml import NvmlBackend
from tests.fakes.fake_pynvml import fake_host
from tests.fakes.fake_pynvml.captures import H100_MIG

MIB = 1 << 20
GIB = 1 << 30
H100_MIG_STEM = "linux-x86_64__nvidia-h100-mig__590.48.01.load"
# nvidia-smi's MIG table row: GPU GI CI MIG-dev | used MiB / total MiB | SMs ...
_SMI_MIG_ROW = re.compile(
    r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s+(\d+)MiB\s*/\s*(\d+)MiB\s+\|\s+(\d+)\s"
)


def _tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Every rich table in ``text`` by title: its rows as {heading: cell}."""
    tables: dict[str, list[dict[str, str]]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("┏"):
            continue
        title = lines[i - 1].strip()
        heads = [c.strip() for c in lines[i + 1].strip("┃").split("┃")]
        rows = []
        for row in lines[i + 3 :]:
            if not row.startswith("│"):
                break
            rows.append(
                dict(zip(heads, (c.strip() for c in row.strip("│").split("│")), strict=True))
            )
        tables[title] = rows
    return tables


def _table(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, list[dict[str, str]]]:
    assert main(["snapshot", *args]) == 0
    return _tables(capsys.readouterr().out)


def _gib(used_mib: int, total_mib: int) -> str:
    return f"{used_mib * MIB / GIB:.1f}/{total_mib * MIB / GIB:.1f}"


def _smi_table_rows(path: Path) -> list[tuple[int, ...]]:
    return [
        tuple(int(g) for g in m.groups())
        for m in map(_SMI_MIG_ROW.match, path.read_text().splitlines())
        if m
    ]


@pytest.mark.parametrize("kind", ["table.txt", "q.txt"])
def test_h100_mig_rows_from_nvidia_smi(
    capsys: pytest.CaptureFixture[str], fixtures: Path, kind: str
) -> None:
    smi = fixtures / "nvidia-smi"
    expected = _smi_table_rows(smi / f"{H100_MIG_STEM}.table.txt")
    assert len(expected) == 4  # GI 2, 3, 9, 10
    tables = _table(capsys, "--backend", "smi", "--from", str(smi / f"{H100_MIG_STEM}.{kind}"))
    (gpu,) = tables["snapshot"]
    assert gpu["GPU"] == "0" and gpu["name"] == "H100 80GB HBM3"
    rows = tables["MIG devices"]
    got = [(r["GPU"], r["GI"], r["CI"], r["mem GiB"], r["SMs"]) for r in rows]
    assert got == [
        (str(g), str(gi), str(ci), _gib(used, total), str(sms))
        for g, gi, ci, _dev, used, total, sms in expected
    ]
    # the three processes of the capture all run in GI 2 / CI 0 (3g.40gb)
    assert [r["procs"] for r in rows] == ["3", "0", "0", "0"]
    # neither prints a profile: the catalog's H100 profiles are told apart by memory and copy
    # engines, which -q prints per device and the table in its "Shared CE ... OFA" columns
    # (NVML names the same, test_smi_mig_nvlink): SMs alone would leave the 3g/4g (60 SMs) and
    # 1g/1g+me pairs open
    assert [r["profile"] for r in rows] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]


def test_a100_mig_rows_from_the_xml(capsys: pytest.CaptureFixture[str], fixtures: Path) -> None:
    xml = fixtures / "nvidia-smi" / "netdata__a100-sxm4-mig.xml"
    gpu = ET.parse(xml).getroot().find("gpu")
    assert gpu is not None
    expected = []
    for mig in gpu.iterfind("mig_devices/mig_device"):
        fb = mig.find("fb_memory_usage")
        assert fb is not None
        expected.append(
            (
                mig.findtext("gpu_instance_id"),
                mig.findtext("compute_instance_id"),
                _gib(
                    int((fb.findtext("used") or "").split()[0]),
                    int((fb.findtext("total") or "").split()[0]),
                ),
                mig.findtext("device_attributes/shared/multiprocessor_count"),
            )
        )
    rows = _table(capsys, "--backend", "smi", "--from", str(xml))["MIG devices"]
    assert [(r["GI"], r["CI"], r["mem GiB"], r["SMs"]) for r in rows] == expected
    assert len(rows) == 2


def test_dcgm_instances_are_mig_rows_not_extra_gpus(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    scrape = (
        fixtures / "dcgm" / "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"
    )
    tables = _table(capsys, "--backend", "dcgm", "--from", str(scrape))
    assert len(tables["snapshot"]) == 1  # the parent GPU only
    (row,) = tables["MIG devices"]
    # GPU_I_ID="13", GPU_I_PROFILE="1g.5gb": GR engine 0.995687, tensor 0.930433, DRAM 0.800339
    assert (row["GPU"], row["GI"], row["profile"]) == ("0", "13", "1g.5gb")
    assert (row["GR act"], row["tensor"], row["DRAM"]) == ("1.00", "0.93", "0.80")
    assert "SM act" not in row  # no instance reports it: no column

    excerpt = fixtures / "dcgm" / "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom"
    tables = _table(capsys, "--backend", "dcgm", "--from", str(excerpt))
    assert len(tables["snapshot"]) == 1
    assert [(r["GI"], r["profile"]) for r in tables["MIG devices"]] == [
        ("7", "1g.10gb"),
        ("8", "1g.10gb"),
        ("9", "1g.10gb"),
    ]


def test_nvml_mig_rows_carry_profiles_and_gpm_pillars(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    host = fake_host(fixtures, H100_MIG)
    backend = NvmlBackend(host.module, clock=host.clock)
    backend.read()
    host.gpus[0].set_mig_gpm(2, 2, 88.0)  # SM_UTIL of GI 2 (where gpu_burn runs)
    host.gpus[0].set_mig_gpm(2, 5, 61.0)  # ANY_TENSOR_UTIL
    host.clock.advance(2.0)
    snapshot = backend.read()
    backend.close()
    print_snapshot_table(snapshot)
    rows = _tables(capsys.readouterr().out)["MIG devices"]
    assert [(r["GI"], r["profile"]) for r in rows] == [
        ("2", "3g.40gb"),
        ("3", "2g.20gb"),
        ("9", "1g.10gb"),
        ("10", "1g.10gb"),
    ]
    assert (rows[0]["SM act"], rows[0]["tensor"]) == ("0.88", "0.61")
    assert all(r["SM act"] == "–" for r in rows[1:])
    assert rows[0]["mem GiB"] == _gib(11091, 40448)  # the capture's GI 2 memory


def test_no_mig_table_without_mig(capsys: pytest.CaptureFixture[str], fixtures: Path) -> None:
    xml = fixtures / "nvidia-smi" / "netdata__tesla-p100.xml"
    tables = _table(capsys, "--backend", "smi", "--from", str(xml))
    assert list(tables) == ["snapshot"]
