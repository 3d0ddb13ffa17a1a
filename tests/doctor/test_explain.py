"""doctor.explain: a paste with an nvidia-smi screen in it (alone, or with an error), judged and
annotated; the screen deciding between candidates; the plan following an OOM diagnosis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import resolve_gpu, resolve_model
from gpuwarden.doctor.explain import SAME_GPU_RATIO, explain, screen_candidates
from gpuwarden.report.explain import explain_document
from gpuwarden.types.health import Severity
from gpuwarden.types.plan import Mode, PlanRequest, Precision

DATA = Path(__file__).resolve().parent.parent / "data" / "explain"
SMI_SUFFIXES = ("table.txt", "q.txt", "query-gpu.csv", ".xml", "dmon.txt")


def _smi_files(fixtures: Path) -> list[Path]:
    folder = fixtures / "nvidia-smi"
    return sorted(p for p in folder.iterdir() if p.name.endswith(SMI_SUFFIXES))


def _example(path: Path, example_id: str) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] == example_id:
            return str(record["error_text"])
    raise KeyError(example_id)


def test_every_healthy_capture_is_read_and_raises_nothing_above_info(fixtures: Path) -> None:
    files = _smi_files(fixtures)
    assert len(files) >= 40
    for path in files:
        report = explain(path.read_text(encoding="utf-8"))
        assert report.screen is not None, path.name
        assert report.screen_problem is None
        assert report.explanation.diagnoses == (), path.name
        assert report.explanation.next_steps == ()  # the screen's verdict replaces "capture more"
        worst = max((f.severity.rank for f in report.explanation.findings), default=0)
        assert worst <= Severity.INFO.rank, (path.name, report.explanation.findings)
        for device in report.screen.devices:
            assert device.notes, path.name
            assert {n.status for n in device.notes} <= {"ok", "info", "finding"}


def test_field_notes_say_what_idle_and_consumer_values_mean(fixtures: Path) -> None:
    idle = (
        fixtures
        / "nvidia-smi"
        / "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle.table.txt"
    )
    report = explain(idle.read_text())
    assert report.screen is not None and report.screen.format == "table"
    notes = {n.field: n for n in report.screen.devices[0].notes}
    assert notes["pstate"].value == "P8"
    assert notes["pstate"].note.startswith("P8 at idle: normal")
    assert notes["ecc_mode_enabled"].value == "N/A"
    assert (
        "GeForce" in notes["ecc_mode_enabled"].note and "normal" in notes["ecc_mode_enabled"].note
    )
    assert notes["memory_used_bytes"].value == "214 MiB / 8,192 MiB"
    assert notes["temperature_gpu_celsius"].status == "ok"  # judged by the rules, not flagged
    assert notes["persistence_mode"].codes == ("persistence-off",)  # the info finding
    assert notes["cuda_driver_version"].value == "13.2"
    assert notes["processes"].value == "2"

    q_idle = (
        fixtures
        / "nvidia-smi"
        / "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle.q.txt"
    )
    q = explain(q_idle.read_text())
    assert q.screen is not None and q.screen.format == "q-text"
    pcie = {n.field: n for n in q.screen.devices[0].notes}["pcie_link_gen_current"]
    assert pcie.value == "Gen1 of Gen3" and "downtrains" in pcie.note and pcie.status == "ok"


def test_a_screen_inside_an_error_paste_is_found_and_decides() -> None:
    """NVIDIA/DIGITS#2005: error 46 with the screen that shows "E. Process"."""
    text = _example(DATA / "heldout.jsonl", "hw-exclusive-process-digits-2005")
    report = explain(text)
    assert report.screen is not None and report.screen.format == "table"
    sample = report.screen.snapshot.samples[0]
    assert sample.compute_mode == "Exclusive_Process"
    top = report.explanation.diagnoses[0]
    assert top.cause == "compute-mode-exclusive"
    assert any("E" in line and "Exclusive_Process" in line for line in top.evidence)


def test_an_error_followed_by_a_capture(fixtures: Path) -> None:
    error = _example(fixtures / "errors" / "examples.jsonl", "ver-driver-insufficient-remode-9")
    table = (
        fixtures / "nvidia-smi" / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.table.txt"
    ).read_text()
    report = explain("Traceback here:\n" + error + "\n\nand nvidia-smi says:\n" + table)
    assert report.screen is not None
    assert report.explanation.diagnoses[0].cause == "driver-too-old"
    assert any("CUDA up to 13.1" in e for e in report.explanation.diagnoses[0].evidence)


