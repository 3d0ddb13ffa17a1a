"""The simdjson scanner against the msgspec decoder (the reference): the same RankTrace for every
real trace, for generated Kineto documents with odd values in every field the analyses read, and
for mutated real bytes; the scanner hands what it does not take to msgspec whole."""

from __future__ import annotations

import gzip
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError
from gpuwarden.traces import decode, native
from gpuwarden.traces.model import RankTrace
from tests.traces.conftest import decoder_env

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "traces"
TRACES = sorted(
    p
    for p in FIXTURES.rglob("*.json*")
    if "hta_expected" not in p.parts and "execution_trace/benchmark_simple_add_et" not in str(p)
)

pytestmark = pytest.mark.skipif(
    not native.SCANNER_BUILT,
    reason="the simdjson scanner is not built (test_load_paths.py::test_scanner_is_built fails)",
)


def _outcome(path: Path, name: str) -> RankTrace | tuple[str, str]:
    with decoder_env(name):
        try:
            return decode.decode_file(path)
        except CorruptInputError as exc:
            return (exc.reference, exc.message)


def _assert_same(a: RankTrace | tuple[str, str], b: RankTrace | tuple[str, str]) -> None:
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert a == b
        return
    for field in RankTrace.__dataclass_fields__:
        x, y = getattr(a, field), getattr(b, field)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, field
            assert np.array_equal(x, y, equal_nan=True), field
        else:
            assert x == y, field


def _scanned(path: Path) -> RankTrace | tuple[str, str]:
    """The scanner's result, checking that it did not hand the file to msgspec."""
    calls: list[int] = []
    real = decode._MsgspecSink.__init__

    def spy(self: Any, expected: int) -> None:
        calls.append(expected)
        real(self, expected)

    decode._MsgspecSink.__init__ = spy  # type: ignore[method-assign]
    try:
        got = _outcome(path, "")
    finally:
        decode._MsgspecSink.__init__ = real  # type: ignore[method-assign]
    assert calls == [], f"{path.name}: the scanner handed the file to msgspec"
    return got


@pytest.mark.parametrize("path", TRACES, ids=[str(p.relative_to(FIXTURES)) for p in TRACES])
def test_every_real_trace_decodes_the_same(path: Path) -> None:
    _assert_same(_scanned(path), _outcome(path, "msgspec"))


def test_small_batches_and_documents_decode_the_same(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # many batch edges, and the tail document holding events too
    path = fixtures / "traces" / "nccl_parser_config" / "nccl_data.json.gz"
    reference = _outcome(path, "msgspec")
    monkeypatch.setattr(decode, "_CHUNK", 3001)
    monkeypatch.setattr(decode, "_BATCH", 5003)
    _assert_same(_scanned(path), reference)


def _write(tmp: Path, doc: Any, *, ascii_only: bool = True) -> Path:
    path = tmp / "rank-0.pt.trace.json"
    path.write_text(json.dumps(doc, ensure_ascii=ascii_only), encoding="utf-8")
    return path


def test_escaped_strings_text_ints_and_wide_ints(tmp_path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": 'say "hi" \u00e9\U0001f600',
            "pid": "12",
            "tid": " 7 ",
            "ts": 1,
            "dur": 2,
            "args": {"External id": "1_0", "stream": "0x0"},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 2**63 + 5,
            "tid": 3.9,
            "ts": 2.5,
            "dur": 1e-3,
            "args": {"correlation": 2**64 - 1, "device": -0, "bytes": None},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD",
            "pid": 0,
            "tid": 7,
            "ts": 3,
            "dur": 4,
            "args": {"memory bandwidth (GB/s)": 12, "bytes": 4096},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 0,
            "tid": 7,
            "ts": 5,
            "dur": 1,
            "args": {"Input Dims": [[3, 5], [5, 7]], "Collective name": None},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::add",
            "pid": 0,
            "tid": 7,
            "ts": 6,
            "dur": 1,
            "args": None,
        },
        {"ph": "i", "cat": "Trace", "name": "x", "ts": 7, "dur": 1},
        {"ph": "M", "name": "process_name", "pid": "Spans", "args": {"name": "x"}},
    ]
    for ascii_only in (True, False):
        path = _write(tmp_path, {"schemaVersion": 1, "traceEvents": events}, ascii_only=ascii_only)
        got = _scanned(path)
        _assert_same(got, _outcome(path, "msgspec"))
        assert isinstance(got, RankTrace)
        assert got.names[0] == 'say "hi" \u00e9\U0001f600'
        assert got.pid.tolist()[:2] == [12, -(2**63) + 5]  # text by int(), uint64 wraps like HTA
        assert got.stream.tolist()[0] == -1 and got.external_id.tolist()[0] == 10
        assert got.args[2] == {"memory bandwidth (GB/s)": 12.0}
        assert got.args[3] == {"Input Dims": [[3, 5], [5, 7]]}


