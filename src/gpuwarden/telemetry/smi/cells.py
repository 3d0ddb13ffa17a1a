"""One nvidia-smi value ("39.32 W", "[N/A]", "16x", "Enabled") → a Python value or None.

Every nvidia-smi format (XML, ``-q`` text, ``--query-gpu`` CSV, ``dmon``) prints values the same
way, so the cell rules live here once. "Not reported" spellings all become ``None``.
"""

from __future__ import annotations

import calendar
import math
import re
import time

from gpuwarden.catalog import nvml_enums
from gpuwarden.errors import ReaderError, quoted
from gpuwarden.telemetry.clock_events import CLOCK_EVENT_BITS
from gpuwarden.telemetry.sensors import sensor_celsius
from gpuwarden.types.telemetry import DeviceState, FabricHealthIssue
from gpuwarden.units import GIB, KIB, MIB

# Spellings nvidia-smi uses for "no value" (fixtures: CSV cells, -q text, XML, dmon "-").
NOT_REPORTED = frozenset(
    {
        "",
        "-",
        "n/a",
        "[n/a]",
        "na",
        "none",
        "not supported",
        "[not supported]",
        "requested functionality has been deprecated",
        "[requested functionality has been deprecated]",
        "not available in wddm driver model",
        "unknown error",
        "[unknown error]",
        "insufficient permissions",
        "[insufficient permissions]",
        # the default screen's cell for a field NVML answered with an error (nvidia-smi prints
        # "ERR!" where the CSV says "[Unknown Error]"): no reading, not a number
        "err!",
    }
    # NVML's errors about the whole GPU: no reading of the field (device_fault reads the state)
    | {
        spelling
        for text in (nvml_enums.GPU_REQUIRES_RESET, nvml_enums.GPU_IS_LOST)
        for spelling in (text.lower(), f"[{text.lower()}]")
    }
)

# possessive runs: a cell like "217<10^5 blanks>0 MiB" must fail at once, not try every way of
# sharing the blanks between the runs around the (empty) unit. Digits are ASCII: nvidia-smi
# prints numbers with printf, and \d (like float() and int()) would read "٣٠٠" as 300.
_NUMBER = re.compile(
    r"^\s*+([-+]?[0-9]++(?:\.[0-9]++)?(?:[eE][-+]?[0-9]++)?)\s*+([A-Za-z%/()]*+)\s*+$"
)
_HEX_NUMBER = re.compile(r"^0[xX][0-9A-Fa-f]++$")
# how much of a bad cell an error quotes: enough to find it, never the whole of a damaged one
_CELL_CHARS = 60


# Drivers before ~2014 labelled the same binary megabytes "MB" (a 6 GiB GTX TITAN: "6143MB").
_BYTES_PER_UNIT = {"": 1, "b": 1, "kib": KIB, "mib": MIB, "mb": MIB, "gib": GIB}
# PCIe throughput: nvidia-smi prints NVML's nvmlDeviceGetPcieThroughput value with the unit "KB/s".
_BYTES_PER_SECOND_PER_UNIT = {"kb/s": 1000, "mb/s": 1000**2, "b/s": 1}
_TRUE = frozenset({"enabled", "yes", "active", "on", "true"})
_FALSE = frozenset({"disabled", "no", "not active", "off", "false"})

HINT = (
    "gpuwarden reads `nvidia-smi -q -x` (XML), `nvidia-smi -q`, the default `nvidia-smi` screen, "
    "`nvidia-smi --query-gpu=... --format=csv`, `nvidia-smi --query-compute-apps=... "
    "--format=csv` and `nvidia-smi dmon` output; save one of them unchanged and pass that file"
)


class SmiOutputError(ReaderError):
    """What is wrong with an nvidia-smi output and at which line, raised plainly ("line 4: ...")."""

    reference = "smi-output-unreadable"
    hint_text = HINT


class LineError(Exception):
    """What is wrong at a line of the input, raised by a parser's helpers (some shared by parsers
    of different hints: builder, topo); the parser's entry point gives the hint (``plainly``)."""

    def __init__(self, line: int | None, problem: str) -> None:
        super().__init__(problem)
        self.line = line
        self.problem = problem

    def plainly(self, hint: str = HINT) -> SmiOutputError:
        return SmiOutputError(self.line, self.problem, hint=hint)


def is_missing(cell: str | None) -> bool:
    return cell is None or cell.strip().lower() in NOT_REPORTED


