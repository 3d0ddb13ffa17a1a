"""The fuzz harness of issue 13, as a test with a fixed seed: real captures and model configs,
mutated the ways files get damaged (cut, bytes flipped, lines lost or repeated, numbers made
absurd), through `snapshot` (smi, dcgm) and `plan` as a user runs them, in this process.

The promise checked: never exit 70 nor a traceback; with --json, always a strict JSON document
(no NaN/Infinity) — the result on stdout, or the error with its reference and hint on stderr;
memory bounded by the input's size limits, for a 50 MB file and for a stream that never ends.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from tests.telemetry.store.verb_fuzz import run_cases

SEED = 13
MB = 10**6
# Absurd numbers real damage and hostile input produce: IEEE edges, wrapped unsigned, sentinels.
_ABSURD = (
    "1e308", "-1e308", "+Inf", "-Inf", "NaN", "nan", "-1", "-8192", "1000", "4294967295",
    "18446744073709551615", "9223372036854775794", "99999999999999999999", "0x10", "1e-320", "",
)  # fmt: skip
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def _cut(text: str, rng: random.Random) -> str:
    return text[: rng.randrange(len(text) + 1)]


def _flip(text: str, rng: random.Random) -> str:
    data = bytearray(text.encode())
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return data.decode("utf-8", errors="replace")


def _absurd_number(text: str, rng: random.Random) -> str:
    spots = list(_NUMBER.finditer(text))
    for spot in rng.sample(spots, min(len(spots), rng.randint(1, 4))):
        text = text[: spot.start()] + rng.choice(_ABSURD) + text[spot.end() :]
    return text if spots else text + rng.choice(_ABSURD)


def _lines(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    if not lines:
        return "\n"
    at = rng.randrange(len(lines))
    kind = rng.choice(["drop", "repeat", "swap", "junk"])
    if kind == "drop":
        del lines[at]
    elif kind == "repeat":
        lines[at:at] = [lines[at]] * rng.choice([2, 50, 3000])
    elif kind == "swap":
        other = rng.randrange(len(lines))
        lines[at], lines[other] = lines[other], lines[at]
    else:
        lines.insert(at, rng.choice(["}{", "<gpu>", "# gpu x", "GPU 0000:00:00.0", "a,b,c", "\0"]))
    return "\n".join(lines) + "\n"


_ODD_VALUES = (None, True, "", "x", -1, 0, 2**64, 1e308, -1e308, 0.5, [], {}, [1, 2], {"a": 1})


def _json_value(text: str, rng: random.Random) -> str:
    """A config.json with one of its values replaced by one of another type or size (Python's
    json writes NaN/Infinity as a hand-edited file might)."""
    try:
        config = json.loads(text)
    except ValueError:
        return text
    if not isinstance(config, dict) or not config:
        return text
    key = rng.choice(sorted(config))
    if rng.random() < 0.2:
        del config[key]
    else:
        config[key] = rng.choice([*_ODD_VALUES, float("nan"), float("inf")])
    return json.dumps(config)


Mutation = Callable[[str, random.Random], str]
MUTATIONS: dict[str, tuple[Mutation, ...]] = {
    "smi": (_cut, _flip, _absurd_number, _absurd_number, _lines, _lines),
    "dcgm": (_cut, _flip, _absurd_number, _absurd_number, _lines, _lines),
    "plan": (_cut, _flip, _absurd_number, _json_value, _json_value, _json_value, _json_value),
}


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    code: int | str
    out: str
    err: str


def run_in_process(argv: Sequence[str]) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: int | str = main(list(argv))
        except BaseException as exc:  # main() must let nothing out
            code = f"raised {type(exc).__name__}: {exc}"
    return Outcome(tuple(argv), code, out.getvalue(), err.getvalue())


def _refuse_constant(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def problem(outcome: Outcome) -> str | None:
    """What broke the promise in one run, or None."""
    if not isinstance(outcome.code, int):
        return outcome.code
    if outcome.code == 70 or "Traceback" in outcome.err or "internal-error" in outcome.err:
        return f"exit {outcome.code}: {outcome.err.strip()[-400:]}"
    if "--json" not in outcome.argv:
        return None
    text = outcome.out if outcome.code == 0 else outcome.err
    try:
        document = json.loads(text, parse_constant=_refuse_constant)
        if outcome.code != 0 and not (document["reference"] and document["hint"]):
            return f"exit {outcome.code} without a reference and a hint: {text[:300]}"
    except (ValueError, KeyError, TypeError) as exc:
        return f"exit {outcome.code}, invalid JSON ({exc}): {text[:300]!r}"
    return None


def _seed_files(fixtures: Path) -> dict[str, list[Path]]:
    smi = fixtures / "nvidia-smi"
    pick = {
        "smi": [
            *sorted(smi.glob("*h100-80gb*.load.*")),  # q, query-gpu, compute-apps, dmon, table
            *sorted(smi.glob("*h100-mig*.load.*")),
            *sorted(smi.glob("windows*610.62.load.*")),
            *sorted(smi.glob("*.xml")),
            smi / "netdata__tesla-p100.csv",
            smi / "captures" / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt",
        ],
        "dcgm": sorted((fixtures / "dcgm").glob("*.prom")),
        "plan": sorted((fixtures / "models").glob("*.json"))[::3],
    }
    assert len(pick["smi"]) == 21 and len(pick["dcgm"]) == 4 and len(pick["plan"]) >= 8
    return pick


def _argv(kind: str, path: Path, rng: random.Random) -> list[str]:
    as_json = ["--json"] if rng.random() < 0.8 else []  # the tables are rendered too
    if kind == "plan":
        return ["plan", str(path), *rng.choice([[], ["--gpu", "H100"], ["--mode", "infer"]])]
    return ["snapshot", "--backend", kind, "--from", str(path), *as_json]


def _cases(fixtures: Path, workdir: Path, per_seed: int, kinds: Sequence[str]) -> list[list[str]]:
    rng = random.Random(SEED)
    cases = []
    for kind in kinds:
        for seed in _seed_files(fixtures)[kind]:
            text = seed.read_text(errors="replace")
            for k in range(per_seed):
                mutated = text
                for _ in range(rng.choice([1, 1, 2, 3])):
                    mutated = rng.choice(MUTATIONS[kind])(mutated, rng)
                path = workdir / f"{kind}-{seed.stem}-{k}{seed.suffix}"
                path.write_text(mutated)
                argv = _argv(kind, path, rng)
                cases.append([*argv, "--json"] if kind == "plan" else argv)
    return cases


def _problems(outcomes: Sequence[Outcome]) -> list[str]:
    return [f"{' '.join(o.argv)}: {p}" for o in outcomes if (p := problem(o))]


def test_mutated_captures_never_break_the_promise(fixtures: Path, tmp_path: Path) -> None:
    cases = _cases(fixtures, tmp_path, per_seed=10, kinds=("smi", "dcgm"))
    assert len(cases) == 250
    outcomes = [run_in_process(argv) for argv in cases]
    assert _problems(outcomes) == []
    codes = {o.code for o in outcomes}
    assert 0 in codes and 2 in codes  # some read through the damage, some were refused
    # the damage reached the readings: values left out and said, cut reports said
    said = " ".join(o.out for o in outcomes if o.code == 0)
    assert "not reported (null)" in said and "cut short" in said


def test_mutated_model_configs_never_break_the_promise(fixtures: Path, tmp_path: Path) -> None:
    cases = _cases(fixtures, tmp_path, per_seed=10, kinds=("plan",))
    assert len(cases) == 160
    outcomes = [run_in_process(argv) for argv in cases]
    assert {o.code for o in outcomes} >= {0, 2}
    assert _problems(outcomes) == []


def test_a_config_with_an_absurd_dimension_is_refused(fixtures: Path, tmp_path: Path) -> None:
    """Found by the harness with another seed (1 run in ~300)."""
    config = json.loads((fixtures / "models" / "Qwen2.5-7B.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "hidden_size": 1e308}))
    outcome = run_in_process(["plan", str(path), "--mode", "infer", "--json"])
    assert problem(outcome) is None and outcome.code == 2


# --- memory -------------------------------------------------------------------------------------

# A 50 MB input may cost a few copies of itself while it is read and refused, never more.
PEAK_PER_INPUT_BYTE = 4.5


@pytest.mark.parametrize(
    ("argv", "make", "reference"),
    [
        (["snapshot", "--backend", "smi"], lambda n: b"\0" * n, "smi-output-unreadable"),
        (["snapshot", "--backend", "dcgm"], lambda n: b"\0" * n, "dcgm-scrape-unreadable"),
        (["plan"], lambda n: b"{" * n, "config-too-large"),
    ],
)
def test_a_50_mb_input_costs_a_bounded_multiple_of_itself(
    tmp_path: Path, argv: list[str], make: Callable[[int], bytes], reference: str
) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(make(50 * MB))
    where = [str(path)] if argv == ["plan"] else ["--from", str(path)]
    tracemalloc.start()
    try:
        outcome = run_in_process([*argv, *where, "--json"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert problem(outcome) is None and outcome.code == 2
    assert json.loads(outcome.err)["reference"] == reference
    assert peak < PEAK_PER_INPUT_BYTE * 50 * MB, f"{peak / MB:.0f} MB for a 50 MB input"


def test_a_fleet_sized_scrape_is_refused_early(fixtures: Path, tmp_path: Path) -> None:
    """50 MB of real series of ever new GPUs: refused at the device limit, not read whole."""
    base = (fixtures / "dcgm" / "issue-dcgm-exporter-581__gb200__excerpt.prom").read_text()
    copies = [base.replace('UUID="GPU-', f'UUID="GPU-{k}-') for k in range(50 * MB // len(base))]
    path = tmp_path / "fleet.prom"
    path.write_text("".join(copies))
    tracemalloc.start()
    try:
        outcome = run_in_process(["snapshot", "--backend", "dcgm", "--from", str(path), "--json"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    error = json.loads(outcome.err)
    assert outcome.code == 2 and "more than 1024 GPUs" in error["message"]
    assert peak < 2.5 * 50 * MB, f"{peak / MB:.0f} MB"


# Streams that never end run in a child under an address-space limit: a reader that went to EOF
# would take the machine's memory before failing, this way it fails the test.
def test_endless_streams_are_cut_at_the_limit(tmp_path: Path) -> None:
    cases = [
        ["snapshot", "--backend", "smi", "--from", "/dev/zero", "--json"],
        ["snapshot", "--backend", "dcgm", "--from", "/dev/zero", "--json"],
        ["plan", "/dev/zero", "--json"],
    ]
    results, peak_mb = run_cases(cases, tmp_path, address_space=2 << 30)
    references = [json.loads(r.err)["reference"] for r in results]
    assert references == ["smi-output-too-large", "dcgm-scrape-too-large", "config-too-large"]
    assert all(r.code == 2 for r in results)
    # the child's peak over the three: 64 MiB read and refused, plus the interpreter (~90 MB
    # measured); a reader that went to EOF would have hit the 2 GiB address-space limit
    assert peak_mb < 400