def test_duplicate_keys_take_the_last_value(tmp_path: Path) -> None:
    text = (
        '{"traceEvents": [{"cat": "kernel", "name": "a", "name": "b", "ts": 1, "ts": 2, "dur": 3,'
        ' "args": {"stream": 7}, "args": {"correlation": 9}}]}'
    )
    path = tmp_path / "rank-0.json"
    path.write_text(text)
    got = _scanned(path)
    _assert_same(got, _outcome(path, "msgspec"))
    assert isinstance(got, RankTrace)
    assert got.names == ("b",) and got.ts.tolist() == [2.0]
    assert (got.stream.tolist(), got.correlation.tolist()) == ([-1], [9])


@pytest.mark.parametrize(
    "text",
    [
        '{"traceEvents": [{"cat": "kernel", "ts": true, "dur": 1}]}',  # a bool time
        '{"traceEvents": [{"cat": "kernel", "ts": "12.5", "dur": 1}]}',  # a time as text
        '{"traceEvents": [{"cat": "kernel", "ts": 1, "dur": 1, "pid": [1]}]}',
        '{"traceEvents": [{"cat": "kernel", "ts": 18446744073709551616, "dur": 1}]}',
        '{"traceEvents": [{"c\\u0061t": "kernel", "ts": 1, "dur": 1}]}',  # an escaped key
        '{"traceEvents": [{"cat": 5, "ts": 1, "dur": 1}]}',
        '{"traceEvents": [{"cat": "kernel", "ts": 1, "dur": 1, "args": [1]}]}',
        '{"traceEvents": [7]}',
        '{"traceEvents": null}',
    ],
)
def test_what_the_scanner_does_not_take_goes_to_msgspec(tmp_path: Path, text: str) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(text)
    reference = _outcome(path, "msgspec")
    with pytest.raises(AssertionError, match="handed the file to msgspec"):
        _scanned(path)
    _assert_same(_outcome(path, ""), reference)


# -- generated documents ------------------------------------------------------------------------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["0x0", "12", " 7 ", "1_0", "-3", "1e3", "aten::mm"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_COMMON: dict[str, st.SearchStrategy[Any]] = {
    "ints": st.integers(-(2**62), 2**62),
    "times": st.one_of(
        st.integers(0, 2**53), st.floats(0, 1e16, allow_nan=False), st.integers(-5, 5)
    ),
}
_ARG_KEYS = [
    "External id",
    "correlation",
    "stream",
    "device",
    "bytes",
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "Group size",
    "dtype",
    "Process Group Name",
    "Process Group Description",
    "Process Group Ranks",
    "Comms Id",
    "memory bandwidth (GB/s)",
    "cuda_sync_kind",
    "wait_on_stream",
    "wait_on_cuda_event_record_corr_id",
    "Input Dims",
    "Sequence number",
]


