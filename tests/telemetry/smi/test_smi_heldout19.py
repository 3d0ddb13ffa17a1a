"""Held-out set 19: every `nvidia-smi -q` report (and `-q -x`) that GitHub issue threads of
2019-2026 paste, in the order the issues corpus gave them, as its stored excerpts hold them
(tests/data/smi_heldout19/: SOURCES.md lists the searches, what was kept and what was skipped
and why; expected.json holds the values read off each sample by hand). Healthy GPUs get nothing
above info.

Also here: a -q report copied from below its banner (from its "Attached GPUs" row or from a
GPU's "GPU <bus id>" line) reads as the report it is; an excerpt holding only a GPU's identity
sections and PCI reads, its bus id taken from the PCI section; `nvidia-smi vgpu -q`, which
prints the same bus-id line over its guests, is still no GPU report.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.smi.detect import detect_format
from gpuwarden.types.telemetry import DeviceSample
from tests.telemetry.smi.heldout import (
    DATA_ROOT,
    doctor_codes_above_info,
    identity_values,
    load_set,
    mixed_set_checks,
    sample_param,
    sample_text,
    samples_read_as,
)

DATA, SAMPLES = load_set("smi_heldout19")

# Samples a parser still cannot read or doctor cannot judge as an engineer does, and why.
READ_XFAIL: dict[str, str] = {}
DOCTOR_XFAIL: dict[str, str] = {}
Q_XFAIL = {
    "q-fragment__nvidia-docker-1090__pcie-throttle-reasons-fb-memory-no-gpu-heading.fragment.txt": (
        "the excerpt starts inside PCI / GPU Link Info: the 'Link Width' rows (16x of 16x) lost "
        "the titles above them, and a link row is read only under its whole path"
    ),
}

(
    test_the_set_is_the_one_described,
    test_reads_the_printed_values,
    test_what_holds_no_gpu_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = mixed_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=12)

SCREENS = samples_read_as(SAMPLES, "smi")


def _q_values(device: DeviceSample) -> dict[str, Any]:
    """The -q rows expected.json records per GPU, as read."""
    return {
        **identity_values(device),
        "clock_event_reasons": (
            None if device.clock_event_reasons is None else list(device.clock_event_reasons)
        ),
        "pcie": [
            device.pcie_link_gen_current,
            device.pcie_link_gen_max,
            device.pcie_link_width_current,
            device.pcie_link_width_max,
        ],
        "mig_devices": (
            None
            if device.mig_devices is None
            else [
                [m.gpu_instance_id, m.compute_instance_id, m.sm_count] for m in device.mig_devices
            ]
        ),
    }


def _reading(text: str, source: str) -> list[DeviceSample]:
    (snapshot,) = parse_smi_output(text, source, 0.0)
    return list(snapshot.samples)


@pytest.mark.parametrize("sample", [sample_param(s, Q_XFAIL) for s in SCREENS])
def test_reads_the_q_rows(sample: dict[str, Any]) -> None:
    samples = _reading(sample_text(DATA, sample), sample["file"])
    assert [_q_values(d) for d in samples] == sample["q"]


# --- a -q report copied from below its banner

_BY_FILE = {s["file"]: s for s in SAMPLES}
_FROM_ATTACHED_GPUS = _BY_FILE[
    "q__nvidia-docker-1285__v100-pcie-passthrough-from-attached-gpus-cut-in-virtualization.partial.txt"
]
_FROM_GPU_LINE = _BY_FILE[
    "q__nvidia-docker-914__v100-sxm2-minor-2-from-gpu-heading-cut-in-pci.partial.txt"
]


@pytest.mark.parametrize(
    "sample", [_FROM_ATTACHED_GPUS, _FROM_GPU_LINE], ids=["from-attached-gpus", "from-gpu-line"]
)
def test_a_report_copied_from_below_its_banner_is_read(sample: dict[str, Any]) -> None:
    """Fails before h98: without the banner or a Timestamp row the text was "not a supported
    nvidia-smi format", and doctor skipped it."""
    (device,) = _reading(sample_text(DATA, sample), sample["file"])
    assert (device.info.name, device.info.uuid) == (
        sample["gpus"][0]["name"],
        sample["q"][0]["uuid"],
    )
    assert doctor_codes_above_info(DATA / sample["file"]) == []


# Whole reports of earlier sets: 2 RTX 2070 (full -q, R450) and 8 sections of 4 RTX 3090 Ti
# (`-q -d POWER,CLOCK`, R580, no Product Name).
_WHOLE_REPORTS = [
    DATA_ROOT
    / "smi_heldout8"
    / "q__zh-linux-notes__2x-rtx-2070-x4-sw-power-cap-idle-mem-full__450.102.04.txt",
    DATA_ROOT
    / "smi_heldout12"
    / "q-d-power-clock__minerva-default-clocks-notes__4x-rtx-3090-ti__580.65.06.txt",
]


def _without_report_rows(device: DeviceSample) -> DeviceSample:
    """A GPU's reading less what the rows above the GPUs print (driver, CUDA, time)."""
    info = dataclasses.replace(device.info, driver_version=None, cuda_driver_version=None)
    return dataclasses.replace(device, info=info, timestamp_s=0.0)


def _copied_from(text: str, opening: str) -> str:
    return text[text.index(opening) :]


@pytest.mark.parametrize("opening", ["\nAttached GPUs", "\nGPU 0"], ids=["attached", "gpu-line"])
@pytest.mark.parametrize("path", _WHOLE_REPORTS, ids=[p.name for p in _WHOLE_REPORTS])
def test_a_whole_report_copied_from_below_its_banner_reads_as_the_report(
    path: Path, opening: str
) -> None:
    """Fails before h98 (refused). Every GPU reads as in the whole report, less the rows the
    copy left out."""
    text = path.read_text()
    whole = [_without_report_rows(d) for d in _reading(text, path.name)]
    copied = [_without_report_rows(d) for d in _reading(_copied_from(text, opening), path.name)]
    assert copied == whole


def test_an_excerpt_of_identity_sections_and_pci_reads_its_bus_id_from_pci() -> None:
    """Fails before h98: rows under 'Inforom Version', 'GPU Operation Mode', 'GPU Virtualization
    Mode', 'GPU Reset Status', 'IBMNPU' and 'PCI' carried one section name -q's reader knew
    (PCI), so the excerpt was "not recognised"; its PCI section prints the bus id the left-out
    'GPU <bus id>' line did."""
    sample = _BY_FILE[
        "q-fragment__nvidia-docker-1753__reset-status-pcie-gen1-of-2-no-gpu-heading.fragment.txt"
    ]
    (device,) = _reading(sample_text(DATA, sample), sample["file"])
    assert device.info.pci_bus_id == "00000000:01:00.0"
    assert (device.pcie_link_gen_current, device.pcie_link_gen_max) == (1, 2)
    assert doctor_codes_above_info(DATA / sample["file"]) == []


def test_a_vgpu_host_listing_under_a_bus_id_line_is_no_gpu_report() -> None:
    """`nvidia-smi vgpu -q` prints "GPU <bus id>" over its guests' "vGPU ID" blocks: no GPU's
    Product Name and none of -q's GPU sections, so it is not taken for a -q report."""
    path = (
        DATA_ROOT
        / "vgpu_license"
        / "vgpu-q__cubecos-vgpu-host__rtx-pro-6000-two-dc-3q-guests__580.105.06.txt"
    )
    assert detect_format(path.read_text()) is None
