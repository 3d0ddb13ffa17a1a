"""A second held-out set of dcgm-exporter pages (tests/data/dcgm_public2: pasted in public issues,
PRs and conformance documents, none in shared/fixtures or tests/data/dcgm_public): newer
exporters (4.x err_code/err_msg and pod_uid labels, vGPU, DCGM_EXP_* clock-event counters), old
ones (1.x metric names), other label layouts (sorted labels, short or redacted values).

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json;
``doctor --from FILE`` raises nothing above info on a healthy page and the expected finding codes
on a faulty one; cut or spliced pages never give a traceback.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.types.telemetry import EventKind
from tests.telemetry.dcgm.heldout import (
    CUT,
    FUZZ,
    MIB,
    assert_snapshot_reads,
    cut_pages_fuzz,
    load_pages,
    marked,
    no_false_alarm_check,
    page_index,
    parse_or_error,
    run_cli,
    short_ids,
    spliced,
)

DATA, ROWS, PAGES = load_pages("dcgm_public2")
IDS = short_ids(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_snapshot_reads_the_values(row: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert_snapshot_reads(capsys, DATA, row, pod_form="keys")


FAULTY = [row for row in ROWS if not row["healthy"]]


test_doctor_raises_no_false_alarm = no_false_alarm_check(DATA, ROWS)


@pytest.mark.parametrize(
    "row", [marked(row, "findings_xfail") for row in FAULTY], ids=[r["file"][:40] for r in FAULTY]
)
def test_doctor_finds_the_fault(row: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_cli(capsys, "doctor", "--from", str(DATA / row["file"]))
    codes = {f["code"] for f in doc["findings"] if f["severity"] != "info"}
    assert set(row["findings"]) <= codes


def test_clock_event_counts_already_seen_are_not_new_events() -> None:
    """A second reading of the same exporter: only a count that rose is an event again."""
    page = PAGES[IDS.index("06_dcgm-exporter-pr261")]
    first = parse_scrape(page, "first", 0.0)
    again = parse_scrape(page, "again", 15.0, previous=first.counts_seen())
    assert [e for e in again.snapshot.events if e.kind is EventKind.CLOCK_EVENT] == []
    hw_thermal = next(line for line in page.splitlines() if 'clock_event="hw_thermal"' in line)
    risen = page.replace(hw_thermal, hw_thermal.rsplit(" ", 1)[0] + " 3")
    later = parse_scrape(risen, "later", 30.0, previous=first.counts_seen())
    events = [e for e in later.snapshot.events if e.kind is EventKind.CLOCK_EVENT]
    assert [(e.code, e.message.split(":")[0]) for e in events] == [
        (0x40, "clock event hw_thermal_slowdown")
    ]


test_fuzz_cut_pages = cut_pages_fuzz(PAGES)


@FUZZ
@given(first=page_index(PAGES), second=page_index(PAGES), cuts=st.tuples(CUT, CUT))
def test_fuzz_spliced_pages(first: int, second: int, cuts: tuple[float, float]) -> None:
    """The head of one page and the tail of another, joined mid-line or not (a paste that lost
    its middle, two pastes run together)."""
    parse_or_error(spliced(PAGES[first], PAGES[second], cuts))


def test_legacy_info_series_names_the_gpu() -> None:
    """dcgm-exporter 1.x wrote ``dcgm_gpu_info{gpu,uuid,gpu_type} 1`` before each GPU's series
    (gpu-monitoring-tools exporters/prometheus-dcgm/dcgm-exporter/dcgm-exporter, its printf
    formats): gpu_type is the name; the info series itself is no reading."""
    uuid = "GPU-c1f38265-5e7c-0a81-14a0-240a35ea8160"
    page = (
        f'dcgm_gpu_info{{gpu="0",uuid="{uuid}",gpu_type="Tesla T4"}} 1\n'
        "# HELP dcgm_fb_used Framebuffer memory used (in MiB).\n"
        "# TYPE dcgm_fb_used gauge\n"
        f'dcgm_fb_used{{gpu="0",uuid="{uuid}"}} 4845\n'
    )
    (sample,) = parse_scrape(page, "legacy", 0.0).snapshot.samples
    assert (sample.info.name, sample.memory_used_bytes) == ("Tesla T4", 4845 * MIB)
    assert sample.extra == {}


def test_relabelled_series_name_the_workload_pod_not_the_exporter() -> None:
    """The label sets dcgm-exporter issue 340 pasted from a Prometheus query (kube-prometheus,
    no honor_labels): pod/namespace/container are the exporter's own, exported_* the workload's.
    The query result printed no values; each line gets one here (45) to make it exposition."""
    labels = (
        'DCGM_FI_DRIVER_VERSION="545.29.06", Hostname="worker1", UUID="GPU-longgui", '
        'container="exporter", device="nvidia0", endpoint="metrics", '
        'exported_container="{c}", exported_namespace="{ns}", exported_pod="{pod}", gpu="0", '
        'instance="someip:9400", job="dcgm-exporter-dev", modelName="NVIDIA GeForce RTX 4090", '
        'namespace="monitoring", pod="dcgm-exporter-dev-78z52", service="dcgm-exporter-dev"'
    )
    workloads = [
        ("ai-artifactory-control", "default", "pod1"),
        ("somecontainer", "default", "pod2"),
    ]
    page = "".join(
        "DCGM_FI_DEV_GPU_TEMP{" + labels.format(c=c, ns=ns, pod=pod) + "} 45\n"
        for c, ns, pod in workloads
    )
    scrape = parse_scrape(page, "relabelled", 0.0)
    assert [(p.container, p.namespace, p.pod) for p in scrape.pods] == workloads
    (sample,) = scrape.snapshot.samples
    assert sample.temperature_gpu_celsius == 45.0
