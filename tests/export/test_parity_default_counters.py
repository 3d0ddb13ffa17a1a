"""Parity with what a default dcgm-exporter serves: its counter CSV's names, types and help texts,
and, on real captures, the same units and labels as a real dcgm-exporter page of the same GPU.

The CSV rows are NVIDIA/dcgm-exporter ``etc/default-counters.csv`` @ 7ad58324 (4.x; its
``dcp-metrics-included.csv`` enables the same rows). 3.x (``dcp-metrics-included.csv`` @ 99a774bb)
differs in three places: no FB_RESERVED row, violation help texts "(in us)", and
NVLINK_BANDWIDTH_TOTAL typed counter with a help text ending without the period."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.export.helpers import Scrape, read_scrape
from tests.fakes.fake_pynvml import FakeGridFeature, fake_host

from gpuwarden.cli.main import main
from gpuwarden.export.fields import (
    DCGM_FIELDS,
    PASSTHROUGH_FIELDS,
    VGPU_LICENSE_STATUS,
    XID_LAST,
    Kind,
    passed_through,
)
from gpuwarden.export.prometheus import Exposition
from gpuwarden.export.service import CollectionLoop
from gpuwarden.export.state import ExporterState, ExportSettings
from gpuwarden.telemetry.dcgm.exposition import parse_exposition
from gpuwarden.telemetry.nvml import NvmlBackend

# (name, type, help) of the rows the CSV enables (the DCGM_FI_DRIVER_VERSION label row aside)
DEFAULT_COUNTERS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
     "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "gauge",
     "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
     "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
     "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
     "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
     "Ratio of cycles the device memory interface is active sending or receiving data."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
     "The rate of data transmitted over the PCIe bus - including both protocol headers and data "
     "payloads - in bytes per second."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
     "The rate of data received over the PCIe bus - including both protocol headers and data "
     "payloads - in bytes per second."),
)  # fmt: skip
# the rows the same file lists commented out, which gpuwarden publishes by default or passes on
COMMENTED_COUNTERS = (
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter",
     "Throttling duration due to power constraints (in ns)."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter",
     "Throttling duration due to thermal constraints (in ns)."),
    ("DCGM_FI_DEV_SYNC_BOOST_VIOLATION", "counter",
     "Throttling duration due to sync-boost constraints (in ns)."),
    ("DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "counter",
     "Throttling duration due to board limit constraints (in ns)."),
    ("DCGM_FI_DEV_LOW_UTIL_VIOLATION", "counter",
     "Throttling duration due to low utilization (in ns)."),
    ("DCGM_FI_DEV_RELIABILITY_VIOLATION", "counter",
     "Throttling duration due to reliability constraints (in ns)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter",
     "Total number of single-bit persistent ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter",
     "Total number of double-bit persistent ECC errors."),
    ("DCGM_FI_DEV_RETIRED_SBE", "counter",
     "Total number of retired pages due to single-bit errors."),
    ("DCGM_FI_DEV_RETIRED_DBE", "counter",
     "Total number of retired pages due to double-bit errors."),
    ("DCGM_FI_DEV_RETIRED_PENDING", "counter", "Total number of pages pending retirement."),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter",
     "Total number of NVLink flow-control CRC errors."),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter",
     "Total number of NVLink data CRC errors."),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink retries."),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter",
     "Total number of NVLink recovery errors."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM."),
    ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "Ratio of cycles the fp64 pipes are active."),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "Ratio of cycles the fp32 pipes are active."),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "Ratio of cycles the fp16 pipes are active."),
)  # fmt: skip
DEFAULT_NAMES = frozenset(name for name, _, _ in DEFAULT_COUNTERS)
# dcgm-exporter 3.x and every real scrape we hold type it counter; the dcgm backend does not keep
# a scrape's TYPE line, so the older type is the one that matches what the scrapes declared
NVLINK_BANDWIDTH = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
# the same GPU model through nvidia-smi (a q capture) and a real 4.x dcgm-exporter page
L4_Q = "smi_heldout8/q-a__smi-simulator-script__l4-idle-gen1-x8-of-16x__550.90.07.txt"
L4_PAGE = "dcgm_public/08__k8s-ai-conformance-kops__l4-580.105.08-fb-reserved-remap.prom"
VGPU_PAGE = "dcgm_public2/02__vks-ai-conformance__grid-a100-8c-vgpu-580.65.06.prom"


def _published() -> dict[str, tuple[str, str]]:
    """Every name gpuwarden's table or passthrough catalog publishes → (type, help)."""
    rows = {f.name: (f.kind.value, f.help) for f in (*DCGM_FIELDS, XID_LAST, VGPU_LICENSE_STATUS)}
    for name in PASSTHROUGH_FIELDS:
        row = passed_through(name)
        rows[name] = (row.kind.value, row.help)
    return rows


