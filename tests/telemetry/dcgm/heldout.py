"""What the held-out dcgm-exporter sets (tests/data/dcgm_public2, dcgm_public3) share: how a set
and its pages are loaded, how `snapshot`/`doctor` are run on a page and their JSON checked
against expected.json, and the cut-and-splice fuzzing every page gets (a damaged page reads to
strict JSON or is refused with one of the scrape's own errors)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.errors import GpuwardenError
from gpuwarden.report.snapshot_document import snapshot_document
from gpuwarden.telemetry.dcgm import parse_scrape

DATA_ROOT = Path(__file__).resolve().parents[2] / "data"
MIB = 1 << 20
# expected.json keys that are not snapshot fields as such (one pod per device, key by key)
_POD_KEYS = ("pod", "namespace", "container")

# how a set writes a device's pods: "keys" (pod/namespace/container of its one pod) or
# "triples" (a "pods" list of [pod, namespace, container])
PodForm = Literal["keys", "triples"]


def load_pages(name: str) -> tuple[Path, list[dict[str, Any]], list[str]]:
    """The folder of a held-out set under tests/data, the rows of its expected.json and the
    text of each row's page."""
    data = DATA_ROOT / name
    rows: list[dict[str, Any]] = json.loads((data / "expected.json").read_text(encoding="utf-8"))
    pages = [(data / row["file"]).read_text(encoding="utf-8") for row in rows]
    return data, rows, pages


def short_ids(rows: list[dict[str, Any]]) -> list[str]:
    """A test id per row: the first two ``__`` parts of its file name."""
    return [row["file"].split("__")[0] + "_" + row["file"].split("__")[1] for row in rows]


