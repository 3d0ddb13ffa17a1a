"""The health fields in dcgm-exporter scrapes (margin, max operating temperatures, SRAM threshold,
exhausted remap banks, recovery action, Fabric Manager status), old and DCGM 4 names.

None of the real scrapes carries these families (their exporters' CSVs did not ask for them),
so each test adds series to a real scrape with the label set of that scrape's own GPU series;
the values are the ones an H100 shows (the nvidia-smi H100 capture: T.Limit 26, max operating
85 °C at 59 °C).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.types.telemetry import DeviceSample

T4 = "datadog-integrations-core__tesla-t4__metrics.prom"
A100 = "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"
INT64_NOT_SUPPORTED = "9223372036854775794"  # DCGM's blank sentinel (telemetry.md §2.5)


def _labels(text: str, name: str, *, instance: bool = False) -> str:
    """The {...} of the first series of ``name`` (of a GPU instance when ``instance``)."""
    for line in text.splitlines():
        if line.startswith(name + "{") and ("GPU_I_ID" in line) == instance:
            return line[len(name) : line.index("}") + 1]
    raise AssertionError(f"no {name} series")


def _with(fixtures: Path, fixture: str, series: dict[str, str], *, instance: bool = False) -> str:
    text = (fixtures / "dcgm" / fixture).read_text()
    family = "DCGM_FI_DEV_XID_ERRORS" if instance else "DCGM_FI_DEV_GPU_TEMP"
    labels = _labels(text, family, instance=instance)
    added = "\n".join(f"{name}{labels} {value}" for name, value in series.items())
    return text.rstrip("\n") + "\n" + added + "\n"


def _gpu(text: str) -> DeviceSample:
    return parse_scrape(text, "scrape", 0.0).snapshot.samples[0]


def test_old_field_names(fixtures: Path) -> None:
    s = _gpu(
        _with(
            fixtures,
            T4,
            {
                "DCGM_FI_DEV_GPU_TEMP_LIMIT": "26",
                "DCGM_FI_DEV_GPU_MAX_OP_TEMP": "85",
                "DCGM_FI_DEV_MEM_MAX_OP_TEMP": "95",
                "DCGM_FI_DEV_THRESHOLD_SRM": "0",
                "DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_NONE": "0",
                "DCGM_FI_DEV_GPU_RECOVERY_ACTION": "0",
                "DCGM_FI_DEV_FABRIC_MANAGER_STATUS": "3",
                "DCGM_FI_DEV_FABRIC_MANAGER_ERROR_CODE": "0",
            },
        )
    )
    assert s.temperature_gpu_celsius == 25  # the T4 scrape's own DCGM_FI_DEV_GPU_TEMP
    assert s.temperature_margin_celsius == 26
    assert (s.temperature_gpu_max_celsius, s.temperature_memory_max_celsius) == (85, 95)
    assert s.sram_threshold_exceeded is False and s.remapped_rows_banks_exhausted == 0
    assert s.recovery_action == "none"
    assert (s.fabric_state, s.fabric_status) == ("completed", "success")
    assert not any("fabric" in k or "recovery" in k or "temp_limit" in k for k in s.extra)


def test_dcgm4_field_names(fixtures: Path) -> None:
    s = _gpu(
        _with(
            fixtures,
            T4,
            {
                "DCGM_FI_DEV_GPU_TEMP_MARGIN_CELSIUS": "-3",  # over the max operating temperature
                "DCGM_FI_DEV_MEMORY_MAX_OP_TEMP_CELSIUS": "95",
                "DCGM_FI_DEV_SRAM_EXCEEDED": "1",
                "DCGM_FI_DEV_BANK_REMAP_AVAIL_NONE": "2",
                "DCGM_FI_DEV_ROW_REMAP_FAILED": "1",
                "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL": "5",
                "DCGM_FI_DEV_FABRIC_MANAGER_STATUS": "4",
                "DCGM_FI_DEV_FABRIC_MANAGER_ERROR": "-15",
            },
        )
    )
    assert s.temperature_margin_celsius == -3
    # no GPU_MAX_OP_TEMP scraped: derived on the current temperature's scale, 25 - 3
    assert s.temperature_gpu_max_celsius == 22
    assert s.sram_threshold_exceeded is True and s.remapped_rows_banks_exhausted == 2
    assert (s.remapped_rows_failure, s.remapped_rows_uncorrectable) == (True, 5)
    assert (s.fabric_state, s.fabric_status) == ("completed", "error (DCGM return code -15)")


@pytest.mark.parametrize(
    ("code", "action"),
    [("0", "none"), ("1", "reset"), ("2", "reboot"), ("3", "drain-p2p"), ("4", "drain-and-reset")],
)
def test_recovery_action_codes(fixtures: Path, code: str, action: str) -> None:
    s = _gpu(_with(fixtures, T4, {"DCGM_FI_DEV_GPU_RECOVERY_ACTION": code}))
    assert s.recovery_action == action


@pytest.mark.parametrize(
    ("status", "fabric"),
    [
        ("0", ("not-supported", None)),
        ("1", ("not-started", None)),
        ("2", ("in-progress", None)),
        ("5", (None, None)),  # DcgmFMStatusUnrecognized: DCGM and the driver disagree
        ("6", (None, None)),  # DcgmFMStatusNvmlTooOld
    ],
)
def test_fabric_manager_status(
    fixtures: Path, status: str, fabric: tuple[str | None, str | None]
) -> None:
    s = _gpu(_with(fixtures, T4, {"DCGM_FI_DEV_FABRIC_MANAGER_STATUS": status}))
    assert (s.fabric_state, s.fabric_status) == fabric
    if fabric == (None, None):  # kept where a person can see it
        assert s.extra["dcgm_dev_fabric_manager_status"] == float(status)


def test_blank_sentinels_are_not_reported(fixtures: Path) -> None:
    s = _gpu(
        _with(
            fixtures,
            T4,
            {
                "DCGM_FI_DEV_GPU_TEMP_LIMIT": INT64_NOT_SUPPORTED,
                "DCGM_FI_DEV_GPU_RECOVERY_ACTION": INT64_NOT_SUPPORTED,
                "DCGM_FI_DEV_FABRIC_MANAGER_STATUS": INT64_NOT_SUPPORTED,
            },
        )
    )
    assert s.temperature_margin_celsius is None and s.temperature_gpu_max_celsius is None
    assert (s.recovery_action, s.fabric_state) == (None, None)


def test_board_readings_on_a_gpu_instance_series_go_to_the_gpu(fixtures: Path) -> None:
    """dcgm-exporter repeats board fields on every GI series of a MIG GPU (the A100 scrape)."""
    text = _with(
        fixtures,
        A100,
        {"DCGM_FI_DEV_GPU_RECOVERY_ACTION": "1", "DCGM_FI_DEV_GPU_TEMP_LIMIT": "20"},
        instance=True,
    )
    parent, instance = parse_scrape(text, "mig", 0.0).snapshot.samples
    assert instance.info.gpu_instance_id == 13
    assert parent.recovery_action == "reset"
    assert parent.temperature_margin_celsius == 20
    assert parent.temperature_gpu_max_celsius == 61 + 20  # its own GPU_TEMP 61
