"""HTA 0.5.0's kernel classification: by kernel *name* only, ``re.match`` (anchored at the start).

Regexes copied from ``hta/utils/utils.py`` of PyPI HolisticTraceAnalysis 0.5.0 (MIT): a name is
COMMUNICATION if it matches ``^nccl.*Kernel``, else MEMORY if ``(^Memcpy)|(^Memset)|(^dma)``, else
COMPUTATION unless it matches ``(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)``, else OTHER.
So a cuda_sync "Stream Wait Event" is COMPUTATION, and ``ncclDevKernel_*`` is COMMUNICATION.
"""

from __future__ import annotations

import re
from enum import IntEnum

_COMM = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


class KernelType(IntEnum):
    """HTA's KernelType; the values are the bits its kernel-type breakdown uses."""

    COMPUTATION = 1
    COMMUNICATION = 2
    MEMORY = 4
    OTHER = 8


def kernel_type(name: str) -> KernelType:
    if _COMM.match(name):
        return KernelType.COMMUNICATION
    if _MEMORY.match(name):
        return KernelType.MEMORY
    if not _NOT_COMPUTE.match(name):
        return KernelType.COMPUTATION
    return KernelType.OTHER
