"""Findings from a `dcgmi diag` report: each failed or warned test, in the codes doctor speaks.

A test's failure maps to an existing finding code where DCGM's documented meaning matches (its
error codes and message formats, dcgm_errors.h: a volatile DBE → ``ecc-uncorrectable``, a row
remap failure → ``row-remap-failure``, an NVLink down → ``nvlink-down``, CUDA's 'system not yet
initialized' → ``fabric-manager-down``, ...); any other failure is ``dcgm-diag-failed`` (Fail:
critical, Warn: warning) with the test's name, DCGM's own message and the remedy DCGM's
documentation gives for that test. Pass and Skip give no finding; they are counted in the check.
A failure that names no GPU (and whose test gives no per-GPU result) is about the node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from gpuwarden.health.checks import check_of
from gpuwarden.health.dcgm_diag import DiagMessage, DiagReport, DiagStatus, DiagTest
from gpuwarden.health.rules.codes import CODES, CodeInfo
from gpuwarden.types.health import (
    Check,
    CheckStatus,
    Confidence,
    DeviceRef,
    Evidence,
    Finding,
    Severity,
)

DIAG_FAILED = "dcgm-diag-failed"

# DCGM error code (dcgm_errors.h) → finding code, where DCGM's meaning is the code's meaning
_CODE_OF_ERROR: dict[int, str] = {
    3: "pcie-errors",  # PCI_REPLAY_RATE
    4: "ecc-uncorrectable",  # VOLATILE_DBE_DETECTED
    6: "retired-pages-pending",  # PENDING_PAGE_RETIREMENTS
    7: "retired-pages-limit",  # RETIRED_PAGES_LIMIT
    8: "retired-pages-limit",  # RETIRED_PAGES_DBE_LIMIT
    10: "thermal-slowdown",  # CLOCK_THROTTLE_THERMAL
    12: "power-brake",  # CLOCK_THROTTLE_POWER
    13: "nvlink-errors",  # NVLINK_ERROR_THRESHOLD
    14: "nvlink-down",  # NVLINK_DOWN
    29: "persistence-off",  # PERSISTENCE_MODE
    40: "thermal-slowdown",  # THERMAL_VIOLATIONS
    41: "thermal-slowdown",  # THERMAL_VIOLATIONS_TS
    45: "pcie-link-degraded",  # PCIE_GENERATION
    46: "pcie-link-degraded",  # PCIE_WIDTH
    57: "ecc-uncorrectable",  # CUDA_DBE
    70: "nvlink-errors",  # NVLINK_CRC_ERROR_THRESHOLD
    71: "nvlink-errors",  # NVLINK_ERROR_CRITICAL
    80: "row-remap-failure",  # ROW_REMAP_FAILURE
    81: "ecc-uncorrectable",  # UNCONTAINED_ERROR (Xid 95)
    83: "retired-pages-pending",  # DBE_PENDING_PAGE_RETIREMENTS
    84: "row-remap-failure",  # UNCORRECTABLE_ROW_REMAP
    85: "row-remap-pending",  # PENDING_ROW_REMAP
    98: "pcie-errors",  # PCIE_H_REPLAY_VIOLATION
    99: "nvlink-down",  # GPU_EXPECTED_NVLINKS_UP
    101: "xid",  # XID_ERROR
    103: "ecc-uncorrectable",  # DBE_VIOLATION
    104: "pcie-errors",  # PCIE_REPLAY_VIOLATION
    106: "ecc-uncorrectable",  # DBE_THRESHOLD_VIOLATION
    107: "pcie-errors",  # PCIE_REPLAY_THRESHOLD_VIOLATION
    108: "fabric-manager-down",  # CUDA_FM_NOT_INITIALIZED
}
_INTERNAL_ERROR_ID = 44  # DCGM_FR_INTERNAL: the test broke, the hardware was not judged
# A performance target the GPU missed during the run, which DCGM's own error table
# (dcgm_errors.cpp, dcgmErrorMeta) grades DCGM_ERROR_MONITOR, not ISOLATE: "this GPU can still
# perform workload". By error id (JSON) and by the error's message format (dcgm_errors.h *_MSG,
# for the table, which prints no id).
_BELOW_TARGET_IDS = frozenset(
    {
        30,  # LOW_BANDWIDTH: "Bandwidth of GPU %u in direction %s of %.2f did not exceed ..."
        31,  # HIGH_LATENCY: "Latency type %s of GPU %u value %.2f exceeded maximum allowed ..."
        50,  # STRESS_LEVEL: "Max stress level of %.1f did not reach desired stress level ..."
        62,  # MEMORY_BANDWIDTH: "GPU %u only achieved a memory bandwidth of %.2f GB/s, ..."
        63,  # TARGET_POWER: "Max power of %.1f did not reach desired power minimum %s of ..."
        72,  # ENFORCED_POWER_LIMIT: "... set to %.1f, which is too low to attempt to achieve ..."
    }
)
_BELOW_TARGET_TEXT = re.compile(
    r"did not exceed minimum required bandwidth|exceeded maximum allowed latency"
    r"|did not reach desired (?:stress level|power minimum)"
    r"|only achieved a memory bandwidth of|too low to attempt to achieve target power",
    re.I,
)

# The same meanings in DCGM's message texts (dcgm_errors.h *_MSG formats, CUDA's error strings),
# for the table, which prints no error code. Most specific first.
_CODE_OF_TEXT: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.I), code)
    for pattern, code in (
        (r"fallen off the bus|\bgpu (?:is |has been )?lost\b|\binaccessible\b", "gpu-lost"),
        (r"system not yet initiali[sz]ed|fabric ?manager", "fabric-manager-down"),
        (
            r"row remap\w* (?:has )?fail|uncorrectable row remap|failed row remap",
            "row-remap-failure",
        ),
        (r"row remap\w* (?:is |are )?pending|pending row remap", "row-remap-pending"),
        (r"pending (?:retired page|page retirement)", "retired-pages-pending"),
        (r"retired pages (?:have been |due to )|or more retired pages", "retired-pages-limit"),
        (r"double[- ]bit|\bDBEs?\b|uncorrectable ecc|uncontained", "ecc-uncorrectable"),
        (
            r"nvlink link \d+ is currently down|nvlinks? (?:is |are )?(?:currently )?down",
            "nvlink-down",
        ),
        (r"nvlinks are up out of|expected nvlinks", "nvlink-down"),
        (r"nvlink errors|nvlink crc|crc errors", "nvlink-errors"),
        (r"pcie? replay", "pcie-errors"),
        (r"pcie (?:link )?(?:generation|gen\b|width)", "pcie-link-degraded"),
        (
            r"throttl\w* due to thermal|thermal violation|temperature .*(?:too high|exceed)",
            "thermal-slowdown",
        ),
        (r"throttl\w* due to power|power violation", "power-brake"),
        (r"\bxid\b", "xid"),
        (r"persistence mode (?:for gpu \d+ )?is (?:currently )?disabled", "persistence-off"),
    )
)
_INTERNAL_TEXT = re.compile(r"internal error during the test", re.I)
# CUDA's errors for a driver and CUDA libraries that do not go together (cudaError_t 35
# InsufficientDriver, 803 SystemDriverMismatch, 804 CompatNotSupportedOnDevice): the test could
# not start CUDA, so it judged the setup, not the GPU
_SETUP_TEXT = re.compile(
    r"unsupported display driver ?/ ?cuda driver combination"
    r"|driver version is insufficient for cuda runtime"
    r"|forward compatibility was attempted on non supported hw",
    re.I,
)
# a test whose only failure is one documented meaning, for a Fail printed without a message
# (DCGM's Persistence Mode check fails only with DCGM_FR_PERSISTENCE_MODE)
_CODE_OF_TEST = {"persistence mode": "persistence-off"}
_GPU_NAMED = re.compile(r"\bGPU\s*(\d{1,4})(?!\d)")

# What DCGM's documentation says to do when a test fails (DCGM Diagnostics user guide, the
# plugin sections; dcgm_errors.h's suggestion strings), by the test's name in either spelling.
_SYSTEM_TRIAGE = (
    "check DCGM and system logs for errors; reset the GPU; restart DCGM; rerun the diagnostic "
    "(DCGM's SYSTEM_TRIAGE)"
)
_FIELD_DIAG = "run a field diagnostic on the GPU (DCGM's TRIAGE_RUN_FIELD_DIAG); if it fails, RMA"
_COOLING = (
    "verify the cooling (fans, airflow, thermal interface) and the power supply, then rerun; "
    + _FIELD_DIAG
)
_TEST_REMEDY: dict[str, str] = {
    "software": "fix the configuration DCGM's message names (denylisted driver, libraries, "
    "permissions, environment variables, graphics processes, InfoROM) and rerun `dcgmi diag -r 1`",
    "pcie": "check the link (`nvidia-smi -q -d PCIE`, `nvidia-smi nvlink -s`), reseat the GPU and "
    "riser, rerun `dcgmi diag -r 2`; " + _FIELD_DIAG,
    "memory": _FIELD_DIAG,
    "memory bandwidth": _COOLING,
    "memtest": _FIELD_DIAG,
    "diagnostic": _COOLING,
    "targeted stress": _COOLING,
    "targeted power": _COOLING,
    "pulse test": _COOLING,
    "eud": _FIELD_DIAG,
    "nvbandwidth": "check the NVLink/PCIe topology and that no other work runs on the GPUs, rerun; "
    + _FIELD_DIAG,
}
# DCGM 2.x/3.x display names → the 4.x plugin names above
_TEST_ALIASES = {
    "gpu memory": "memory",
    "eud test": "eud",
    "sm stress": "diagnostic",
    "denylist": "software",
    "blacklist": "software",
    "nvml library": "software",
    "cuda main library": "software",
    "cuda toolkit libraries": "software",
    "permissions and os blocks": "software",
    "permissions and os-related blocks": "software",
    "persistence mode": "software",
    "environment variables": "software",
    "environmental variables": "software",
    "page retirement/row remap": "software",
    "graphics processes": "software",
    "inforom": "software",
    "fabric manager": "software",
}
# The one code DCGM can report that CODES does not describe (the xid finding's words come from
# the Xid catalog, which a diag message does not reach): critical, as a Fail is, no bucket.
_XID_SEEN = CodeInfo(
    Severity.CRITICAL,
    "DCGM saw an Xid error from the driver while the test ran",
    "look the Xid up in the kernel log (`dcgmi diag` names it; `gpuwarden explain 'Xid ...'`) "
    "and follow its resolution bucket",
)


class _Unjudged(Enum):
    """Why a failed test said nothing of the hardware."""

    INTERNAL = "internal"  # the test broke inside DCGM
    SETUP = "setup"  # CUDA could not start: driver and CUDA libraries do not go together
    BELOW_TARGET = "below-target"  # a performance target missed: DCGM grades it 'monitor'


# put before the code's cause when every failure of a finding is unjudged for the same reason
_UNJUDGED_CAUSE = {
    _Unjudged.INTERNAL: "the test broke inside DCGM (an internal error: a child process failed "
    "or its output did not parse), so it did not judge the hardware; ",
    _Unjudged.SETUP: "the test could not start CUDA because the driver and the CUDA libraries "
    "DCGM loaded do not go together (CUDA's driver/runtime mismatch), so it did not judge the "
    "hardware; ",
    _Unjudged.BELOW_TARGET: "the GPU missed a performance target of the test (power, stress "
    "level, bandwidth or latency), which DCGM grades 'monitor': the GPU can still take work, "
    "and a power limit, clocks or other load can cause it as well as the hardware; ",
}
# a setup fault is fixed in the setup: the test's hardware steps would mislead
_UNJUDGED_REMEDY = {
    _Unjudged.SETUP: "install the DCGM and CUDA packages that match the driver (or the driver "
    "that matches them; in a container, the host's driver libraries must be mounted), then "
    "rerun `dcgmi diag`",
}
# DCGM's next step for a missed target (dcgm_errors.h, DCGM_FR_TARGET_POWER_NEXT and the
# plugins' guides: run on idle GPUs, an enforced power limit can make the target unattainable)
_BELOW_TARGET_FIRST = (
    "check the GPU's enforced power limit, clocks and utilization during the test (`nvidia-smi -q "
    "-d POWER,CLOCK,PERFORMANCE`) and that no other work ran on it, then rerun the test; if it "
    "misses again: "
)
_DIAG_GUIDE = "https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html"


@dataclass(frozen=True, slots=True)
class _Failure:
    code: str
    gpu: int | None
    test: DiagTest
    message: DiagMessage | None
    unjudged: _Unjudged | None  # why the test did not judge the hardware, if it did not


def _code_of(message: DiagMessage) -> str | None:
    if message.error_id is not None and message.error_id in _CODE_OF_ERROR:
        return _CODE_OF_ERROR[message.error_id]
    return next((code for pattern, code in _CODE_OF_TEXT if pattern.search(message.text)), None)


def _unjudged(message: DiagMessage) -> _Unjudged | None:
    """Why a failure says nothing certain of the hardware: DCGM broke, CUDA could not start,
    or the GPU only missed a performance target."""
    if message.error_id == _INTERNAL_ERROR_ID or _INTERNAL_TEXT.search(message.text):
        return _Unjudged.INTERNAL
    if _SETUP_TEXT.search(message.text):
        return _Unjudged.SETUP
    if message.error_id in _BELOW_TARGET_IDS or _BELOW_TARGET_TEXT.search(message.text):
        return _Unjudged.BELOW_TARGET
    return None


def _gpus_of(message: DiagMessage, test: DiagTest) -> list[int | None]:
    """The GPUs a failure is about: the one its result names (JSON), those its text names,
    those whose per-GPU result failed; else the node."""
    if message.gpu_index is not None:
        return [message.gpu_index]
    named = sorted({int(g) for g in _GPU_NAMED.findall(message.text)})
    if named:
        return list(named)
    return _failed_gpus(test)


def _failed_gpus(test: DiagTest) -> list[int | None]:
    failed = [gpu for gpu, status in test.gpu_status if status.rank >= DiagStatus.WARN.rank]
    return list(failed) if failed else [None]


def _failures(test: DiagTest) -> Iterable[_Failure]:
    problems = [m for m in test.messages if m.kind in ("warning", "error")]
    if not problems:
        code = _CODE_OF_TEST.get(" ".join(test.name.lower().split()), DIAG_FAILED)
        for gpu in _failed_gpus(test):
            yield _Failure(code, gpu, test, None, unjudged=None)
        return
    for message in problems:
        code = _code_of(message) or DIAG_FAILED
        for gpu in _gpus_of(message, test):
            yield _Failure(code, gpu, test, message, _unjudged(message))


def _code_info(code: str) -> CodeInfo:
    return CODES.get(code, _XID_SEEN)


def _where(gpu: int | None) -> str:
    return f"GPU {gpu}" if gpu is not None else "the node"


def _remedy_for(test: DiagTest) -> str:
    name = " ".join(test.name.lower().split())
    key = _TEST_ALIASES.get(name, name)
    return _TEST_REMEDY.get(key, _SYSTEM_TRIAGE)


def _severity(code: str, status: DiagStatus, unjudged: bool) -> Severity:
    """Fail → the code's severity (dcgm-diag-failed: critical); Warn → at most warning; a test
    that broke inside DCGM or could not start CUDA (its per-GPU results may all pass) →
    warning: nothing was judged."""
    base = _code_info(code).severity
    if code == DIAG_FAILED and (unjudged or status is DiagStatus.WARN):
        return Severity.WARNING
    if status is DiagStatus.WARN and base is Severity.CRITICAL:
        return Severity.WARNING
    return base


def _evidence(failure: _Failure, source: str) -> Evidence:
    message = failure.message
    detail = message.text[:400] if message is not None else "no message printed with the result"
    if message is not None and message.error_name is not None:
        detail = f"{message.error_name} ({message.error_id}): {detail}"
    return Evidence(
        f"dcgmi-diag:{failure.test.name}",
        failure.test.status.value,
        source,
        f"{failure.test.category or 'test'} on {_where(failure.gpu)}: {detail}",
    )


def _cause_and_remedy(group: Sequence[_Failure]) -> tuple[str, str]:
    """The code's words; dcgm-diag-failed's remedy is what DCGM's guide says for each test
    that failed, each step once."""
    code = group[0].code
    info = _code_info(code)
    cause, remedy = info.cause, info.remedy
    if code == DIAG_FAILED:
        steps = (step for f in group for step in _remedy_for(f.test).split("; "))
        remedy = "; ".join(dict.fromkeys(steps))
    reasons = {f.unjudged for f in group}
    if len(reasons) == 1 and (reason := reasons.pop()) is not None:
        cause = _UNJUDGED_CAUSE[reason] + cause
        remedy = _UNJUDGED_REMEDY.get(reason, remedy)
        if reason is _Unjudged.BELOW_TARGET:
            remedy = _BELOW_TARGET_FIRST + remedy
    return cause, remedy


def _confidence(group: Sequence[_Failure]) -> Confidence:
    """High when DCGM judged the hardware; low when the test broke or could not start; medium
    when the GPU missed a target, which a limit or other load explains as well."""
    reasons = {f.unjudged for f in group}
    if None in reasons:
        return Confidence.HIGH
    return Confidence.MEDIUM if reasons == {_Unjudged.BELOW_TARGET} else Confidence.LOW


def _finding(group: Sequence[_Failure], source: str) -> Finding:
    first = group[0]
    tests = list(dict.fromkeys(f.test.name for f in group))
    worst = max((f.test.status for f in group), key=lambda s: s.rank)
    severity = max(
        (_severity(first.code, f.test.status, f.unjudged is not None) for f in group),
        key=lambda s: s.rank,
    )
    cause, remedy = _cause_and_remedy(group)
    return Finding(
        code=first.code,
        severity=severity,
        title=f"dcgmi diag: {', '.join(tests)} {worst.value} on {_where(first.gpu)}",
        cause=cause,
        remedy=remedy,
        # a diag report names a GPU by its index only (no UUID, bus id or name to add)
        device=DeviceRef(index=first.gpu) if first.gpu is not None else None,
        evidence=tuple(_evidence(f, source) for f in group[:8]),
        action=_code_info(first.code).action,
        confidence=_confidence(group),
        references=(_DIAG_GUIDE,),
        count=len(group),
    )


def dcgm_diag_findings(report: DiagReport, *, source: str) -> list[Finding]:
    """One finding per (code, GPU) from the report's failed and warned tests."""
    groups: dict[tuple[str, int | None], list[_Failure]] = {}
    for test in report.tests:
        if test.status not in (DiagStatus.FAIL, DiagStatus.WARN):
            continue
        for failure in _failures(test):
            groups.setdefault((failure.code, failure.gpu), []).append(failure)
    return [_finding(group, source) for group in groups.values()]


def dcgm_diag_check(report: DiagReport, findings: Sequence[Finding], source: str) -> Check:
    """The doctor line: how many tests passed, failed, warned, were skipped, and which."""
    by_status: dict[DiagStatus, list[str]] = {}
    for test in report.tests:
        by_status.setdefault(test.status, []).append(test.name)
    parts = [f"{len(report.tests)} test(s) in {source}"]
    if report.dcgm_version:
        parts[0] += f" (DCGM {report.dcgm_version})"
    for status in (DiagStatus.FAIL, DiagStatus.WARN, DiagStatus.SKIP, DiagStatus.NOT_RUN):
        names = by_status.get(status, [])
        if names:
            parts.append(f"{status.value}: {', '.join(names[:8])}")
    passed = len(by_status.get(DiagStatus.PASS, []))
    parts.append(f"{passed} pass")
    detail = "; ".join(parts)
    if findings:
        return check_of("dcgm-diag", findings, detail)
    outcome = CheckStatus.PASS if passed else CheckStatus.SKIP
    return Check("dcgm-diag", outcome, detail)
