"""What an Xid message's payload says, where NVIDIA documents it. Pure functions over one message.

* Xid 144-150 (NVLink5): the message is ``<unit> <Fatal|Nonfatal> XC<n> i<n> Link <n> (<IntrInfo>
  <errorStatus> <errorDebugData[0..4]>)`` (NVIDIA Xid catalog, WORKFLOW_NVLINK5_ERR). IntrInfo and
  errorStatus are looked up in the catalog's "XID 144-150 Decode" sheet (``catalog.xid``); a pair
  that matches no row stays "undecoded" and keeps the catalog's severity.
* Xid 154: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)": the new
  action, named as ``DeviceSample.recovery_action`` names it (NVML nvmlDeviceGpuRecoveryAction_t).
* Xid 45: "... caused by previous Xid 145": the Xid that caused the cleanup.
* Xid 13: "(GPC 7, TPC 7, SM 0)": where on the chip the exception hit (WORKFLOW_XID_13 compares
  GPC/TPC across incidents).
* Xid 63/64: which memory repair the event is about, as the driver names it: "Row Remapper: New
  row marked for remapping" (Ampere+) or "Dynamic Page Retirement: New page retired" (older).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from gpuwarden.catalog.nvml_enums import RECOVERY_ACTIONS, recovery_action_from_text
from gpuwarden.catalog.xid import (
    MEMORY_REPAIR_XIDS,
    PAGE_RETIREMENT,
    ROW_REMAPPING,
    Nvlink5Rule,
    bucket_severity,
    nvlink5_rules,
    recovery_action_verdict,
)
from gpuwarden.types.health import Severity

NVLINK5_XIDS = range(144, 151)
# the Xids decode_payload reads
PAYLOAD_XIDS = frozenset({*NVLINK5_XIDS, 154, 45, *MEMORY_REPAIR_XIDS})

# Decimal numbers in the payloads are the driver's 32-bit words, at most 10 digits (a longer run
# is not one, and int() refuses more than 4300 decimal digits).
_RECOVERY = re.compile(
    r"recovery action changed from\s+(?P<old>0x[0-9a-fA-F]+|\d{1,10})\s*"
    r"(?:\((?P<old_name>[^)]*)\))?\s*to\s+(?P<new>0x[0-9a-fA-F]+|\d{1,10})\s*"
    r"(?:\((?P<new_name>[^)]*)\))?",
    re.IGNORECASE,
)
_CAUSED_BY = re.compile(r"caused by previous Xid\s*(\d{1,10})(?!\d)", re.IGNORECASE)
_SM_LOCATION = re.compile(r"\(GPC\s*(\d{1,10}),\s*TPC\s*(\d{1,10}),\s*SM\s*(\d{1,10})\)")
# "Row Remapper", "row remapping", "ROW_REMAP..." / "Page Retirement", "page retired",
# "unable to retire page"
_ROW_REMAP_WORDS = re.compile(r"\brow[\s_-]*remap", re.IGNORECASE)
_PAGE_RETIRE_WORDS = re.compile(
    r"\bpages?[\s_-]*retire|\bretire[sd]?\s+(?:the\s+|a\s+)?page", re.IGNORECASE
)
_NVLINK5_WORDS = re.compile(r"\(\s*(0x[0-9a-fA-F]{1,8})\s+(0x[0-9a-fA-F]{1,8})\b")
_NVLINK5_HEAD = re.compile(r"^\s*(?P<unit>[A-Z][A-Z0-9_/]*)")
_NVLINK5_FATAL = re.compile(r"\b(Non-?fatal|Fatal)\b", re.IGNORECASE)
_NVLINK5_LINK = re.compile(r"\bLink\s+(\d+)")
_NETIR_LINK_REASON_SHIFT = 20  # IntrInfo[25:20]: NETIR_LINK_EVT's link-down reason (both layouts)
_NETIR_LINK_REASON_MASK = 0x3F


def recovery_action_name(code: int | None, name: str | None) -> str | None:
    """``DeviceSample.recovery_action`` words for an NVML recovery-action code or its text."""
    if code is not None and code in RECOVERY_ACTIONS:
        return RECOVERY_ACTIONS[code]
    return recovery_action_from_text(name) if name and name.strip() else None


def _number(text: str) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def decode_recovery_action(message: str) -> tuple[str | None, str | None] | None:
    """Xid 154: (previous action, new action), or None when the message has no such change."""
    match = _RECOVERY.search(message)
    if match is None:
        return None
    old = recovery_action_name(_number(match["old"]), match["old_name"])
    new = recovery_action_name(_number(match["new"]), match["new_name"])
    return old, new


def decode_caused_by(message: str) -> int | None:
    """Xid 45: the Xid named in "caused by previous Xid N", if the message says it."""
    match = _CAUSED_BY.search(message)
    return None if match is None else int(match[1])


def sm_location(message: str) -> tuple[int, int, int] | None:
    """Xid 13: (GPC, TPC, SM) of "Graphics SM ... Exception on (GPC 8, TPC 5, SM 1)"."""
    match = _SM_LOCATION.search(message)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def memory_repair_named(message: str) -> str | None:
    """Xid 63/64: ``ROW_REMAPPING`` or ``PAGE_RETIREMENT`` as the message names it; None when it
    names neither (or both)."""
    rows = _ROW_REMAP_WORDS.search(message) is not None
    pages = _PAGE_RETIRE_WORDS.search(message) is not None
    if rows == pages:
        return None
    return ROW_REMAPPING if rows else PAGE_RETIREMENT


@dataclass(frozen=True, slots=True)
class PayloadDecode:
    """What one message decoded to: text pairs for ``XidGroup.decoded``, and, when the payload
    decides them, the severity and NVIDIA bucket that replace the catalog's."""

    pairs: tuple[tuple[str, str], ...]
    severity: Severity | None = None
    action: str | None = None