def _mostly(usual: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually a typical value, sometimes anything."""
    return st.one_of(usual, usual, usual, _VALUES)


_ARGS = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {}, optional={k: _mostly(_COMMON["ints"] | st.text(max_size=5)) for k in _ARG_KEYS}
    ),
    _VALUES,
)
_EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "i", "M", "f"]),
        "cat": _mostly(
            st.sampled_from(
                [
                    "cpu_op",
                    "kernel",
                    "gpu_memcpy",
                    "cuda_sync",
                    "user_annotation",
                    "Trace",
                    "Kernel",
                    "python_function",
                ]
            )
        ),
        "name": _mostly(
            st.sampled_from(
                [
                    "aten::mm",
                    "aten::add",
                    "ncclDevKernel_AllReduce_Sum",
                    'q"uote',
                    "\u00e9\u4e2d",
                    "aten::linear",
                ]
            )
        ),
        "pid": _mostly(_COMMON["ints"]),
        "tid": _mostly(_COMMON["ints"]),
        "ts": _mostly(_COMMON["times"]),
        "dur": _mostly(_COMMON["times"]),
        "args": _ARGS,
    },
)


@st.composite
def _documents(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    events = [
        dict(draw(st.permutations(list(e.items())))) if draw(st.booleans()) else e
        for e in draw(st.lists(_EVENT, max_size=12))
    ]
    doc: dict[str, Any] = {"traceEvents": events}
    if draw(st.booleans()):
        doc["distributedInfo"] = draw(st.one_of(_VALUES, st.just({"rank": 3, "world_size": 8})))
    if draw(st.booleans()):
        doc["deviceProperties"] = draw(_VALUES)
    if draw(st.booleans()):
        doc = {"schemaVersion": draw(_SCALARS), **doc, "baseTimeNanoseconds": draw(_SCALARS)}
    return doc, draw(st.booleans())


def _both(write: Callable[[Path], Path]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp))
        _assert_same(_outcome(path, ""), _outcome(path, "msgspec"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents())
def test_generated_documents_decode_the_same(case: tuple[dict[str, Any], bool]) -> None:
    doc, ascii_only = case
    _both(lambda tmp: _write(tmp, doc, ascii_only=ascii_only))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents(), st.integers(60, 400))
def test_generated_documents_in_small_batches_decode_the_same(
    case: tuple[dict[str, Any], bool], batch: int
) -> None:
    doc, ascii_only = case
    real = decode._BATCH, decode._CHUNK
    decode._BATCH, decode._CHUNK = batch, 97
    try:
        _both(lambda tmp: _write(tmp, doc, ascii_only=ascii_only))
    finally:
        decode._BATCH, decode._CHUNK = real


# -- mutated real bytes -------------------------------------------------------------------------

_SEEDS = {
    rel: gzip.decompress(b) if (b := (FIXTURES / rel).read_bytes())[:2] == b"\x1f\x8b" else b
    for rel in [
        "triton_example/triton_example.json.gz",
        "trace_file_list/inference_rank_1.json.gz",
        "large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
        "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "critical_path/cuda_event_sync/event_sync_trace.json.gz",
    ]
}


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(_SEEDS[draw(st.sampled_from(sorted(_SEEDS)))])
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(data) - 1))
        token = draw(
            st.sampled_from(
                [
                    b"-1",
                    b"1.5",
                    b"null",
                    b'"0x0"',
                    b"18446744073709551616",
                    b"true",
                    b"\\u00e9",
                    b'"',
                    b"}",
                    b",",
                    b"1e999",
                    b" ",
                ]
            )
        )
        data[pos : pos + draw(st.integers(0, 3))] = token
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_mutated_real_bytes_decode_the_same_or_only_the_scanner_reads_them(data: bytes) -> None:
    """Equal outcomes, but for one allowed difference: msgspec validates every value, the
    scanner only the structure, UTF-8 and the values the analyses read. So a malformed value
    nobody reads (``"Ev Idx": 1.5.5``) is an error for msgspec and not for the scanner."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank-0.json"
        path.write_bytes(data)
        ours, reference = _outcome(path, ""), _outcome(path, "msgspec")
        if isinstance(ours, RankTrace) and isinstance(reference, tuple):
            assert (
                reference[0] == "trace-unreadable" and "invalid or truncated JSON" in reference[1]
            )
            return
        _assert_same(ours, reference)
