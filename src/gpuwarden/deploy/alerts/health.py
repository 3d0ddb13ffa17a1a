"""Health: the GPU is broken or about to be (memory errors, Xids, lost GPUs, heat, power, links),
and the telemetry that says so is missing or stale. Codes and severities: diagnosis.md §2."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from gpuwarden.catalog.thermal import ThermalThresholds, reported_names, thermal_catalog
from gpuwarden.catalog.xid import CATALOG_URL
from gpuwarden.deploy.alerts.spec import AlertSpec, Case, FailureMode, InputSeries, Text
from gpuwarden.deploy.alerts.spec import series as _s
from gpuwarden.deploy.alerts.xid import (
    XID_TOPIC,
    critical_matcher,
    dcgm_xids,
    gpuwarden_xids,
    warning_matcher,
)
from gpuwarden.deploy.knobs import AlertKnobs
from gpuwarden.deploy.promql import (
    GPU,
    NODE,
    alternatives,
    each_gpu_once,
    either,
    indent,
    per_node,
    selector,
    set_label,
)
from gpuwarden.health.thresholds import Thresholds
from gpuwarden.telemetry.clock_events import CLOCK_EVENT_BITS
from gpuwarden.types.health import Severity

HEALTH = FailureMode.HEALTH
_CRIT = Severity.CRITICAL
_WARN = Severity.WARNING
# dcgm-exporter publishes the clock-event bitmask under its old and its DCGM 4 name
# (telemetry.md §2.3, field 112); bits as NVML's nvmlClocksEventReasons.
_REASON_FIELDS = ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
_BIT = {name: bit for bit, name in CLOCK_EVENT_BITS}
_SW_THERMAL_BIT = _BIT["sw_thermal_slowdown"]  # the next bit is HW thermal slowdown
_HW_POWER_BRAKE_BIT = _BIT["hw_power_brake_slowdown"]
# dcgm-exporter's clock_event label values (clock_events_collector.go clockEventToString)
_THERMAL_EVENTS = "~sw_thermal|hw_thermal"
_POWER_BRAKE_EVENT = "hw_power_brake"


def finding(code: str) -> str:
    """gpuwarden's health verdict of ``code``: one series per finding, its severity a label."""
    return selector("gpuwarden_finding", code=code)


def _bits(bit: int, width: int) -> str:
    """The bitmask fields with any of ``width`` bits from ``bit`` set (PromQL has no bitwise
    operators: floor and modulo read the bits)."""
    return either(*(f"floor({f} / {bit}) % {2**width} > 0" for f in _REASON_FIELDS))


def _clock_events(matcher: str, k: AlertKnobs) -> str:
    """dcgm-exporter's clock-event counts (windowed and, newest, cumulative), one per GPU."""
    w = k.counter_rate_window
    count = selector("DCGM_EXP_CLOCK_EVENTS_COUNT", clock_event=matcher)
    total = selector("DCGM_EXP_CLOCK_EVENTS_TOTAL", clock_event=matcher)
    return either(
        f"max without(clock_event, window_size_in_ms) ({count} > 0)",
        f"max without(clock_event) (increase({total}[{w}]) > 0)",
    )


def gpu_lost(k: AlertKnobs) -> AlertSpec:
    lost_xid = dcgm_xids("79", k)
    missing = (
        f"last_over_time(DCGM_FI_DEV_GPU_TEMP[{k.gpu_missing_lookback}])\n"
        f"unless on({GPU}) DCGM_FI_DEV_GPU_TEMP\n"
        f"and on({NODE}) DCGM_FI_DEV_GPU_TEMP"
    )
    temps = (_s("DCGM_FI_DEV_GPU_TEMP", "40x100"), _s("DCGM_FI_DEV_GPU_TEMP", "41x100", gpu=1))
    return AlertSpec(
        "GpuLost",
        "gpu-lost",
        HEALTH,
        _CRIT,
        "GPU lost (fallen off the bus)",
        "Xid 79 in dcgm-exporter's Xid series, or the GPU's series vanished while the other "
        "GPUs of its node still report",
        either(lost_xid, f"{missing}\nunless on({GPU}) (\n  {lost_xid}\n)"),
        finding("gpu-lost"),
        fails_job=True,
        cases=(
            Case(
                "xid 79 in the last-value gauge",
                (_s("DCGM_FI_DEV_XID_ERRORS", "0x5 79x20"), *temps),
                (0,),
                {"xid": "79"},
                at_minutes=15,
            ),
            Case(
                "xid 79 counted by dcgm-exporter",
                (_s("DCGM_EXP_XID_ERRORS_TOTAL", "_x5 1x20", xid="79"), *temps),
                (0,),
                {"xid": "79"},
                at_minutes=15,
            ),
            Case(
                "a GPU's series stop while its node still reports",
                (_s("DCGM_FI_DEV_GPU_TEMP", "40x10 stale"), temps[1]),
                (0,),
                at_minutes=20,
            ),
            Case(
                "healthy: no Xid, every GPU reports", (_s("DCGM_FI_DEV_XID_ERRORS", "0x30"), *temps)
            ),
            Case(
                "healthy: the whole node stops (the exporter is down, not a GPU)",
                (
                    _s("DCGM_FI_DEV_GPU_TEMP", "40x10 stale"),
                    _s("DCGM_FI_DEV_GPU_TEMP", "40x10 stale", gpu=1),
                ),
            ),
            Case(
                "healthy: an Xid 79 more than an hour old",
                (_s("DCGM_FI_DEV_XID_ERRORS", "0 79x100"), *temps),
                at_minutes=90,
            ),
        ),
    )


