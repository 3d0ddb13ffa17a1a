"""Every number the health rules compare a reading with, its default, and where the default comes
from. Users override any of them with a TOML file of flat ``name = value`` keys
(``thresholds_from_toml``); the rules read only the frozen dataclass.

Units are in the field names: ``_celsius``, ``_percent`` (0-100), ``_ratio`` (0-1, a share of a
maximum), ``_share`` (0-1, a share of the readings or GPUs in a window), ``_s``, ``_per_minute``,
``_per_second``, ``_count``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from gpuwarden.catalog import health_lines as lines
from gpuwarden.documents import DocumentError, load_toml_text
from gpuwarden.errors import InputError

_REFERENCE = "thresholds-invalid"
_HINT = (
    "a thresholds file holds flat `name = number` TOML keys named as in the README's "
    "health-thresholds table, e.g. `memory_used_max_ratio = 0.9`"
)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The health rules' knobs (defaults: ``THRESHOLD_SOURCES`` says where each comes from)."""

    # --- temperature (point rules)
    gpu_temperature_slowdown_headroom_celsius: float = 5.0
    gpu_temperature_margin_min_celsius: float = 5.0
    gpu_temperature_fallback_celsius: float = 83.0
    memory_temperature_headroom_celsius: float = 5.0
    # --- memory health (point rules)
    retired_pages_dbe_limit_count: int = lines.RETIRED_PAGES_DBE_LIMIT_COUNT.value
    retired_pages_total_limit_count: int = 63
    memory_used_max_ratio: float = 0.95
    # --- what "under load" means for the PCIe link and the power cap
    load_utilization_min_percent: float = 50.0
    # --- windows: the least evidence a windowed verdict rests on
    window_min_samples_count: int = 5
    window_min_span_s: float = 10.0
    busy_utilization_min_percent: float = lines.BUSY_UTILIZATION_MIN_PERCENT.value
    pillar_coverage_min_share: float = 0.8
    # --- utilization verdicts
    low_utilization_max_percent: float = lines.LOW_UTILIZATION_MAX_PERCENT.value
    low_utilization_min_span_s: float = 30.0
    fake_load_utilization_min_percent: float = 95.0
    fake_load_sm_active_max_ratio: float = 0.20
    fake_load_power_max_ratio: float = 0.25
    fake_load_memory_utilization_max_percent: float = 5.0
    memory_bound_dram_active_min_ratio: float = 0.80
    memory_bound_sm_active_max_ratio: float = 0.30
    no_tensor_tensor_active_max_ratio: float = 0.01
    no_tensor_sm_active_min_ratio: float = 0.50
    data_starved_min_span_s: float = 20.0
    data_starved_max_interval_s: float = 5.0
    data_starved_min_cycles_count: int = 2
    data_starved_idle_max_ratio: float = 0.10
    data_starved_busy_min_ratio: float = 0.50
    data_starved_idle_min_share: float = 0.20
    data_starved_power_correlation_min_ratio: float = 0.50
    comm_bound_sm_drop_max_ratio: float = 0.50
    comm_bound_traffic_min_ratio: float = 0.50
    comm_bound_traffic_min_bytes_per_second: float = 1e9
    comm_bound_lockstep_min_share: float = 0.75
    comm_bound_min_share: float = 0.25
    # --- peers
    peers_min_gpus_count: int = lines.PEERS_MIN_GPUS_COUNT.value
    straggler_robust_z_min: float = lines.STRAGGLER_ROBUST_Z_MIN.value
    straggler_min_gap_ratio: float = lines.STRAGGLER_MIN_GAP_RATIO.value
    straggler_fallback_min_gap_ratio: float = 0.20
    thermal_outlier_min_celsius: float = lines.THERMAL_OUTLIER_MIN_CELSIUS.value
    thermal_outlier_load_match_ratio: float = lines.THERMAL_OUTLIER_LOAD_MATCH_RATIO.value
    # --- error counters over a window
    ecc_corrected_max_per_minute: float = lines.ECC_CORRECTED_MAX_PER_MINUTE.value
    pcie_replay_max_per_minute: float = 8.0
    nvlink_replay_recovery_max_count: int = 1
    nvlink_crc_max_per_second: float = 100.0


DEFAULT_THRESHOLDS = Thresholds()