# NVML errors nvidia-smi prints in place of a value (nvmlErrorString, bracketed in CSV) that are
# about the GPU, not the field: NVML_ERROR_RESET_REQUIRED ("The GPU requires a reset before it
# can be used again") and NVML_ERROR_GPU_IS_LOST ("The GPU has fallen off the bus or has
# otherwise become inaccessible"). The cell is no reading; the GPU's state is what it says.
_DEVICE_FAULTS = {
    nvml_enums.GPU_REQUIRES_RESET.lower(): (
        DeviceState.ERROR,
        f"{nvml_enums.GPU_REQUIRES_RESET} (NVML_ERROR_RESET_REQUIRED, printed in place of its "
        "readings)",
    ),
    nvml_enums.GPU_IS_LOST.lower(): (
        DeviceState.GPU_LOST,
        f"{nvml_enums.GPU_IS_LOST} (NVML_ERROR_GPU_IS_LOST, printed in place of its readings)",
    ),
}


# a cell shorter than the shortest error names none (every element of a -q -x document is
# looked at: most hold a short value or only the blanks between child elements)
_SHORTEST_FAULT_CHARS = min(map(len, _DEVICE_FAULTS))


def device_fault(cell: str | None) -> tuple[DeviceState, str] | None:
    """The state a value cell says the whole GPU is in ("[GPU requires reset]"), or None."""
    if cell is None or not _SHORTEST_FAULT_CHARS <= len(cell) <= 40:
        return None
    return _DEVICE_FAULTS.get(cell.strip().strip("[]").strip().lower())


def device_fault_said(message: str) -> tuple[DeviceState, str] | None:
    """The state a message printed in place of a GPU's report says ("Unable to determine the
    device handle for GPU 00000000:3B:00.0: GPU is lost.  Reboot the system ..."), or None."""
    lowered = message[:500].lower()
    return next((fault for said, fault in _DEVICE_FAULTS.items() if said in lowered), None)


def number_and_unit(cell: str | None) -> tuple[float, str] | None:
    """``"39.32 W"`` → (39.32, "W"); not-reported → None; anything else → ValueError."""
    if is_missing(cell):
        return None
    assert cell is not None
    text = cell.strip()
    match = _NUMBER.match(text)
    if match is None:
        raise ValueError(f"not a number: {quoted(text, _CELL_CHARS)}")
    return float(match.group(1)), match.group(2)


def to_float(cell: str | None) -> float | None:
    parsed = number_and_unit(cell)
    return None if parsed is None else parsed[0]


def to_celsius(cell: str | None) -> float | None:
    return sensor_celsius(to_float(cell))


def to_int(cell: str | None) -> int | None:
    """Integers, "16x" link widths and "0x1F" hex masks."""
    if is_missing(cell):
        return None
    assert cell is not None
    text = cell.strip()
    if text.lower().startswith("0x"):
        if not _HEX_NUMBER.match(text):
            raise ValueError(f"not a number: {quoted(text, _CELL_CHARS)}")
        return int(text, 16)
    parsed = number_and_unit(text)
    if parsed is None:
        return None
    value, _ = parsed
    if not math.isfinite(value) or value != int(value):  # "1e400" reads as inf
        raise ValueError(f"not an integer: {quoted(text, _CELL_CHARS)}")
    return int(value)


def to_bytes(cell: str | None, default_unit: str = "MiB") -> int | None:
    """Memory sizes: nvidia-smi prints MiB ("8192 MiB"); a bare number uses ``default_unit``."""
    parsed = number_and_unit(cell)
    if parsed is None:
        return None
    value, unit = parsed
    factor = _BYTES_PER_UNIT.get((unit or default_unit).lower())
    if factor is None or not math.isfinite(value * factor):
        raise ValueError(f"not a memory size: {quoted(str(cell), _CELL_CHARS)}")
    return round(value * factor)


def to_bytes_per_second(cell: str | None, default_unit: str = "KB/s") -> float | None:
    parsed = number_and_unit(cell)
    if parsed is None:
        return None
    value, unit = parsed
    factor = _BYTES_PER_SECOND_PER_UNIT.get((unit or default_unit).lower())
    if factor is None:
        raise ValueError(f"not a throughput: {quoted(str(cell), _CELL_CHARS)}")
    return value * factor


