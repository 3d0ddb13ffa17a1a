"""Held-out set 25: nvidia-smi outputs of any kind, GPU and driver that the pages corpus, then the
issues corpus, quote, in the order they came (tests/data/smi_heldout25/: SOURCES.md lists the 15
searches, what was kept and skipped and why; expected.json holds the values read off each sample
by hand before gpuwarden ran). The pages corpus gave none (man pages and spec texts); the issues
corpus gave -q and -q -x excerpts, R3xx `-q -d TEMPERATURE` reports, a default screen, and
nvidia-smi's "couldn't communicate with the NVIDIA driver" line six times.

Measured before any change: 13 of 16 read (or were refused) as the engineer reads them, doctor
as expected on 15. The two R3xx reports' "Temperature / Gpu" row was not read (fixed: R3xx
drivers name the GPU temperature "Gpu", as they name "Utilization / Gpu"); the -q -x excerpt
without its document and GPU elements stays refused (a strict xfail below, with its reason).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.telemetry.smi import parse_smi_output
from tests.telemetry.smi.heldout import (
    load_set,
    printed_uuid,
    sample_param,
    sample_text,
    samples_read_as,
    smi_set_checks,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout25")

_XML_EXCERPT = (
    "xml-fragment__netdata-2922__6064-mib-geforce-pci-to-fb-memory-no-gpu-element.fragment.xml"
)
_XML_EXCERPT_REASON = (
    "an excerpt of a -q -x document from inside <pci> to <fb_memory_usage>, without the "
    "<nvidia_smi_log> root or the <gpu> element it sits in: the XML reader reads a document (one "
    "cut short is read up to its cut, xml_document), and sibling elements that no GPU element "
    "holds are not one; nvidia-smi never prints such a text, so reading it needs a rule for a "
    "fragment, not for its output"
)
# Samples a parser still cannot read, and why.
READ_XFAIL: dict[str, str] = {_XML_EXCERPT: _XML_EXCERPT_REASON}
# Samples doctor cannot judge as an engineer does yet, and why: the same one, refused as input.
DOCTOR_XFAIL: dict[str, str] = {_XML_EXCERPT: _XML_EXCERPT_REASON}

(
    test_the_set_is_the_one_described,
    test_what_holds_no_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = smi_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL, min_samples=16)

SMI = samples_read_as(SAMPLES, "smi")


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SMI])
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    """Both R3xx `-q -d TEMPERATURE` reports failed before h215: no GPU temperature."""
    (reading,) = parse_smi_output(sample_text(DATA, sample), sample["file"], 0.0)
    gpus = list(reading.samples)
    assert [table_values(d) for d in gpus] == sample["gpus"]
    assert {d.info.driver_version for d in gpus} == {sample["driver"]}
    assert [d.power_limit_watts for d in gpus] == sample["power_limit_w"]
    identity = [{"uuid": printed_uuid(d), "pci_bus_id": d.info.pci_bus_id} for d in gpus]
    assert identity == [sample["identity"]]


def test_the_r3xx_gpu_row_is_read_only_under_temperature() -> None:
    """The old spelling is taken where the new one is missing, under "Temperature" alone: a
    report printing both keeps "GPU Current Temp"."""
    report = (
        "==============NVSMI LOG==============\n\n"
        "Driver Version                      : 325.15\n\n"
        "Attached GPUs                       : 1\n"
        "GPU 0000:03:00.0\n"
        "    Utilization\n"
        "        Gpu                         : 7 %\n"
        "    Temperature\n"
        "        GPU Current Temp            : 41 C\n"
        "        Gpu                         : 39 C\n"
    )
    ((gpu,),) = (r.samples for r in parse_smi_output(report, "report.txt", 0.0))
    assert (gpu.temperature_gpu_celsius, gpu.gpu_utilization_percent) == (41.0, 7.0)
