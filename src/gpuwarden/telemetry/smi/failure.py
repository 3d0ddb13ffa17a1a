"""nvidia-smi's own failure messages: what a failed run means, from its text or its exit code.

Read by the doctor (a failed probe, a pasted failure) and by the smi telemetry backend, which
names such a paste when it refuses it, so the phrases live once, below both.
"""

from __future__ import annotations

import re

from gpuwarden.catalog import nvml_enums
from gpuwarden.types.environment import SmiStatus

# nvidia-smi exits with NVML's nvmlReturn_t (NOT_FOUND: "No devices were found"). The texts
# decide first: they are what users paste.
_SMI_EXIT_CODES = {
    nvml_enums.NVML_ERROR_NO_PERMISSION: "permission",
    nvml_enums.NVML_ERROR_NOT_FOUND: "no-devices",
    nvml_enums.NVML_ERROR_DRIVER_NOT_LOADED: "driver-not-loaded",
    nvml_enums.NVML_ERROR_LIBRARY_NOT_FOUND: "library-not-found",
    nvml_enums.NVML_ERROR_GPU_IS_LOST: "gpu-lost",
    nvml_enums.NVML_ERROR_LIB_RM_VERSION_MISMATCH: "version-mismatch",
}
# nvidia-smi's line for a GPU NVML could not open, with NVML's reason after it
_DEVICE_HANDLE = nvml_enums.DEVICE_HANDLE_UNKNOWN.lower()
_SMI_TEXTS = (
    ("driver/library version mismatch", "version-mismatch"),
    ("couldn't communicate with the nvidia driver", "driver-not-loaded"),
    ("nvidia driver is not loaded", "driver-not-loaded"),
    ("no devices were found", "no-devices"),
    # only a device-handle line that does not name the permission (_handle_refused_only)
    (_DEVICE_HANDLE, "gpu-lost"),
    ("gpu is lost", "gpu-lost"),
    ("nvml shared library", "library-not-found"),
    ("insufficient permissions", "permission"),
    # any other reason NVML gave for not starting ("Failed to initialize NVML: Unknown Error",
    # NVML_ERROR_UNKNOWN: in a container, the device nodes it can no longer open): nvidia-smi
    # read nothing, whatever the reason; the phrases above are the reasons with a meaning
    ("failed to initialize nvml", "nvml-init-failed"),
)
NVML_LIBRARY = re.compile(r"NVML library version:\s*(\d+(?:\.\d+)+)", re.IGNORECASE)
# nvidia-smi's failure messages are a line or three (a version mismatch adds the NVML version)
_MAX_FAILURE_LINES = 6


def classify_smi_failure(returncode: int | None, text: str) -> str | None:
    """What a failed nvidia-smi run means; None when it worked."""
    if returncode is None:
        return "timeout"
    lowered = text.lower().replace("\u2018", "'").replace("\u2019", "'")  # pasted curly quotes
    for phrase, failure in _SMI_TEXTS:
        if phrase in lowered and not (phrase == _DEVICE_HANDLE and _handle_refused_only(lowered)):
            return failure
    if returncode == 0:
        return None
    return _SMI_EXIT_CODES.get(returncode, "other")


def _handle_refused_only(lowered: str) -> bool:
    """Does every device-handle line name the permission (NVML_ERROR_NO_PERMISSION: those GPUs
    answered; the device nodes' access is the matter)? One GPU that did not answer beside them
    is still a lost GPU, whatever line comes first."""
    refused = nvml_enums.INSUFFICIENT_PERMISSIONS.lower()
    lines = [line for line in lowered.splitlines() if _DEVICE_HANDLE in line]
    return bool(lines) and all(refused in line for line in lines)


def smi_failure_output(text: str) -> SmiStatus | None:
    """Saved output of an nvidia-smi that failed ("NVIDIA-SMI has failed because it couldn't
    communicate with the NVIDIA driver", "Failed to initialize NVML: Driver/library version
    mismatch", "No devices were found"): what the probe would have read, or None when the text
    is not such an output. Only a short text counts (nvidia-smi prints a line or three when it
    fails); the exit code is unknown."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or len(lines) > _MAX_FAILURE_LINES:
        return None
    failure = classify_smi_failure(0, text)
    if failure is None:
        return None
    library = NVML_LIBRARY.search(text)
    said = next(
        (line.strip() for line in lines if classify_smi_failure(0, line) == failure), lines[0]
    )
    return SmiStatus(
        present=True,
        failure=failure,
        message=said[:300],  # the line that says it, not the command pasted above it
        nvml_library_version=library.group(1) if library else None,
    )
