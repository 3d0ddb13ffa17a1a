"""The Xid catalog: every row loads, severities follow NVIDIA's buckets and DCGM's always-FAIL set,
the NVLink5 decode sheet loads, and a bad cell is ``catalog-data-corrupt``."""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import pytest

from gpuwarden.catalog import xid as catalog
from gpuwarden.catalog.tables import Row
from gpuwarden.catalog.xid import (
    DCGM_ALWAYS_FAIL,
    UNKNOWN_XID_SEVERITY,
    bucket_guidance,
    bucket_severity,
    derive_severity,
    nvlink5_rules,
    xid_catalog,
    xid_info,
    xid_severity,
)
from gpuwarden.errors import CorruptInputError
from gpuwarden.types.health import Severity


def _package_rows(name: str) -> list[dict[str, str]]:
    text = resources.files("gpuwarden.catalog.data").joinpath(name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def test_every_row_of_the_csv_loads() -> None:
    rows = _package_rows("xid.csv")
    unused = _package_rows("xid_unused.csv")
    table = xid_catalog()
    assert sorted(table) == sorted(int(r["xid"]) for r in rows + unused)
    for row in rows:
        info = table[int(row["xid"])]
        assert info.mnemonic == row["mnemonic"]
        assert info.meaning == row["meaning"]
        assert info.source == row["source"]
        assert info.immediate_action == (row["nvidia_immediate_action"] or None)


def test_the_shared_fixture_is_copied_unchanged(fixtures: Path) -> None:
    """The package CSV is the shared fixture plus rows it lacks; the fixture's rows stay as is."""
    with (fixtures / "catalog" / "xid.csv").open(newline="") as f:
        shared = {row["xid"]: row for row in csv.DictReader(f)}
    ours = {row["xid"]: row for row in _package_rows("xid.csv")}
    assert len(shared) == 46
    for number, row in shared.items():
        assert ours[number] == row
    added = set(ours) - set(shared)
    assert added, "rows added from NVIDIA's catalog"
    assert all("row added by gpuwarden" in ours[n]["source"] for n in added)


@pytest.mark.parametrize(
    ("xid", "severity"),
    [
        (13, Severity.WARNING),  # RESTART_APP
        (31, Severity.WARNING),  # RESTART_APP, WORKFLOW_XID_31 investigation
        (43, Severity.INFO),  # IGNORE
        (63, Severity.INFO),  # IGNORE: a remap recorded, takes effect at reset
        (45, Severity.WARNING),  # WORKFLOW_XID_45
        (48, Severity.CRITICAL),  # WORKFLOW_XID_48 but in DCGM's always-FAIL set
        (74, Severity.CRITICAL),  # WORKFLOW_NVLINK_ERR but always-FAIL
        (79, Severity.CRITICAL),  # RESTART_BM
        (94, Severity.WARNING),  # RESTART_APP: contained
        (95, Severity.CRITICAL),  # RESET_GPU and always-FAIL
        (54, Severity.WARNING),  # CHECK_MECHANICALS
        (56, Severity.CRITICAL),  # CONTACT_SUPPORT
        (119, Severity.CRITICAL),
        (144, Severity.WARNING),  # WORKFLOW_NVLINK5_ERR until the payload is decoded
        (151, Severity.CRITICAL),  # RESTART_VM
        (154, Severity.WARNING),  # XID_154: the message names the action
        (171, UNKNOWN_XID_SEVERITY),  # no bucket in the catalog
    ],
)
def test_severity_follows_the_buckets(xid: int, severity: Severity) -> None:
    info = xid_info(xid)
    assert info is not None
    assert info.severity is severity
    assert xid_severity(xid) is severity


def test_dcgm_always_fail_rows_are_the_rows_the_catalog_marks() -> None:
    marked = {
        info.xid
        for info in xid_catalog().values()
        if info.dcgm_health_watch and "always FAIL" in info.dcgm_health_watch
    }
    assert marked == DCGM_ALWAYS_FAIL
    assert all(xid_severity(x) is Severity.CRITICAL for x in DCGM_ALWAYS_FAIL)


def test_bucket_rule() -> None:
    assert derive_severity(500, "RESET_GPU") is Severity.CRITICAL
    assert derive_severity(500, "RESTART_BM") is Severity.CRITICAL
    assert derive_severity(500, "CONTACT_SUPPORT") is Severity.CRITICAL
    assert derive_severity(500, "RESTART_APP") is Severity.WARNING
    assert derive_severity(500, "CHECK_UVM") is Severity.WARNING
    assert derive_severity(500, "WORKFLOW_XID_48") is Severity.WARNING
    assert derive_severity(500, "IGNORE") is Severity.INFO
    assert derive_severity(500, None) is UNKNOWN_XID_SEVERITY
    assert derive_severity(48, "IGNORE") is Severity.CRITICAL  # DCGM overrides
    assert bucket_severity("SOMETHING_NEW") is UNKNOWN_XID_SEVERITY


def test_unknown_xid() -> None:
    assert xid_info(9999) is None
    assert xid_severity(9999) is Severity.WARNING


def test_codes_the_catalog_lists_as_unused_have_its_name_and_buckets_but_no_verdict() -> None:
    """NVIDIA's catalog keeps 59 codes with the Description "Unused" (Ampere and newer): their
    mnemonic and buckets are read, their meaning says so, and the severity is the unknown
    default whatever the bucket (CONTACT_SUPPORT for 16 and 51, IGNORE for 14 and 108): the
    catalog gives no judgement of a code it says does not occur."""
    unused = {int(r["xid"]): r for r in _package_rows("xid_unused.csv")}
    assert len(unused) == 59
    assert {r["nvidia_description"] for r in unused.values()} == {"Unused"}
    assert set(range(1, 173)) == set(xid_catalog())  # with xid.csv: every code 1-172
    for number, row in unused.items():
        info = xid_info(number)
        assert info is not None and info.listed_unused
        assert info.mnemonic == row["mnemonic"]
        assert info.immediate_action == (row["nvidia_immediate_action"] or None)
        assert info.severity is UNKNOWN_XID_SEVERITY
        assert "unused" in info.meaning and info.recommended_action is None
    fifty_one, one_o_eight = xid_catalog()[51], xid_catalog()[108]
    assert (fifty_one.mnemonic, fifty_one.immediate_action) == (
        "SILENT_RUNNING_STRESS_TEST_FAILURE",
        "CONTACT_SUPPORT",
    )
    assert (one_o_eight.immediate_action, one_o_eight.investigatory_action) == (
        "IGNORE",
        "XID_137_FLOW",
    )
    assert not any(info.listed_unused for x, info in xid_catalog().items() if x not in unused)


def test_every_immediate_bucket_has_guidance() -> None:
    for info in xid_catalog().values():
        if info.immediate_action is not None:
            assert bucket_guidance(info.immediate_action), info.xid
    for rule in nvlink5_rules():
        assert bucket_guidance(rule.immediate_action), rule
        assert bucket_guidance(rule.investigatory_action), rule


def test_nvlink5_sheet_loads() -> None:
    rules = nvlink5_rules()
    assert {r.xid for r in rules} == set(range(144, 151))
    assert len(rules) == len(_package_rows("xid_nvlink5.csv"))
    for rule in rules:
        assert len(rule.intrinfo_v1) == len(rule.intrinfo_v2) == 32
        assert rule.source
    link_down = [r for r in rules if r.unit.startswith("NETIR_LINK_EVT")]
    assert len(link_down) == 21  # one row per documented link-down reason
    assert all(r.error_status is None for r in link_down)  # any errorStatus


def test_a_bad_cell_is_catalog_data_corrupt() -> None:
    row = Row("xid.csv", 9, {"xid": "thirteen", "mnemonic": "X", "meaning": "m", "source": "s"})
    with pytest.raises(CorruptInputError, match=r"xid\.csv line 9, column 'xid'") as info:
        catalog._info(row)
    assert info.value.reference == "catalog-data-corrupt"


def test_a_bad_mask_is_catalog_data_corrupt() -> None:
    cells = dict(_package_rows("xid_nvlink5.csv")[0])
    cells["intrinfo_v1"] = "0101"
    with pytest.raises(CorruptInputError, match="intrinfo_v1") as info:
        catalog._rule(Row("xid_nvlink5.csv", 2, cells))
    assert info.value.reference == "catalog-data-corrupt"
