"""The NVML backend's GPM readings through the exporter, on a fake NVML built from the real H100
captures (tests/fakes/fake_pynvml): the profiling pillars on Hopper without a DCGM daemon, and
MIG utilisation per GPU instance — never the zero dcgm-exporter users get (its issues #50 #105
#216) and never a value an instance did not report."""

from __future__ import annotations

import csv

import pytest
from tests.export.helpers import read_scrape
from tests.fakes.fake_pynvml import fake_host

from gpuwarden.export.prometheus import Exposition
from gpuwarden.export.service import CollectionLoop
from gpuwarden.export.state import ExporterState, ExportSettings
from gpuwarden.telemetry.nvml import NvmlBackend

H100 = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
H100_MIG = "linux-x86_64__nvidia-h100-mig__590.48.01"
# NVML_GPM_METRIC_* ids (nvml.h; telemetry.md §2.4)
GRAPHICS, SM_UTIL, SM_OCCUPANCY, ANY_TENSOR, DRAM_BW, FP32 = 1, 2, 3, 5, 10, 12


def exporter(fixtures, name: str):
    host = fake_host(fixtures, name)
    clock = host.clock
    backend = NvmlBackend(host.module, clock=clock)
    state = ExporterState(
        ExportSettings(backend="nvml", simulated=False, hostname="gpu-node-1"), clock=clock
    )
    exposition = Exposition(
        state, version="test", clock=clock, wall_clock=clock, process_metrics=False
    )
    loop = CollectionLoop(backend, state, interval_s=1.0, clock=clock)
    return loop, exposition, host.gpus[0], clock


def test_hopper_pillars_come_from_gpm_without_dcgm(fixtures):
    loop, exposition, gpu, clock = exporter(fixtures, H100)
    loop.poll()
    first = read_scrape(exposition.text())
    assert "DCGM_FI_PROF_SM_ACTIVE" not in first.names()  # one GPM sample is no rate yet
    for metric, percent in {GRAPHICS: 99.0, SM_UTIL: 62.5, ANY_TENSOR: 40.0, DRAM_BW: 20.0}.items():
        gpu.set_gpm(metric, percent)
    clock.advance(1.0)
    loop.poll()
    scrape = read_scrape(exposition.text())
    assert scrape.one("DCGM_FI_PROF_GR_ENGINE_ACTIVE", gpu="0") == pytest.approx(0.99)
    assert scrape.one("DCGM_FI_PROF_SM_ACTIVE", gpu="0") == pytest.approx(0.625)
    assert scrape.one("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gpu="0") == pytest.approx(0.40)
    assert scrape.one("DCGM_FI_PROF_DRAM_ACTIVE", gpu="0") == pytest.approx(0.20)
    # the capture's PCIe TX 3092 KB/s, through GPM (MiB/s) as DCGM reads it on Hopper
    assert scrape.one("DCGM_FI_PROF_PCIE_TX_BYTES", gpu="0") == pytest.approx(3092 * 1000)
    assert scrape.one("DCGM_FI_DEV_XID_ERRORS", gpu="0") == 0  # NVML watches Xid events
    # the first reading is the capture's own (the fake NVML reads the query-gpu CSV)
    csv_text = (fixtures / "nvidia-smi" / f"{H100}.load.query-gpu.csv").read_text()
    header, row = (
        next(csv.reader([line], skipinitialspace=True))
        for line in csv_text.splitlines()
        if line and not line.startswith("#")
    )
    watts = float(dict(zip(header, row, strict=True))["power.draw [W]"].split()[0])
    assert first.one("DCGM_FI_DEV_POWER_USAGE", Hostname="gpu-node-1") == pytest.approx(watts)


def test_mig_utilisation_is_each_instances_own(fixtures):
    # the H100 capture in MIG mode: GI 2 (3g.40gb) runs the load, GI 3/9/10 idle
    loop, exposition, gpu, clock = exporter(fixtures, H100_MIG)
    loop.poll()
    for metric, percent in {GRAPHICS: 97.0, SM_UTIL: 88.0, SM_OCCUPANCY: 45.0, FP32: 12.0}.items():
        gpu.set_mig_gpm(2, metric, percent)
    gpu.set_mig_gpm(9, SM_UTIL, 5.0)
    clock.advance(2.0)
    loop.poll()
    scrape = read_scrape(exposition.text())
    sm = {lab["GPU_I_ID"]: v for lab, v in scrape.series("DCGM_FI_PROF_SM_ACTIVE")}
    assert sm == {"2": pytest.approx(0.88), "9": pytest.approx(0.05)}  # 3 and 10: not reported
    busy = {"GPU_I_ID": "2", "GPU_I_PROFILE": "3g.40gb"}
    assert scrape.one("DCGM_FI_PROF_GR_ENGINE_ACTIVE", **busy) == pytest.approx(0.97)
    assert scrape.one("DCGM_FI_PROF_SM_OCCUPANCY", **busy) == pytest.approx(0.45)
    assert scrape.one("DCGM_FI_PROF_PIPE_FP32_ACTIVE", **busy) == pytest.approx(0.12)
    # every instance keeps its framebuffer; the whole GPU's utilization is N/A under MIG
    instances = {
        lab["GPU_I_ID"] for lab, _ in scrape.series("DCGM_FI_DEV_FB_USED") if "GPU_I_ID" in lab
    }
    assert instances == {"2", "3", "9", "10"}
    labels = scrape.series("DCGM_FI_PROF_SM_ACTIVE")[0][0]
    assert labels["UUID"] == scrape.series("DCGM_FI_DEV_GPU_TEMP")[0][0]["UUID"]  # the parent's
    assert labels["device"] == "nvidia0"
