"""NVML's spelling of a PCI bus id (nvml.h NVML_DEVICE_PCI_BUS_ID_FMT "%08X:%02X:%02X.0")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.catalog.pci_bus import normalize_pci_bus_id, nvml_bus_id


@pytest.mark.parametrize(
    ("printed", "nvml"),
    [
        ("0000:34:00.0", "00000000:34:00.0"),  # nvidia-smi's "Unable to determine ..." line
        ("0000:3b:00.0", "00000000:3B:00.0"),  # the kernel's "nvidia 0000:3b:00.0:"
        ("00000000:AC:00.0", "00000000:AC:00.0"),  # the screen's own spelling is kept
        ("0001:c1:00.0", "00000001:C1:00.0"),  # a second PCI segment
        ("PCI:...", None),  # a redacted id
    ],
)
def test_a_bus_id_in_nvml_spelling(printed: str, nvml: str | None) -> None:
    assert nvml_bus_id(printed) == nvml


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFF), st.integers(0, 0x1F), st.integers(0, 7))
def test_nvml_spelling_names_the_same_function(
    domain: int, bus: int, device: int, function: int
) -> None:
    legacy = f"{domain:04x}:{bus:02x}:{device:02x}.{function}"
    spelled = nvml_bus_id(legacy)
    assert spelled == f"{domain:08X}:{bus:02X}:{device:02X}.{function}"
    assert normalize_pci_bus_id(spelled) == normalize_pci_bus_id(legacy)
