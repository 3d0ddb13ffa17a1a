"""Set 9 of the dcgm-exporter held-out pages was to be themed: pages of GPUs in trouble (a
non-zero Xid, ECC or remap count, a throttle bit, a hot GPU, NVLink errors). The public
indexes gave none that is not already held or made up (tests/data/dcgm_public9/SOURCES.md), so
the set holds no page; this module keeps what the review of DCGM's fault fields behind it found.

DCGM 4 (dcgm_fields.h, fields 1420-1424) publishes the time NVML counted each clock-event reason
as its own ns counter: SW_POWER_CAP_NS is what field 240 (DCGM_FI_DEV_POWER_VIOLATION) counts,
and the thermal time nvidia-smi's readers keep is its SW + HW thermal slowdown counters
(1422 + 1423), as the smi readers sum them. A page with only the DCGM 4 names read neither.
"""

from __future__ import annotations

import pytest

from gpuwarden.telemetry.collector import derive_rates
from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.types.telemetry import DeviceSample

_LABELS = 'gpu="0",UUID="GPU-08533397-8c65-7a0b-003b-c4bd120e67c1",Hostname="h"'
_POWER_CAP = "DCGM_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP_NS"
_SW_THERMAL = "DCGM_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN_NS"
_HW_THERMAL = "DCGM_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN_NS"
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0  # dcgm_structs.h DCGM_INT64_BLANK


def _read(*series: tuple[str, object]) -> DeviceSample:
    """The one sample of a page of ``series`` (name, value as the page writes it)."""
    page = "".join(f"{name}{{{_LABELS}}} {value}\n" for name, value in series)
    (sample,) = parse_scrape(page, "page", 0.0).snapshot.samples
    return sample


def test_the_dcgm4_clock_event_times_are_the_violation_times() -> None:
    sample = _read((_POWER_CAP, 2_500_000_000), (_SW_THERMAL, 3_000), (_HW_THERMAL, 4_000))
    assert (sample.power_violation_ns_total, sample.thermal_violation_ns_total) == (
        2_500_000_000,
        7_000,
    )
    # the raw per-reason counters stay readable among the extras
    assert sample.extra["dcgm_dev_clocks_event_reason_hw_therm_slowdown_ns"] == 4_000


def test_one_thermal_reason_is_the_thermal_time_the_page_gives() -> None:
    """As the smi readers: the thermal time is the sum of the thermal counters present."""
    assert _read((_HW_THERMAL, 4_000)).thermal_violation_ns_total == 4_000


@pytest.mark.parametrize("classic_first", [True, False])
def test_fields_240_and_241_are_read_before_their_dcgm4_counterparts(classic_first: bool) -> None:
    classic = [("DCGM_FI_DEV_POWER_VIOLATION", 10), ("DCGM_FI_DEV_THERMAL_VIOLATION", 20)]
    dcgm4 = [(_POWER_CAP, 11), (_SW_THERMAL, 12), (_HW_THERMAL, 13)]
    series = classic + dcgm4 if classic_first else dcgm4 + classic
    sample = _read(*series)
    assert (sample.power_violation_ns_total, sample.thermal_violation_ns_total) == (10, 20)


@pytest.mark.parametrize("value", [_INT64_BLANK, "+Inf", "NaN"])
def test_a_blank_or_unbounded_counter_gives_no_time(value: object) -> None:
    sample = _read((_POWER_CAP, value), (_SW_THERMAL, value), ("DCGM_FI_DEV_GPU_TEMP", 60))
    assert (sample.power_violation_ns_total, sample.thermal_violation_ns_total) == (None, None)
    assert sample.temperature_gpu_celsius == 60.0


def test_two_scrapes_give_the_share_of_time_throttled() -> None:
    """What the watch judges: 4 s of 10 s power-capped and 1 s + 1.5 s thermal slowdown."""
    first = _read((_POWER_CAP, 1_000_000_000), (_SW_THERMAL, 0), (_HW_THERMAL, 0))
    page = "".join(
        f"{name}{{{_LABELS}}} {value}\n"
        for name, value in (
            (_POWER_CAP, 5_000_000_000),
            (_SW_THERMAL, 10**9),
            (_HW_THERMAL, 15 * 10**8),
        )
    )
    (second,) = parse_scrape(page, "page", 10.0).snapshot.samples
    derived = derive_rates(first, second)
    assert derived.power_throttled_ratio == pytest.approx(0.4)
    assert derived.thermal_throttled_ratio == pytest.approx(0.25)