def _helps(text: str) -> dict[str, str]:
    prefix = "# HELP "
    return {
        line[len(prefix) :].split(" ", 1)[0]: line[len(prefix) :].split(" ", 1)[1]
        for line in text.splitlines()
        if line.startswith(prefix)
    }


def _export(capsys: pytest.CaptureFixture[str], *args: str) -> Scrape:
    assert main(["export", *args, "--once"]) == 0
    return read_scrape(capsys.readouterr().out)


def test_every_default_counter_has_a_mapping():
    assert DEFAULT_NAMES - set(_published()) == set()


@pytest.mark.parametrize(("name", "kind", "help_text"), DEFAULT_COUNTERS + COMMENTED_COUNTERS)
def test_type_and_help_text_are_the_csvs(name, kind, help_text):
    ours_kind, ours_help = _published()[name]
    assert ours_help == help_text
    assert ours_kind == ("counter" if name == NVLINK_BANDWIDTH else kind)


def test_a_field_no_csv_lists_is_passed_through_untyped():
    row = passed_through("DCGM_FI_DEV_NVLINK_COUNT_TX_DISCARDS")
    assert row.kind is Kind.UNTYPED
    assert "passed through" in row.help


def test_a_real_vgpu_page_passes_its_fields_through_as_dcgm_exporter_serves_them(capsys):
    path = DATA / VGPU_PAGE
    scrape = _export(capsys, "--backend", "dcgm", "--from", str(path))
    source = parse_exposition(path.read_text(), "source")
    helps = _helps(scrape.text)
    assert helps["DCGM_FI_DEV_VGPU_LICENSE_STATUS"] == "vGPU License status"
    assert helps[NVLINK_BANDWIDTH] == "Total number of NVLink bandwidth counters for all lanes."
    assert scrape.types["DCGM_FI_DEV_VGPU_LICENSE_STATUS"] == "gauge"
    for name in ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", NVLINK_BANDWIDTH):
        theirs = [s.value for s in source.samples if s.name == name]
        assert [v for _, v in scrape.series(name)] == theirs
        assert scrape.types[name] == source.types[name]


def test_the_same_gpu_model_reads_in_dcgm_exporters_units(capsys):
    ours = _export(capsys, "--backend", "smi", "--from", str(DATA / L4_Q), "--hostname", "node")
    theirs = read_scrape((DATA / L4_PAGE).read_text())

    def gpu0(scrape: Scrape, name: str) -> float:
        return scrape.one(name, gpu="0")

    # framebuffer in MiB on both: free + used + reserved is the L4's 23034 MiB, a few MiB apart
    fb = ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED")
    our_fb = sum(gpu0(ours, name) for name in fb)
    assert our_fb == pytest.approx(gpu0(ours, "DCGM_FI_DEV_FB_TOTAL"), abs=2)
    assert our_fb == pytest.approx(sum(gpu0(theirs, name) for name in fb), abs=4)
    # idle clocks in MHz, idle power in W
    for name in ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK"):
        assert gpu0(ours, name) == gpu0(theirs, name)
    assert gpu0(ours, "DCGM_FI_DEV_POWER_USAGE") == pytest.approx(
        gpu0(theirs, "DCGM_FI_DEV_POWER_USAGE"), rel=0.05
    )
    shared = ours.names() & theirs.names()
    assert {name: ours.types[name] for name in shared} == {
        name: theirs.types[name] for name in shared
    }
    # dcgm-exporter's label names, plus the lower-case hostname its latest release uses
    for name in shared:
        (our_labels, _), *_ = ours.series(name)
        (their_labels, _), *_ = theirs.series(name)
        assert set(our_labels) == set(their_labels) | {"hostname"}, name


