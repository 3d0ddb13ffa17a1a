"""A GPU whose reading holds nothing a rule judges (a dcgm-exporter page that only names it) read
"ok" in snapshot's health cell and doctor's verdict cell, under a node verdict of "no findings":
its cells now say "–", as the node says UNKNOWN (no evidence is no pass)."""

from __future__ import annotations

from tests.cli.test_main import run_cli
from tests.conftest import PROJECT_ROOT

PAGE = str(
    PROJECT_ROOT
    / "tests/data/dcgm_public/03__dcgm-exporter-272__a100-80gb-pcie-mig-lowercase-names.prom"
)


def _run(*args: str) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _gpu_rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if "A100 80GB PCIe" in line and line.startswith("│")]


def test_snapshot_says_nothing_where_nothing_was_judged() -> None:
    rows = _gpu_rows(_run("snapshot", "--backend", "dcgm", "--from", PAGE))
    assert len(rows) == 2 and all(" ok " not in row for row in rows)


def test_doctor_says_nothing_where_nothing_was_judged() -> None:
    out = _run("doctor", "--from", PAGE)
    assert out.startswith("UNKNOWN")
    rows = _gpu_rows(out)
    assert len(rows) == 2 and all(" ok " not in row for row in rows)
