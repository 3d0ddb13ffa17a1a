"""Xid catalog: ``data/xid.csv`` → ``XidInfo``, with a severity derived from NVIDIA's buckets.

Four data files, each row naming its source:

* ``xid.csv``: per Xid, the mnemonic, its meaning, NVIDIA's immediate and investigatory resolution
  buckets (Xid catalog for Ampere and newer), a plain recommended action and DCGM's health-watch
  mapping.
* ``xid_nvlink5.csv``: NVIDIA's "XID 144-150 Decode" sheet: which IntrInfo bit pattern and
  errorStatus of an NVLink5 Xid mean which sub-unit, severity and action.
* ``xid_buckets.csv``: what each resolution bucket asks a person to do.
* ``xid_unused.csv``: the codes NVIDIA's catalog lists with the Description "Unused" (for Ampere
  and newer): its mnemonic and buckets, no meaning.

Severity rule (reference/telemetry.md §2.3 and §6): DCGM's health module always FAILs Xids 48, 74,
79, 95, 119, 120 and 140; an immediate action that takes the GPU, the node or the VM out of
service (RESET_GPU, RESTART_BM, RESTART_VM) or hands it to support (CONTACT_SUPPORT) is critical;
RESTART_APP, CHECK_*, UPDATE_SWFW, the conditional workflows and XID_154 are warnings; IGNORE is
info. An Xid the catalog does not list, or lists without a bucket, is a warning: never dropped.
So is an Xid it lists as "Unused": NVIDIA gives it no meaning, and its bucket (mostly
CONTACT_SUPPORT) is what to do with a code that should not appear, not a judgement of a fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

from gpuwarden.catalog.tables import Row, read_rows
from gpuwarden.types.health import Severity

_FILE = "xid.csv"
_COLUMNS = (
    "xid",
    "mnemonic",
    "meaning",
    "likely_cause",
    "nvidia_immediate_action",
    "nvidia_investigatory_action",
    "recommended_action",
    "dcgm_health_watch_mapping",
    "source",
)
_NVLINK5_FILE = "xid_nvlink5.csv"
_NVLINK5_COLUMNS = (
    "xid",
    "unit",
    "intrinfo_v1",
    "intrinfo_v2",
    "error_status",
    "immediate_action",
    "action2_intrinfo_v1",
    "action2_intrinfo_v2",
    "action2",
    "investigatory_action",
    "nvlink_severity",
    "hw_sw",
    "source",
)
_BUCKETS_FILE = "xid_buckets.csv"
_UNUSED_FILE = "xid_unused.csv"
_UNUSED_COLUMNS = (
    "xid",
    "mnemonic",
    "nvidia_description",
    "nvidia_immediate_action",
    "nvidia_investigatory_action",
    "source",
)
# what the catalog's Description column says of a code it keeps only as a name
UNUSED_DESCRIPTION = "Unused"
UNUSED_MEANING = (
    "listed as unused for Ampere and newer GPUs in NVIDIA's Xid catalog, which gives it no "
    "meaning (a code of older GPUs or drivers, or one NVIDIA has not documented)"
)

# NVIDIA/DCGM modules/health/DcgmHealthWatch.cpp BuildXidMappings @72fa3fea: the "devastating"
# Xids that FAIL every health watch (94 is in the same list but only WARNs: contained).
DCGM_ALWAYS_FAIL = frozenset({48, 74, 79, 95, 119, 120, 140})
# Immediate actions that take the GPU (or its node / VM) out of service, or need support.
CRITICAL_BUCKETS = frozenset({"RESET_GPU", "RESTART_BM", "CONTACT_SUPPORT", "RESTART_VM"})
# Actions a job or an operator takes while the GPU stays in service.
WARNING_BUCKETS = frozenset({"RESTART_APP", "UPDATE_SWFW", "XID_154", "XID_154_EVAL"})
WARNING_BUCKET_PREFIXES = ("CHECK_", "WORKFLOW_")
INFO_BUCKETS = frozenset({"IGNORE"})
# GPU_HAS_FALLEN_OFF_THE_BUS: the GPU stopped answering on PCIe (the driver also prints that
# condition without an Xid).
GPU_LOST_XID = 79
# Neither in the catalog nor bucketed there: something happened that nobody classified.
UNKNOWN_XID_SEVERITY = Severity.WARNING
CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"


@dataclass(frozen=True, slots=True)
class XidInfo:
    """One row of the Xid catalog."""

    xid: int
    mnemonic: str  # NVIDIA's name: ROBUST_CHANNEL_GR_EXCEPTION
    meaning: str
    likely_cause: str | None
    immediate_action: str | None  # NVIDIA "Resolution Bucket (Immediate Action)": RESET_GPU, ...
    investigatory_action: str | None  # "Resolution Bucket (Investigatory Action)"
    recommended_action: str | None  # in plain words, where the catalog row gives one
    dcgm_health_watch: str | None  # how DCGM's health module classifies it
    source: str
    severity: Severity  # derived: see the module docstring
    # NVIDIA's catalog lists the code as "Unused": a name and buckets, no meaning; the severity
    # is then the unknown default, not the bucket's
    listed_unused: bool = False


@dataclass(frozen=True, slots=True)
class Nvlink5Rule:
    """One row of NVIDIA's "XID 144-150 Decode" sheet.

    The masks are 32 characters, bit 31 first: ``0``/``1`` must match, ``-`` is "user decode".
    V1 is the driver's layout before R575 (sub-unit in IntrInfo[9:5]), V2 from R575 on
    (IntrInfo[6:0]); bits 25:20 carry NETIR_LINK_EVT's link-down reason in both.
    """

    xid: int
    unit: str  # "NETIR_LINK_EVT/NETIR_LINK_DOWN": V1 name / V2 name where they differ
    intrinfo_v1: str
    intrinfo_v2: str
    error_status: frozenset[int] | None  # None: any errorStatus
    immediate_action: str
    action2_intrinfo_v1: str | None  # IntrInfo pattern that promotes to ``action2``
    action2_intrinfo_v2: str | None
    action2: str | None
    investigatory_action: str
    nvlink_severity: str  # as NVIDIA writes it: "Non-fatal", "Fatal", "Link Fatal", "Fatal**"
    hw_sw: str
    source: str


def bucket_severity(bucket: str | None) -> Severity:
    """Severity of one of NVIDIA's immediate-action buckets; no bucket → the unknown default."""
    if bucket is None:
        return UNKNOWN_XID_SEVERITY
    if bucket in CRITICAL_BUCKETS:
        return Severity.CRITICAL
    if bucket in INFO_BUCKETS:
        return Severity.INFO
    if bucket in WARNING_BUCKETS or bucket.startswith(WARNING_BUCKET_PREFIXES):
        return Severity.WARNING
    return UNKNOWN_XID_SEVERITY


