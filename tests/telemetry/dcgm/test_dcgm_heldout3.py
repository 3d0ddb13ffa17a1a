"""A third held-out set of dcgm-exporter pages (tests/data/dcgm_public3: pasted in public issues,
Kubernetes AI-conformance evidence and the Kubernetes website; none in shared/fixtures,
tests/data/dcgm_public or dcgm_public2): profiling fields (SM active/occupancy, tensor, DRAM,
PCIe bytes), pages without HELP/TYPE, vGPU profiles (GRID A100-40C, H100-20C) on 580.x, a
GH200 with DRA labels, H100 NVL and A100 MIG excerpts (GI 0), prompt/curl lines in the paste.

``snapshot --backend dcgm --from FILE`` reads the values written down by hand in expected.json;
``doctor --from FILE`` raises nothing above info on these healthy pages; cut or spliced pages
never give a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.errors import GpuwardenError
from gpuwarden.report.snapshot import snapshot_document
from gpuwarden.telemetry.dcgm import parse_scrape

DATA = Path(__file__).resolve().parents[2] / "data" / "dcgm_public3"
ROWS: list[dict[str, Any]] = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))
PAGES = [(DATA / row["file"]).read_text(encoding="utf-8") for row in ROWS]
MIB = 1 << 20
IDS = [row["file"].split("__")[0] + "_" + row["file"].split("__")[1] for row in ROWS]
UUID = "GPU-84412445-5790-0b3f-f714-da8aa3b2c0b0"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main([*args, "--json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, document
    return document


def _check(device: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, value in expected.items():
        if key.endswith("_mib"):  # MiB as the page prints them
            assert device[key.removesuffix("_mib") + "_bytes"] == value * MIB, key
        elif key == "pods":  # [pod, namespace, container] of each pod on the device
            seen = [[p["pod"], p["namespace"], p["container"]] for p in device["pods"] or ()]
            assert seen == value, key
        elif key == "extra":
            assert {k: device["extra"].get(k) for k in value} == value
        elif isinstance(value, float):
            assert device[key] == pytest.approx(value), key
        else:
            assert device[key] == value, key


def _marked(row: dict[str, Any], reason_key: str) -> Any:
    if row.get(reason_key):
        return pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row[reason_key]))
    return row


@pytest.mark.parametrize("row", [_marked(row, "snapshot_xfail") for row in ROWS], ids=IDS)
def test_snapshot_reads_the_values(row: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    snap = _run(capsys, "snapshot", "--backend", "dcgm", "--from", str(DATA / row["file"]))
    assert snap["host"] == row["host"]
    assert len(snap["devices"]) == row["device_count"]  # none merged, none lost
    devices = {d["uuid"]: d for d in snap["devices"]}
    for uuid, expected in row["gpus"].items():
        _check(devices[uuid], expected)


HEALTHY = [row for row in ROWS if row["healthy"]]


@pytest.mark.parametrize(
    "row", [_marked(row, "doctor_xfail") for row in HEALTHY], ids=[r["file"][:40] for r in HEALTHY]
)
def test_doctor_raises_no_false_alarm(
    row: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _run(capsys, "doctor", "--from", str(DATA / row["file"]))
    assert [(f["code"], f["title"]) for f in doc["findings"] if f["severity"] != "info"] == []


def test_openmetrics_timestamps_in_seconds_and_eof() -> None:
    """OpenMetrics (what a scraper asking for application/openmetrics-text gets, and what some
    pipelines re-serve) stamps samples in seconds with a fraction ("timestamp = realnumber" in
    its ABNF), may declare a UNIT and ends with "# EOF"; the Prometheus text format stamps
    integer milliseconds. Both are the same reading."""
    series = f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="{UUID}",Hostname="n1"}} 45'
    openmetrics = (
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n# UNIT DCGM_FI_DEV_GPU_TEMP celsius\n"
        f"{series} 1520430000.123\n# EOF\n"
    )
    prometheus = f"{series} 1520430000123\r\n"  # and Windows line ends
    for page in (openmetrics, prometheus):
        (sample,) = parse_scrape(page, "stamped", 0.0).snapshot.samples
        assert sample.temperature_gpu_celsius == 45.0


def test_a_page_grepped_to_one_family_is_read_despite_its_prompt() -> None:
    """`curl .../metrics | grep FAMILY` on a one-GPU node pastes as the prompt line, HELP, TYPE
    and one sample: the HELP/TYPE lines are exposition, so the prompt is the minority."""
    page = (
        "$ curl -s localhost:9400/metrics | grep DCGM_FI_DEV_GPU_TEMP\n"
        "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
        f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="{UUID}",Hostname="n1"}} 45\n'
    )
    (sample,) = parse_scrape(page, "grepped", 0.0).snapshot.samples
    assert sample.temperature_gpu_celsius == 45.0


def test_text_mostly_not_exposition_is_still_refused() -> None:
    """Metadata lines count as exposition, prose does not: a note quoting one series is not
    a scrape."""
    page = "".join(f"note line {n}: see the dashboard\n" for n in range(3)) + (
        f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="{UUID}"}} 45\n'
    )
    with pytest.raises(GpuwardenError) as caught:
        parse_scrape(page, "note", 0.0)
    assert caught.value.reference == "dcgm-scrape-unreadable"


_FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _parse_or_error(text: str) -> None:
    """A Snapshot whose JSON is strict, or one of the scrape's own errors; nothing else."""
    try:
        scrape = parse_scrape(text, "fuzz", 0.0)
    except GpuwardenError as exc:
        reference: str | None = exc.reference
    else:
        json.dumps(snapshot_document(scrape.snapshot), allow_nan=False)
        reference = None
    assert reference in (None, "dcgm-scrape-unreadable", "dcgm-scrape-no-gpus")


@_FUZZ
@given(which=st.integers(0, len(PAGES) - 1), cut=st.floats(0, 1))
def test_fuzz_cut_pages(which: int, cut: float) -> None:
    _parse_or_error(PAGES[which][: int(len(PAGES[which]) * cut)])


@_FUZZ
@given(
    first=st.integers(0, len(PAGES) - 1),
    second=st.integers(0, len(PAGES) - 1),
    cuts=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    stamp=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True).map(repr)),
)
def test_fuzz_spliced_pages(
    first: int, second: int, cuts: tuple[float, float], stamp: str | None
) -> None:
    """The head of one page and the tail of another, joined mid-line or not; a timestamp of
    any float text after the head's last value."""
    head = PAGES[first][: int(len(PAGES[first]) * cuts[0])]
    tail = PAGES[second][int(len(PAGES[second]) * cuts[1]) :]
    _parse_or_error(head + (f" {stamp}" if stamp else "") + tail)
