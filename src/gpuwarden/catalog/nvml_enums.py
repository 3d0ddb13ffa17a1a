"""NVML's enumerations of a GPU's health state, in the one spelling gpuwarden uses everywhere
(DeviceSample, findings, Xid 154 decoding, the exporter): the recovery action the driver asks for,
the NVSwitch fabric registration state and the fabric's health. NVML, DCGM and nvidia-smi encode
them differently (codes, names, capitalised words); this is where each encoding becomes the one
spelling."""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpuwarden.types.telemetry import FabricHealthIssue

# nvmlDeviceGpuRecoveryAction_t (nvml.h; pynvml NVML_GPU_RECOVERY_ACTION_*), the value of
# NVML_FI_DEV_GET_GPU_RECOVERY_ACTION and DCGM_FI_DEV_GPU_RECOVERY_ACTION (Xid 154 names it too).
# 5-7 arrived with NVML 615 (NVML API reference, change log "v610 to v615").
RECOVERY_ACTIONS: dict[int, str] = {
    0: "none",
    1: "reset",
    2: "reboot",
    3: "drain-p2p",
    4: "drain-and-reset",
    5: "recover-imex-domain",
    6: "bus-reset",
    7: "system-reboot",
}
# How nvidia-smi (-q "GPU Recovery Action", XML gpu_recovery_action, CSV gpu_recovery_action)
# and Xid 154 messages spell them; compared lower-case with single spaces.
_RECOVERY_TEXT: dict[str, str] = {
    "none": "none",
    "reset": "reset",
    "gpu reset": "reset",
    "gpu reset required": "reset",
    "pf flr": "reset",  # R610's name for action 1: a PCIe function-level reset of the GPU
    "reboot": "reboot",
    "node reboot": "reboot",
    "node reboot required": "reboot",
    "os reboot": "reboot",  # R610's name for action 2
    "drain p2p": "drain-p2p",
    "drain and reset": "drain-and-reset",
    "drain p2p and reset": "drain-and-reset",
    "drain p2p + reset": "drain-and-reset",
    "recover imex domain": "recover-imex-domain",
    "bus reset": "bus-reset",
    "system reboot": "system-reboot",
}

# nvmlReturn_t (nvml.h; pynvml NVML_ERROR_*): what NVML calls fail with, and what nvidia-smi
# exits with
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18

# What nvidia-smi prints in place of a value when NVML refused the call for the whole GPU
# (RESET_REQUIRED, GPU_IS_LOST): "[GPU requires reset]" in CSV, bare in -q text and XML.
# gpuwarden's own state error for such a GPU starts with the same words (smi cells, the NVML
# backend), and the rules recognise the GPU by them.
GPU_REQUIRES_RESET = "GPU requires reset"
GPU_IS_LOST = "GPU is lost"
# what nvidia-smi prints above its table for a GPU the driver lists but NVML cannot open
# ("Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error")
DEVICE_HANDLE_UNKNOWN = "Unable to determine the device handle"
# nvmlErrorString(NVML_ERROR_NO_PERMISSION): the GPU answers but this user or container may not
# open its device node; nvidia-smi prints it after the line above
INSUFFICIENT_PERMISSIONS = "Insufficient Permissions"

# nvmlGpuVirtualizationMode_t (nvml.h); DCGM_FI_DEV_VIRTUAL_MODE (field 500) has the same values
VIRTUALIZATION_MODE_PASSTHROUGH = 1
VIRTUALIZATION_MODE_VGPU = 2
# DeviceSample.vgpu_license_status where the reader can only tell licensed from unlicensed (NVML's
# guest call, DCGM field 526): never the restricted / unrestricted detail nvidia-smi prints
VGPU_LICENSED = "licensed"
VGPU_UNLICENSED = "unlicensed"

# nvmlGpuFabricState_t (nvml.h; pynvml NVML_GPU_FABRIC_STATE_*)
FABRIC_STATES: dict[int, str] = {
    0: "not-supported",
    1: "not-started",
    2: "in-progress",
    3: "completed",
}
FABRIC_SUCCESS = "success"  # fabric_status of a registration that completed without error

# nvmlGpuFabricInfo_v3_t.healthSummary, NVML_GPU_FABRIC_HEALTH_SUMMARY_* (nvml.h), also
# DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY (field 175). 0 = NOT_SUPPORTED: nvidia-smi then prints every
# "Fabric / Health" row N/A, the mask too.
FABRIC_HEALTH_SUMMARIES: dict[int, str] = {1: "healthy", 2: "unhealthy", 3: "limited-capacity"}
# healthMask (NVML v2+; DCGM_FI_DEV_FABRIC_HEALTH_MASK, field 174, the same bits), read as
# NVML_GPU_FABRIC_HEALTH_GET: (mask >> SHIFT) & WIDTH. The yes/no fields answer 0 NOT_SUPPORTED,
# 1 TRUE, 2 FALSE (NVML_GPU_FABRIC_HEALTH_MASK_<field>_*).
_MASK_TRUE, _MASK_FALSE = 1, 2
_HEALTH_FLAGS: tuple[tuple[int, int, FabricHealthIssue], ...] = (
    (0, 0x3, FabricHealthIssue.DEGRADED_BANDWIDTH),  # _SHIFT/_WIDTH_DEGRADED_BW
    (2, 0x3, FabricHealthIssue.ROUTE_RECOVERY),
    (4, 0x3, FabricHealthIssue.ROUTE_UNHEALTHY),
    (6, 0x3, FabricHealthIssue.ACCESS_TIMEOUT_RECOVERY),
)
# _SHIFT/_WIDTH_INCORRECT_CONFIGURATION: a code, 0 NOT_SUPPORTED, 1 NONE, then the kind
_CONFIGURATION_SHIFT, _CONFIGURATION_WIDTH, _CONFIGURATION_NONE = 8, 0xF, 1
_CONFIGURATIONS = {
    2: FabricHealthIssue.INCORRECT_SYSGUID,
    3: FabricHealthIssue.INCORRECT_CHASSIS_SN,
    4: FabricHealthIssue.NO_PARTITION,
    5: FabricHealthIssue.INSUFFICIENT_NVLINKS,
    6: FabricHealthIssue.INCOMPATIBLE_GPU_FW,
    7: FabricHealthIssue.INVALID_LOCATION,
    8: FabricHealthIssue.GPU_STATE_INVALID,
}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def recovery_action_name(code: int) -> str:
    """An NVML/DCGM recovery-action code as DeviceSample spells it. A code newer than this table
    stays visible as ``unknown-<code>`` (it is a request for action, never "none")."""
    return RECOVERY_ACTIONS.get(code, f"unknown-{code}")