# What nvidia-smi -q does not print, and so the smi backend cannot serve: the last Xid (no
# watcher), the energy counter (NVML only), NVLink throughput (not read), the vGPU licence state
# (a bare-metal GPU has none) and the profiling pillars (DCGM's profiling module or NVML GPM).
SMI_CANNOT = frozenset({
    "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", NVLINK_BANDWIDTH,
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
})  # fmt: skip
# What the NVML backend does not read (telemetry/nvml): NVLink throughput (NVML field values
# NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX, scopeId UINT_MAX for all links)
NVML_DOES_NOT_READ = frozenset({NVLINK_BANDWIDTH})
VGPU_LICENSE = VGPU_LICENSE_STATUS.name
_VGPU_GUEST, _COMPUTE_FEATURE = 2, 4  # nvmlGpuVirtualizationMode_t, nvmlGridLicenseFeatureCode_t


def test_what_the_smi_backend_serves_of_the_default_set(capsys, fixtures):
    path = fixtures / "nvidia-smi" / f"{H100}.load.q.txt"
    scrape = _export(capsys, "--backend", "smi", "--from", str(path))
    assert DEFAULT_NAMES & scrape.names() == DEFAULT_NAMES - SMI_CANNOT


def test_what_the_nvml_backend_serves_of_the_default_set(fixtures):
    host = fake_host(fixtures, H100)
    gpu, clock = host.gpus[0], host.clock
    # a licensed vGPU guest (bare metal has no licence state, so no series; DCGM says 0 there)
    gpu.virtualization_mode = _VGPU_GUEST
    gpu.grid_features = (
        FakeGridFeature(_COMPUTE_FEATURE, "NVIDIA Virtual Compute Server", licensed=True),
    )
    state = ExporterState(
        ExportSettings(backend="nvml", simulated=False, hostname="gpu-node-1"), clock=clock
    )
    exposition = Exposition(
        state, version="test", clock=clock, wall_clock=clock, process_metrics=False
    )
    loop = CollectionLoop(NvmlBackend(host.module, clock=clock), state, interval_s=1.0, clock=clock)
    loop.poll()
    # NVML_GPM_METRIC_GRAPHICS_UTIL, ANY_TENSOR_UTIL, DRAM_BW_UTIL (nvml.h): a rate needs 2 samples
    for metric in (1, 5, 10):
        gpu.set_gpm(metric, 50.0)
    clock.advance(1.0)
    loop.poll()
    scrape = read_scrape(exposition.text())
    assert DEFAULT_NAMES & scrape.names() == DEFAULT_NAMES - NVML_DOES_NOT_READ
    assert scrape.one(VGPU_LICENSE, gpu="0") == 1


@pytest.mark.parametrize(
    ("capture", "published"),
    [
        ("smi_heldout7/q__cuda-error-4-vgpu-readme__rtxa6000-24q-vgpu-unlicensed__535.183.06.txt",
         [0.0]),
        ("vgpu_license/q__tkgi-gpu-operator-vgpu-guide__grid-v100d-8c-licensed__535.216.01.txt",
         [1.0]),
        ("vgpu_license/xml-trimmed__vgpu-browser-vm-metrics-test__l40s-2q-licensed__580.105.08.xml",
         [1.0]),
        # the hypervisor host: nvidia-smi prints no guest licence, so nothing is claimed
        ("vgpu_license/q-trimmed__cubecos-vgpu-host__rtx-pro-6000-server-host__580.105.06.txt", []),
    ],
)  # fmt: skip
def test_a_vgpu_guests_licence_is_dcgms_field_526(capsys, capture, published):
    scrape = _export(capsys, "--backend", "smi", "--from", str(DATA / capture))
    assert [value for _, value in scrape.series(VGPU_LICENSE)] == published
    if published:
        assert scrape.types[VGPU_LICENSE] == "gauge"
        assert _helps(scrape.text)[VGPU_LICENSE] == "vGPU License status"
