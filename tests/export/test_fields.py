"""The export table (DeviceSample → DCGM) against the dcgm backend's table (DCGM → DeviceSample):
one mapping, read in both directions, must give back what it started from."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog.nvml_enums import RECOVERY_ACTIONS
from gpuwarden.export.fields import (
    DCGM_FIELDS,
    FABRIC_HEALTH_MASK,
    FABRIC_HEALTH_SUMMARY,
    FB_TOTAL,
    MIG_FIELDS,
    XID_LAST,
    Kind,
    clock_event_mask,
    fabric_manager_status,
    passthrough_name,
)
from gpuwarden.telemetry.clock_events import CLOCK_EVENT_BITS, decode_clock_events
from gpuwarden.telemetry.dcgm.fields import (
    CLOCK_EVENT_FIELDS,
    FIELDS,
    extra_name,
    fabric_fields,
    fabric_health_fields,
)
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample, FabricHealthIssue, NvLinkSample
from gpuwarden.units import MIB

# Rows whose value is computed from several DeviceSample attributes: no FIELDS entry reads them
# back into one attribute (the dcgm backend keeps them in ``extra``).
COMPUTED = {
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
}


def test_every_row_is_one_dcgm_field_named_once():
    names = [f.name for f in (*DCGM_FIELDS, XID_LAST, FB_TOTAL)]
    assert len(names) == len(set(names))
    ids = [f.field_id for f in (*DCGM_FIELDS, XID_LAST, FB_TOTAL)]
    assert len(ids) == len(set(ids))
    assert all(name.startswith(("DCGM_FI_DEV_", "DCGM_FI_PROF_")) for name in names)


@pytest.mark.parametrize(
    "row", [f for f in DCGM_FIELDS if f.name not in COMPUTED], ids=lambda f: f.name
)
def test_the_dcgm_backend_reads_each_row_back_into_the_same_attribute(row):
    if row.name in CLOCK_EVENT_FIELDS:
        assert row.attr == "clock_event_reasons"
        return
    attr, _ = FIELDS[row.name]
    assert attr == row.attr


# One value per attribute in DeviceSample's own units, as a backend would report it.
READINGS = {
    "clock_sm_mhz": 1980.0,
    "clock_memory_mhz": 2619.0,
    "temperature_memory_celsius": 55.0,
    "temperature_gpu_celsius": 59.0,
    "power_draw_watts": 629.45,
    "energy_consumed_joules": 319159.391,
    "pcie_replay_total": 9,
    "memory_free_bytes": 61263 * MIB,
    "memory_used_bytes": 19818 * MIB,
    "memory_reserved_bytes": 479 * MIB,
    "remapped_rows_failure": True,
    "remapped_rows_pending": False,
    "retired_pages_pending": True,
    "sram_threshold_exceeded": False,
    "pstate": "P8",
    "recovery_action": "drain-and-reset",
    "clock_event_reasons": ("gpu_idle", "sw_thermal_slowdown"),
}


@pytest.mark.parametrize(
    "row", [f for f in DCGM_FIELDS if f.name not in COMPUTED], ids=lambda f: f.name
)
def test_a_value_exported_then_read_by_the_dcgm_backend_is_the_same(row):
    value = READINGS.get(row.attr, 42.0)
    sample = DeviceSample(info=DeviceInfo(0, "GPU-x", "test"), timestamp_s=0.0, **{row.attr: value})
    exported = row.value(sample)
    assert exported is not None and math.isfinite(exported)
    if row.name in CLOCK_EVENT_FIELDS:
        assert decode_clock_events(int(exported)) == value
        return
    _, back = FIELDS[row.name]
    assert back(exported) == pytest.approx(value)


def test_units_are_dcgms():
    sample = DeviceSample(
        info=DeviceInfo(0, "GPU-x", "test", memory_total_bytes=81559 * MIB),
        timestamp_s=0.0,
        memory_used_bytes=19818 * MIB + 123,  # NVML bytes: DCGM truncates to whole MiB
        energy_consumed_joules=319159.391,
        pstate="P0",
        recovery_action="unknown-9",
    )
    by_name = {f.name: f for f in DCGM_FIELDS}
    assert by_name["DCGM_FI_DEV_FB_USED"].value(sample) == 19818
    assert by_name["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].value(sample) == 319159391
    assert by_name["DCGM_FI_DEV_PSTATE"].value(sample) == 0
    assert by_name["DCGM_FI_DEV_GPU_RECOVERY_ACTION"].value(sample) == 9  # a newer NVML code
    assert FB_TOTAL.value(sample) == 81559
    assert by_name["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].kind is Kind.COUNTER
    assert by_name["DCGM_FI_DEV_POWER_USAGE"].kind is Kind.GAUGE


def test_a_field_the_backend_did_not_read_has_no_value():
    empty = DeviceSample(info=DeviceInfo(0, "GPU-x", "test"), timestamp_s=0.0)
    assert all(row.value(empty) is None for row in DCGM_FIELDS)
    nan = DeviceSample(
        info=DeviceInfo(0, "GPU-x", "test"), timestamp_s=0.0, power_draw_watts=math.nan
    )
    assert next(f for f in DCGM_FIELDS if f.name == "DCGM_FI_DEV_POWER_USAGE").value(nan) is None


def test_nvlink_totals_sum_the_links_that_report():
    links = (
        NvLinkSample(0, True, replay_errors_total=3, recovery_errors_total=None),
        NvLinkSample(1, True, replay_errors_total=4, recovery_errors_total=None),
    )
    sample = DeviceSample(info=DeviceInfo(0, "GPU-x", "test"), timestamp_s=0.0, nvlinks=links)
    by_name = {f.name: f for f in DCGM_FIELDS}
    assert by_name["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"].value(sample) == 7
    assert by_name["DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"].value(sample) is None


def test_the_mig_rows_are_the_pillars_and_the_framebuffer():
    assert {f.name for f in MIG_FIELDS} == {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
    }


@given(st.sets(st.sampled_from([name for _, name in CLOCK_EVENT_BITS])))
@settings(max_examples=100, deadline=None)
def test_clock_event_mask_is_the_inverse_of_the_decoder(reasons):
    assert set(decode_clock_events(clock_event_mask(reasons))) == reasons


@pytest.mark.parametrize(("state", "status"), [("not-supported", None), ("not-started", None),
    ("in-progress", None), ("completed", "success"), ("completed", "error")])  # fmt: skip
def test_fabric_status_round_trips_through_dcgms_enum(state, status):
    code = fabric_manager_status(state, status)
    assert code is not None
    assert fabric_fields(code, None) == {"fabric_state": state, "fabric_status": status}


def test_recovery_actions_round_trip_through_nvmls_enum():
    row = next(f for f in DCGM_FIELDS if f.name == "DCGM_FI_DEV_GPU_RECOVERY_ACTION")
    _, back = FIELDS[row.name]
    for code, name in RECOVERY_ACTIONS.items():
        assert row.to_dcgm(name) == code
        assert back(float(code)) == name


@pytest.mark.parametrize(
    "metric",
    ["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
     "DCGM_FI_DEV_NVLINK_COUNT_TX_DISCARDS", "DCGM_FI_PROF_NVLINK_L0_TX_BYTES"],
)  # fmt: skip
def test_passed_through_names_come_back_as_they_were(metric):
    assert passthrough_name(extra_name(metric)) == metric


def test_fields_the_table_publishes_are_not_passed_through_twice():
    assert passthrough_name(extra_name("DCGM_FI_DEV_GPU_TEMP")) is None
    assert passthrough_name("dcgm_exp_xid_errors_window_s") is None
    assert passthrough_name("gpm_pcie_tx_bytes_per_second") is None


# Label values as backends read them (model names, pod names, host names): any printable text,
# quotes, backslashes and line feeds included.
_VALUES = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), whitelist_characters='\n"\\'),
    max_size=30,
)


@given(_VALUES)
@settings(max_examples=150, deadline=None)
def test_any_label_value_survives_the_text_format(value):
    from prometheus_client.parser import text_string_to_metric_families

    from gpuwarden.export.families import Family
    from gpuwarden.export.prometheus import render_text, to_metric

    family = Family("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", Kind.GAUGE,
                    samples=(((("modelName", value),), 41.0),))  # fmt: skip
    (parsed,) = text_string_to_metric_families(render_text([to_metric(family)]))
    assert [(s.labels, s.value) for s in parsed.samples] == [({"modelName": value}, 41.0)]


@given(st.lists(st.text(max_size=20), min_size=1, max_size=40))
@settings(max_examples=15, deadline=None)
def test_even_control_characters_leave_an_exposition_prometheus_parses(values):
    import shutil
    import subprocess

    from gpuwarden.export.families import Family
    from gpuwarden.export.prometheus import render_text, to_metric

    samples = tuple(((("gpu", str(i)), ("modelName", v)), 1.0) for i, v in enumerate(values))
    text = render_text([to_metric(Family("DCGM_FI_DEV_GPU_TEMP", "t", Kind.GAUGE, samples))])
    promtool = shutil.which("promtool")
    assert promtool
    lint = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                          capture_output=True, check=False)  # fmt: skip
    assert b"parsing error" not in lint.stdout + lint.stderr, text


_HEALTH_ISSUES = [i.value for i in FabricHealthIssue]


@given(
    st.sampled_from([None, "healthy", "unhealthy", "limited-capacity"]),
    st.one_of(
        st.none(),
        st.lists(st.sampled_from(_HEALTH_ISSUES[:4]), unique=True).flatmap(
            lambda flags: st.sampled_from([None, *_HEALTH_ISSUES[4:]]).map(
                lambda kind: tuple(i for i in _HEALTH_ISSUES if i in flags or i == kind)
            )
        ),
    ),
)
@settings(max_examples=100, deadline=None)
def test_fabric_health_round_trips_through_dcgm_fields_174_175(summary, issues):
    """What the exporter writes, the dcgm reader reads back (the order is the mask's)."""
    mask = FABRIC_HEALTH_MASK.value(_FabricOnly(summary, issues))
    code = FABRIC_HEALTH_SUMMARY.value(_FabricOnly(summary, issues))
    back = fabric_health_fields(code, mask)
    if code is None and mask is None:
        assert back == {}
        return
    assert back["fabric_health_summary"] == summary
    assert back["fabric_health_issues"] == issues


@dataclass
class _FabricOnly:
    fabric_health_summary: str | None
    fabric_health_issues: tuple[str, ...] | None