_DIAG = "shared/reference/diagnosis.md §2 (the seeds' healthy ranges)"
_DCGM_LIMITS = "DCGM dcgmlib/dcgm_gpu_hardware_limits.h"
THRESHOLD_SOURCES: Mapping[str, str] = {
    "gpu_temperature_slowdown_headroom_celsius": f"{_DIAG}: GPU ≥ its slowdown threshold − 5 °C",
    "gpu_temperature_margin_min_celsius": (
        f"{_DIAG}, read on the T.Limit margin (NVML nvmlDeviceGetMarginTemperature): slowdown "
        "starts a few °C past T.Limit 0 (the H100 capture prints 'Slowdown T.Limit -2 C'), so 5 °C "
        "of margin is the same warning distance as slowdown − 5; applied also where the board "
        "states a slowdown threshold: the driver's SW thermal slowdown starts at the max operating "
        "temperature (nvidia-smi(1), SW Thermal Slowdown), on some boards far below slowdown"
    ),
    "gpu_temperature_fallback_celsius": (
        f"{_DIAG}: 83 °C when the board states no threshold and the catalog holds none for its "
        "model (catalog/data/gpu_thermal.csv: the slowdown and max operating temperatures real "
        "captures of the model print, judged with the same headroom and margin) (GPU Boost's "
        "default target temperature on GeForce cards)"
    ),
    "memory_temperature_headroom_celsius": f"{_DIAG}: memory (HBM) ≥ its max − 5 °C",
    "retired_pages_dbe_limit_count": lines.RETIRED_PAGES_DBE_LIMIT_COUNT.source,
    "retired_pages_total_limit_count": (
        f"{_DCGM_LIMITS}: DCGM_LIMIT_MAX_RETIRED_PAGES 63, SBE + DBE, 'updated to match the field "
        "diag'; the table holds 64 pages (~256 KB, NVIDIA Dynamic Page Retirement)"
    ),
    "memory_used_max_ratio": f"{_DIAG}: memory used > 95 % of total",
    "load_utilization_min_percent": (
        "the low-utilization line of diagnosis.md §2 (50 %): above it the GPU is busy, and the "
        "driver keeps the PCIe link and clocks at full speed"
    ),
    "window_min_samples_count": (
        "gpuwarden: NVML averages utilization over 1/6-1 s, so 5 readings are the fewest "
        "independent ones a verdict should rest on"
    ),
    "window_min_span_s": (
        "gpuwarden: a training step takes 0.1-10 s; 10 s covers several, so a verdict is not "
        "about one step"
    ),
    "busy_utilization_min_percent": lines.BUSY_UTILIZATION_MIN_PERCENT.source,
    "pillar_coverage_min_share": (
        "gpuwarden: a DCGM pillar decides only when at least 80 % of the readings report it"
    ),
    "low_utilization_max_percent": lines.LOW_UTILIZATION_MAX_PERCENT.source,
    "low_utilization_min_span_s": (
        "gpuwarden: 'sustained' = half of watch's default 60 s window, longer than a checkpoint "
        "save or an evaluation pass"
    ),
    "fake_load_utilization_min_percent": f"{_DIAG}: utilization ≈ 100 %",
    "fake_load_sm_active_max_ratio": f"{_DIAG}: SM active < 20 %",
    "fake_load_power_max_ratio": (
        "gpuwarden: idle boards draw 8-17 % of their power limit in the captures (H100 70/700 W, "
        "RTX 4080 SUPER 26/320 W, A100 67/400 W, T4 9/70 W); below 25 % nothing is computed"
    ),
    "fake_load_memory_utilization_max_percent": (
        "gpuwarden: 'no memory traffic' — the captures' idle boards read 0-10 %, real kernels "
        "read tens of %"
    ),
    "memory_bound_dram_active_min_ratio": f"{_DIAG}: DRAM active > 80 %",
    "memory_bound_sm_active_max_ratio": f"{_DIAG}: SM active < 30 %",
    "no_tensor_tensor_active_max_ratio": f"{_DIAG}: tensor active ≈ 0 (under 1 %)",
    "no_tensor_sm_active_min_ratio": f"{_DIAG}: SM active high (half the SMs or more)",
    "data_starved_min_span_s": (
        "gpuwarden: two input-pipeline cycles of a few seconds each fit in 20 s"
    ),
    "data_starved_max_interval_s": (
        "gpuwarden: an input-pipeline stall lasts a step or a few (~0.1-5 s); readings further "
        "apart average the busy and idle phases into one level (dcgm-exporter's 30 s default, "
        "`nvidia-smi dmon -d 30`), so the rhythm cannot show"
    ),
    "data_starved_min_cycles_count": (
        "gpuwarden: a sawtooth needs at least two busy → idle → busy cycles"
    ),
    "data_starved_idle_max_ratio": (
        "gpuwarden: waiting for input, SM activity falls to a tenth of its busy level or less"
    ),
    "data_starved_busy_min_ratio": (
        "gpuwarden: computing, SM activity is at least half its busy level (the 90th percentile)"
    ),
    "data_starved_idle_min_share": (
        "gpuwarden: idle 20 % of the time costs a fifth of the GPU — worth a warning"
    ),
    "data_starved_power_correlation_min_ratio": (
        "gpuwarden: power follows real on/off compute (Pearson r ≥ 0.5); without it the gaps may "
        "be sampling artefacts"
    ),
    "comm_bound_sm_drop_max_ratio": (
        "gpuwarden: during a collective SM activity falls below half of the GPU's busy level"
    ),
    "comm_bound_traffic_min_ratio": (
        "gpuwarden: NVLink/PCIe traffic at half its peak in the window or more"
    ),
    "comm_bound_traffic_min_bytes_per_second": (
        "gpuwarden: 1 GB/s — under it the interconnect carries control traffic, not gradients"
    ),
    "comm_bound_lockstep_min_share": (
        "gpuwarden: 'in lockstep' = three GPUs of four drop at the same reading"
    ),
    "comm_bound_min_share": (
        "gpuwarden: communication-only time of a quarter of the window or more"
    ),
    "peers_min_gpus_count": lines.PEERS_MIN_GPUS_COUNT.source,
    "straggler_robust_z_min": lines.STRAGGLER_ROBUST_Z_MIN.source,
    "straggler_min_gap_ratio": lines.STRAGGLER_MIN_GAP_RATIO.source,
    "straggler_fallback_min_gap_ratio": (
        "gpuwarden: power (the NVML fallback) varies up to ~10 % between identical boards at the "
        "same load (silicon leakage), so the gap must be twice that"
    ),
    "thermal_outlier_min_celsius": lines.THERMAL_OUTLIER_MIN_CELSIUS.source,
    "thermal_outlier_load_match_ratio": lines.THERMAL_OUTLIER_LOAD_MATCH_RATIO.source,
    "ecc_corrected_max_per_minute": lines.ECC_CORRECTED_MAX_PER_MINUTE.source,
    "pcie_replay_max_per_minute": (
        f"{_DCGM_LIMITS}: DCGM_LIMIT_MAX_PCIREPLAY_RATE 8, '8 replays per minute is the maximum "
        "recommended by RM'"
    ),
    "nvlink_replay_recovery_max_count": (
        f"{_DCGM_LIMITS}: DCGM_LIMIT_MAX_NVLINK_ERROR 1 — any replay or recovery error fails "
        "DCGM's NVLink health watch"
    ),
    "nvlink_crc_max_per_second": (
        f"{_DCGM_LIMITS}: DCGM_LIMIT_MAX_NVLINK_CRC_ERROR 100, 'CRC errors only matter at rates "
        "of 100+ per second'"
    ),
}

