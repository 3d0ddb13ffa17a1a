"""`trace analyze` (JSON, tables, HTML) and `trace diff` on real traces mutated the ways files
get damaged (cut, overwritten or repeated bytes, a gzip stream cut) and the ways odd writers and
hand edits change them (numbers as text, huge and infinite values, duplicate keys, deep
nesting, wrong types): never exit 70, never invalid JSON, bounded memory. Cases from a fixed
seed, run by the harness in tests/telemetry/store/verb_fuzz.py."""

from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

from tests.telemetry.store.verb_fuzz import PEAK_RSS_LIMIT_MB, problems, run_cases

SEED = 13
TRACES = 36
SEEDS = (
    "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
    "call_stack/backward_thread.json",
    "large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
    "critical_path/cuda_event_sync/event_sync_trace.json.gz",
)
# What replaces a number, a string or a key's value: text, the edges of every JSON number,
# wrong JSON types, and nesting deeper than any parser's recursion limit.
_VALUES = (
    b'"x"', b'""', b"1e999", b"-1e999", b"1e308", b"18446744073709551616", b"-1", b"0",
    b"true", b"null", b"[]", b"{}", b'[1, "a"]', b'{"a": {"b": [null]}}', b"NaN", b"Infinity",
    b"[" * 5000 + b"]" * 5000, b'"ProfilerStep#x"', b"9007199254740993.5",
)  # fmt: skip
_NUMBER = re.compile(rb"(?<=: )-?\d+(\.\d+)?")
_STRING = re.compile(rb'(?<=: )"[^"\\]{0,40}"')
_KEY = re.compile(rb'"(ts|dur|cat|name|pid|tid|stream|correlation|args|traceEvents|ph)": ')
# the value after one of the keys the analyses read (up to the next comma or brace)
_VALUE_OF_KEY = re.compile(rb'"(?:ts|dur|stream|cat|name|args)": (?P<v>[^,}]+)')


def _json(fixtures: Path, rel: str) -> bytes:
    data = (fixtures / "traces" / rel).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _replace_some(data: bytes, pattern: re.Pattern[bytes], rng: random.Random) -> bytes:
    """Up to 8 matches of ``pattern`` (its group ``v`` if it has one) replaced by odd values."""
    group = pattern.groupindex.get("v", 0)
    spots = list(pattern.finditer(data))
    chosen = rng.sample(spots, min(len(spots), rng.randint(1, 8)))
    for match in sorted(chosen, key=lambda m: -m.start(group)):
        data = data[: match.start(group)] + rng.choice(_VALUES) + data[match.end(group) :]
    return data


def _mutate(data: bytes, rng: random.Random) -> bytes:
    kind = rng.choice(["cut", "bytes", "repeat", "number", "string", "key", "duplicate-key"])
    if kind == "cut":
        return data[: rng.randrange(len(data))]
    if kind == "bytes":
        out = bytearray(data)
        for _ in range(rng.randint(1, 20)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == "repeat":  # a chunk copied in again: keys and events twice, brackets unbalanced
        at, size = rng.randrange(len(data)), rng.randint(1, 4096)
        return data[:at] + data[at : at + size] * rng.randint(2, 5) + data[at:]
    if kind == "number":
        return _replace_some(data, _NUMBER, rng)
    if kind == "string":
        return _replace_some(data, _STRING, rng)
    if kind == "key":
        return _replace_some(data, _VALUE_OF_KEY, rng)
    # duplicate-key: the same key again with another value (JSON takes the last one)
    spots = list(_KEY.finditer(data))
    match = rng.choice(spots)
    extra = match.group(0) + rng.choice(_VALUES) + b", "
    return data[: match.start()] + extra + data[match.start() :]


def test_damaged_and_odd_traces_never_crash_a_verb(fixtures: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    seeds = {rel: _json(fixtures, rel) for rel in SEEDS}
    good = str(fixtures / "traces" / SEEDS[0])
    cases: list[list[str]] = []
    for k in range(TRACES):
        data = _mutate(seeds[rng.choice(SEEDS)], rng)
        gz = rng.random() < 0.3
        path = tmp_path / f"rank-{k}.pt.trace.json{'.gz' if gz else ''}"
        if gz:
            data = gzip.compress(data, mtime=0)
            if rng.random() < 0.3:
                data = data[: rng.randrange(len(data))]  # a gzip stream cut short
        path.write_bytes(data)
        cases += [
            ["trace", "analyze", str(path), "--json"],
            ["trace", "analyze", str(path), "--html", str(tmp_path / f"r{k}.html")],
            ["trace", "diff", good, str(path), "--json"],
        ]
    outcomes, peak_mb = run_cases(cases, tmp_path)
    assert problems(outcomes) == []
    assert peak_mb < PEAK_RSS_LIMIT_MB
    codes = {o.code for o in outcomes}
    assert 0 in codes and 2 in codes  # some mutated traces still load, some are refused
