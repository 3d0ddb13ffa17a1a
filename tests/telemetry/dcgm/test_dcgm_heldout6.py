"""A sixth held-out set of dcgm-exporter pages (tests/data/dcgm_public6): GPUs in trouble, as
pasted in the threads about them (none in shared/fixtures nor the earlier sets). Four Quadro
RTX 5000 series in Markdown fences between a reporter's sentences, where DCGM's profiling
module failed after an Xid 31 and exports 0 beside a utilization of 100 (DCGM issue 303); an Xid
45 series written as a Prometheus UI lists it, without GPU or value (DCGM issue 235); and an
RTX 3090's XID_ERRORS with err_code="0" (dcgm-exporter PR 326), the healthy control.

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json;
a page that is no scrape is refused with exit 2; ``doctor --from FILE`` raises nothing above
info on the healthy GPUs, and no verdict of an idle or starved GPU where the profiling reading
is what failed; cut or spliced pages never give a traceback.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.telemetry.dcgm.profiling import PROFILING_RATIOS
from tests.telemetry.dcgm.heldout import (
    load_pages,
    marked,
    page_set_checks,
    refused_check,
    run_cli,
    short_ids,
)

DATA, ROWS, PAGES = load_pages("dcgm_public6")
READ = [row for row in ROWS if not row.get("refused")]
FAULTY = [row for row in READ if not row["healthy"]]
REJECTING = [row for row in READ if row.get("rejected")]
GPU = 'gpu="3",UUID="GPU-893e8405-030d-31eb-a44e-982d4d646a22",Hostname="phx8-2fa"'


(
    test_snapshot_reads_the_values,
    test_doctor_raises_no_false_alarm,
    test_fuzz_cut_pages,
    test_fuzz_spliced_pages,
) = page_set_checks(DATA, ROWS, PAGES)


test_a_page_that_is_no_scrape_is_refused = refused_check(DATA, ROWS)


@pytest.mark.parametrize("row", FAULTY, ids=short_ids(FAULTY))
def test_doctor_gives_the_thread_s_verdict(
    row: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The findings above info are the thread's, and none it rules out (a busy GPU whose
    profiling failed is neither idle nor starved)."""
    doc = run_cli(capsys, "doctor", "--from", str(DATA / row["file"]))
    above_info = sorted({f["code"] for f in doc["findings"] if f["severity"] != "info"})
    assert above_info == row["findings_above_info"]
    assert not {f["code"] for f in doc["findings"]} & set(row["forbidden_findings"])


@pytest.mark.parametrize(
    "row", [marked(row, "findings_xfail") for row in FAULTY], ids=short_ids(FAULTY)
)
def test_doctor_names_the_rejected_reading(
    row: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """What the reader left out of a GPU's reading, and why, reaches doctor's verdict."""
    doc = run_cli(capsys, "doctor", "--from", str(DATA / row["file"]))
    said = json.dumps([doc["findings"], doc["inputs"], doc["checks"]])
    for uuid, field in row["rejected"]:
        assert uuid in said and field in said


@pytest.mark.parametrize("row", REJECTING, ids=short_ids(REJECTING))
def test_the_left_out_reading_is_said(row: dict[str, Any]) -> None:
    scrape = parse_scrape((DATA / row["file"]).read_text(encoding="utf-8"), "page", 0.0)
    said = [(e.uuid, e.message.split(" = ")[0]) for e in scrape.snapshot.events if e.uuid]
    assert said == [tuple(pair) for pair in row["rejected"]]


def test_fences_neither_count_nor_vote() -> None:
    """A Markdown fence around each series is the issue's markup: the two series outnumber the
    one sentence of prose (the four fences would outvote them if they counted)."""
    page = (
        "The utilization was high\n```text\n"
        f"DCGM_FI_DEV_GPU_UTIL{{{GPU}}} 40\n```\n~~~\n"
        f"DCGM_FI_DEV_FB_USED{{{GPU}}} 512\n~~~\n"
    )
    scrape = parse_scrape(page, "fenced", 0.0)
    (sample,) = scrape.snapshot.samples
    assert (sample.gpu_utilization_percent, sample.memory_used_bytes) == (40.0, 512 << 20)
    assert any("skipped 1 line(s)" in e.message for e in scrape.snapshot.events)


def test_a_fence_is_only_a_fence() -> None:
    """A line that starts with backquotes but goes on with text is prose, and votes."""
    page = f"``` run this\n`curl` it:\nDCGM_FI_DEV_GPU_UTIL{{{GPU}}} 40\n"
    with pytest.raises(CorruptInputError, match="not a metric line"):
        parse_scrape(page, "prose", 0.0)


@pytest.mark.parametrize(
    ("utilization", "engine", "left_out"),
    [(100, 0, True), (95, 0, True), (94, 0, False), (100, 0.01, False), (None, 0, False)],
)
def test_profiling_zero_beside_a_busy_gpu_is_left_out(
    utilization: float | None, engine: float, left_out: bool
) -> None:
    """Engine activity of exactly 0 beside a utilization of at least 95 % is the profiling
    module's failure: every profiling ratio of 0 on that GPU is left out and said; a GPU less
    busy, or with some activity, or without a utilization keeps what it reads."""
    lines = [f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{GPU}}} {engine}"]
    lines += [f"DCGM_FI_PROF_SM_ACTIVE{{{GPU}}} 0", f"DCGM_FI_PROF_DRAM_ACTIVE{{{GPU}}} 0.5"]
    if utilization is not None:
        lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{GPU}}} {utilization}")
    scrape = parse_scrape("\n".join(lines) + "\n", "busy", 0.0)
    (sample,) = scrape.snapshot.samples
    assert sample.dram_active_ratio == 0.5  # not 0: a reading, kept
    if left_out:
        assert (sample.graphics_engine_active_ratio, sample.sm_active_ratio) == (None, None)
        said = {e.message.split(" = ")[0] for e in scrape.snapshot.events}
        assert said == {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE"}
    else:
        assert (sample.graphics_engine_active_ratio, sample.sm_active_ratio) == (engine, 0.0)
        assert scrape.snapshot.events == ()


def test_the_profiling_ratios_are_dcgm_s_activity_fields() -> None:
    assert PROFILING_RATIOS["graphics_engine_active_ratio"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    assert "pcie_tx_bytes_per_second" not in PROFILING_RATIOS  # a rate, not a share of time
    assert all(name.startswith("DCGM_FI_PROF_") for name in PROFILING_RATIOS.values())
