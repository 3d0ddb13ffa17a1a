"""A pass that rests on a memory-error history says so: uncorrectable errors of the GPU's life,
retired pages and remapped rows below every line are the evidence of the pass, not a finding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.doctor.test_doctor import doctor_json

DATA = Path(__file__).resolve().parents[1] / "data"
# four Azure K80s: GPUs 0 and 1 with 7 / 4 aggregate double-bit errors and one single-bit and
# one double-bit page retired each, nothing volatile, nothing pending (read off the file)
K80 = DATA / "smi_xml_public3" / "pai__4x-tesla-k80-azure__v10__430.26.xml"
A100_REMAP = (
    DATA / "smi_heldout7" / "q__ml-engineering-debug__a100-sxm4-80gb-row-remap-pending__510.73.08"
    ".elided.txt"
)


def _check(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in doc["checks"] if c["name"] == name)


def test_old_double_bit_errors_and_retired_pages_are_the_evidence_of_the_pass(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, doc = doctor_json(capsys, "--from", str(K80))
    ecc, retired = _check(doc, "ecc"), _check(doc, "retired-pages")
    assert (ecc["status"], retired["status"]) == ("pass", "pass")
    assert "GPU 0: 7 uncorrectable ECC error(s) in its life (aggregate)" in ecc["detail"]
    assert "GPU 1: 4 uncorrectable ECC error(s) in its life (aggregate)" in ecc["detail"]
    assert "GPU 2" not in ecc["detail"]  # none in its life: nothing to say
    assert (
        "GPU 0: 2 page(s) retired (1 from double-bit errors), below the RMA line of 60"
        in (retired["detail"])
    )
    assert [f["code"] for f in doc["findings"] if f["severity"] != "info"] == []


def test_a_remapped_row_is_said_once_its_remap_is_done(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pending = A100_REMAP.read_text()
    _, doc = doctor_json(capsys, "--from", str(A100_REMAP))
    # pending: the finding says it, the history is not repeated beside it
    assert "row(s) remapped" not in _check(doc, "row-remap")["detail"]
    done = tmp_path / "remapped.txt"
    done.write_text(pending.replace("Pending                           : Yes", "Pending : No"))
    _, doc = doctor_json(capsys, "--from", str(done))
    remap = _check(doc, "row-remap")
    assert remap["status"] == "pass"
    assert (
        "GPU 0: 1 row(s) remapped (0 after uncorrectable errors), spare rows left"
        in (remap["detail"])
    )


def test_processes_without_memory_readings_are_not_said_to_hold_none(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    """nvidia-smi under Windows' WDDM prints N/A for each process's memory: the JSON has null
    and the check says the memory is not reported, not "hold 0.0 GiB"."""
    capture = (
        fixtures
        / "nvidia-smi"
        / "captures"
        / ("windows-x86_64__nvidia-geforce-rtx-2080-super__610.62.txt")
    )
    _, doc = doctor_json(capsys, "--from", str(capture))
    detail = _check(doc, "processes")["detail"]
    assert detail.startswith("GPU 0: 21 process(es), memory per process not reported (")
    assert "GiB" not in detail


@pytest.mark.parametrize(("expect", "status"), [((), "skip"), (("--expect-gpus", "1"), "pass")])
def test_a_gpu_count_with_nothing_to_count_against_is_not_a_pass(
    capsys: pytest.CaptureFixture[str], fixtures: Path, expect: tuple[str, ...], status: str
) -> None:
    capture = (
        fixtures
        / "nvidia-smi"
        / ("linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.idle.q.txt")
    )
    _, doc = doctor_json(capsys, "--from", str(capture), *expect)
    assert _check(doc, "gpu-count")["status"] == status


@pytest.mark.parametrize(
    ("capture", "status"),
    [
        # GB200 sits in NVL72 racks whose fabric the switch trays manage: the excerpt has no
        # fabric state, so nothing says whether this one is
        ("dcgm/issue-dcgm-exporter-581__gb200__excerpt.prom", "skip"),
        # dmon names no GPU
        ("nvidia-smi/linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.load.dmon.txt", "skip"),
        ("nvidia-smi/linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.idle.q.txt", "pass"),
    ],
)
def test_not_an_nvswitch_system_only_where_the_gpus_say_so(
    capsys: pytest.CaptureFixture[str], fixtures: Path, capture: str, status: str
) -> None:
    _, doc = doctor_json(capsys, "--from", str(fixtures / capture))
    assert _check(doc, "fabric-manager")["status"] == status


def test_a_readings_nvlink_skip_points_at_the_nvlink_s_output_beside_it(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    q = fixtures / "nvidia-smi" / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
    status = fixtures / "topo" / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.nvlink-s.txt"
    _, doc = doctor_json(capsys, "--from", str(q), "--from", str(status))
    nvlink, topology = _check(doc, "nvlink"), _check(doc, "nvlink-topology")
    assert nvlink["detail"].startswith("the links' state is judged from the `nvidia-smi nvlink")
    assert (nvlink["status"], topology["status"]) == ("skip", "pass")
    assert topology["detail"] == "18 NVLink(s) active, none lost"