# The bucket each GPU recovery action asks for (catalog.nvml_enums spelling; NVML
# nvmlDeviceGpuRecoveryAction_t: "Reset the GPU's PCIe bus", "Reboot the system"), whether the
# driver states it in NVML's recovery-action field or in an Xid 154 message. Actions without a
# bucket (drain-p2p, recover-imex-domain, one newer than this table) are still requests.
RECOVERY_ACTION_BUCKETS: Mapping[str, str] = MappingProxyType(
    {
        "none": "IGNORE",
        "reset": "RESET_GPU",
        "drain-and-reset": "RESET_GPU",
        "bus-reset": "RESET_GPU",
        "reboot": "RESTART_BM",
        "system-reboot": "RESTART_BM",
    }
)


def recovery_action_verdict(action: str) -> tuple[Severity, str | None]:
    """Severity and NVIDIA bucket of a recovery action the driver asks for; an action without a
    bucket is a warning."""
    bucket = RECOVERY_ACTION_BUCKETS.get(action)
    return (Severity.WARNING if bucket is None else bucket_severity(bucket)), bucket


# Xid 63 ("ECC page retirement or row remapping recording event") and 64 ("... recording
# failure") name one of two memory repairs, by GPU generation: Ampere and newer remap rows (NVML
# nvmlDeviceGetRemappedRows: "For Ampere or newer fully supported devices"; the driver prints
# "Row Remapper: New row marked for remapping, reset gpu to activate"), older data-center GPUs
# retire pages ("Dynamic Page Retirement: New page retired, reboot to activate";
# docs.nvidia.com/deploy/dynamic-page-retirement). Architectures as NVML names them.
MEMORY_REPAIR_XIDS = frozenset({63, 64})
ROW_REMAPPING = "row remapping"
PAGE_RETIREMENT = "page retirement"
ROW_REMAPPING_ARCHITECTURES = ("ampere", "ada", "hopper", "blackwell", "rubin")
PAGE_RETIREMENT_ARCHITECTURES = ("fermi", "kepler", "maxwell", "pascal", "volta", "turing")


def memory_repair_of_architecture(architecture: str | None) -> str | None:
    """``ROW_REMAPPING`` or ``PAGE_RETIREMENT`` for an architecture name ("Hopper", "Ada
    Lovelace", "Volta"); None when the name is absent or unknown."""
    words = (architecture or "").lower().split()
    if not words:
        return None
    if words[0] in ROW_REMAPPING_ARCHITECTURES:
        return ROW_REMAPPING
    if words[0] in PAGE_RETIREMENT_ARCHITECTURES:
        return PAGE_RETIREMENT
    return None


def derive_severity(xid: int, immediate_action: str | None) -> Severity:
    """The module docstring's rule: DCGM's always-FAIL set first, then the immediate bucket."""
    if xid in DCGM_ALWAYS_FAIL:
        return Severity.CRITICAL
    return bucket_severity(immediate_action)