def test_a_broken_screen_is_reported_and_the_error_still_explained(fixtures: Path) -> None:
    table = (
        fixtures / "nvidia-smi" / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.table.txt"
    ).read_text()
    lines = table.splitlines()
    broken = "\n".join([*lines[:9], "| 0 garbage row that is not a GPU row |", *lines[10:]])
    report = explain("RuntimeError: CUDA error: uncorrectable ECC error encountered\n" + broken)
    assert report.screen is None
    assert report.screen_problem is not None and "line" in report.screen_problem
    assert report.explanation.diagnoses[0].cause == "ecc-uncorrectable"


def test_error_lines_with_commas_are_not_taken_for_a_csv(fixtures: Path) -> None:
    # its first line, 'File "...module.py", line 1159, in convert', has two ", " like a CSV row
    text = _example(fixtures / "errors" / "examples.jsonl", "ver-cpu-wheel-mineru-1754")
    assert text.lstrip().startswith("File") and text.splitlines()[0].count(", ") >= 2
    assert screen_candidates(text) == []
    report = explain(text)
    assert report.screen is None and report.screen_problem is None
    assert report.explanation.diagnoses[0].cause == "cpu-only-build"


def test_heldout_through_the_whole_pipeline() -> None:
    """The doctor pipeline reads pasted screens too: the DIGITS miss of the pure layer is gone."""
    import csv

    with (DATA / "heldout_labels.csv").open(newline="") as f:
        causes = {row["id"]: row["causes"] for row in csv.DictReader(f)}
    records = [json.loads(x) for x in (DATA / "heldout.jsonl").read_text().splitlines()]
    hits = sum(
        1
        for r in records
        if (d := explain(r["error_text"]).explanation.diagnoses) and d[0].cause == causes[r["id"]]
    )
    assert hits / len(records) >= 0.93  # measured 59/63


def _request(gpu: str) -> PlanRequest:
    return PlanRequest(
        model=resolve_model("Llama-2-7b-hf"),
        mode=Mode.TRAIN,
        gpu=resolve_gpu(gpu),
        precision=Precision.BF16_MIXED,
        micro_batch=8,
        seq_len=4096,
    )


def test_the_plan_follows_an_oom_diagnosis(fixtures: Path) -> None:
    oom = _example(fixtures / "errors" / "examples.jsonl", "oom-pytorch-67971")
    report = explain(oom, plan_request=_request("A100 40GB"))
    assert report.plan is not None and report.plan_skipped is None
    assert report.plan.plan.fits is False
    assert report.plan.plan.fixes  # the playbook, re-planned
    assert report.plan.oom_total_bytes == 6 * (1 << 30)
    assert report.plan.same_gpu is False  # a 6 GiB GPU ran out, the plan is for a 40 GB one
    document = explain_document(report)
    assert document["plan"]["schema"] == "gpuwarden.plan/1"
    assert document["plan"]["fits"] is False and document["plan"]["same_gpu"] is False
    assert SAME_GPU_RATIO[0] < 39.38 / 40 < SAME_GPU_RATIO[1]  # what CUDA reports for an A100 40GB


def test_the_plan_is_skipped_for_an_error_that_is_not_oom(fixtures: Path) -> None:
    error = _example(fixtures / "errors" / "examples.jsonl", "nccl-shm-docker-342")
    report = explain(error, plan_request=_request("A100 40GB"))
    assert report.plan is None
    assert report.plan_skipped == "the error is not an out-of-memory error"


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_json_is_always_valid(data: st.DataObject, fixtures: Path) -> None:
    sources = [
        *(
            json.loads(x)["error_text"]
            for x in (fixtures / "errors" / "examples.jsonl").read_text().splitlines()
        ),
        (
            fixtures / "nvidia-smi" / "linux-x86_64__nvidia-h100-mig__590.48.01.idle.table.txt"
        ).read_text(),
        (fixtures / "xid" / "gpud__dmesg-with-xid-119.log").read_text(),
    ]
    text = data.draw(st.sampled_from(sources))
    at = data.draw(st.integers(0, len(text)))
    text = text[:at] + data.draw(st.text(max_size=30)) + text[at + data.draw(st.integers(0, 30)) :]
    document = explain_document(explain(text))
    again = json.loads(json.dumps(document, ensure_ascii=False, allow_nan=False))
    assert again["schema"] == "gpuwarden.explain/1"
    assert set(again) >= {"diagnoses", "facts", "xid_events"}


@pytest.mark.parametrize(
    "name", ["gpud__dmesg-with-xid-119.log", "gpud__dmesg-decode-iso-xid13-43.log"]
)
def test_kernel_logs_give_xid_events(fixtures: Path, name: str) -> None:
    document = explain_document(explain((fixtures / "xid" / name).read_text()))
    events = document["xid_events"]
    assert events
    keys = {"xid", "pci_bus_id", "uuid", "count", "first_seen", "last_seen", "mnemonic", "action",
            "severity", "lines"}  # fmt: skip
    assert all(keys <= set(e) for e in events)
    assert document["diagnoses"]