def us_to_ns(cell: str | None, default_unit: str = "us") -> int | None:
    """Clock-event counters: nvidia-smi prints microseconds ("212553937 us")."""
    parsed = number_and_unit(cell)
    if parsed is None:
        return None
    value, unit = parsed
    scale = {"us": 1000, "ms": 1_000_000, "ns": 1, "s": 1_000_000_000}.get(
        (unit or default_unit).lower()
    )
    if scale is None or not math.isfinite(value * scale):
        raise ValueError(f"not a duration: {quoted(str(cell), _CELL_CHARS)}")
    return round(value * scale)


def to_bool(cell: str | None) -> bool | None:
    if is_missing(cell):
        return None
    assert cell is not None
    text = cell.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"not a yes/no value: {quoted(cell.strip(), _CELL_CHARS)}")


# the longest text a field holds: a path (a process name) is at most PATH_MAX; a longer cell is
# damage, not a reading, and echoing it would fill every title that names the field
MAX_TEXT_CHARS = 4096
# a version ("610.57.04", "13.0", "96.00.74.00.01") is a few dozen characters at most
MAX_VERSION_CHARS = 64


def to_text(cell: str | None) -> str | None:
    if is_missing(cell):
        return None
    assert cell is not None
    text = cell.strip()
    return text if len(text) <= MAX_TEXT_CHARS else None


def _printed(cell: str | None, values: frozenset[str]) -> str | None:
    """The text of a cell whose real values include words NOT_REPORTED lists (a recovery action
    "None", a fabric state "Not Supported"): those ``values`` are read, the rest of
    NOT_REPORTED (N/A, bracketed errors) is "not reported"."""
    if cell is None:
        return None
    text = " ".join(cell.split())
    if is_missing(text) and text.lower() not in values:
        return None
    return text


def to_recovery_action(cell: str | None) -> str | None:
    """ "GPU Recovery Action : None" / "Reset" / "Drain and Reset" → "none", "reset", ..."""
    text = _printed(cell, frozenset({"none"}))
    return None if text is None else nvml_enums.recovery_action_from_text(text)


def to_fabric_state(cell: str | None) -> str | None:
    """Fabric "State : Completed" → "completed" ("not-supported", "not-started", ...)."""
    text = _printed(cell, frozenset({"not supported"}))
    return None if text is None else nvml_enums.fabric_state_from_text(text)


def to_fabric_status(cell: str | None) -> str | None:
    """Fabric "Status : Success" → "success"; the NVML error text of a failed registration is
    kept as printed."""
    text = _printed(cell, frozenset({"unknown error"}))
    return None if text is None else nvml_enums.fabric_status_from_text(text)


# The yes/no rows of nvidia-smi's "Fabric / Health" block (-q row name, XML tag under
# fabric/health) and the FabricHealthIssue each reports (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*:
# every row is one 2-bit field of healthMask, TRUE / FALSE / NOT_SUPPORTED).
FABRIC_HEALTH_ROWS: tuple[tuple[str, str, FabricHealthIssue], ...] = (
    ("Bandwidth", "bandwidth", FabricHealthIssue.DEGRADED_BANDWIDTH),
    ("Route Recovery in progress", "route_recovery_in_progress", FabricHealthIssue.ROUTE_RECOVERY),
    ("Route Unhealthy", "route_unhealthy", FabricHealthIssue.ROUTE_UNHEALTHY),
    (
        "Access Timeout Recovery",
        "access_timeout_recovery",
        FabricHealthIssue.ACCESS_TIMEOUT_RECOVERY,
    ),
)
FABRIC_HEALTH_CONFIGURATION = ("Incorrect Configuration", "incorrect_configuration")
# "Bandwidth" answers "Full" / "Degraded" where the other rows answer True / False.
_CONDITION_PRESENT = _TRUE | {"degraded"}
_CONDITION_ABSENT = _FALSE | {"full"}
# NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_* by a word of the printed text (nvidia-smi
# prints the kind; a word is matched, not a whole spelling, so that a rewording still reads).
_CONFIGURATION_WORDS: tuple[tuple[str, FabricHealthIssue], ...] = (
    ("sysguid", FabricHealthIssue.INCORRECT_SYSGUID),
    ("chassis", FabricHealthIssue.INCORRECT_CHASSIS_SN),
    ("partition", FabricHealthIssue.NO_PARTITION),
    ("nvlink", FabricHealthIssue.INSUFFICIENT_NVLINKS),
    ("firmware", FabricHealthIssue.INCOMPATIBLE_GPU_FW),
    ("fw", FabricHealthIssue.INCOMPATIBLE_GPU_FW),
    ("location", FabricHealthIssue.INVALID_LOCATION),
    ("state", FabricHealthIssue.GPU_STATE_INVALID),
)


