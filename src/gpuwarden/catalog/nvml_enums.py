"""NVML's enumerations of a GPU's health state, in the one spelling gpuwarden uses everywhere
(DeviceSample, findings, Xid 154 decoding, the exporter): the recovery action the driver asks for
and the NVSwitch fabric registration state. NVML, DCGM and nvidia-smi encode them differently
(codes, names, capitalised words); this is where each encoding becomes the one spelling."""

from __future__ import annotations

import re

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
    "reboot": "reboot",
    "node reboot": "reboot",
    "node reboot required": "reboot",
    "drain p2p": "drain-p2p",
    "drain and reset": "drain-and-reset",
    "drain p2p and reset": "drain-and-reset",
    "drain p2p + reset": "drain-and-reset",
    "recover imex domain": "recover-imex-domain",
    "bus reset": "bus-reset",
    "system reboot": "system-reboot",
}

# nvmlGpuFabricState_t (nvml.h; pynvml NVML_GPU_FABRIC_STATE_*)
FABRIC_STATES: dict[int, str] = {
    0: "not-supported",
    1: "not-started",
    2: "in-progress",
    3: "completed",
}
FABRIC_SUCCESS = "success"  # fabric_status of a registration that completed without error


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