def marked(row: dict[str, Any], reason_key: str) -> Any:
    """The row, as a strict xfail when expected.json gives a reason under ``reason_key``."""
    if row.get(reason_key):
        return pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=row[reason_key]))
    return row


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    """The JSON document of one `gpuwarden ... --json` run that exits 0."""
    code = main([*args, "--json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, document
    return document


def check_device(device: dict[str, Any], expected: dict[str, Any], pod_form: PodForm) -> None:
    for key, value in expected.items():
        if key.endswith("_mib"):  # MiB as the page prints them
            assert device[key.removesuffix("_mib") + "_bytes"] == value * MIB, key
        elif pod_form == "keys" and key in _POD_KEYS:
            assert [p[key] for p in device["pods"]] == [value], key
        elif pod_form == "triples" and key == "pods":
            seen = [[p["pod"], p["namespace"], p["container"]] for p in device["pods"] or ()]
            assert seen == value, key
        elif key == "extra":
            assert {k: device["extra"].get(k) for k in value} == value
        elif isinstance(value, float):
            assert device[key] == pytest.approx(value), key
        else:
            assert device[key] == value, key


def assert_snapshot_reads(
    capsys: pytest.CaptureFixture[str], data: Path, row: dict[str, Any], pod_form: PodForm
) -> None:
    """`snapshot --backend dcgm --from` the row's page gives the host, devices and events of
    expected.json."""
    snap = run_cli(capsys, "snapshot", "--backend", "dcgm", "--from", str(data / row["file"]))
    assert snap["host"] == row["host"]
    assert len(snap["devices"]) == row["device_count"]  # none merged, none lost
    devices = {d["uuid"]: d for d in snap["devices"]}
    for uuid, expected in row["gpus"].items():
        check_device(devices[uuid], expected, pod_form)
    for kind, expected_events in row.get("events", {}).items():
        seen = [[e["code"], e["uuid"]] for e in snap["events"] if e["kind"] == kind]
        assert seen == expected_events, kind


def assert_no_false_alarm(capsys: pytest.CaptureFixture[str], page: Path) -> None:
    doc = run_cli(capsys, "doctor", "--from", str(page))
    assert [(f["code"], f["title"]) for f in doc["findings"] if f["severity"] != "info"] == []


FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
CUT = st.floats(0, 1)


def page_index(pages: list[str]) -> st.SearchStrategy[int]:
    return st.integers(0, len(pages) - 1)


def cut_page(page: str, cut: float) -> str:
    """The head of ``page`` up to ``cut`` (0..1 of its length)."""
    return page[: int(len(page) * cut)]


def spliced(head: str, tail: str, cuts: tuple[float, float], joint: str = "") -> str:
    """The head of one page and the tail of another, joined by ``joint``."""
    return cut_page(head, cuts[0]) + joint + tail[int(len(tail) * cuts[1]) :]


def parse_or_error(text: str) -> None:
    """A Snapshot whose JSON is strict, or one of the scrape's own errors; nothing else."""
    try:
        scrape = parse_scrape(text, "fuzz", 0.0)
    except GpuwardenError as exc:
        reference: str | None = exc.reference
    else:
        json.dumps(snapshot_document(scrape.snapshot), allow_nan=False)
        reference = None
    assert reference in (None, "dcgm-scrape-unreadable", "dcgm-scrape-no-gpus")


def no_false_alarm_check(
    data: Path, rows: list[dict[str, Any]]
) -> Callable[[dict[str, Any], pytest.CaptureFixture[str]], None]:
    """``assert_no_false_alarm`` on each page the set's rows call healthy (a ``doctor_xfail`` a
    strict xfail), as a test its module binds under a ``test_*`` name."""
    healthy = [row for row in rows if row["healthy"]]
    cases = [marked(row, "doctor_xfail") for row in healthy]

    @pytest.mark.parametrize("row", cases, ids=[row["file"][:40] for row in healthy])
    def check(row: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
        assert_no_false_alarm(capsys, data / row["file"])

    return check


def cut_pages_fuzz(pages: list[str]) -> Callable[..., None]:
    """Any page cut short reads or is refused (``parse_or_error``), as a test its module binds
    under a ``test_*`` name."""

    @FUZZ
    @given(which=page_index(pages), cut=CUT)
    def check(which: int, cut: float) -> None:
        parse_or_error(cut_page(pages[which], cut))

    return check


TestFn = Callable[..., None]


def page_set_checks(
    data: Path, rows: list[dict[str, Any]], pages: list[str], pod_form: PodForm = "triples"
) -> tuple[TestFn, TestFn, TestFn, TestFn]:
    """The four checks every set from the fifth on runs, as test functions for its module:
    ``snapshot`` reads each page not refused as written down (a ``snapshot_xfail`` a strict
    xfail), ``no_false_alarm_check``, ``cut_pages_fuzz``, and the head of one page joined to the
    tail of another reads or is refused (``parse_or_error``)."""
    read = [row for row in rows if not row.get("refused")]

    @pytest.mark.parametrize(
        "row", [marked(row, "snapshot_xfail") for row in read], ids=short_ids(read)
    )
    def test_snapshot_reads_the_values(
        row: dict[str, Any], capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert_snapshot_reads(capsys, data, row, pod_form=pod_form)

    @FUZZ
    @given(first=page_index(pages), second=page_index(pages), cuts=st.tuples(CUT, CUT))
    def test_fuzz_spliced_pages(first: int, second: int, cuts: tuple[float, float]) -> None:
        """The head of one page and the tail of another, joined mid-line (often mid-label)."""
        parse_or_error(spliced(pages[first], pages[second], cuts))

    return (
        test_snapshot_reads_the_values,
        no_false_alarm_check(data, rows),
        cut_pages_fuzz(pages),
        test_fuzz_spliced_pages,
    )


def refused_check(data: Path, rows: list[dict[str, Any]]) -> TestFn:
    """Each page the set's rows call ``refused`` (no scrape), given to ``snapshot`` and to
    ``doctor``, as a test its module binds under a ``test_*`` name."""
    refused = [row for row in rows if row.get("refused")]

    @pytest.mark.parametrize("row", refused, ids=short_ids(refused))
    @pytest.mark.parametrize("command", ["snapshot", "doctor"])
    def test_a_page_that_is_no_scrape_is_refused(row: dict[str, Any], command: str) -> None:
        """Exit 2 with one of the reader's own errors (doctor: or that it knows no such
        capture)."""
        args = ["snapshot", "--backend", "dcgm"] if command == "snapshot" else ["doctor"]
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main([*args, "--from", str(data / row["file"]), "--json"])
        assert code == 2
        accepted = [*row["refused"], *(["capture-not-recognised"] if command == "doctor" else [])]
        assert json.loads(err.getvalue())["reference"] in accepted

    check: TestFn = test_a_page_that_is_no_scrape_is_refused  # two parametrize marks type it Any
    return check
