"""dcgm-exporter's per-Xid counters keep their Xid: which Xids, how many, on which GPU.

No fixture scrape has DCGM_EXP_XID_ERRORS_COUNT enabled (it is off in the default CSV), so the
series are added to real scrapes exactly as dcgm-exporter writes them: the device's own label
set (copied from the fixture's DCGM_FI_DEV_XID_ERRORS line) plus ``window_size_in_ms`` and
``xid`` (internal/pkg/collector/expcollector.go + xid_collector.go; the sample output in
https://github.com/NVIDIA/dcgm-exporter/pull/239 has the same label layout), and a series
without ``xid`` and value 0 for a device with no Xid in the window.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.errors import CorruptInputError
from gpuwarden.health.evaluate import evaluate_readings
from gpuwarden.telemetry.dcgm import open_dcgm, parse_scrape
from gpuwarden.telemetry.dcgm.xid import MAX_EVENTS_PER_XID
from gpuwarden.types.health import Confidence, Severity
from gpuwarden.types.telemetry import EventKind

from .exporter import serve_metrics

T4 = "datadog-integrations-core__tesla-t4__metrics.prom"
T4_UUID = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"
A100 = "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"
A100_UUID = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"
WINDOW = 'window_size_in_ms="300000"'


def _xid_lines(text: str, uuid: str) -> list[str]:
    return [
        line
        for line in text.splitlines()
        if line.startswith("DCGM_FI_DEV_XID_ERRORS{") and f'UUID="{uuid}"' in line
    ]


def _series(xid_line: str, family: str, extra_labels: str, value: int) -> str:
    """A series of ``family`` with the label set of one fixture DCGM_FI_DEV_XID_ERRORS line."""
    labels = xid_line[xid_line.index("{") + 1 : xid_line.rindex("}")]
    return f"{family}{{{labels},{extra_labels}}} {value}"


def _t4_with(fixtures: Path, *series: tuple[str, str, int], last_xid: int | None = None) -> str:
    text = (fixtures / "dcgm" / T4).read_text()
    (line,) = _xid_lines(text, T4_UUID)
    if last_xid is not None:
        text = text.replace(line, line.rsplit(" ", 1)[0] + f" {last_xid}")
        line = line.rsplit(" ", 1)[0] + f" {last_xid}"
    added = [_series(line, family, labels, value) for family, labels, value in series]
    return text + "\n".join(added) + "\n"


def _t4b(fixtures: Path, *series: tuple[str, str, int]) -> bytes:
    return _t4_with(fixtures, *series).encode()


def test_windowed_counts_keep_each_xid(fixtures: Path) -> None:
    text = _t4_with(
        fixtures,
        ("DCGM_EXP_XID_ERRORS_COUNT", f'{WINDOW},xid="13"', 3),
        ("DCGM_EXP_XID_ERRORS_COUNT", f'{WINDOW},xid="79"', 1),
        last_xid=79,
    )
    snap = parse_scrape(text, "t4.prom", 1_700_000_000.0).snapshot
    gpu = next(s for s in snap.samples if s.info.uuid == T4_UUID)
    other = next(s for s in snap.samples if s.info.uuid != T4_UUID)
    assert gpu.xid_last == 79  # DCGM_FI_DEV_XID_ERRORS keeps working alongside
    assert gpu.extra["dcgm_exp_xid_errors_count_xid_13"] == 3
    assert gpu.extra["dcgm_exp_xid_errors_count_xid_79"] == 1
    assert gpu.extra["dcgm_exp_xid_errors_window_s"] == 300.0
    assert "dcgm_exp_xid_errors_count" not in gpu.extra  # the lossy label-less key is gone
    assert not any(k.startswith("dcgm_exp_xid") for k in other.extra)
    assert all(e.kind is EventKind.XID for e in snap.events)
    assert sorted(e.code for e in snap.events) == [13, 13, 13, 79]
    assert {(e.uuid, e.index, e.timestamp_s) for e in snap.events} == {
        (T4_UUID, 0, 1_700_000_000.0)
    }
    assert next(e.message for e in snap.events if e.code == 13) == (
        "Xid 13: 3 in the last 300 s (DCGM_EXP_XID_ERRORS_COUNT)"
    )


def test_no_xid_in_the_window_is_no_event(fixtures: Path) -> None:
    text = _t4_with(fixtures, ("DCGM_EXP_XID_ERRORS_COUNT", WINDOW, 0))
    snap = parse_scrape(text, "t4.prom", 0.0).snapshot
    gpu = next(s for s in snap.samples if s.info.uuid == T4_UUID)
    assert snap.events == ()
    assert gpu.extra["dcgm_exp_xid_errors_window_s"] == 300.0
    assert not any(k.startswith("dcgm_exp_xid_errors_count") for k in gpu.extra)
    assert gpu.xid_last is None


def test_mig_instance_series_count_for_their_gpu_once(fixtures: Path) -> None:
    # dcgm-exporter writes a GPU's Xid counts on the GPU's series and again on each GPU_I_ID one
    text = (fixtures / "dcgm" / A100).read_text()
    lines = _xid_lines(text, A100_UUID)
    assert len(lines) == 2 and 'GPU_I_ID="13"' in lines[1]
    added = [_series(line, "DCGM_EXP_XID_ERRORS_COUNT", f'{WINDOW},xid="31"', 2) for line in lines]
    snap = parse_scrape(text + "\n".join(added) + "\n", "a100.prom", 0.0).snapshot
    parent, instance = snap.samples
    assert [(e.code, e.uuid) for e in snap.events] == [(31, A100_UUID), (31, A100_UUID)]
    assert parent.extra["dcgm_exp_xid_errors_count_xid_31"] == 2
    assert not any(k.startswith("dcgm_exp_xid") for k in instance.extra)


def test_err_code_label_and_total_family(fixtures: Path) -> None:
    text = _t4_with(
        fixtures,
        ("DCGM_EXP_XID_ERRORS_TOTAL", 'err_code="48"', 2),
        ("DCGM_EXP_XID_ERRORS_TOTAL", 'xid="94"', 1),
    )
    scrape = parse_scrape(text, "t4.prom", 0.0)
    assert sorted(e.code for e in scrape.snapshot.events) == [48, 48, 94]
    assert "since dcgm-exporter started" in scrape.snapshot.events[0].message
    gpu = next(s for s in scrape.snapshot.samples if s.info.uuid == T4_UUID)
    assert gpu.extra["dcgm_exp_xid_errors_total_xid_48"] == 2
    # the next reading: one more Xid 48; then the exporter restarted (total went down to 1)
    seen = {c.key: c.count for c in scrape.xid_counts}
    later = parse_scrape(
        _t4_with(fixtures, ("DCGM_EXP_XID_ERRORS_TOTAL", 'xid="48"', 3)),
        "t4.prom",
        1.0,
        previous=seen,
    )
    assert [e.code for e in later.snapshot.events] == [48]
    seen = {c.key: c.count for c in later.xid_counts}
    restarted = _t4_with(fixtures, ("DCGM_EXP_XID_ERRORS_TOTAL", 'xid="48"', 1))
    events = parse_scrape(restarted, "t4.prom", 2.0, previous=seen).snapshot.events
    assert [e.code for e in events] == [48]


def test_windowed_and_total_together_do_not_double_count(fixtures: Path) -> None:
    text = _t4_with(
        fixtures,
        ("DCGM_EXP_XID_ERRORS_COUNT", f'{WINDOW},xid="43"', 2),
        ("DCGM_EXP_XID_ERRORS_TOTAL", 'xid="43"', 5),
    )
    snap = parse_scrape(text, "t4.prom", 0.0).snapshot
    assert [e.code for e in snap.events] == [43, 43]


def test_a_burst_is_bounded_but_its_count_is_exact(fixtures: Path) -> None:
    text = _t4_with(fixtures, ("DCGM_EXP_XID_ERRORS_COUNT", f'{WINDOW},xid="13"', 5000))
    snap = parse_scrape(text, "t4.prom", 0.0).snapshot
    assert len(snap.events) == MAX_EVENTS_PER_XID
    assert "5000 in the last 300 s" in snap.events[0].message
    gpu = next(s for s in snap.samples if s.info.uuid == T4_UUID)
    assert gpu.extra["dcgm_exp_xid_errors_count_xid_13"] == 5000


def test_bad_xid_label_names_the_line(fixtures: Path) -> None:
    text = _t4_with(fixtures, ("DCGM_EXP_XID_ERRORS_COUNT", f'{WINDOW},xid="thirteen"', 1))
    with pytest.raises(CorruptInputError) as err:
        parse_scrape(text, "t4.prom", 0.0)
    assert err.value.reference == "dcgm-scrape-unreadable"
    assert f"t4.prom, line {len(text.splitlines())}" in err.value.message


def test_a_saved_scrape_gives_its_xids_once(fixtures: Path, tmp_path: Path) -> None:
    path = tmp_path / "t4.prom"
    path.write_text(_t4_with(fixtures, ("DCGM_EXP_XID_ERRORS_COUNT", f'{WINDOW},xid="79"', 1)))
    backend = open_dcgm(str(path))
    assert [e.code for e in backend.read().events] == [79]
    assert backend.read().events == ()  # the same moment read again: nothing new happened


@pytest.fixture
def exporter() -> Iterator[tuple[str, list[bytes]]]:
    """A /metrics endpoint on 127.0.0.1 whose body the test sets between readings."""
    bodies: list[bytes] = [b""]
    with serve_metrics(bodies, []) as base:
        yield f"{base}/metrics", bodies


def test_live_exporter_only_new_xids_become_events(
    fixtures: Path, exporter: tuple[str, list[bytes]]
) -> None:
    url, bodies = exporter
    count = "DCGM_EXP_XID_ERRORS_COUNT"
    backend = open_dcgm(url)
    bodies.append(_t4b(fixtures, (count, f'{WINDOW},xid="13"', 2)))
    assert [e.code for e in backend.read().events] == [13, 13]
    bodies.append(_t4b(fixtures, (count, f'{WINDOW},xid="13"', 2)))
    assert backend.read().events == ()  # the same two, still in the window
    bodies.append(
        _t4b(fixtures, (count, f'{WINDOW},xid="13"', 3), (count, f'{WINDOW},xid="79"', 1))
    )
    assert sorted(e.code for e in backend.read().events) == [13, 79]
    bodies.append(_t4b(fixtures, (count, WINDOW, 0)))  # all aged out of the window
    assert backend.read().events == ()
    bodies.append(_t4b(fixtures, (count, f'{WINDOW},xid="13"', 1)))
    assert [e.code for e in backend.read().events] == [13]  # a new one after the window emptied
    backend.close()


# --- the default last-value gauge alone: doctor says an Xid happened, not when ------------------


def _doctor(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    scrape = tmp_path / "metrics.prom"
    scrape.write_text(text)
    code = main(["doctor", "--from", str(scrape), "--json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, document
    return document


def _xid_findings(document: dict[str, Any]) -> list[tuple[str, str, str, int | None]]:
    return [
        (f["code"], f["severity"], f["confidence"], f["device"]["index"])
        for f in document["findings"]
        if f["code"] in ("xid", "gpu-lost")
    ]


@pytest.mark.parametrize(
    ("xid", "severity"),
    [(79, "warning"), (48, "warning"), (13, "info"), (43, "info"), (200, "info")],
)
def test_a_last_xid_alone_is_reported_one_level_below_the_catalog(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], xid: int, severity: str
) -> None:
    """The real T4 page with its DCGM_FI_DEV_XID_ERRORS set to ``xid``: an Xid happened since
    the exporter started, when and how often unknown (the gauge is sticky, dcgm-exporter #190,
    #500), so one severity level below the catalog's (79, 48 critical → warning; 13 warning →
    info; 43 info; 200, not in the catalog, warning → info), medium confidence, and the kernel
    log asked for. The other GPU of the page gets nothing."""
    document = _doctor(tmp_path, _t4_with(fixtures, last_xid=xid), capsys)
    assert _xid_findings(document) == [("xid", severity, "medium", 0)]
    (finding,) = [f for f in document["findings"] if f["code"] == "xid"]
    assert f"Xid {xid} " in finding["title"] and "when and how often unknown" in finding["title"]
    assert "kernel log" in finding["remedy"]
    assert finding["evidence"][0]["field"] == "xid_last" and finding["evidence"][0]["value"] == xid
    (check,) = [c for c in document["checks"] if c["name"] == "xid" and "last Xid" in c["detail"]]
    assert f"GPU 0: last Xid {xid}, time unknown" in check["detail"]


def test_a_zero_gauge_is_no_xid(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _doctor(tmp_path, (fixtures / "dcgm" / T4).read_text(), capsys)
    assert _xid_findings(document) == []


def test_counted_xids_speak_for_their_gpu_and_the_gauge_adds_nothing(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the windowed counter on the GPU, its events are judged (Xid 13 ×3) and the last
    value (13, the same Xid) is not reported a second time."""
    text = _t4_with(fixtures, ("DCGM_EXP_XID_ERRORS_COUNT", f'{WINDOW},xid="13"', 3), last_xid=13)
    document = _doctor(tmp_path, text, capsys)
    findings = [f for f in document["findings"] if f["code"] == "xid"]
    assert [(f["count"], f["confidence"]) for f in findings] == [(3, "high")]


def test_a_counted_xid_63_is_the_repair_its_gpu_s_architecture_makes(fixtures: Path) -> None:
    """dcgm-exporter's Xid counters carry no message: a Tesla T4 (Turing, named by the page's
    modelName only) retires pages, so its Xid 63 is a retirement waiting for a reboot."""
    text = _t4_with(fixtures, ("DCGM_EXP_XID_ERRORS_COUNT", f'{WINDOW},xid="63"', 2))
    snap = parse_scrape(text, "t4.prom", 1_700_000_000.0).snapshot
    found = {f.code: f for f in evaluate_readings([snap]).findings}
    pending = found["retired-pages-pending"]
    assert (pending.severity, pending.confidence) == (Severity.WARNING, Confidence.HIGH)
    assert pending.device is not None and pending.device.uuid == T4_UUID
    assert next(e.value for e in pending.evidence if e.field == "architecture") == "Turing"
    assert "row-remap-pending" not in found and found["xid"].severity is Severity.INFO
