"""A GPU's `nvidia-smi -q` report copied from inside it, without the NVSMI LOG banner and the
"GPU <bus id>" line (smi_heldout13's ollama-10393 sample): its indented rows read as one GPU
whose bus id and index are said to be unprinted, ONLY when they carry two or more of -q's own
section names. No other indented "Key : value" text is read as -q.
"""

from __future__ import annotations

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import detect_format, parse_smi_output
from gpuwarden.telemetry.smi.detect import SmiFormat
from gpuwarden.units import MIB
from tests.telemetry.smi.heldout import load_set

DATA, _ = load_set("smi_heldout13")
EXCERPT = (DATA / "q__ollama-10393__mid-gpu-pci-to-fb-memory.fragment.txt").read_text()


def test_the_excerpt_reads_as_one_gpu_whose_bus_id_and_index_are_not_printed() -> None:
    (snap,) = parse_smi_output(EXCERPT, "q.txt", 0.0)
    (gpu,) = snap.samples
    assert (gpu.info.pci_bus_id, gpu.pstate, gpu.clock_event_reasons) == (None, "P8", ("gpu_idle",))
    assert (gpu.memory_used_bytes, gpu.info.memory_total_bytes) == (8415 * MIB, 16376 * MIB)
    assert gpu.memory_free_bytes is None  # "7636 M": the excerpt ends inside the value
    said = [e.message for e in snap.events if e.uuid == gpu.info.uuid]
    assert any("bus id and index" in message for message in said)


def test_a_cut_value_is_not_reported_only_where_the_input_ends_inside_it() -> None:
    # the same line followed by a newline is a value as printed, and "7636 M" is none
    with pytest.raises(CorruptInputError, match="7636 M"):
        parse_smi_output(EXCERPT + "\n", "q.txt", 0.0)


def test_a_prompt_above_the_excerpt_is_no_row() -> None:
    (snap,) = parse_smi_output("$ nvidia-smi -q | tail -28\n" + EXCERPT, "q.txt", 0.0)
    assert [d.pstate for d in snap.samples] == ["P8"]


_ONE_SECTION = """\
    FB Memory Usage
        Total                             : 16376 MiB
        Used                              : 8415 MiB
"""
_YAML = """\
gpu:
  FB Memory Usage:
    Total: 16376 MiB
  Performance State: P8
  Temperature:
    GPU Current Temp: 40 C
"""
_TRACEBACK = """\
Traceback (most recent call last):
  File "probe.py", line 3, in <module>
    PCI = read("PCI")
    Temperature = read("Temperature")
KeyError: 'FB Memory Usage'
"""
_TITLES_WITHOUT_ROWS = """\
Sections:
    PCI
    Temperature
    FB Memory Usage
"""
_DCGMI = """\
+---------------------------+------------------------------------------------+
| GPU ID: 0                 |                                                |
+===========================+================================================+
| PCI                       | 00000000:3B:00.0                               |
| Temperature               | 40 C                                           |
| Performance State         | P8                                             |
+---------------------------+------------------------------------------------+
"""


@pytest.mark.parametrize(
    "text",
    [_ONE_SECTION, _YAML, _TRACEBACK, _TITLES_WITHOUT_ROWS, _DCGMI],
    ids=["one-section", "yaml", "traceback", "titles-without-rows", "dcgmi-table"],
)
def test_other_text_with_the_same_words_is_not_q(text: str) -> None:
    assert detect_format(text) is not SmiFormat.Q_TEXT
    with pytest.raises(CorruptInputError):
        parse_smi_output(text, "other.txt", 0.0)
