"""Held-out set 7: nvidia-smi output of the kinds set 6 could not find — vGPU guests, Jetson and
GB10 screens ("Not Supported" memory), an R575 `-q -x`, a row-remap-pending fault, dmon with the
R535+ columns, `--query-gpu` with clock event reasons, `-L` with MIG devices, Japanese documents
(tests/data/smi_heldout7/: SOURCES.md says where each one comes from, expected.json holds the
values read off each sample by hand). Every sample reads without a traceback to the values
printed in it, or is refused clearly when it names no GPU reading, and `doctor` gives exactly
the findings above info the sample shows: none for a healthy GPU.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.smi.paste import strip_terminal
from gpuwarden.telemetry.smi.xml_format import parse_xml
from tests.telemetry.smi.heldout import (
    load_set,
    sample_param,
    sample_text,
    samples_read_as,
    smi_set_checks,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout7")

# Samples a parser still cannot read, and why (see the report).
READ_XFAIL: dict[str, str] = {}
# Samples doctor cannot take yet, and why.
DOCTOR_XFAIL: dict[str, str] = {}


def _text(sample: dict[str, Any]) -> str:
    return sample_text(DATA, sample)


SMI_SAMPLES = samples_read_as(SAMPLES, "smi")
REJECTED = samples_read_as(SAMPLES, "rejected")

(
    test_the_set_is_the_one_described,
    test_what_holds_no_reading_is_refused_clearly,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = smi_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL)


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES])
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    snapshots = parse_smi_output(_text(sample), sample["file"], 0.0)
    # dmon prints one reading per interval; every other format is one reading
    assert len(snapshots) == sample.get("readings", 1)
    for snap in snapshots:
        assert [table_values(d) for d in snap.samples] == sample["gpus"]
        assert {d.info.driver_version for d in snap.samples} == {sample["driver"]}
    devices = snapshots[-1].samples
    if "fans_pct" in sample:
        assert [d.fan_speed_percent for d in devices] == sample["fans_pct"]
    if "fan_pct" in sample:
        assert [d.fan_speed_percent for d in devices] == [sample["fan_pct"]]
    if "clock_event_reasons" in sample:
        reasons = [list(d.clock_event_reasons or ()) for d in devices]
        assert reasons == sample["clock_event_reasons"]


def test_a_gpu_list_is_named_for_what_it_is() -> None:
    # `-L` names GPUs and MIG devices but holds no reading: the refusal says so
    sample = next(s for s in REJECTED if s["file"].startswith("list__"))
    with pytest.raises(CorruptInputError, match=r"nvidia-smi -L"):
        parse_smi_output(_text(sample), sample["file"], 0.0)


def test_a_vgpu_guest_is_read_with_its_profile_name_and_no_sensor_readings() -> None:
    (snap,) = parse_smi_output(
        _text(next(s for s in SAMPLES if "rtxa6000-24q" in s["file"])), "vgpu.txt", 0.0
    )
    (device,) = snap.samples
    assert device.info.uuid == "GPU-bf0881b6-032a-11f0-825b-5c07a73a413d"
    assert device.ecc_errors_corrected_volatile == 0
    assert device.clock_event_reasons is None  # "Clocks Event Reasons : N/A" on a vGPU
    assert [p.pid for p in device.processes or ()] == [1117, 1717]


@pytest.mark.parametrize(
    ("line", "command"),
    [
        # a fish/starship prompt: path and git branch between the host and the sigil
        ("me@nixos ~/dotfiles [main] $ nvidia-smi -q -x", "nvidia-smi -q -x"),
        ("me@box /srv/x $ nvidia-smi -L", "nvidia-smi -L"),
        # the command as Markdown inline code, alone or as a heading
        ("`nvidia-smi --query-gpu=name --format=csv`", "nvidia-smi --query-gpu=name --format=csv"),
        ("## `nvidia-smi dmon -c 1 -s pucm`", "nvidia-smi dmon -c 1 -s pucm"),
        # a root prompt is still a prompt
        ("# nvidia-smi -L", "nvidia-smi -L"),
    ],
)
def test_the_command_line_is_found_under_its_prompt_or_markdown(line: str, command: str) -> None:
    paste = strip_terminal(line + "\nGPU 0: X (UUID: GPU-1)\n")
    assert (paste.command, paste.text.splitlines()) == (command, ["", "GPU 0: X (UUID: GPU-1)"])


def test_a_markdown_heading_without_the_command_is_not_taken_for_one() -> None:
    text = "## `nvidia-smi` output\n+---+\n"
    assert strip_terminal(text).command is None


def test_a_document_broken_elsewhere_still_names_its_line() -> None:
    """Cutting the unread <supported_clocks> block rescues only that block's damage."""
    text = _text(next(s for s in SAMPLES if s["file"].startswith("xml__")))
    broken = text.replace("<fb_memory_usage>", "<fb_memory_usage", 1)
    with pytest.raises(CorruptInputError) as caught:
        parse_xml(broken, "broken.xml", 0.0)
    assert "not well-formed" in caught.value.message and "broken.xml, line " in caught.value.message