def to_fabric_health_summary(cell: str | None) -> str | None:
    """Fabric "Health / Summary : Healthy" → "healthy" ("unhealthy", "limited-capacity");
    N/A and "Not Supported" (NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED) → None."""
    text = to_text(cell)
    # spelt like the fabric state: lower case, hyphenated
    return None if text is None else nvml_enums.fabric_state_from_text(text)


def fabric_condition(cell: str | None) -> bool | None:
    """One yes/no row of "Fabric / Health": present, absent, or None (N/A, not supported, or a
    word this reader does not know: nothing is claimed from it)."""
    text = to_text(cell)
    if text is None:
        return None
    word = " ".join(text.split()).lower()
    if word in _CONDITION_PRESENT:
        return True
    return False if word in _CONDITION_ABSENT else None


def fabric_configuration(cell: str | None) -> FabricHealthIssue | None:
    """ "Incorrect Configuration : None" → None; any other printed kind → its issue."""
    text = to_text(cell)  # "None" is NOT_REPORTED: no misconfiguration, or none reported
    if text is None:
        return None
    words = re.findall(r"[a-z0-9]+", text.lower())
    for word, issue in _CONFIGURATION_WORDS:
        if any(w.startswith(word) for w in words):
            return issue
    return FabricHealthIssue.INCORRECT_CONFIGURATION


def fabric_health_issues(
    conditions: list[tuple[FabricHealthIssue, str | None]], configuration: str | None
) -> tuple[str, ...] | None:
    """The issues the "Fabric / Health" rows report present, () when every row that answered
    said no, None when no row answered (all N/A: the driver reports no fabric health)."""
    answers = [(issue, fabric_condition(cell)) for issue, cell in conditions]
    kind = fabric_configuration(configuration)
    if kind is not None:
        answers.append((kind, True))
    elif _says_none(configuration):
        answers.append((FabricHealthIssue.INCORRECT_CONFIGURATION, False))
    return nvml_enums.present_issues(answers)


def _says_none(cell: str | None) -> bool:
    return cell is not None and cell.strip().lower() == "none"


# A driver or CUDA version is numbers ("580.88", "610.57.04", "13.0"); what authors put in its
# place when they hide it ("XXX.XX", "xxx.xx.xx", "<version>") is not one.
_VERSION_NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]+)*$")


def to_version(cell: str | None) -> str | None:
    """ "610.57.04 [Deprecated; ...]" → "610.57.04"; a redacted "XXX.XX" → None."""
    text = to_text(cell)
    if text is None:
        return None
    version = text.split(" [", 1)[0].strip()
    if len(version) > MAX_VERSION_CHARS or not _VERSION_NUMBER.match(version):
        return None
    return version


def parse_smi_time(text: str | None) -> float | None:
    """nvidia-smi timestamps carry no zone; read as UTC so a capture parses the same anywhere.

    ``-q``/XML print "Tue Jul 14 09:00:44 2026", CSV prints "2026/07/14 09:00:44.579".
    """
    if is_missing(text):
        return None
    assert text is not None
    raw = text.strip()
    if not raw.isascii():  # strptime's %Y, like int(), reads any Unicode digit
        return None
    if "/" in raw:  # CSV: fraction of a second after the dot
        head, _, frac = raw.partition(".")
        pattern = "%Y/%m/%d %H:%M:%S"
    else:
        head, frac, pattern = raw, "", "%a %b %d %H:%M:%S %Y"
    try:
        seconds = float(calendar.timegm(time.strptime(head, pattern)))
    except ValueError:
        return None
    if frac.isdecimal():
        seconds += int(frac) / 10 ** len(frac)
    return seconds


_NAME_ORDER = {name: i for i, (_, name) in enumerate(CLOCK_EVENT_BITS)}


def clock_event_name(raw: str) -> str | None:
    """Normalise the per-reason names of XML tags, CSV columns and ``-q`` text to ours."""
    key = re.sub(r"[^a-z0-9]+", "_", raw.strip().lower()).strip("_")
    for prefix in ("clocks_event_reason_", "clocks_throttle_reason_"):
        key = key.removeprefix(prefix)
    aliases = {
        "idle": "gpu_idle",
        "display_clocks_setting": "display_clock_setting",
    }
    key = aliases.get(key, key)
    return key if key in _NAME_ORDER else None


def ordered_reasons(names: set[str]) -> tuple[str, ...]:
    return tuple(sorted(names, key=_NAME_ORDER.__getitem__))