def recovery_action_from_text(text: str) -> str:
    """nvidia-smi's spelling ("None", "Drain and Reset") as DeviceSample spells it. A spelling
    this table does not know stays visible, lower-case and hyphenated."""
    key = " ".join(text.split()).lower()
    return _RECOVERY_TEXT.get(key, _slug(key))


def fabric_state_name(code: int) -> str | None:
    """An nvmlGpuFabricState_t as DeviceSample spells it; None for a code NVML does not define."""
    return FABRIC_STATES.get(code)


def fabric_state_from_text(text: str) -> str:
    """nvidia-smi's "Completed", "In Progress", "Not Started", "Not Supported"."""
    return _slug(text)


def fabric_status_from_text(text: str) -> str:
    """nvidia-smi's "Success", or the NVML error text of a registration that failed."""
    cleaned = " ".join(text.split())
    return FABRIC_SUCCESS if cleaned.lower() == FABRIC_SUCCESS else cleaned


def present_issues(
    answers: Iterable[tuple[FabricHealthIssue, bool | None]],
) -> tuple[str, ...] | None:
    """The FabricHealthIssue values answered present; () when every answer was "no", None when
    nothing answered (NOT_SUPPORTED, N/A). NVML's mask and nvidia-smi's rows both end here."""
    answered = False
    present: list[str] = []
    for issue, said in answers:
        answered = answered or said is not None
        if said:
            present.append(issue.value)
    return tuple(present) if answered else None


def fabric_health_issues(mask: int) -> tuple[str, ...] | None:
    """The FabricHealthIssue values a healthMask reports present; () when every field answered
    "no", None when none answered (a mask of NOT_SUPPORTED fields)."""
    said = {_MASK_TRUE: True, _MASK_FALSE: False}
    answers = [(issue, said.get((mask >> shift) & width)) for shift, width, issue in _HEALTH_FLAGS]
    configuration = (mask >> _CONFIGURATION_SHIFT) & _CONFIGURATION_WIDTH
    if configuration == _CONFIGURATION_NONE:
        answers.append((FabricHealthIssue.INCORRECT_CONFIGURATION, False))
    elif configuration:
        kind = _CONFIGURATIONS.get(configuration, FabricHealthIssue.INCORRECT_CONFIGURATION)
        answers.append((kind, True))
    return present_issues(answers)


def fabric_health(summary: int | None, mask: int | None) -> dict[str, str | tuple[str, ...] | None]:
    """fabric_health_summary / fabric_health_issues from a health summary code (None where the
    reader has none: NVML's v2 struct) and a health mask (None where not read)."""
    if summary == 0:  # NOT_SUPPORTED: no health at all, as nvidia-smi prints it (every row N/A)
        return {"fabric_health_summary": None, "fabric_health_issues": None}
    name = None if summary is None else FABRIC_HEALTH_SUMMARIES.get(summary, f"unknown-{summary}")
    issues = None if mask is None else fabric_health_issues(mask)
    return {"fabric_health_summary": name, "fabric_health_issues": issues}


# the exporter's inverses of the decoding tables above
_SUMMARY_CODES = {text: code for code, text in FABRIC_HEALTH_SUMMARIES.items()}
_CONFIGURATION_CODES = {kind.value: code for code, kind in _CONFIGURATIONS.items()}


def fabric_health_summary_code(name: str | None) -> int | None:
    """The inverse of FABRIC_HEALTH_SUMMARIES (the exporter writes DCGM field 175)."""
    return None if name is None else _SUMMARY_CODES.get(name)


def fabric_health_mask(issues: tuple[str, ...] | None) -> int | None:
    """The healthMask that decodes to ``issues`` (the inverse of fabric_health_issues; every
    yes/no field answered, the configuration NONE unless one is present)."""
    if issues is None:
        return None
    mask = 0
    for shift, _width, issue in _HEALTH_FLAGS:
        mask |= (_MASK_TRUE if issue.value in issues else _MASK_FALSE) << shift
    configuration = next(
        (_CONFIGURATION_CODES[i] for i in issues if i in _CONFIGURATION_CODES), None
    )
    if configuration is None and FabricHealthIssue.INCORRECT_CONFIGURATION.value in issues:
        configuration = _CONFIGURATION_WIDTH  # a kind newer than this table: any unknown code
    return mask | (configuration or _CONFIGURATION_NONE) << _CONFIGURATION_SHIFT