# Fields whose value is a share of a whole, so above 1 is a typo (0.95, not 95).
_FRACTIONS = ("_ratio", "_share")


def _invalid(message: str, hint: str = _HINT) -> InputError:
    return InputError(message, reference=_REFERENCE, hint=hint)


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, [f.name for f in fields(Thresholds)], n=3, cutoff=0.6)
    if close:
        return "did you mean " + ", ".join(repr(c) for c in close) + "?"
    return _HINT


def _checked_value(key: str, value: Any, default: float) -> float:
    """``value`` as the field's type, or an error naming the key and what is wrong."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(f"threshold {key!r}: {value!r} is not a number")
    try:  # a TOML integer may have hundreds of digits: more than any float holds
        float(value)
    except OverflowError:
        digits = len(str(abs(value)))
        raise _invalid(
            f"threshold {key!r}: a {digits}-digit number is not a finite number"
        ) from None
    if isinstance(default, int) and not float(value).is_integer():
        raise _invalid(f"threshold {key!r}: {value!r} must be a whole number")
    if not math.isfinite(value):
        raise _invalid(f"threshold {key!r}: {value!r} is not a finite number")
    if value < 0:
        raise _invalid(f"threshold {key!r}: {value!r} is negative; thresholds are ≥ 0")
    if key.endswith(_FRACTIONS) and value > 1:
        raise _invalid(
            f"threshold {key!r}: {value!r} is above 1; it is a share (0.95 means 95 %)",
        )
    if key.endswith("_percent") and value > 100:
        raise _invalid(f"threshold {key!r}: {value!r} is above 100 %")
    return int(value) if isinstance(default, int) else float(value)


def thresholds_from_toml(text: str, base: Thresholds = DEFAULT_THRESHOLDS) -> Thresholds:
    """``base`` with the keys of a TOML document overriding it. Raises ``InputError``
    (reference ``thresholds-invalid``) naming the key and the problem; the caller adds the file
    name."""
    try:
        document = load_toml_text(text)
    except DocumentError as exc:
        raise _invalid(str(exc)) from None
    known = {f.name: getattr(base, f.name) for f in fields(Thresholds)}
    changes: dict[str, Any] = {}
    for key, value in document.items():
        if key not in known:
            raise _invalid(f"unknown threshold {key!r}", hint=_did_you_mean(key))
        changes[key] = _checked_value(key, value, known[key])
    return replace(base, **changes)
