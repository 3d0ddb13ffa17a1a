"""Real `nvidia-smi` captures -> the values a fake NVML device reports.

Written for the fake only, independently of the product's smi parser (the fake must not share
code with what it tests). Sources (../shared/fixtures/nvidia-smi/SOURCES.md):

* nvidia_gpu_exporter captures: ``*.query-gpu.csv`` (most fields, T.Limit margin, recovery
  action, remap histogram, fabric), ``*.q.txt`` (CUDA version, architecture, PCIe
  replay/throughput, temperature thresholds in degrees or relative to T.Limit, SRAM flag),
  ``*.query-compute-apps.csv`` (processes), ``topo/*.nvlink-s.txt`` (link speeds).
* netdata ``-q -x`` XMLs (A100 MIG, P100, RTX 3060 Laptop, RTX 2080 Windows).

Every value keeps nvidia-smi's display unit here (MiB, W, MHz, us, KB/s); the fake converts to
NVML's units (bytes, mW, ns) in one place (device.py). ``None`` = nvidia-smi printed N/A,
[N/A], [Not Supported] or "Requested functionality has been deprecated".
"""

from __future__ import annotations

from pathlib import Path

from .capture_csv import load_exporter_capture
from .capture_model import CapturedGpu, CapturedMig, CapturedProcess
from .capture_xml import load_xml_capture

__all__ = [
    "A100_MIG_XML",
    "H100",
    "H100_MIG",
    "P100_XML",
    "RTX_2080",
    "RTX_2080_WIN_XML",
    "RTX_3060_XML",
    "RTX_4080",
    "CapturedGpu",
    "CapturedMig",
    "CapturedProcess",
    "load_capture",
    "load_exporter_capture",
    "load_xml_capture",
]

# ---- the named captures tests use -----------------------------------------------------------

H100 = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
H100_MIG = "linux-x86_64__nvidia-h100-mig__590.48.01"
RTX_4080 = "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05"
RTX_2080 = "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05"
A100_MIG_XML = "netdata__a100-sxm4-mig.xml"
P100_XML = "netdata__tesla-p100.xml"
RTX_3060_XML = "netdata__rtx-3060.xml"
RTX_2080_WIN_XML = "netdata__rtx-2080-win.xml"


def load_capture(fixtures: Path, name: str, state: str = "load") -> CapturedGpu:
    smi = fixtures / "nvidia-smi"
    if name.endswith(".xml"):
        return load_xml_capture(smi / name)
    return load_exporter_capture(smi, name, state)
