"""Texts that name only GPUs without MIG, where "MIG mode without instances" cannot be the cause.

CUDA error 46 ("all CUDA-capable devices are busy or unavailable") has two usual readings: a GPU
in MIG mode with no instance the process may use, or an exclusive-compute-mode GPU another
process holds. MIG exists only on the products of NVIDIA's MIG user guide ("Supported GPUs":
A30 / A100 / H100 / H200 / B200 / GB200 / RTX PRO Blackwell …), a fact the catalog records per
GPU (``GpuSpec.has_mig``). When every GPU the paste names is one the catalog knows to have none
(a GeForce, an L4, a T4, a V100), the MIG reading is ranked last — not dropped: the host may
hold a GPU the paste does not name, which ``nvidia-smi -L`` shows.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Iterable
from functools import cache

from gpuwarden.catalog.gpu_names import compact
from gpuwarden.catalog.gpus import gpu_catalog
from gpuwarden.health.explain.rank import Ceiling
from gpuwarden.health.explain.text import Paste
from gpuwarden.types.hardware import GpuSpec

MIG_CAUSE = "mig-no-instances"
_NAMES_READ = 50  # a log repeating one GPU name thousands of times names it once

NO_MIG_CEILING = Ceiling(
    score=0.2,  # below every other reading of CUDA error 46: the named GPUs cannot run MIG
    why="every GPU the paste names has no MIG (MIG exists only on the data-center and RTX PRO "
    "Blackwell GPUs of NVIDIA's MIG user guide)",
    decides="`nvidia-smi -L` (a GPU the paste does not name, MIG devices listed as 'MIG "
    "…') and `nvidia-smi -q | grep -i 'compute mode'` (Exclusive_Process: another process "
    "holds the GPU)",
    causes=frozenset({MIG_CAUSE}),
)


def _family_has_mig(rows: Iterable[GpuSpec]) -> bool | None:
    """A product has MIG when one of its variants does; it has none when every variant has
    none; None otherwise."""
    readings = {gpu.has_mig for gpu in rows}
    if True in readings:
        return True
    return None if None in readings else False


def _family_pattern(family: str) -> str:
    """ "RTX 4090" written as people and nvidia-smi do: "RTX 4090", "rtx4090", "RTX-4090"."""
    return r"[\s_-]*".join(re.escape(word) for word in family.split())


@cache
def _families() -> tuple[re.Pattern[str], dict[str, bool | None]]:
    """The catalog's product names as one pattern (longest first), and each one's MIG."""
    by_family: dict[str, list[GpuSpec]] = {}
    for gpu in gpu_catalog():
        by_family.setdefault(gpu.family.lower(), []).append(gpu)
    names = sorted(by_family, key=len, reverse=True)
    alternatives = "|".join(_family_pattern(name) for name in names)
    pattern = re.compile(rf"(?<![a-z0-9])(?:{alternatives})(?![a-z0-9])", re.IGNORECASE)
    # keyed by the compact name: the key "RTX 4090", "rtx4090" and "RTX-4090" share
    return pattern, {compact(name): _family_has_mig(rows) for name, rows in by_family.items()}


def _named_families(flat: str) -> set[str]:
    pattern, _ = _families()
    found = itertools.islice(pattern.finditer(flat), _NAMES_READ)
    return {compact(m[0]) for m in found}


def no_mig_ceiling(paste: Paste, voted: Collection[str]) -> Ceiling | None:
    """The ceiling on the MIG reading (when ``voted``, the causes the paste's votes name, hold
    it) of a text whose named GPUs all lack MIG (at least one named, each known to the
    catalog); None when it names none, or one with MIG or unknown."""
    if MIG_CAUSE not in voted:
        return None
    _, has_mig = _families()
    named = _named_families(paste.flat)
    readings = {has_mig.get(name) for name in named}
    if not named or readings != {False}:
        return None
    return NO_MIG_CEILING
