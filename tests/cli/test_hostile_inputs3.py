"""Issue 13's promise, third sweep: the parsers added since the second (``dcgmi diag`` reports,
NVSwitch SXid lines, vGPU license fields, dmon with other programs' lines and ``-d N``, CSV with
a cut first timestamp, the new explain signatures and OOM readers, the catalog's thermal
lookup), fed their own held-out samples damaged the ways the earlier sweeps used and ways aimed
at them: 5,000-digit numbers in every numeric cell, NUL, UTF-16, a BOM, a diag table of 10^5
rows or columns, JSON nested 10^5 deep, a 50 MB single line, and runs of 10^5 of the characters
the new regular expressions repeat. Fixed seed.

The promise (``problem`` of the first harness): never exit 70 nor a traceback; with --json a
strict JSON document, the error with its reference and hint; no hang; memory bounded.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuwarden.catalog import gpu_names
from gpuwarden.catalog.thermal import thermal_thresholds_for
from tests.checkout import child_env
from tests.cli.test_fuzz_verbs import _absurd_number, _cut, _flip, _lines, problem, run_in_process
from tests.telemetry.store import verb_fuzz

SEED = 38
DATA = Path(__file__).resolve().parents[1] / "data"
MB = 10**6
RUN = 100_000  # characters in a hostile run, rows or columns in a hostile table, depth of JSON

# --- catastrophic backtracking: every regular expression of the package is timed by the probe of
# test_hostile_r9_regex_probe.py (it walks every module, these parsers' among them) ------------

# --- the verbs that read the new samples, fed them damaged --------------------------------------

_NUMERIC = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
HUGE = "7" * 5_000  # past int()'s 4,300-digit limit, in every numeric cell at once


def _every_number_huge(text: str, rng: random.Random) -> str:
    return _NUMERIC.sub(HUGE, text)


def _nul(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + "\0" * rng.choice([1, 64]) + text[at:]


def _run_of(chars: str) -> Callable[[str, random.Random], str]:
    """A run of RUN characters put inside one line: what a regex repeating them meets."""

    def insert(text: str, rng: random.Random) -> str:
        lines = text.splitlines() or [""]
        k = rng.randrange(len(lines))
        at = rng.randrange(len(lines[k]) + 1)
        lines[k] = lines[k][:at] + chars * (RUN // len(chars)) + lines[k][at:]
        return "\n".join(lines) + "\n"

    return insert


DAMAGE: dict[str, Callable[[str, random.Random], str]] = {
    "cut": _cut,
    "flip": _flip,
    "absurd": _absurd_number,
    "lines": _lines,
    "huge-numbers": _every_number_huge,
    "nul": _nul,
    **{f"run{chars!r}": _run_of(chars) for chars in (" ", "\t", "7", "|", "+-", "1,", "9.")},
}
ENCODINGS: dict[str, Callable[[str], bytes]] = {
    "utf-16": lambda text: text.encode("utf-16"),
    "bom": lambda text: b"\xef\xbb\xbf" + text.encode(),
}
VERBS = {
    "doctor": ["doctor", "--from"],
    "snapshot": ["snapshot", "--backend", "smi", "--from"],
    "explain": ["explain", "--file"],
}


def _files(folder: str, pattern: str = "*") -> list[tuple[str, str]]:
    skip = {"SOURCES.md", "expected.json"}
    paths = sorted(p for p in (DATA / folder).glob(pattern) if p.name not in skip)
    return [(p.name, p.read_text(encoding="utf-8")) for p in paths]


def _texts(*names: str, key: str) -> list[tuple[str, str]]:
    found = []
    for name in names:
        for line in (DATA / "explain" / name).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if key in record:
                found.append((record["id"], record[key]))
    return found


def _families() -> dict[str, tuple[list[tuple[str, str]], tuple[str, ...]]]:
    """Each kind of new input: its samples (name, text) and the verbs that read it."""
    smi = ("snapshot", "doctor")
    return {
        "dcgmi-diag": (_files("dcgmi_diag", "[0-9]*"), ("doctor",)),
        "sxid": (_files("xid_heldout6", "05*") + _files("xid_heldout4", "15*"), ("doctor",)),
        "vgpu-license": (_files("vgpu_license"), smi),
        "smi-series": (_files("smi_series"), smi),
        "smi-heldout8": (_files("smi_heldout8"), smi),
        "explain": (
            _texts("heldout13.jsonl", "heldout14.jsonl", "heldout15.jsonl", key="error_text"),
            ("explain",),
        ),
        "oom": (_texts("oom_facts.jsonl", key="text"), ("explain",)),
    }


def _damaged_cases(workdir: Path) -> list[list[str]]:
    """For every family and every kind of damage, one sample and one of its verbs (fixed seed)."""
    rng = random.Random(SEED)
    cases = []
    for family, (samples, verbs) in _families().items():
        for damage in [*DAMAGE, *ENCODINGS]:
            name, text = rng.choice(samples)
            if damage in ENCODINGS:
                data = ENCODINGS[damage](text)
            else:
                data = DAMAGE[damage](text, rng).encode("utf-8", errors="surrogatepass")
            path = workdir / f"{family}-{damage.strip(chr(39))}-{name}"
            path.write_bytes(data)
            cases.append([*VERBS[rng.choice(verbs)], str(path), "--json"])
    return cases


def _run_all(cases: list[list[str]], workdir: Path, budget_s: float) -> tuple[list[str], float]:
    """Run in one child under an address-space limit (the harness of test_fuzz_verbs), within a
    time budget: a hang fails here instead of holding the suite."""
    listing = workdir / "cases.json"
    listing.write_text(json.dumps(cases))
    limit = str(verb_fuzz.ADDRESS_SPACE_LIMIT)
    proc = subprocess.run(
        [sys.executable, "-c", verb_fuzz._RUNNER, str(listing), limit],
        capture_output=True,
        text=True,
        check=False,
        timeout=budget_s,
        cwd=workdir,
        env=child_env(),
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == len(cases) + 1, proc.stderr[-3000:]
    *results, last = (json.loads(line) for line in lines)
    outcomes = [
        verb_fuzz.Outcome(tuple(argv), r["code"], r["json_problem"], r["err"])
        for argv, r in zip(cases, results, strict=True)
    ]
    return verb_fuzz.problems(outcomes), float(last["peak_mb"])


def test_damaged_new_samples_never_break_the_promise(tmp_path: Path) -> None:
    cases = _damaged_cases(tmp_path)
    assert len(cases) == 7 * (len(DAMAGE) + len(ENCODINGS))
    found, peak_mb = _run_all(cases, tmp_path, budget_s=120)
    assert found == []
    assert peak_mb < verb_fuzz.PEAK_RSS_LIMIT_MB


# --- the runs that held a verb for minutes before this sweep (fixed in the parsers) ----------

VGPU_Q = (
    DATA
    / "vgpu_license"
    / "q__tkgi-gpu-operator-vgpu-guide__grid-v100d-8c-licensed__535.216.01.txt"
)
BLANKS = " " * RUN


def _within(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def _runs_that_hung() -> dict[str, tuple[str, str]]:
    """name → (verb, text): q_text's key/value pattern (lazy key before a blank run), the paste
    reader's prompt pattern (nested optional blank runs: cubic), the OOM readers' sizes (tried
    from every digit of a run)."""
    q = VGPU_Q.read_text(encoding="utf-8")
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {} MiB. GPU 0 has a total"
    return {
        "blanks-in-a-q-key": ("snapshot", _within(q, "Driver Version", f"Driver{BLANKS}Version")),
        "blanks-in-a-q-value": ("doctor", _within(q, "Licensed", f"Licen{BLANKS}sed")),
        "blanks-before-the-first-line": ("snapshot", f"{BLANKS}x\n{q}"),
        "a long path in the prompt": (
            "doctor",
            f"me@box:/data{'1,' * (RUN // 2)}/x$ ./run.sh\n{q}",
        ),
        "digits-in-an-oom-size": ("explain", oom.format("7" * RUN)),
        "thousands-groups-in-an-oom-size": ("explain", oom.format("1," * (RUN // 2))),
    }


def test_the_runs_that_held_a_verb_for_minutes_are_read_at_once(tmp_path: Path) -> None:
    cases = []
    for name, (verb, text) in _runs_that_hung().items():
        path = tmp_path / f"{name}.txt"
        path.write_text(text, encoding="utf-8")
        cases.append([*VERBS[verb], str(path), "--json"])
    # before the fixes these took 8 s, 9 s and more than 15 s each (three past any wait)
    found, _ = _run_all(cases, tmp_path, budget_s=30)
    assert found == []


def test_an_error_names_a_huge_cell_without_echoing_it(tmp_path: Path) -> None:
    dmon = (DATA / "smi_series" / "dmon__cuda-notes__l40s-busy-87c.txt").read_text(encoding="utf-8")
    path = tmp_path / "dmon.txt"
    path.write_text(_every_number_huge(dmon, random.Random(SEED)), encoding="utf-8")
    outcome = run_in_process([*VERBS["snapshot"], str(path), "--json"])
    assert problem(outcome) is None and outcome.code == 2
    assert len(json.loads(outcome.err)["message"]) < 1_000


def test_a_csv_cell_with_a_long_blank_run_is_read_at_once(tmp_path: Path) -> None:
    csv = DATA / "smi_series" / "csv__chess-hackathon-quickstart__rtx-3090-session3-wsl.txt"
    path = tmp_path / "query.csv"
    path.write_text(
        _within(csv.read_text(encoding="utf-8"), "2170 MiB", f"217{BLANKS}0 MiB"), encoding="utf-8"
    )
    found, _ = _run_all([[*VERBS["snapshot"], str(path), "--json"]], tmp_path, budget_s=8)
    assert found == []


# --- dcgm-exporter's reader: blockquote markers and a series written a label a line ----------

DCGM_ONE_LABEL_A_LINE = (
    DATA
    / "dcgm_public8"
    / "10__dcgm-exporter-source-comment__rtx4090-535.54.03-one-label-a-line-job-pod.prom"
)
DCGM_VERBS = (["doctor", "--from"], ["snapshot", "--backend", "dcgm", "--from"])
SHAPED_MB = 2


def _label_lines_long(page: str, piece: str) -> str:
    """Each label line of the page made ~SHAPED_MB / 16 MB long with ``piece`` repeated in its
    value: the series is rejoined from all of them (at most 64), each a long line."""
    lines = page.splitlines()
    long_value = piece * (SHAPED_MB * MB // 16 // len(piece))
    return "\n".join(
        line.replace('="', f'="{long_value}', 1) if line.strip().endswith('",') else line
        for line in lines
    )


def _dcgm_shapes() -> dict[str, str]:
    page = DCGM_ONE_LABEL_A_LINE.read_text(encoding="utf-8")
    return {
        # a line of ">" (one blockquote marker each): the marker loop copied the rest of the
        # line for every one, minutes at 10 MB
        "blockquote-markers": ">" * (SHAPED_MB * MB) + "\n" + page,
        # the join re-read the whole joined series at every line: 64 long lines, 64 readings
        "long-label-lines": _label_lines_long(page, "x"),
        "escaped-quotes-in-label-lines": _label_lines_long(page, '\\"'),
    }


def test_dcgm_pages_of_hostile_layout_are_read_in_linear_time(tmp_path: Path) -> None:
    cases = []
    for name, text in _dcgm_shapes().items():
        path = tmp_path / f"{name}.prom"
        path.write_text(text, encoding="utf-8")
        cases += [[*verb, str(path), "--json"] for verb in DCGM_VERBS]
    # about 4 s on a loaded 2-core runner; before the fixes these six took more than 60 s
    found, peak_mb = _run_all(cases, tmp_path, budget_s=25)
    assert found == []
    assert peak_mb < verb_fuzz.PEAK_RSS_LIMIT_MB


# --- inputs shaped against the diag reader: huge tables, deep JSON ------------------------------

DIAG = DATA / "dcgmi_diag"
DIAG_TABLE = DIAG / "05__DCGM-253-comment__b200-4.4.1-slurm-pcie-internal-error.txt"
DIAG_JSON = DIAG / "09__DCGM-src-JsonResultTests__3.1.0-8gpu-pass-warning-prefix-nulls.json"


def _many_rows(table: str) -> str:
    lines = table.splitlines()
    at, row = next(
        (k, line) for k, line in enumerate(lines) if line.startswith("|  ") and "GPU" in line
    )
    return "\n".join(lines[:at] + [row] * RUN + lines[at:]) + "\n"


def _many_columns(table: str) -> str:
    lines = table.splitlines()
    return "\n".join(line + " x |" * RUN if line.startswith("|") else line for line in lines) + "\n"


def _diag_shapes() -> dict[str, str]:
    table = DIAG_TABLE.read_text(encoding="utf-8")
    report = DIAG_JSON.read_text(encoding="utf-8")
    return {
        "rows": _many_rows(table),
        "columns": _many_columns(table),
        "deep-array": "[" * RUN + "]" * RUN,
        "deep-object": '{"DCGM GPU Diagnostic": ' + '{"a": ' * RUN + "1" + "}" * (RUN + 1),
        "huge-gpu-ids": report.replace('"0,1,2,3,4,5,6,7"', f'"{HUGE}"'),
        "huge-numbers": _every_number_huge(table, random.Random(SEED)),
    }


def test_diag_reports_of_absurd_shape_keep_the_promise(tmp_path: Path) -> None:
    cases = []
    for name, text in _diag_shapes().items():
        path = tmp_path / f"{name}.txt"
        path.write_text(text, encoding="utf-8")
        cases.append(["doctor", "--from", str(path), "--json"])
    found, peak_mb = _run_all(cases, tmp_path, budget_s=90)
    assert found == []
    assert peak_mb < verb_fuzz.PEAK_RSS_LIMIT_MB


# --- one line of 50 MB --------------------------------------------------------------------------

# as the first harness: a 50 MB input may cost a few copies of itself while read and refused
PEAK_PER_INPUT_BYTE = 4.5


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_50_mb_single_line_costs_a_bounded_multiple_of_itself(tmp_path: Path, verb: str) -> None:
    path = tmp_path / "line.txt"
    path.write_bytes(b"7" * (50 * MB))
    tracemalloc.start()
    try:
        outcome = run_in_process([*VERBS[verb], str(path), "--json"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert problem(outcome) is None and outcome.code == 2
    assert str(path) in json.loads(outcome.err)["message"]
    assert peak < PEAK_PER_INPUT_BYTE * 50 * MB, f"{peak / MB:.0f} MB for a 50 MB line"


# --- the catalog's thermal lookup: product names as a damaged capture spells them ---------------


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA" + BLANKS + "H100 80GB HBM3",
        "NVIDIA H100 " * (RUN // 12),
        HUGE * 20,
        "\0" * RUN,
        "\ufeffNVIDIA L40S",
    ],
)
def test_the_thermal_lookup_answers_a_hostile_name_at_once(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked without a clock (a wall-clock bound fails under load; the name's own regular
    expressions are timed by the probe of test_hostile_r9_regex_probe.py): the name is read
    twice at most, its compact form and its words, however many rows the table has. A lookup
    reading it again for each row of the table costs the table's size times the name's."""
    name_reads = 0
    word_pattern = gpu_names._WORD

    class CountingWords:
        def findall(self, text: str) -> list[str]:
            nonlocal name_reads
            name_reads += text == name.lower()
            return word_pattern.findall(text)

    monkeypatch.setattr(gpu_names, "_WORD", CountingWords())
    found = thermal_thresholds_for(name)
    assert name_reads <= 2
    # only a name whose words are a model's (blanks aside) names one
    assert found is None or found.smi_name.split() == name.split()
