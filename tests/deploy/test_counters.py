"""dcgm-exporter's counters CSV that `deploy dcgm-counters` writes: every DCGM field a rule reads
has a row (dcgm-exporter publishes only what its CSV lists), the default's rows come first, and
each row is the three cells dcgm-exporter's parser wants."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuwarden.cli.commands.deploy import dcgm_catalog
from gpuwarden.cli.main import main
from gpuwarden.deploy.counters import (
    CONFIGMAP_KEY,
    DEFAULT_COUNTERS,
    counter_rows,
    counters_csv,
    csv_name,
    fields_read,
    unknown_fields,
)
from gpuwarden.deploy.rules import rule_set

# The fields of the alerts that can never fire on dcgm-exporter's default counters (h144's audit)
NOT_IN_DEFAULT = (
    "DCGM_FI_DEV_ROW_REMAP_PENDING",  # GpuRowRemapPending
    "DCGM_FI_DEV_RETIRED_PENDING",  # GpuRetiredPagesPending
    "DCGM_FI_DEV_RETIRED_SBE",  # GpuRetiredPagesLimit
    "DCGM_FI_DEV_RETIRED_DBE",
    "DCGM_FI_DEV_GPU_RECOVERY_ACTION",  # GpuRecoveryActionPending
    "DCGM_FI_DEV_FABRIC_MANAGER_STATUS",  # GpuFabricManagerDown
    "DCGM_FI_DEV_PCIE_LINK_GEN",  # GpuPcieLinkDegraded
    "DCGM_FI_DEV_PCIE_LINK_WIDTH",
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN",
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT",  # GpuFakeLoad without SM active
)


def _rows(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return [[cell.strip() for cell in line.split(",")] for line in lines]


def test_every_field_a_rule_reads_has_a_row() -> None:
    rules, catalog = rule_set(), dcgm_catalog()
    names = {row[0] for row in _rows(counters_csv(rules, catalog))}
    assert unknown_fields(rules, catalog) == ()
    for field in fields_read(rules):
        assert csv_name(field, catalog) in names, field
    # the DCGM 4.6 name of a field is enabled by its older name's row, never listed twice
    assert csv_name("DCGM_FI_DEV_GPU_TEMP_SLOWDOWN_CELSIUS", catalog) == (
        "DCGM_FI_DEV_SLOWDOWN_TEMP"
    )
    assert "DCGM_FI_DEV_GPU_TEMP_SLOWDOWN_CELSIUS" not in names


def test_the_fields_the_default_leaves_out_are_added_after_its_rows() -> None:
    rows = counter_rows(rule_set(), dcgm_catalog())
    assert rows[: len(DEFAULT_COUNTERS)] == DEFAULT_COUNTERS
    for field in NOT_IN_DEFAULT:
        assert field not in DEFAULT_COUNTERS
        assert field in rows[len(DEFAULT_COUNTERS) :], field
    assert len(rows) == len(set(rows))


def test_each_row_is_three_cells_of_a_known_type() -> None:
    rows = _rows(counters_csv(rule_set(), dcgm_catalog()))
    assert all(len(row) == 3 and all(row) for row in rows)
    assert {row[1] for row in rows} == {"gauge", "counter", "label"}
    recovery = next(r for r in rows if r[0] == "DCGM_FI_DEV_GPU_RECOVERY_ACTION")
    assert recovery[2].startswith("Recovery action the driver asks for")  # its commas → ";"
    assert rows[-1] == ["DCGM_FI_DRIVER_VERSION", "label", "Driver Version"]


def test_cli_writes_the_csv_and_gpu_operators_configmap(tmp_path: Path) -> None:
    csv_path, cm_path = tmp_path / "dcgm-metrics.csv", tmp_path / "cm.yaml"
    assert main(["deploy", "dcgm-counters", "-o", str(csv_path)]) == 0
    argv = ["deploy", "dcgm-counters", "--format", "configmap", "--namespace", "gpu-op"]
    assert main([*argv, "--name", "gw-counters", "-o", str(cm_path)]) == 0
    configmap = yaml.safe_load(cm_path.read_text())
    assert (configmap["kind"], configmap["metadata"]["name"]) == ("ConfigMap", "gw-counters")
    assert configmap["metadata"]["namespace"] == "gpu-op"
    assert configmap["data"] == {CONFIGMAP_KEY: csv_path.read_text()}


# Fields whose CSV row stops dcgm-exporter 4.4.1-4.5.2 from starting (driver 590.48.01), from
# netdata's runtime validation (src/go/plugin/go.d/collector/dcgm/, "Startup-Fail Fields"): DCGM
# 4.6's new names among them, which is why a row takes the older name the catalog knows.
STARTUP_FAIL_4_5_2 = (
    "DCGM_FI_DEV_FABRIC_HEALTH_MASK",
    "DCGM_FI_DEV_GET_GPU_RECOVERY_ACTION",
    "DCGM_FI_DEV_MEMORY_UNREPAIRABLE_FLAG",
    "DCGM_FI_DEV_NVLINK_ECC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_GET_STATE",
    "DCGM_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS",
)


def test_no_row_stops_a_released_dcgm_exporter() -> None:
    rows = counter_rows(rule_set(), dcgm_catalog())
    assert not set(rows) & set(STARTUP_FAIL_4_5_2)
