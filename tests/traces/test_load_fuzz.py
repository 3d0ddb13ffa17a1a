"""Fuzz the trace loader (and the HTA-compatible analyses on whatever it accepts) with mutations of
real fixture bytes: every outcome is a loaded trace or a GpuwardenError, never another exception."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError, GpuwardenError
from gpuwarden.traces import decode
from gpuwarden.traces.hta import hta_report
from gpuwarden.traces.load import load_traces

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "traces"
SEEDS = [
    "call_stack/backward_thread.json",
    "triton_example/triton_example.json.gz",
    "trace_file_list/inference_rank_1.json.gz",
    "large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
    "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "critical_path/cuda_event_sync/event_sync_trace.json.gz",
]


def _json(rel: str) -> bytes:
    data = (FIXTURES / rel).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


JSON_SEEDS = {rel: _json(rel) for rel in SEEDS}
GZ_SEEDS = {rel: gzip.compress(data, mtime=0) for rel, data in JSON_SEEDS.items()}


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tiny chunks and batches so the streaming cutter runs on these small files too.
    monkeypatch.setattr(decode, "_CHUNK", 997)
    monkeypatch.setattr(decode, "_BATCH", 1024)


def _load_and_analyse(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"rank-0.pt.trace{suffix}"
        path.write_bytes(data)
        error: GpuwardenError | None = None
        try:
            trace = load_traces([path])
        except GpuwardenError as exc:
            error = exc
        if error is None:
            hta_report(trace)
        elif isinstance(error, CorruptInputError):
            assert str(path) in error.message
            assert error.hint


@st.composite
def mutated(draw: st.DrawFn, seeds: dict[str, bytes]) -> bytes:
    data = bytearray(seeds[draw(st.sampled_from(sorted(seeds)))])
    kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "splice"]))
    if kind == "truncate":
        return bytes(data[: draw(st.integers(0, len(data)))])
    for _ in range(draw(st.integers(1, 8))):
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[pos:pos] = draw(
                st.sampled_from(
                    [
                        b"}",
                        b"{",
                        b",",
                        b'"',
                        b"]",
                        b"[",
                        b"-1",
                        b"1e999",
                        b"null",
                        b'"0x0"',
                        b"18446744073709551616",
                    ]
                )
            )
        elif kind == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 16))]
        elif kind == "splice":
            other = seeds[draw(st.sampled_from(sorted(seeds)))]
            start = draw(st.integers(0, len(other)))
            data[pos:pos] = other[start : start + draw(st.integers(1, 200))]
    return bytes(data)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # large reprs
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(JSON_SEEDS))
def test_mutated_json_loads_or_fails_cleanly(data: bytes) -> None:
    _load_and_analyse(data, ".json")


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(GZ_SEEDS))
def test_mutated_gzip_loads_or_fails_cleanly(data: bytes) -> None:
    _load_and_analyse(data, ".json.gz")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_fail_cleanly(data: bytes) -> None:
    _load_and_analyse(data, ".json")


@pytest.mark.parametrize("rel", SEEDS)
def test_every_truncation_point_of_a_small_trace(rel: str) -> None:
    data = GZ_SEEDS[rel]
    for cut in range(0, len(data), max(1, len(data) // 40)):
        _load_and_analyse(data[:cut], ".json.gz")