def _optional(row: Row, column: str) -> str | None:
    return row.optional_text(column) or None


def _info(row: Row) -> XidInfo:
    xid = row.required_count("xid")
    immediate = _optional(row, "nvidia_immediate_action")
    return XidInfo(
        xid=xid,
        mnemonic=row.text("mnemonic"),
        meaning=row.text("meaning"),
        likely_cause=_optional(row, "likely_cause"),
        immediate_action=immediate,
        investigatory_action=_optional(row, "nvidia_investigatory_action"),
        recommended_action=_optional(row, "recommended_action"),
        dcgm_health_watch=_optional(row, "dcgm_health_watch_mapping"),
        source=row.text("source"),
        severity=derive_severity(xid, immediate),
    )


def _unused_info(row: Row) -> XidInfo:
    if row.text("nvidia_description") != UNUSED_DESCRIPTION:
        raise row.error("nvidia_description", f"not {UNUSED_DESCRIPTION!r}")
    return XidInfo(
        xid=row.required_count("xid"),
        mnemonic=row.text("mnemonic"),
        meaning=UNUSED_MEANING,
        likely_cause=None,
        immediate_action=_optional(row, "nvidia_immediate_action"),
        investigatory_action=_optional(row, "nvidia_investigatory_action"),
        recommended_action=None,
        dcgm_health_watch=None,
        source=row.text("source"),
        severity=UNKNOWN_XID_SEVERITY,
        listed_unused=True,
    )


@cache
def _catalog() -> Mapping[int, XidInfo]:
    table: dict[int, XidInfo] = {}
    rows = [(row, _info(row)) for row in read_rows(_FILE, _COLUMNS)]
    rows += [(row, _unused_info(row)) for row in read_rows(_UNUSED_FILE, _UNUSED_COLUMNS)]
    for row, info in rows:
        if info.xid in table:
            raise row.error("xid", f"Xid {info.xid} is listed twice")
        table[info.xid] = info
    return MappingProxyType(table)


def xid_catalog() -> Mapping[int, XidInfo]:
    """Every Xid the catalog lists, by number (read once, then cached)."""
    return _catalog()


def xid_info(xid: int) -> XidInfo | None:
    """The catalog row of ``xid``, or None when the catalog does not list it."""
    return _catalog().get(xid)


def xid_severity(xid: int) -> Severity:
    """The catalog's severity of ``xid``; an unlisted Xid is ``UNKNOWN_XID_SEVERITY``."""
    info = xid_info(xid)
    return UNKNOWN_XID_SEVERITY if info is None else info.severity


def _mask(row: Row, column: str, *, required: bool) -> str | None:
    raw = row.text(column) if required else row.optional_text(column)
    if not raw:
        return None
    if len(raw) != 32 or set(raw) - {"0", "1", "-"}:
        raise row.error(column, f"{raw!r} is not a 32-character mask of 0, 1, -")
    return raw


def _error_status(row: Row) -> frozenset[int] | None:
    raw = row.optional_text("error_status")
    if not raw:
        return None
    try:
        return frozenset(int(part, 16) for part in raw.split(";"))
    except ValueError:
        raise row.error("error_status", f"{raw!r} is not hexadecimal") from None


def _rule(row: Row) -> Nvlink5Rule:
    return Nvlink5Rule(
        xid=row.required_count("xid"),
        unit=row.text("unit"),
        intrinfo_v1=_mask(row, "intrinfo_v1", required=True) or "",
        intrinfo_v2=_mask(row, "intrinfo_v2", required=True) or "",
        error_status=_error_status(row),
        immediate_action=row.text("immediate_action"),
        action2_intrinfo_v1=_mask(row, "action2_intrinfo_v1", required=False),
        action2_intrinfo_v2=_mask(row, "action2_intrinfo_v2", required=False),
        action2=_optional(row, "action2"),
        investigatory_action=row.text("investigatory_action"),
        nvlink_severity=row.text("nvlink_severity"),
        hw_sw=row.text("hw_sw"),
        source=row.text("source"),
    )


@cache
def nvlink5_rules() -> tuple[Nvlink5Rule, ...]:
    """NVIDIA's decode table for the NVLink5 Xids 144-150, in sheet order."""
    return tuple(_rule(row) for row in read_rows(_NVLINK5_FILE, _NVLINK5_COLUMNS))


@cache
def _buckets() -> Mapping[str, str]:
    table: dict[str, str] = {}
    for row in read_rows(_BUCKETS_FILE, ("bucket", "guidance", "source")):
        bucket = row.text("bucket")
        if bucket in table:
            raise row.error("bucket", f"{bucket!r} is listed twice")
        row.text("source")
        table[bucket] = row.text("guidance")
    return MappingProxyType(table)


def bucket_guidance(bucket: str | None) -> str | None:
    """What NVIDIA's resolution bucket asks for, in a sentence; None for an unknown bucket."""
    return None if bucket is None else _buckets().get(bucket)
