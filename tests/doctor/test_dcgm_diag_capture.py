"""`doctor --from` reads `dcgmi diag` reports (tests/data/dcgmi_diag) as their own kind of capture:
recognised by dcgmi's headings, judged, and refused plainly (exit 2, the file named) when cut."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from gpuwarden.doctor.captures import CaptureKind, classify

DATA = Path(__file__).resolve().parents[1] / "data" / "dcgmi_diag"
SAMPLES = sorted(p.name for p in DATA.iterdir() if "__" in p.name)
EXPECTED = json.loads((DATA / "expected.json").read_text())


@pytest.mark.parametrize("name", SAMPLES)
def test_each_report_is_recognised_and_judged(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = DATA / name
    assert classify(path.read_text()) is CaptureKind.DCGM_DIAG
    assert main(["doctor", "--from", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    above_info = {
        (f["code"], (f.get("device") or {}).get("index"))
        for f in document["findings"]
        if f["severity"] != "info"
    }
    wanted = {(code, gpu) for code, gpu, _ in EXPECTED[name]["findings"]}
    assert wanted <= above_info  # expected.json lists the first and last GPU of a range
    assert {code for code, _ in above_info} == {code for code, _ in wanted}
    (check,) = [c for c in document["checks"] if c["name"] == "dcgm-diag"]
    assert check["status"] in ("pass", "warn", "fail")


@pytest.mark.parametrize(
    "fixture",
    ["nvidia-smi", "topo", "dcgm", "xid"],
)
def test_other_captures_are_not_taken_for_a_diag_report(fixtures: Path, fixture: str) -> None:
    for path in sorted((fixtures / fixture).iterdir())[:12]:
        if path.suffix in (".md", ".gz") or not path.is_file():
            continue
        assert classify(path.read_text(errors="replace")[: 64 << 10]) is not CaptureKind.DCGM_DIAG


@pytest.mark.parametrize(
    ("cut", "problem"),
    [
        (300, "closing brace"),
        (None, "no test result row"),
    ],
)
def test_a_cut_report_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cut: int | None, problem: str
) -> None:
    path = tmp_path / "diag.out"
    if cut is not None:
        whole = (DATA / SAMPLES[-1]).read_text()
        path.write_text(whole[:cut])
    else:
        path.write_text("| Diagnostic                | Result                 |\n+====+\n")
    assert main(["doctor", "--from", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and problem in err and "Traceback" not in err


VGPU = Path(__file__).resolve().parents[1] / "data" / "vgpu_license"


@pytest.mark.parametrize(
    "sample",
    [DATA / name for name in SAMPLES] + sorted(p for p in VGPU.iterdir() if p.suffix != ".md"),
    ids=lambda p: p.name,
)
def test_a_number_of_5000_digits_is_read_or_refused_never_a_crash(
    sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three of a report's zeros, and a -q's, made 5,000 nines (a GPU index, a DCGM error id, a
    driver version): Python's int() refuses past 4,300 digits, so the readers bound every number
    they convert."""
    damaged = tmp_path / sample.name
    damaged.write_bytes(sample.read_bytes().replace(b"0", b"9" * 5000, 3))
    code = main(["doctor", "--from", str(damaged), "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 2), err
    if code == 0:
        json.loads(out)
    else:
        assert json.loads(err)["hint"]
