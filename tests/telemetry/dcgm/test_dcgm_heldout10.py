"""A tenth held-out set of dcgm-exporter pages (tests/data/dcgm_public10), sampled as the searches
gave them (find_string on the series the brief names, then the issues / pages / code corpora; none
in shared/fixtures nor the earlier sets): a GKE Tesla T4 of a HAMi workshop with the exporter's
lower-case ``hostname`` label and a pod, a Rafay MKS T4's conformance evidence in blocks, three
H100s of dcgm-exporter issue 490 with a profiler pod, a VKS GRID A100-10C vGPU guest, two V100s
of a Go test written tab-indented, eight EKS H100s with a vLLM pod. Every page is healthy.

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json
(before any change: 6 of 6 right); ``doctor --from FILE`` raises nothing above info on them; cut
or spliced pages never give a traceback.

What the review of the pages' fields against DCGM found: DCGM 4.6 renamed its fields and a
counters file written with the new names makes dcgm-exporter serve them; such a page read no
temperature, power, utilisation or driver before (now read as under the older names).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.report.snapshot_document import snapshot_document
from gpuwarden.telemetry.dcgm import parse_scrape
from tests.telemetry.dcgm.heldout import load_pages, page_set_checks, run_cli

DATA, ROWS, PAGES = load_pages("dcgm_public10")

(
    test_snapshot_reads_the_values,
    test_doctor_raises_no_false_alarm,
    test_fuzz_cut_pages,
    test_fuzz_spliced_pages,
) = page_set_checks(DATA, ROWS, PAGES)


# DCGM 4.6 renamed its fields (the DCGM Field Naming Standard) and kept the old names as
# deprecated aliases of the same ids: old name → new name as DCGM's Python bindings list them
# (_DEPRECATED_ALIASES). dcgm-exporter names a series, and a label-type field's label, as its
# counters file does, so a counters file written with the new names serves these instead.
_DCGM46_NAME_OF = {
    "DCGM_FI_DRIVER_VERSION": "DCGM_FI_SYSTEM_DRIVER_VERSION",
    "DCGM_FI_DEV_NAME": "DCGM_FI_DEV_GPU_NAME",
    "DCGM_FI_DEV_MEMORY_TEMP": "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS",
    "DCGM_FI_DEV_GPU_TEMP": "DCGM_FI_DEV_GPU_TEMP_CELSIUS",
    "DCGM_FI_DEV_POWER_USAGE": "DCGM_FI_DEV_BOARD_POWER_WATTS",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "DCGM_FI_DEV_BOARD_POWER_LIMIT_REQUESTED_WATTS",
    "DCGM_FI_DEV_GPU_UTIL": "DCGM_FI_DEV_GPU_UTIL_RATIO",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "DCGM_FI_DEV_PCIE_REPLAY_TOTAL",
    "DCGM_FI_DEV_XID_ERRORS": "DCGM_FI_DEV_XID_ERROR",
    "DCGM_FI_DEV_RETIRED_PENDING": "DCGM_FI_DEV_PAGE_RETIRED_PENDING",
    "DCGM_FI_DEV_RETIRED_DBE": "DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "DCGM_FI_DEV_ROW_REMAP_FAILED",
    "DCGM_FI_DEV_VIRTUAL_MODE": "DCGM_FI_DEV_GPU_VIRTUAL_MODE",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
    "DCGM_FI_PROF_DRAM_ACTIVE": "DCGM_FI_PROF_DRAM_UTIL_RATIO",
}
_OLD_NAME = re.compile(
    r"\b(" + "|".join(sorted(_DCGM46_NAME_OF, key=len, reverse=True)) + r")(?=[\s{=])"
)


def _with_dcgm46_names(page: str) -> str:
    """The page as a counters file written with DCGM 4.6's names would serve it."""
    return _OLD_NAME.sub(lambda old: _DCGM46_NAME_OF[old.group(1)], page)


def _devices(page: str) -> list[dict[str, Any]]:
    document = snapshot_document(parse_scrape(page, "page", 0.0).snapshot)
    return [{k: v for k, v in d.items() if k != "timestamp_s"} for d in document["devices"]]


@pytest.mark.parametrize("number", ["02", "06"])
def test_a_page_of_dcgm46_field_names_reads_as_the_same_page(number: str) -> None:
    """The T4 page (driver label, temperatures, power, energy, PROF ratios) and the EKS page
    (a pod on GPU 2) read the same values whichever names the counters file used."""
    page = PAGES[[row["file"][:2] for row in ROWS].index(number)]
    renamed = _with_dcgm46_names(page)
    assert renamed != page
    assert _devices(renamed) == _devices(page)


_GUEST = 'gpu="0",UUID="GPU-44d2411e-1604-478f-aa96-5a3c00000000",modelName="GRID A100-10C"'
_IN_TROUBLE = (
    f"DCGM_FI_DEV_NAME{{{_GUEST}}} GRID A100-10C\n"  # a string field: its text is the value
    f"DCGM_FI_DEV_GPU_TEMP{{{_GUEST}}} 71\n"
    f"DCGM_FI_DEV_POWER_MGMT_LIMIT{{{_GUEST}}} 400\n"
    f"DCGM_FI_DEV_XID_ERRORS{{{_GUEST}}} 79\n"
    f"DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{_GUEST}}} 12\n"
    f"DCGM_FI_DEV_RETIRED_PENDING{{{_GUEST}}} 1\n"
    f"DCGM_FI_DEV_RETIRED_DBE{{{_GUEST}}} 3\n"
    f"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{{_GUEST}}} 2\n"
    f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{_GUEST}}} 1\n"
    f"DCGM_FI_DEV_VIRTUAL_MODE{{{_GUEST}}} 2\n"
    f"DCGM_FI_DEV_VGPU_LICENSE_STATUS{{{_GUEST}}} 0\n"
)


def test_the_fault_fields_under_dcgm46_names_read_as_under_the_old_ones() -> None:
    """Xid, retired pages, remapped rows, PCIe replays and a vGPU guest's license (field 526
    read with the virtual mode, field 500, that DCGM 4.6 names DCGM_FI_DEV_GPU_VIRTUAL_MODE)."""
    renamed = _with_dcgm46_names(_IN_TROUBLE)
    assert "DCGM_FI_DEV_GPU_VIRTUAL_MODE{" in renamed
    (device,) = _devices(renamed)
    assert device == _devices(_IN_TROUBLE)[0]
    assert (device["xid_last"], device["remapped_rows_failure"], device["vgpu_license_status"]) == (
        79,
        True,
        "unlicensed",
    )


def test_doctor_names_the_same_faults_whichever_names_the_page_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    codes = []
    for text in (_IN_TROUBLE, _with_dcgm46_names(_IN_TROUBLE)):
        page = tmp_path / "page.prom"
        page.write_text(text, encoding="utf-8")
        document = run_cli(capsys, "doctor", "--from", str(page))
        codes.append(sorted(f["code"] for f in document["findings"] if f["severity"] != "info"))
    assert (
        codes[1]
        == codes[0]
        == [
            "retired-pages-pending",
            "row-remap-failure",
            "vgpu-unlicensed",
            "xid",
        ]
    )


def test_a_lower_cased_dcgm46_name_reads_too() -> None:
    """A pipeline that lower-cases metric names, on a DCGM 4.6 page."""
    page = f"dcgm_fi_dev_gpu_temp_celsius{{{_GUEST}}} 64\n"
    (device,) = _devices(page)
    assert device["temperature_gpu_celsius"] == 64.0