def memory_errors(t: Thresholds, k: AlertKnobs) -> tuple[AlertSpec, ...]:
    w = k.counter_rate_window
    storm = t.ecc_corrected_max_per_minute
    dbe_limit, total_limit = t.retired_pages_dbe_limit_count, t.retired_pages_total_limit_count
    return (
        AlertSpec(
            "GpuEccUncorrectable",
            "ecc-uncorrectable",
            HEALTH,
            _CRIT,
            "uncorrectable ECC error",
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0 (volatile double-bit errors since the last reset)",
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0",
            finding("ecc-uncorrectable"),
            fails_job=True,
            cases=(
                Case(
                    "a double-bit error", (_s("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "0x5 1x15"),), (0,)
                ),
                Case("healthy: none", (_s("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "0x20"),)),
            ),
        ),
        AlertSpec(
            "GpuEccCorrectableStorm",
            "ecc-correctable-storm",
            HEALTH,
            _WARN,
            "corrected ECC errors rising fast",
            f"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL rising faster than {storm:g} per minute over {w}",
            f"rate(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[{w}]) * 60 > {storm:g}",
            finding("ecc-correctable-storm"),
            for_="5m",
            cases=(
                Case(
                    "twice the limit per minute",
                    (_s("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", f"0+{2 * storm:g}x30"),),
                    (0,),
                ),
                Case(
                    "healthy: a fifth of the limit",
                    (_s("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", f"0+{storm / 5:g}x30"),),
                ),
            ),
        ),
        AlertSpec(
            "GpuRetiredPagesPending",
            "retired-pages-pending",
            HEALTH,
            _WARN,
            "page retirement pending (reset needed)",
            "DCGM_FI_DEV_RETIRED_PENDING > 0",
            "DCGM_FI_DEV_RETIRED_PENDING > 0",
            finding("retired-pages-pending"),
            cases=(
                Case("pending", (_s("DCGM_FI_DEV_RETIRED_PENDING", "0x5 1x15"),), (0,)),
                Case("healthy: none pending", (_s("DCGM_FI_DEV_RETIRED_PENDING", "0x20"),)),
            ),
        ),
        AlertSpec(
            "GpuRetiredPagesLimit",
            "retired-pages-limit",
            HEALTH,
            _CRIT,
            "retired-page table (nearly) full: RMA criterion",
            f"DCGM_FI_DEV_RETIRED_DBE ≥ {dbe_limit}, or SBE + DBE retired pages ≥ {total_limit}",
            f"DCGM_FI_DEV_RETIRED_DBE >= {dbe_limit}\n or\n"
            f"(DCGM_FI_DEV_RETIRED_SBE + DCGM_FI_DEV_RETIRED_DBE) >= {total_limit}",
            finding("retired-pages-limit"),
            cases=(
                Case(
                    "DBE pages at the limit",
                    (_s("DCGM_FI_DEV_RETIRED_DBE", f"{dbe_limit}x20"),),
                    (0,),
                ),
                Case(
                    "SBE + DBE pages at the limit",
                    (
                        _s("DCGM_FI_DEV_RETIRED_SBE", f"{total_limit - 3}x20"),
                        _s("DCGM_FI_DEV_RETIRED_DBE", "3x20"),
                    ),
                    (0,),
                ),
                Case(
                    "healthy: a few retired pages",
                    (_s("DCGM_FI_DEV_RETIRED_SBE", "10x20"), _s("DCGM_FI_DEV_RETIRED_DBE", "2x20")),
                ),
            ),
        ),
        AlertSpec(
            "GpuRowRemapPending",
            "row-remap-pending",
            HEALTH,
            _WARN,
            "row remap pending (reset needed)",
            "DCGM_FI_DEV_ROW_REMAP_PENDING > 0",
            "DCGM_FI_DEV_ROW_REMAP_PENDING > 0",
            finding("row-remap-pending"),
            cases=(
                Case("pending", (_s("DCGM_FI_DEV_ROW_REMAP_PENDING", "0x5 1x15"),), (0,)),
                Case("healthy: none pending", (_s("DCGM_FI_DEV_ROW_REMAP_PENDING", "0x20"),)),
            ),
        ),
        AlertSpec(
            "GpuRowRemapFailure",
            "row-remap-failure",
            HEALTH,
            _CRIT,
            "row remapping failed: RMA criterion",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0, or a memory bank without spare rows "
            "(DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_NONE > 0)",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0\n or\nDCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_NONE > 0",
            finding("row-remap-failure"),
            cases=(
                Case("a remap failed", (_s("DCGM_FI_DEV_ROW_REMAP_FAILURE", "0x5 1x15"),), (0,)),
                Case(
                    "a bank has no spare row left",
                    (_s("DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_NONE", "0x5 2x15"),),
                    (0,),
                ),
                Case(
                    "healthy: remapped rows but no failure",
                    (
                        _s("DCGM_FI_DEV_ROW_REMAP_FAILURE", "0x20"),
                        _s("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "3x20"),
                        _s("DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_NONE", "0x20"),
                    ),
                ),
            ),
        ),
        AlertSpec(
            "GpuSramThresholdExceeded",
            "sram-threshold-exceeded",
            HEALTH,
            _CRIT,
            "SRAM error threshold exceeded: RMA criterion",
            "gpuwarden's reading of the SRAM threshold flag (no dcgm-exporter default field)",
            None,
            finding("sram-threshold-exceeded"),
        ),
        AlertSpec(
            "GpuMemoryUnrepairable",
            "memory-unrepairable",
            HEALTH,
            _CRIT,
            "memory the driver cannot repair: field diagnostics, then RMA",
            "gpuwarden's reading of the unrepairable-memory flag (R575+ nvidia-smi / NVML "
            "nvmlDeviceGetUnrepairableMemoryFlag; no dcgm-exporter default field)",
            None,
            finding("memory-unrepairable"),
        ),
        AlertSpec(
            "GpuRepairPending",
            "repair-pending",
            HEALTH,
            _WARN,
            "a channel or TPC repair waits for a GPU reset",
            "gpuwarden's reading of the repair-pending flags (R575+ nvidia-smi / NVML "
            "nvmlDeviceGetRepairStatus; no dcgm-exporter default field)",
            None,
            finding("repair-pending"),
        ),
    )


def driver_states() -> tuple[AlertSpec, ...]:
    # dcgmFabricManagerStatus_t: 1 not started, 2 in progress, 4 completed with an error
    # (telemetry/dcgm/fields.py); 0 = not an NVSwitch system, 5/6 = version mismatch reports.
    fabric = "DCGM_FI_DEV_FABRIC_MANAGER_STATUS"
    return (
        AlertSpec(
            "GpuRecoveryActionPending",
            "recovery-action-pending",
            HEALTH,
            _CRIT,
            "the driver asks for a recovery action",
            "DCGM_FI_DEV_GPU_RECOVERY_ACTION > 0 (1 reset, 2 reboot, 3 drain P2P, 4 drain and "
            "reset: NVML's nvmlDeviceGpuRecoveryAction_t)",
            "DCGM_FI_DEV_GPU_RECOVERY_ACTION > 0",
            finding("recovery-action-pending"),
            cases=(
                Case("reset asked", (_s("DCGM_FI_DEV_GPU_RECOVERY_ACTION", "0x5 1x15"),), (0,)),
                Case("healthy: none", (_s("DCGM_FI_DEV_GPU_RECOVERY_ACTION", "0x20"),)),
            ),
        ),
        AlertSpec(
            "GpuFabricManagerDown",
            "fabric-manager-down",
            HEALTH,
            _CRIT,
            "GPU not registered with the NVSwitch fabric",
            f"{fabric} not started (1), still in progress (2) or failed (4)",
            f"{fabric} == 1 or {fabric} == 2 or {fabric} == 4",
            finding("fabric-manager-down"),
            for_="5m",
            cases=(
                Case("not started", (_s(fabric, "1x20"),), (0,)),
                Case("failed", (_s(fabric, "4x20"),), (0,)),
                Case("healthy: completed", (_s(fabric, "3x20"),)),
                Case("healthy: not an NVSwitch system", (_s(fabric, "0x20"),)),
            ),
        ),
    )


# the alert of the catalog's critical Xids (Alertmanager's inhibit rules match on its name)
XID_CRITICAL_ALERT = "GpuXidCritical"


def xid_alerts(k: AlertKnobs) -> tuple[AlertSpec, ...]:
    text = Text(
        "the driver reported an Xid (kernel log 'NVRM: Xid'); the catalog's severity comes from "
        "NVIDIA's resolution bucket and DCGM's health watches",
        "look the Xid up in NVIDIA's Xid catalog (runbook_url) and do its immediate action; "
        "`gpuwarden explain 'Xid N'` gives the same row",
    )
    crit, warn = critical_matcher(), warning_matcher()
    return (
        AlertSpec(
            XID_CRITICAL_ALERT,
            "xid",
            HEALTH,
            _CRIT,
            "critical Xid {{ $labels.xid }}",
            "an Xid the catalog rates critical (reset, reboot or support) in dcgm-exporter's "
            f"Xid series within {k.xid_recent_window}",
            dcgm_xids(crit, k),
            set_label(gpuwarden_xids(crit, k), "severity", _CRIT.value),
            text=text,
            runbook_url=CATALOG_URL,
            cases=(
                Case(
                    "xid 48 in the last-value gauge",
                    (_s("DCGM_FI_DEV_XID_ERRORS", "0x5 48x20"),),
                    (0,),
                    {"xid": "48"},
                ),
                Case(
                    "xid 95 in the windowed count",
                    (
                        _s(
                            "DCGM_EXP_XID_ERRORS_COUNT",
                            "0x5 1x20",
                            xid="95",
                            window_size_in_ms="300000",
                        ),
                    ),
                    (0,),
                    {"xid": "95", "window_size_in_ms": "300000"},
                ),
                Case(
                    "the counter wins over the last-value gauge",
                    (
                        _s("DCGM_EXP_XID_ERRORS_TOTAL", "0x5 1x20", xid="48"),
                        _s("DCGM_FI_DEV_XID_ERRORS", "0x5 48x20"),
                    ),
                    (0,),
                    {"xid": "48"},
                ),
                Case(
                    "healthy: an application Xid 13", (_s("DCGM_FI_DEV_XID_ERRORS", "0x5 13x20"),)
                ),
                Case("healthy: no Xid", (_s("DCGM_FI_DEV_XID_ERRORS", "0x20"),)),
            ),
        ),
        AlertSpec(
            "GpuXidWarning",
            "xid",
            HEALTH,
            _WARN,
            "Xid {{ $labels.xid }}",
            "an Xid the catalog rates a warning (restart the application, check) or does not "
            f"list, in dcgm-exporter's Xid series within {k.xid_recent_window}",
            dcgm_xids(warn, k),
            set_label(gpuwarden_xids(warn, k), "severity", _WARN.value),
            text=text,
            runbook_url=CATALOG_URL,
            cases=(
                Case("xid 13", (_s("DCGM_FI_DEV_XID_ERRORS", "0x5 13x20"),), (0,), {"xid": "13"}),
                Case(
                    "an Xid the catalog does not list",
                    (_s("DCGM_EXP_XID_ERRORS_TOTAL", "0x5 2x20", xid="999"),),
                    (0,),
                    {"xid": "999"},
                ),
                Case(
                    "healthy: a critical Xid is not a warning",
                    (_s("DCGM_FI_DEV_XID_ERRORS", "0x5 48x20"),),
                ),
                Case(
                    "healthy: Xid 43 is information", (_s("DCGM_FI_DEV_XID_ERRORS", "0x5 43x20"),)
                ),
            ),
        ),
    )


def thermal_power(t: Thresholds, k: AlertKnobs) -> tuple[AlertSpec, ...]:
    return (
        AlertSpec(
            "GpuThermalSlowdown",
            "thermal-slowdown",
            HEALTH,
            _WARN,
            "thermal slowdown",
            "the clock-event reasons (bitmask or dcgm-exporter's clock-event counts) show SW or "
            "HW thermal slowdown",
            either(_bits(_SW_THERMAL_BIT, 2), _clock_events(_THERMAL_EVENTS, k)),
            finding("thermal-slowdown"),
            for_="2m",
            cases=(
                Case("HW thermal slowdown bit", (_s(_REASON_FIELDS[0], "0x5 64x20"),), (0,)),
                Case(
                    "SW thermal + power cap bits (new name)",
                    (_s(_REASON_FIELDS[1], "0x5 36x20"),),
                    (0,),
                ),
                Case(
                    "dcgm-exporter's clock-event count",
                    (
                        _s(
                            "DCGM_EXP_CLOCK_EVENTS_COUNT",
                            "0x5 3x20",
                            clock_event="hw_thermal",
                            window_size_in_ms="300000",
                        ),
                    ),
                    (0,),
                ),
                Case("healthy: idle", (_s(_REASON_FIELDS[0], "1x20"),)),
                Case("healthy: power cap only", (_s(_REASON_FIELDS[0], "4x20"),)),
                Case(
                    "healthy: HW slowdown alone (P-state change)", (_s(_REASON_FIELDS[0], "8x20"),)
                ),
            ),
        ),
        temperature_high(t),
        AlertSpec(
            "GpuPowerBrake",
            "power-brake",
            HEALTH,
            _WARN,
            "HW power brake slowdown",
            "the clock-event reasons show HW power brake slowdown (an external power signal)",
            either(_bits(_HW_POWER_BRAKE_BIT, 1), _clock_events(_POWER_BRAKE_EVENT, k)),
            finding("power-brake"),
            for_="1m",
            cases=(
                Case("power brake bit", (_s(_REASON_FIELDS[0], "0x5 128x20"),), (0,)),
                Case("power brake + HW slowdown", (_s(_REASON_FIELDS[0], "0x5 136x20"),), (0,)),
                Case("healthy: power cap", (_s(_REASON_FIELDS[0], "4x20"),)),
                Case("healthy: thermal is another alert", (_s(_REASON_FIELDS[0], "64x20"),)),
            ),
        ),
    )


# --- temperature: health.rules.thermal_power's temperature-high, threshold for threshold

# The ``threshold`` label: which line a GPU crossed (the catalog's arms name the model's own, in
# the words doctor's finding uses: "max operating 85 °C for its model").
STATED_SLOWDOWN = "stated slowdown"
STATED_MAX_OPERATING = "stated max operating"
STATED_MEMORY = "stated memory max operating"
FALLBACK_THRESHOLD = "fallback: no threshold stated or on record"
_TEMP = "DCGM_FI_DEV_GPU_TEMP"
# The threshold fields under their DCGM 3 and DCGM 4 (canonical ..._CELSIUS) names: a counters
# CSV may list either (telemetry/dcgm/fields.py reads both); dcgm-exporter's default CSV lists
# none, only DCGM_FI_DEV_GPU_TEMP and DCGM_FI_DEV_MEMORY_TEMP.
_SLOWDOWN = ("DCGM_FI_DEV_SLOWDOWN_TEMP", "DCGM_FI_DEV_GPU_TEMP_SLOWDOWN_CELSIUS")
_MARGIN = ("DCGM_FI_DEV_GPU_TEMP_LIMIT", "DCGM_FI_DEV_GPU_TEMP_MARGIN_CELSIUS")
_MAX_OP = ("DCGM_FI_DEV_GPU_MAX_OP_TEMP", "DCGM_FI_DEV_GPU_MAX_OP_TEMP_CELSIUS")
_MEM_MAX_OP = ("DCGM_FI_DEV_MEM_MAX_OP_TEMP", "DCGM_FI_DEV_MEMORY_MAX_OP_TEMP_CELSIUS")


def _field(names: tuple[str, ...]) -> str:
    return selector("", __name__="~" + alternatives(names))


# Thresholds the GPU states (doctor: celsius() > 0 for degrees; the T.Limit margin as it is):
# where any is scraped, only they judge, never the catalog or the fallback.
_STATED = f"{_field(_SLOWDOWN)} > 0 or {_field(_MARGIN)} or {_field(_MAX_OP)} > 0"
_REGEX_SPECIALS = re.compile(r"([\\.+*?()|\[\]{}^$])")


def catalog_line(known: ThermalThresholds, t: Thresholds) -> tuple[float, str] | None:
    """Where a GPU of this model is near a threshold the catalog holds for it and the words that
    name it: the lower of slowdown − headroom and max operating − margin, as doctor judges a
    capture that states none (None: the row holds neither)."""
    named = (
        ("slowdown", known.slowdown_celsius, t.gpu_temperature_slowdown_headroom_celsius),
        ("max operating", known.max_operating_celsius, t.gpu_temperature_margin_min_celsius),
    )
    lines = [
        (value - less, f"{what} {value:.0f} °C for its model")
        for what, value, less in named
        if value
    ]
    return min(lines, default=None)


def _names_regex(names: Iterable[str]) -> str:
    """An RE2 alternation matching exactly these names, case aside (NVML's spelling is fixed;
    doctor also ignores case)."""
    return "(?i)" + "|".join(_REGEX_SPECIALS.sub(r"\\\1", n) for n in names)


def _catalog_models(t: Thresholds) -> dict[tuple[float, str], list[str]]:
    """The names dcgm-exporter's ``modelName`` gives the catalog's models, by their line (models
    sharing a line share an arm of the rule)."""
    by_line: dict[tuple[float, str], list[str]] = {}
    for known in thermal_catalog():
        line = catalog_line(known, t)
        if line is not None:
            by_line.setdefault(line, []).extend(reported_names(known))
    return by_line


def _labelled(expr: str, threshold: str) -> str:
    return set_label(expr, "threshold", threshold)


def _first_per_gpu(*arms: str) -> str:
    """The arms in order, each only for GPUs no earlier arm alerts on: one alert per GPU, its
    ``threshold`` label from the first line crossed (doctor's finding names the same one)."""
    return f"\n or on({GPU})\n".join(f"({arm})" for arm in arms)


def _temperature_expr(t: Thresholds) -> str:
    """health.rules.thermal_power's order: the slowdown threshold or the max operating
    temperature (T.Limit margin, else absolute) the GPU states; else the lines the catalog holds
    for its model (``modelName``, one arm per line its models share); else the fallback degrees;
    and the memory against its max."""
    head = t.gpu_temperature_slowdown_headroom_celsius
    margin = t.gpu_temperature_margin_min_celsius
    slowdown = f"max by ({GPU}) ({_field(_SLOWDOWN)} > 0)"
    max_op = f"max by ({GPU}) ({_field(_MAX_OP)} > 0)"
    mem_max = f"max by ({GPU}) ({_field(_MEM_MAX_OP)} > 0)"
    mem_head = t.memory_temperature_headroom_celsius
    models = _catalog_models(t)
    on_record = "~" + _names_regex(n for names in models.values() for n in names)
    fallback = t.gpu_temperature_fallback_celsius
    unstated = _first_per_gpu(
        *(
            _labelled(f"{selector(_TEMP, modelName='~' + _names_regex(names))} >= {line:g}", words)
            for (line, words), names in models.items()
        ),
        _labelled(
            f"{_TEMP} >= {fallback:g}\nunless on({GPU}) {selector(_TEMP, modelName=on_record)}",
            FALLBACK_THRESHOLD,
        ),
    )
    return _first_per_gpu(
        _labelled(f"{_TEMP} - on({GPU}) group_left() {slowdown} >= -{head:g}", STATED_SLOWDOWN),
        _labelled(f"{_field(_MARGIN)} <= {margin:g}", STATED_MAX_OPERATING),
        _labelled(
            f"{_TEMP} - on({GPU}) group_left() {max_op} >= -{margin:g}\n"
            f"unless on({GPU}) {_field(_MARGIN)}",
            STATED_MAX_OPERATING,
        ),
        f"(\n  {indent(unstated)}\n)\nunless on({GPU}) ({_STATED})",
        _labelled(
            f"DCGM_FI_DEV_MEMORY_TEMP - on({GPU}) group_left() {mem_max} >= -{mem_head:g}",
            STATED_MEMORY,
        ),
    )


def temperature_high(t: Thresholds) -> AlertSpec:
    head = t.gpu_temperature_slowdown_headroom_celsius
    margin = t.gpu_temperature_margin_min_celsius
    fallback = t.gpu_temperature_fallback_celsius
    mem_head = t.memory_temperature_headroom_celsius
    hot, cool = 93 - head / 2, 93 - head - 3  # against the T4's 93 °C slowdown threshold
    slowdown, max_op, memory = (
        {"threshold": STATED_SLOWDOWN},
        {"threshold": STATED_MAX_OPERATING},
        {"threshold": STATED_MEMORY},
    )
    return AlertSpec(
        "GpuTemperatureHigh",
        "temperature-high",
        HEALTH,
        _WARN,
        "temperature near the slowdown threshold{{ with $labels.threshold }} ({{ . }}){{ end }}",
        f"GPU temperature ≥ the slowdown threshold it states − {head:g} °C, or ≤ {margin:g} °C "
        "from the max operating temperature it states (T.Limit margin or degrees); where it "
        f"states none, the same distances from its model's thresholds on record "
        f"(catalog/data/gpu_thermal.csv, by modelName), else ≥ {fallback:g} °C; or memory ≥ its "
        f"max − {mem_head:g} °C. The threshold label names the line crossed",
        _temperature_expr(t),
        finding("temperature-high"),
        for_="5m",
        cases=(
            Case(
                "near the slowdown threshold",
                (
                    _s("DCGM_FI_DEV_GPU_TEMP", f"{hot:g}x20"),
                    _s("DCGM_FI_DEV_SLOWDOWN_TEMP", "93x20"),
                ),
                (0,),
                slowdown,
            ),
            Case(
                "healthy: above the fallback but far from this board's threshold",
                (
                    _s("DCGM_FI_DEV_GPU_TEMP", f"{cool:g}x20"),
                    _s("DCGM_FI_DEV_SLOWDOWN_TEMP", "93x20"),
                ),
            ),
            Case(
                "no threshold, a model not on record: the fallback",
                (_s("DCGM_FI_DEV_GPU_TEMP", f"{fallback + 1:g}x20"),),
                (0,),
                {"threshold": FALLBACK_THRESHOLD},
            ),
            Case(
                "healthy: no threshold, below the fallback",
                (_s("DCGM_FI_DEV_GPU_TEMP", f"{fallback - 5:g}x20"),),
            ),
            Case(
                "T.Limit margin nearly used up",
                (_s("DCGM_FI_DEV_GPU_TEMP_LIMIT", f"{margin - 2:g}x20"),),
                (0,),
                max_op,
            ),
            Case(
                "T.Limit margin nearly used up, far from the stated slowdown",
                (
                    _s("DCGM_FI_DEV_GPU_TEMP", "60x20"),
                    _s("DCGM_FI_DEV_GPU_TEMP_LIMIT", f"{margin - 2:g}x20"),
                    _s("DCGM_FI_DEV_SLOWDOWN_TEMP", "93x20"),
                ),
                (0,),
                max_op,
            ),
            Case(
                "healthy: T.Limit margin",
                (_s("DCGM_FI_DEV_GPU_TEMP_LIMIT", f"{margin + 15:g}x20"),),
            ),
            Case(
                "memory near its max",
                (
                    _s("DCGM_FI_DEV_MEMORY_TEMP", f"{95 - mem_head / 2:g}x20"),
                    _s("DCGM_FI_DEV_MEM_MAX_OP_TEMP", "95x20"),
                ),
                (0,),
                memory,
            ),
            Case(
                "healthy: memory far from its max",
                (
                    _s("DCGM_FI_DEV_MEMORY_TEMP", "70x20"),
                    _s("DCGM_FI_DEV_MEM_MAX_OP_TEMP", "95x20"),
                ),
            ),
        ),
    )


def links(t: Thresholds, k: AlertKnobs) -> tuple[AlertSpec, ...]:
    w = k.counter_rate_window
    load = t.load_utilization_min_percent
    replays = t.pcie_replay_max_per_minute
    degraded = (
        "(DCGM_FI_DEV_PCIE_LINK_GEN < DCGM_FI_DEV_PCIE_MAX_LINK_GEN\n"
        " or\n DCGM_FI_DEV_PCIE_LINK_WIDTH < DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH)\n"
        f"and on({GPU}) DCGM_FI_DEV_GPU_UTIL >= {load:g}"
    )

    def link(gen: int, width: int, util: float) -> tuple[InputSeries, ...]:
        return (
            _s("DCGM_FI_DEV_PCIE_LINK_GEN", f"{gen}x30"),
            _s("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "5x30"),
            _s("DCGM_FI_DEV_PCIE_LINK_WIDTH", f"{width}x30"),
            _s("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "16x30"),
            _s("DCGM_FI_DEV_GPU_UTIL", f"{util:g}x30"),
        )

    return (
        AlertSpec(
            "GpuPcieLinkDegraded",
            "pcie-link-degraded",
            HEALTH,
            _WARN,
            "PCIe link below its maximum under load",
            f"PCIe generation or width below the maximum while utilization ≥ {load:g} % (idle "
            "downtraining is normal and ignored)",
            degraded,
            finding("pcie-link-degraded"),
            for_="10m",
            cases=(
                Case("Gen3 of Gen5 under load", link(3, 16, 90), (0,), at_minutes=25),
                Case("x8 of x16 under load", link(5, 8, 90), (0,), at_minutes=25),
                Case("healthy: Gen1 while idle", link(1, 16, 0), at_minutes=25),
                Case("healthy: full link under load", link(5, 16, 90), at_minutes=25),
            ),
        ),
        AlertSpec(
            "GpuPcieReplays",
            "pcie-errors",
            HEALTH,
            _WARN,
            "PCIe replays above the driver's limit",
            f"DCGM_FI_DEV_PCIE_REPLAY_COUNTER rising faster than {replays:g} per minute over {w}",
            f"rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[{w}]) * 60 > {replays:g}",
            finding("pcie-errors"),
            for_="5m",
            cases=(
                Case(
                    "twice the limit",
                    (_s("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", f"0+{2 * replays:g}x30"),),
                    (0,),
                ),
                Case(
                    "healthy: a replay now and then",
                    (_s("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "0 0 1x10 2x17"),),
                ),
            ),
        ),
    )


def thermal_outlier(t: Thresholds, k: AlertKnobs) -> AlertSpec:
    w = k.thermal_peer_window
    temp = each_gpu_once(f"avg_over_time(DCGM_FI_DEV_GPU_TEMP[{w}])")
    power = each_gpu_once(f"avg_over_time(DCGM_FI_DEV_POWER_USAGE[{w}])")
    hot, match, peers = (
        t.thermal_outlier_min_celsius,
        t.thermal_outlier_load_match_ratio,
        t.peers_min_gpus_count,
    )
    expr = (
        f"{temp} - on({NODE}) group_left() {per_node('quantile', f'0.5, {temp}')} >= {hot:g}\n"
        f"and on({GPU}) abs(\n  {power}\n  / on({NODE}) group_left() "
        f"{per_node('quantile', f'0.5, {power}')} - 1\n) <= {match:g}\n"
        f"and on({NODE}) {per_node('count', each_gpu_once('DCGM_FI_DEV_GPU_TEMP'))} >= {peers}"
    )

    def node(temps: tuple[float, ...], watts: tuple[float, ...]) -> tuple[InputSeries, ...]:
        return tuple(
            s
            for i, (c, p) in enumerate(zip(temps, watts, strict=True))
            for s in (
                _s("DCGM_FI_DEV_GPU_TEMP", f"{c:g}x40", gpu=i),
                _s("DCGM_FI_DEV_POWER_USAGE", f"{p:g}x40", gpu=i),
            )
        )

    return AlertSpec(
        "GpuThermalOutlier",
        "thermal-outlier",
        HEALTH,
        _WARN,
        "runs hotter than its peers at the same load",
        f"GPU temperature (mean over {w}) ≥ {hot:g} °C above the median of its node's GPUs, its "
        f"power within ±{match:.0%} of theirs, {peers} GPUs or more on the node",
        expr,
        finding("thermal-outlier"),
        for_="15m",
        cases=(
            Case(
                "12 °C hotter at the same power",
                node((62, 60, 61, 74), (600, 610, 590, 605)),
                (3,),
                at_minutes=35,
            ),
            Case(
                "healthy: hotter because it draws more power",
                node((62, 60, 61, 74), (600, 610, 590, 900)),
                at_minutes=35,
            ),
            Case("healthy: two GPUs are too few peers", node((55, 80), (600, 600)), at_minutes=35),
            Case(
                "healthy: a MIG GPU's four instances are one peer (two GPUs in all)",
                (
                    *node((74,), (605,)),
                    *(
                        s
                        for gi in range(1, 5)
                        for s in (
                            _s("DCGM_FI_DEV_GPU_TEMP", "60x40", 1, GPU_I_ID=str(gi)),
                            _s("DCGM_FI_DEV_POWER_USAGE", "600x40", 1, GPU_I_ID=str(gi)),
                        )
                    ),
                ),
                at_minutes=35,
            ),
        ),
    )


def rma_candidate() -> AlertSpec:
    return AlertSpec(
        "GpuRmaCandidate",
        "rma-candidate",
        HEALTH,
        _CRIT,
        "RMA criteria met",
        "gpuwarden's escalation (a fatal Xid recurring within 24 h, with the memory RMA "
        "criteria alerting on their own)",
        None,
        finding("rma-candidate"),
        text=Text(
            "the GPU meets NVIDIA's RMA criteria: a fatal Xid recurred within 24 h, or memory "
            "errors reached their limits",
            "drain the GPU; run the field diagnostics (or `dcgmi diag -r 4`); collect "
            "nvidia-bug-report.sh and open a support / RMA case",
        ),
    )


def _topic(topic: str, specs: tuple[AlertSpec, ...]) -> tuple[AlertSpec, ...]:
    return tuple(replace(s, topic=topic) for s in specs)


def health_alerts(t: Thresholds, k: AlertKnobs) -> tuple[AlertSpec, ...]:
    """By rule group: Xids and lost GPUs (they share the Xid recording rule), memory, the
    device's state and links, heat and power."""
    return (
        *_topic(XID_TOPIC, (gpu_lost(k), *xid_alerts(k))),
        *_topic("memory", (*memory_errors(t, k), rma_candidate())),
        *_topic("device", (*driver_states(), *links(t, k))),
        *_topic("thermal", (*thermal_power(t, k), thermal_outlier(t, k))),
    )
