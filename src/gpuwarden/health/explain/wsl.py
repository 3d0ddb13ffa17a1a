"""Texts from inside WSL 2 (Windows Subsystem for Linux), where the Linux driver stack that some
causes presume is not there.

Under WSL 2 the GPU belongs to the Windows driver. The Linux side has no NVIDIA kernel module
(nothing to load, probe or mismatch): the dxgkrnl module's /dev/dxg paravirtualises the GPU, and
the Windows driver injects its user-space libraries (libcuda, libnvidia-ml, nvidia-smi) into
/usr/lib/wsl/lib. NVIDIA's CUDA on WSL User Guide: install the Windows driver only — no Linux
display driver inside WSL (a Linux libcuda or nvidia-utils package then shadows the injected
ones) — on a Windows build with GPU paravirtualisation (Windows 11, or Windows 10 21H2 and later),
with the GPU in WDDM mode (not TCC). So "couldn't communicate with the NVIDIA driver", "no NVIDIA
driver", a version mismatch or CUDA's "driver version is insufficient" inside WSL do not mean what
they mean on a Linux host: the Windows driver, the Windows build or a Linux library shadowing
WSL's decides. Those causes stay below certainty there and say what to check.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.rank import Ceiling
from gpuwarden.health.explain.text import Paste

# WSL named, its library mount, its kernel's release string, or its Windows-side folder.
_WSL = re.compile(
    r"(?<![a-z0-9_])wsl ?2?(?![a-z0-9_])|/usr/lib/wsl\b|microsoft-standard|"
    r"system32\\+lxss|windows subsystem for linux",
    re.IGNORECASE,
)
_WORDS = ("wsl", "microsoft-standard", "lxss", "windows subsystem for linux")

# Causes read from the Linux host's driver: its kernel module, its probe, its library versions,
# its CUDA version.
LINUX_DRIVER_CAUSES = frozenset(
    {"driver-not-loaded", "driver-probe-failed", "nvml-driver-mismatch", "driver-too-old"}
)

WSL_CEILING = Ceiling(
    score=0.6,  # the usual reading at best: inside WSL the Windows driver and build decide
    why="the text comes from WSL 2: the GPU's driver is the Windows one (no NVIDIA kernel module "
    "in WSL; its libraries are injected into /usr/lib/wsl/lib)",
    decides="`nvidia-smi.exe` on Windows (the driver's version; WDDM, not TCC), `winver` (GPU "
    "in WSL needs Windows 11 or Windows 10 21H2+), `ls -l /usr/lib/wsl/lib` and "
    "`ldconfig -p | grep -E 'libcuda|libnvidia-ml'` inside WSL (a Linux driver, libcuda or "
    "nvidia-utils package in the distro shadows WSL's: remove it)",
    causes=LINUX_DRIVER_CAUSES,
)


def wsl_ceiling(paste: Paste) -> Ceiling | None:
    """The ceiling on the Linux-driver causes of a text from inside WSL 2; None otherwise."""
    if not paste.shows(_WORDS, _WSL):
        return None
    return WSL_CEILING
