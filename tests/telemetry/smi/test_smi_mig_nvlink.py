"""MIG-device and NVLink facts from nvidia-smi output: what each format carries, equal across the
formats of one capture and equal to what NVML (the fake built from the same capture) reports.

What the captures carry (checked below on the files themselves): `-q -x` (all four XMLs are
nvsmi_device_v11.dtd) and `-q` list each MIG device's GI/CI ids, SM count and memory, but no
profile name and no NVLink section (NVLink is `nvidia-smi nvlink`, its own command; the H100
MIG capture's `nvlink -s` says queries are not supported in MIG mode). The default table's
"MIG devices" block has the same ids, SMs and memory. NVLink stays None; the profile comes from
the GPU catalog (memory, copy engines, SMs), and must be the one NVML names.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from gpuwarden.telemetry.nvml import NvmlBackend
from gpuwarden.telemetry.smi import open_smi
from tests.fakes.fake_pynvml import fake_host
from tests.fakes.fake_pynvml.captures import A100_MIG_XML, H100_MIG

SMI = "nvidia-smi"
H100_MIG_STEM = "linux-x86_64__nvidia-h100-mig__590.48.01"
# MigDeviceSample fields every nvidia-smi format carries
SHARED = ("gpu_instance_id", "compute_instance_id", "sm_count", "memory_total_bytes")


def _migs(path: Path) -> list[tuple[object, ...]]:
    sample = open_smi(str(path)).read().samples[0]
    assert sample.mig_devices is not None
    return [tuple(getattr(m, f) for f in SHARED) for m in sample.mig_devices]


def test_xml_captures_carry_neither_nvlink_nor_mig_profile_elements(fixtures: Path) -> None:
    xmls = sorted((fixtures / SMI).glob("*.xml"))
    assert len(xmls) == 4
    for path in xmls:
        text = path.read_text()
        assert 'SYSTEM "nvsmi_device_v11.dtd"' in text
        # no element of either kind in the file: nothing to read
        assert not re.search(r"<[a-z_]*(nvlink|profile)[a-z_]*>", text), path.name
        for sample in open_smi(str(path)).read().samples:
            assert sample.nvlinks is None, path.name


@pytest.mark.parametrize("state", ["idle", "load"])
def test_mig_devices_equal_in_table_and_q_text(fixtures: Path, state: str) -> None:
    stem = fixtures / SMI / f"{H100_MIG_STEM}.{state}"
    table = _migs(stem.with_name(stem.name + ".table.txt"))
    q_text = _migs(stem.with_name(stem.name + ".q.txt"))
    assert table == q_text
    assert [row[0] for row in q_text] == [2, 3, 9, 10]
    assert [row[2] for row in q_text] == [60, 32, 16, 16]  # SMs: 3g, 2g, 1g, 1g on H100


@pytest.mark.parametrize(
    ("capture", "smi_file", "profiles"),
    [
        (
            H100_MIG,
            f"{H100_MIG_STEM}.load.q.txt",
            ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"],
        ),
        (A100_MIG_XML, "netdata__a100-sxm4-mig.xml", ["3g.20gb", "3g.20gb"]),
    ],
)
def test_mig_devices_equal_to_nvml(
    fixtures: Path, capture: str, smi_file: str, profiles: list[str]
) -> None:
    host = fake_host(fixtures, capture)
    backend = NvmlBackend(host.module, clock=host.clock)
    nvml = backend.read().samples[0]
    backend.close()
    smi = open_smi(str(fixtures / SMI / smi_file)).read().samples[0]
    assert nvml.mig_devices is not None and smi.mig_devices is not None
    # every field the smi format fills, NVML fills alike (NVML adds the UUID); the profile the
    # catalog infers from memory, copy engines and SMs is the one NVML names
    for ours, theirs in zip(smi.mig_devices, nvml.mig_devices, strict=True):
        filled = {f.name for f in dataclasses.fields(ours) if getattr(ours, f.name) is not None}
        assert filled == {*SHARED, "memory_used_bytes", "profile"}
        assert {f: getattr(ours, f) for f in filled} == {f: getattr(theirs, f) for f in filled}
    assert [m.profile for m in smi.mig_devices] == profiles
    assert smi.nvlinks is None and nvml.nvlinks is None  # MIG mode: no NVLink queries
