"""Issue 13, round 7: dcgm-exporter pages the readers refuse, now that they raise plainly and the
entry points name the page (errors.ReaderError / errors.naming, this stop): every verb that
reads a page names it once, and what the error quotes of the page is bounded.

Measured before the fixes: every refused page below was named exactly once by snapshot, doctor,
export --once and record (no change needed there); but a page's metric name, value, label name,
first series name or ``gpu`` label was quoted whole, so a 1 MB value gave a 1 MB error (the
exposition reader's own "not a metric line" already cut its quote at 60 characters)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.telemetry.dcgm.exposition import ScrapeError
from gpuwarden.telemetry.dcgm.scrape import parse_scrape
from tests.cli.test_fuzz_verbs import problem, run_in_process
from tests.conftest import FIXTURES

# A real page (dcgm-exporter on an A100, NVIDIA's docs) as the seed
SEED = FIXTURES / "dcgm" / "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"
LABELS = 'gpu="0",UUID="GPU-34319582-d595-d1c7-d1d2-179bcfa61660",Hostname="h"'
TEMP = "DCGM_FI_DEV_GPU_TEMP"
MB = 1_000_000


def _seed() -> str:
    return SEED.read_text()


# refused pages: the seed with one line a hostile user changed, and pages that are no scrape
REFUSED = {
    "value": lambda: f"{_seed()}{TEMP}{{{LABELS}}} abc\n{_seed().splitlines()[0]}\n",
    "label-syntax": lambda: f'{TEMP}{{gpu="0" UUID="x"}} 1\n{_seed()}',
    "xid-label": lambda: f'{_seed()}DCGM_EXP_XID_ERRORS_COUNT{{{LABELS},xid="x"}} 1\n',
    "window-label": lambda: (
        f'{_seed()}DCGM_EXP_XID_ERRORS_COUNT{{{LABELS},xid="79",window_size_in_ms="x"}} 1\n'
    ),
    "gpu-label": lambda: f'{_seed()}{TEMP}{{gpu="-1",UUID="GPU-2"}} 1\n',
    "not-dcgm": lambda: "go_goroutines 12\nprocess_cpu_seconds_total 3\n",
    "help-only": lambda: f"# HELP {TEMP} x\n# TYPE {TEMP} gauge\n",
    "no-gpu": lambda: f'{TEMP}{{foo="1"}} 1\n',
    "fleet-page": lambda: "".join(f'{TEMP}{{gpu="{i}",UUID="GPU-{i}"}} 1\n' for i in range(1100)),
}
VERBS = {
    "snapshot": ["snapshot", "--backend", "dcgm", "--json", "--from"],
    "doctor": ["doctor", "--json", "--from"],
    "export": ["export", "--backend", "dcgm", "--once", "--from"],
}


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("page", sorted(REFUSED))
def test_a_refused_page_is_named_once(page: str, verb: str, tmp_path: Path) -> None:
    path = tmp_path / f"{page}.prom"
    path.write_text(REFUSED[page]())
    outcome = run_in_process([*VERBS[verb], str(path)])
    assert problem(outcome) is None
    assert outcome.code == 2
    assert outcome.err.count(path.name) == 1


@pytest.mark.parametrize("page", ["value", "not-dcgm"])
def test_record_names_a_refused_page_once(page: str, tmp_path: Path) -> None:
    path = tmp_path / f"{page}.prom"
    path.write_text(REFUSED[page]())
    database = str(tmp_path / "record.db")
    argv = ["record", "--backend", "dcgm", "--duration", "1", "--db", database, "--from"]
    outcome = run_in_process([*argv, str(path), "--", "true"])
    assert problem(outcome) is None
    assert outcome.code == 2
    assert outcome.err.count(path.name) == 1


def test_a_folder_s_refused_page_is_listed_once(tmp_path: Path) -> None:
    (tmp_path / "good.prom").write_text(_seed())
    (tmp_path / "bad.prom").write_text(REFUSED["value"]())
    outcome = run_in_process(["doctor", "--from", str(tmp_path)])
    assert outcome.code == 0
    assert outcome.out.count("bad.prom") == 1
    assert "bad.prom: line 23: DCGM_FI_DEV_GPU_TEMP: 'abc' is not a number" in outcome.out


# pages whose refusal quoted a megabyte of themselves (failed before: each message ~1 MB)
HUGE = {
    "value": lambda: f"{_seed()}{TEMP}{{{LABELS}}} {'x' * MB}\n",
    "metric-name": lambda: f"{_seed()}DCGM_{'A' * MB}{{{LABELS}}} x\n",
    "label-name": lambda: f"{_seed()}{TEMP}{{{'a' * MB}}} 1\n",
    "first-series": lambda: f"go_{'a' * MB} 1\n",
    "gpu-label": lambda: f'{_seed()}{TEMP}{{gpu="{"9" * 5000}",UUID="GPU-2"}} 1\n',
}


@pytest.mark.parametrize("page", sorted(HUGE))
def test_what_a_refusal_quotes_of_the_page_is_bounded(page: str) -> None:
    with pytest.raises(ScrapeError) as refused:
        parse_scrape(HUGE[page](), "huge.prom", 0.0)
    message = str(refused.value)
    assert message.startswith("huge.prom")
    assert message.count("huge.prom") == 1
    assert len(message) < 300
    assert "characters)" in message  # it says how long the quoted text was