@cache
def _bits(mask: str) -> tuple[int, int]:
    """(care, value) of a 32-character 0/1/- mask, bit 31 first."""
    care = int(mask.replace("0", "1").replace("-", "0"), 2)
    value = int(mask.replace("-", "0"), 2)
    return care, value


def _matches(mask: str | None, word: int) -> bool:
    if mask is None:
        return False
    care, value = _bits(mask)
    return word & care == value


@dataclass(frozen=True, slots=True)
class _Candidate:
    rule: Nvlink5Rule
    layout: str  # "V1" (driver < R575) or "V2" (>= R575)
    promoted: bool  # IntrInfo matched the rule's "action 2" pattern


@cache
def _rules_of(xid: int) -> tuple[Nvlink5Rule, ...]:
    return tuple(rule for rule in nvlink5_rules() if rule.xid == xid)


def _candidates(xid: int, intrinfo: int) -> list[_Candidate]:
    found: list[_Candidate] = []
    for rule in _rules_of(xid):
        for layout, mask, promoted_mask in (
            ("V1", rule.intrinfo_v1, rule.action2_intrinfo_v1),
            ("V2", rule.intrinfo_v2, rule.action2_intrinfo_v2),
        ):
            if _matches(mask, intrinfo):
                found.append(_Candidate(rule, layout, promoted=False))
            elif _matches(promoted_mask, intrinfo):
                found.append(_Candidate(rule, layout, promoted=True))
    return found


def _named(candidates: list[_Candidate], unit: str | None) -> list[_Candidate]:
    """Keep the rows whose sub-unit name is the one the message prints, when any is."""
    if unit is None:
        return candidates
    named = [c for c in candidates if unit in c.rule.unit.split("/")]
    return named or candidates


def _by_status(candidates: list[_Candidate], status: int) -> list[_Candidate]:
    """Rows for errorStatus: an exact row, else one row per set bit (all bits must be known)."""
    exact = [c for c in candidates if c.rule.error_status is None or status in c.rule.error_status]
    if exact or status == 0:
        return exact
    per_bit: list[_Candidate] = []
    for bit in range(32):
        if status >> bit & 1:
            rows = [c for c in candidates if 1 << bit in (c.rule.error_status or ())]
            if not rows:
                return []
            per_bit.extend(rows)
    return per_bit


