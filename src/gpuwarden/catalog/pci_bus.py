"""PCI bus ids as the kernel and the NVIDIA driver print them, in one form. Pure."""

from __future__ import annotations

import re

_BUS = re.compile(
    r"(?<![0-9A-Za-z])(?:(?P<domain>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):"
    r"(?P<device>[0-9a-fA-F]{2})(?:\.(?P<function>[0-7]))?(?![0-9A-Za-z])"
)
# Drivers before ~2010 (1.0-9xxx to 19x) print "NVRM: Xid (0001:00): 8": the bus in 4 hex digits
# and the device, no domain, no function (the same logs say "nvidia 0000:01:00.0: ..." for that
# GPU). Read only where the modern form is not found.
_LEGACY_BUS = re.compile(r"\s*(?:PCI:)?(?P<bus>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{2})\s*")


def bus_id(domain: str, bus: str, device: str, function: str) -> str:
    """A bus id printed in parts (hex; a 4- or 8-digit domain) in our form, "0000:3b:00.0"."""
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{int(function)}"


def whole_bus_id(domain_bus: str) -> str:
    """A whole "domain:bus:device.function" ("0000:3B:00.0", "00000000:3b:00.0", as the kernel's
    device prefix prints it and a caller's pattern matched it) in our form."""
    domain, bus, device_function = domain_bus.split(":")
    device, function = device_function.split(".")
    return bus_id(domain, bus, device, function)


def nvml_bus_id(text: str) -> str | None:
    """A bus id in the spelling NVML reports it (``nvmlPciInfo_t.busId``, nvml.h's
    ``NVML_DEVICE_PCI_BUS_ID_FMT`` "%08X:%02X:%02X.0"), as nvidia-smi's screens and dcgm-exporter's
    ``pci_bus_id`` label print it: "0000:3b:00.0" → "00000000:3B:00.0". None where it is not one."""
    ours = normalize_pci_bus_id(text)
    if ours is None:
        return None
    domain, bus, device_function = ours.split(":")
    return f"{int(domain, 16):08X}:{bus.upper()}:{device_function.upper()}"


def normalize_pci_bus_id(text: str | None) -> str | None:
    """ "0000:3b:00", "00000000:3B:00.0", "PCI:0000:3b:00", "3b:00.0" and old drivers' "003b:00"
    → "0000:3b:00.0"; None for a redacted or unreadable id ("PCI:...", "PCI:0000:xx:00")."""
    if not text:
        return None
    match = _BUS.search(text)
    if match is None:
        return _legacy_bus_id(text)
    return bus_id(match["domain"] or "0", match["bus"], match["device"], match["function"] or "0")


def _legacy_bus_id(text: str) -> str | None:
    """ "0001:00" (a pre-2010 driver's bus:device) → "0000:01:00.0"; None for anything else."""
    match = _LEGACY_BUS.fullmatch(text)
    if match is None or int(match["bus"], 16) > 0xFF:  # a PCI bus number is 8 bits
        return None
    return bus_id("0", match["bus"], match["device"], "0")
