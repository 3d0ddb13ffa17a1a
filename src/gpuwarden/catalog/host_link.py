"""The PCIe link between a GPU and its host: generation by product and compute capability, and the
x16 line rate of each generation. Pure.

Line rates: PCI-SIG PCI Express Base Specification 3.0 / 4.0 / 5.0 — 8, 16, 32 GT/s per lane with
128b/130b encoding, so an x16 link carries 15.75, 31.5 and 63 GB/s per direction.

Generations (vendor datasheets): Kepler to Turing boards (Tesla K80, P100, P40, V100, T4, GeForce
10/16/20, Quadro P/RTX) are "PCIe Gen3"; Ampere (A100, A10, A30, A40, GeForce 30) and Ada
(L4, L40(S), RTX 6000 Ada, GeForce 40) "PCIe Gen4"; Hopper (H100, H200) and the B200 and GeForce
50 / RTX PRO Blackwell boards "PCIe Gen5"; AMD Instinct MI210 / MI250 PCIe 4.0, MI300X / MI325X
PCIe 5.0. Superchips reach their CPU over NVLink-C2C (GH200, GB200, GB300, GB10) and Jetson /
DRIVE modules share the SoC's memory: no PCIe host link. A laptop GPU's lane count is the
laptop maker's choice (x4 to x16): no x16 line rate is its ceiling.
"""

from __future__ import annotations

import re

from gpuwarden.catalog.gpu_names import SUPERCHIP_NAME

PCIE_X16_GB_S = {3: 15.75, 4: 31.5, 5: 63.0}

# Names that decide before any compute capability: no PCIe host link, or an AMD board.
_BY_NAME: tuple[tuple[re.Pattern[str], int | None], ...] = (
    (SUPERCHIP_NAME, None),
    (re.compile(r"GB10\b|Jetson|Orin|Xavier|Tegra|Thor", re.IGNORECASE), None),
    (re.compile(r"Laptop|Max-Q|Mobile", re.IGNORECASE), None),
    (re.compile(r"\bMI(?:210|250X?)\b"), 4),
    (re.compile(r"\bMI(?:300X?|325X)\b"), 5),
    # ROCm writes a gfx target as major / minor (gfx942 = 9.4): no NVIDIA compute capability
    (re.compile(r"\bAMD\b|Radeon|Instinct"), None),
    # data-center boards by name, for traces whose deviceProperties carry no compute capability
    (re.compile(r"\b(?:K80|P100|P40|P4|V100|T4)\b"), 3),
    (re.compile(r"\b(?:A100|A10G?|A30|A40|L4|L40S?)\b"), 4),
    (re.compile(r"\b(?:H100|H200|H800)\b"), 5),
)
# Compute capabilities of integrated GPUs (Tegra K1, X1, X2, Xavier, Orin, Thor; GB10): no link.
_INTEGRATED = frozenset({(3, 2), (5, 3), (6, 2), (7, 2), (8, 7), (10, 1), (11, 0), (12, 1)})
# The first compute capability of each PCIe generation, newest first (B300, 10.3, is left out:
# its boards' host link is not read here).
_GENERATION_FROM = (((12, 0), 5), ((10, 0), 5), ((9, 0), 5), ((8, 0), 4), ((3, 0), 3))
_UNREAD = frozenset({(10, 3)})


def pcie_generation(name: str | None, compute_capability: tuple[int, int] | None) -> int | None:
    """The PCIe generation of a discrete GPU's host link, from its product name (as nvidia-smi
    and Kineto's deviceProperties print it) and compute capability; None where it has none or
    it is not known."""
    for pattern, generation in _BY_NAME:
        if name and pattern.search(name):
            return generation
    if compute_capability is None or compute_capability in _INTEGRATED | _UNREAD:
        return None
    return next((gen for first, gen in _GENERATION_FROM if compute_capability >= first), None)