def _action(candidate: _Candidate) -> str:
    if candidate.promoted and candidate.rule.action2 is not None:
        return candidate.rule.action2
    return candidate.rule.immediate_action


def _row_severity(candidate: _Candidate) -> Severity:
    """The bucket's severity; a (link-)fatal row whose action is IGNORE still took a link or
    the GPU down, so it is at least a warning."""
    severity = bucket_severity(_action(candidate))
    said = candidate.rule.nvlink_severity.lower()
    if severity is Severity.INFO and "fatal" in said and not said.startswith("non"):
        return Severity.WARNING
    return severity


def _worst(candidates: list[_Candidate]) -> _Candidate:
    return max(candidates, key=lambda c: (_row_severity(c).rank, c.promoted))


def _unique(values: list[str]) -> str:
    return ", ".join(dict.fromkeys(values))


def decode_nvlink5(xid: int, message: str) -> PayloadDecode:
    """Xid 144-150: the sub-unit, severity and action NVIDIA's decode table gives the message's
    IntrInfo and errorStatus; "undecoded" (and no severity) when no row matches."""
    words = _NVLINK5_WORDS.search(message)
    if words is None:
        return PayloadDecode((("nvlink5", "undecoded: no (IntrInfo errorStatus ...) words"),))
    intrinfo, status = int(words[1], 16), int(words[2], 16)
    head = _NVLINK5_HEAD.match(message)
    unit = None if head is None else head["unit"]
    shown = (("intrinfo", f"0x{intrinfo:08x}"), ("error_status", f"0x{status:08x}"))
    rows = _by_status(_named(_candidates(xid, intrinfo), unit), status)
    if not rows:
        return PayloadDecode(
            (*shown, ("nvlink5", "undecoded: no row of NVIDIA's XID 144-150 Decode table matches"))
        )
    worst = _worst(rows)
    pairs: list[tuple[str, str]] = [
        ("unit", _unique([c.rule.unit for c in rows])),
        ("nvlink_severity", _unique([c.rule.nvlink_severity for c in rows])),
        ("action", _action(worst)),
        ("investigate", _unique([c.rule.investigatory_action for c in rows])),
        ("layout", _unique([c.layout for c in rows])),
        *shown,
    ]
    if "NETIR_LINK_EVT" in worst.rule.unit:
        reason = intrinfo >> _NETIR_LINK_REASON_SHIFT & _NETIR_LINK_REASON_MASK
        pairs.append(("link_down_reason", str(reason)))
    for label, pattern in (("link", _NVLINK5_LINK), ("printed", _NVLINK5_FATAL)):
        found = pattern.search(message)
        if found is not None:
            pairs.append((label, found[1]))
    return PayloadDecode(tuple(pairs), _row_severity(worst), _action(worst))


def decode_payload(xid: int, message: str) -> PayloadDecode | None:
    """The decode of a message whose Xid has a documented payload; None for the others."""
    if xid in NVLINK5_XIDS:
        return decode_nvlink5(xid, message)
    if xid == 154:
        change = decode_recovery_action(message)
        if change is None:
            return PayloadDecode((("recovery_action", "undecoded"),))
        old, new = change
        if new is None:
            return PayloadDecode((("recovery_action", "undecoded"),))
        pairs = (("recovery_action", new), ("recovery_action_from", old or "unknown"))
        return PayloadDecode(pairs, *recovery_action_verdict(new))
    if xid == 45:
        cause = decode_caused_by(message)
        return None if cause is None else PayloadDecode((("caused_by", str(cause)),))
    if xid in MEMORY_REPAIR_XIDS:
        repair = memory_repair_named(message)
        return None if repair is None else PayloadDecode((("memory_repair", repair),))
    return None
