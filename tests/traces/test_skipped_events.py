"""Events left out of the analyses are counted by reason, the same by both decoders: a real
trace with some of its kernels' values spoiled the way hand edits and odd writers do."""

from __future__ import annotations

import gzip
import json
import random
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.traces.load import load_traces
from gpuwarden.traces.model import SKIP_REASONS

from .conftest import DECODERS, decoder_env

SIMPLE_ADD = "critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _document(fixtures: Path, rel: str = SIMPLE_ADD) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(gzip.decompress((fixtures / "traces" / rel).read_bytes()))
    return document


def _kernels(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in document["traceEvents"] if e.get("cat") == "kernel"]


def _load(path: Path) -> dict[str, dict[str, int]]:
    """skipped_events as each decoder finds them."""
    out = {}
    for name in DECODERS:
        with decoder_env(None if name == "simdjson" else "msgspec"):
            (rank,) = load_traces([path]).ranks.values()
        out[name] = rank.meta.skipped_events
    return out


def _write(tmp_path: Path, document: dict[str, Any] | str) -> Path:
    path = tmp_path / "rank-0.pt.trace.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_real_traces_skip_nothing(fixtures: Path) -> None:
    """No false alarm: every fixture with GPU work loads with nothing left out, except HTA's
    large-integer test trace, whose one kernel really has no args (so no stream)."""
    for path in sorted((fixtures / "traces").rglob("*.json*")):
        if "hta_expected" in path.parts or "memory_analysis" in path.parts:
            continue
        if path.name.endswith("_et.json.gz"):  # an execution trace, not Kineto
            continue
        (rank,) = load_traces([path]).ranks.values()
        expected = {"gpu-event-without-stream": 1} if "large_integer" in str(path) else {}
        assert rank.meta.skipped_events == expected, path


def test_a_text_dur_is_counted_by_both_decoders(fixtures: Path, tmp_path: Path) -> None:
    document = _document(fixtures)
    kernels = _kernels(document)
    for kernel in kernels[:5]:
        kernel["dur"] = "x"
    kernels[5]["dur"] = "12"  # a number written as text: float("12") is a number, kept
    found = _load(_write(tmp_path, document))
    assert found == {name: {"dur-not-a-number": 5} for name in DECODERS}


def test_a_duplicate_dur_key_counts_the_last_value(fixtures: Path, tmp_path: Path) -> None:
    text = json.dumps(_document(fixtures))
    spoiled, count = re.subn(r'("cat": "kernel", .*?"dur": \d+)', r'\1, "dur": "x"', text, count=3)
    assert count == 3
    found = _load(_write(tmp_path, spoiled))
    assert found == {name: {"dur-not-a-number": 3} for name in DECODERS}


def test_a_stream_that_is_not_an_integer_is_counted(fixtures: Path, tmp_path: Path) -> None:
    document = _document(fixtures)
    kernels = _kernels(document)
    kernels[0]["args"]["stream"] = "seven"
    del kernels[1]["args"]["stream"]
    kernels[2]["args"]["stream"] = "7"  # HTA's int("7") is 7: a stream
    found = _load(_write(tmp_path, document))
    assert found == {name: {"gpu-event-without-stream": 2} for name in DECODERS}


def test_ts_problems_and_a_nan_dur(fixtures: Path, tmp_path: Path) -> None:
    document = _document(fixtures)
    kernels = _kernels(document)
    kernels[0]["ts"] = "later"
    del kernels[1]["ts"]
    kernels[2]["dur"] = "nan"  # float("nan"): a number, not a finite one
    found = _load(_write(tmp_path, document))
    expected = {"dur-not-a-number": 1, "ts-not-a-number": 1, "ts-missing": 1}
    assert found == dict.fromkeys(DECODERS, expected)
    assert list(found["msgspec"]) == [k for k in SKIP_REASONS if k in expected]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spoiled=st.integers(0, 40))
def test_counts_match_what_was_spoiled(fixtures: Path, seed: int, spoiled: int) -> None:
    """Any number of GPU events, each spoiled in one of the ways above: the counts by reason
    are exactly what was done, and the decoders agree."""
    rng = random.Random(seed)
    document = _document(fixtures)
    gpu = [e for e in document["traceEvents"] if e.get("cat") in GPU_CATS]
    expected: dict[str, int] = {}
    for event in rng.sample(gpu, min(spoiled, len(gpu))):
        how = rng.choice(["dur", "ts", "stream", "no-stream"])
        if how == "dur":
            event["dur"] = rng.choice(["x", "", "nan?", "1,5"])
            reason = "dur-not-a-number"
        elif how == "ts":
            event["ts"] = rng.choice(["x", "1e5x", "soon"])
            reason = "ts-not-a-number"
        elif how == "stream":
            event["args"]["stream"] = rng.choice(["seven", "0x0", "", "7.5e"])
            reason = "gpu-event-without-stream"
        else:
            event["args"].pop("stream", None)
            reason = "gpu-event-without-stream"
        expected[reason] = expected.get(reason, 0) + 1
    with tempfile.TemporaryDirectory() as tmp:
        found = _load(_write(Path(tmp), document))
    assert found["msgspec"] == found["simdjson"]
    assert found["msgspec"] == {k: expected[k] for k in SKIP_REASONS if k in expected}
