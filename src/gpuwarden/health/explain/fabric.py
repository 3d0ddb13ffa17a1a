"""Texts from a machine without an NVSwitch fabric, where Fabric Manager has nothing to manage.

Fabric Manager configures the NVSwitches of NVSwitch-based systems (the Fabric Manager user
guide: DGX/HGX A100, H100, B200 baseboards and NVL racks): without it CUDA refuses to start
there. On any other machine — PCIe cards, two cards joined by an NVLink bridge, GeForce and RTX
boards — there is no fabric: nv-fabricmanager finds no NVSwitch, says so
(``NV_WARN_NOTHING_TO_DO``) and exits, and its service showing "failed" harms nothing. The same
warning comes from a Blackwell (NVLink 5) baseboard whose NVLink Subnet Manager did not start
(the guide: FM then fails with NV_WARN_NOTHING_TO_DO), so it leaves "Fabric Manager is down"
open rather than ruling it out: below certainty, saying what decides.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.rank import Ceiling
from gpuwarden.health.explain.text import Paste

# nv-fabricmanager's warning when the NVSwitch driver reports no device, and the GPU products
# that never sit on an NVSwitch baseboard (consumer and workstation boards, PCIe cards).
_NO_NVSWITCH = re.compile(
    r"NV_WARN_NOTHING_TO_DO|NVSwitch driver failed with error:\s*WARNING Nothing to do|"
    r"\bGeForce\b|\bTITAN\b|\bQuadro\b|\bRTX\s*A?\d{3,4}\b|\b[AHL]\d{2,3}[- ]PCIe\b",
    re.IGNORECASE,
)
_WORDS = ("nothing", "geforce", "titan", "quadro", "rtx", "pcie")
# A paste that shows an NVSwitch system after all: its baseboards, SXM modules, the switches
# (not FM's own "NVSwitch device information from NVSwitch driver", nor its config path).
_NVSWITCH_SYSTEM = re.compile(
    r"(?<![/\w])NVSwitch(?:es)?\b(?!/|\s+(?:driver|device information))|"
    r"\bSXM\d?\b|\bHGX\b|\bDGX\b|\bNVL(?:36|72)\b|HBM3e?\b",
    re.IGNORECASE,
)

NO_NVSWITCH_CEILING = Ceiling(
    score=0.45,  # one candidate: on a machine without NVSwitches Fabric Manager is not needed
    why="the paste shows no NVSwitch fabric (Fabric Manager found no NVSwitch, or the GPUs are "
    "PCIe/consumer boards): Fabric Manager is needed on NVSwitch systems only",
    decides="`nvidia-smi -q | grep -A2 -i fabric` ('Not Supported' = no NVSwitch fabric: "
    "Fabric Manager is not needed, stop its service) and `nvidia-smi topo -m` (NV# links "
    "through NVSwitches); on an NVLink 5 (Blackwell) baseboard NV_WARN_NOTHING_TO_DO means the "
    "NVLink Subnet Manager (nvlsm) did not start: start FM through nvidia-fabricmanager-start.sh",
    causes=frozenset({"fabric-manager-down"}),
)


def no_nvswitch_ceiling(paste: Paste) -> Ceiling | None:
    """The ceiling on the Fabric Manager reading of a text from a machine that shows no NVSwitch
    fabric; None otherwise."""
    if not paste.shows(_WORDS, _NO_NVSWITCH):
        return None
    if _NVSWITCH_SYSTEM.search(paste.flat) is not None:
        return None
    return NO_NVSWITCH_CEILING
