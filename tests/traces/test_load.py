"""The trace loader against real Kineto files (../shared/fixtures/traces), checked column by column
against an independent orjson parse of the same bytes."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from gpuwarden.errors import CorruptInputError, InputError
from gpuwarden.traces import workers
from gpuwarden.traces.column_store import MATMUL_OPS
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.model import Category

NCCL = "nccl_parser_config/nccl_data.json.gz"
AMD = "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
LEGACY = "trace_file_list/inference_rank_1.json.gz"
CPU_ONLY = "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
BIG_INT = "large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz"
NS = "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
MEGATRON = "astra_megatron_tp8_a100"

pytestmark = pytest.mark.usefixtures("decoder")  # each test with both decoders


def _raw(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    parsed: dict[str, Any] = orjson.loads(data)
    return parsed


def _hta_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


@pytest.mark.parametrize("rel", [NCCL, AMD, LEGACY, CPU_ONLY, BIG_INT])
def test_columns_match_an_independent_parse(fixtures: Path, rel: str) -> None:
    path = fixtures / "traces" / rel
    raw = _raw(path)
    events = raw["traceEvents"]
    kept = [
        (i, e)
        for i, e in enumerate(events)
        if e.get("dur") is not None and e.get("cat") is not None and e["cat"] != "Trace"
    ]
    trace = load_traces([path])
    assert trace.skipped == ()
    (rank,) = trace.ranks.values()
    assert len(rank) == len(kept)
    assert rank.meta.event_count == len(events)
    assert rank.index.tolist() == [i for i, _ in kept]
    assert rank.ts.tolist() == [float(e["ts"]) for _, e in kept]
    assert rank.dur.tolist() == [float(e["dur"]) for _, e in kept]
    assert [rank.name(r) for r in range(len(rank))] == [e.get("name", "") for _, e in kept]
    assert [rank.cat_names[c] for c in rank.cat_id] == [e["cat"] for _, e in kept]
    args = [e.get("args", {}) for _, e in kept]
    assert rank.stream.tolist() == [_hta_int(a.get("stream", -1)) for a in args]
    assert rank.correlation.tolist() == [a.get("correlation", -1) for a in args]
    assert rank.external_id.tolist() == [a.get("External id", -1) for a in args]
    has_float = any(not isinstance(e.get("ts"), int) for e in events)
    assert rank.meta.ts_is_float is has_float


def test_metadata_rank_world_and_devices(fixtures: Path) -> None:
    path = fixtures / "traces" / NCCL
    raw = _raw(path)
    rank = load_traces([path]).ranks[0]
    assert rank.meta.rank_source == "distributedInfo"
    assert rank.meta.world_size == raw["distributedInfo"]["world_size"] == 2
    assert rank.meta.backend == raw["distributedInfo"]["backend"]
    assert rank.meta.base_time_ns == raw["baseTimeNanoseconds"]
    assert [d["name"] for d in rank.meta.device_properties] == [
        d["name"] for d in raw["deviceProperties"]
    ]
    assert rank.meta.trace_bytes == len(gzip.decompress(path.read_bytes()))


def test_categories_fold_legacy_cats(fixtures: Path) -> None:
    rank = next(iter(load_traces([fixtures / "traces" / LEGACY]).ranks.values()))
    cats = {rank.cat_names[c]: Category(k) for c, k in zip(rank.cat_id, rank.category, strict=True)}
    assert cats["Kernel"] is Category.KERNEL
    assert cats["Runtime"] is Category.CUDA_RUNTIME


def test_amd_hex_streams_become_minus_one(fixtures: Path) -> None:
    path = fixtures / "traces" / AMD
    raw = _raw(path)
    hex_rows = [
        e
        for e in raw["traceEvents"]
        if isinstance(e.get("args", {}).get("stream"), str) and e.get("dur") is not None
    ]
    assert hex_rows, "fixture should hold AMD runtime events with string streams"
    rank = load_traces([path]).ranks[0]
    runtime = rank.category == Category.CUDA_RUNTIME
    assert runtime.any()
    assert set(rank.stream[runtime].tolist()) == {-1}
    assert rank.meta.rank_source == "default"


def test_uint64_arg_beyond_int64_is_kept(fixtures: Path) -> None:
    trace = load_traces([fixtures / "traces" / BIG_INT])
    (rank_no,) = trace.ranks
    rank = trace.ranks[rank_no]
    assert rank_no == 70 and rank.meta.rank_source == "file name"
    comms = [a["Comms Id"] for a in rank.args.values() if "Comms Id" in a]
    assert comms == [10159970886766084423]


def test_ns_trace_keeps_fractional_microseconds(fixtures: Path) -> None:
    rank = load_traces([fixtures / "traces" / NS]).ranks[0]
    assert rank.meta.ts_is_float
    assert np.any(rank.ts != np.floor(rank.ts))


def test_collective_args_on_nccl_ops(fixtures: Path) -> None:
    path = fixtures / "traces" / NCCL
    raw = _raw(path)
    expected = sorted(
        e["args"]["Collective name"]
        for e in raw["traceEvents"]
        if e.get("cat") == "cpu_op" and "Collective name" in e.get("args", {})
    )
    rank = load_traces([path]).ranks[0]
    got = sorted(
        a["Collective name"]
        for r, a in rank.args.items()
        if "Collective name" in a and rank.category[r] == Category.CPU_OP
    )
    assert got and got == expected


def test_directory_of_ranks_loads_all_in_parallel(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # threads for the scanner (it releases the GIL), processes for msgspec
    monkeypatch.setattr(workers, "FORK_MIN_JSON_BYTES", 0)
    monkeypatch.setattr(workers, "THREAD_MIN_JSON_BYTES", 0)
    seen: list[tuple[str, int, int]] = []
    folder = fixtures / "traces" / MEGATRON
    trace = load_traces([folder], workers=2, progress=lambda p, d, t: seen.append((p, d, t)))
    assert sorted(trace.ranks) == list(range(8))
    assert all(r.meta.world_size == 8 for r in trace.ranks.values())
    assert [d for _, d, _ in seen] == list(range(1, 9)) and {t for _, _, t in seen} == {8}
    sequential = load_traces([folder], workers=1)
    for k, r in trace.ranks.items():
        assert np.array_equal(r.ts, sequential.ranks[k].ts)
        assert r.names == sequential.ranks[k].names


@pytest.mark.parametrize("parallel", [False, True])
def test_bad_rank_file_is_skipped_and_reported(
    fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: bool
) -> None:
    if parallel:  # errors then travel back from worker threads or processes
        monkeypatch.setattr(workers, "FORK_MIN_JSON_BYTES", 0)
        monkeypatch.setattr(workers, "THREAD_MIN_JSON_BYTES", 0)
    good = tmp_path / "rank-0.json.gz"
    shutil.copy(fixtures / "traces" / MEGATRON / "megatron_kineto_0.json.gz", good)
    data = gzip.decompress(
        (fixtures / "traces" / MEGATRON / "megatron_kineto_1.json.gz").read_bytes()
    )
    bad = tmp_path / "rank-1.json"
    bad.write_bytes(data[: len(data) // 2])
    trace = load_traces([tmp_path], workers=2 if parallel else 1)
    assert list(trace.ranks) == [0]
    assert len(trace.skipped) == 1
    path, reason = trace.skipped[0]
    assert path == str(bad) and str(bad) in reason and "truncated" in reason


def test_all_files_bad_is_an_error_naming_them(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_bytes(b'{"traceEvents": [{"ph": "X", ')
    b = tmp_path / "b.json.gz"
    b.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(CorruptInputError) as err:
        load_traces([a, b])
    assert err.value.reference == "trace-unreadable"
    assert str(a) in err.value.message and str(b) in err.value.message
    assert err.value.hint


@pytest.mark.parametrize(
    "rel",
    ["execution_trace/benchmark_simple_add_et.json.gz", "memory_analysis/memory_timeline.raw.gz"],
)
def test_non_kineto_json_is_named(fixtures: Path, rel: str) -> None:
    path = fixtures / "traces" / rel
    with pytest.raises(CorruptInputError) as err:
        load_traces([path])
    assert "not a PyTorch profiler (Kineto) trace" in err.value.message
    assert str(path) in err.value.message
    assert err.value.reference == "trace-not-kineto"


def test_duplicate_ranks_name_both_files(fixtures: Path) -> None:
    folder = fixtures / "traces" / "tracelens_h100_hf_inference"
    with pytest.raises(InputError) as err:
        load_traces([folder])
    assert err.value.reference == "trace-duplicate-rank"
    assert err.value.message.count(str(folder)) == 2


def test_empty_directory_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_traces([tmp_path])
    assert err.value.reference == "trace-no-files"
    with pytest.raises(CorruptInputError) as err2:
        load_traces([tmp_path / "nope.json"])
    assert "nope.json" in err2.value.message


def _columns_of(path: Path) -> dict[str, Any]:
    (rank,) = load_traces([path]).ranks.values()
    cols = {
        k: getattr(rank, k).tolist()
        for k in ("index", "ts", "dur", "name_id", "cat_id", "stream", "correlation", "pid")
    }
    cols["names"] = rank.names
    cols["args"] = rank.args
    cols["ts_is_float"] = rank.meta.ts_is_float
    return cols


@pytest.mark.parametrize(
    "rel", [NCCL, AMD, "critical_path/cuda_event_sync/event_sync_trace.json.gz"]
)
def test_small_batches_give_the_same_columns(
    fixtures: Path, rel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuwarden.traces import decode

    path = fixtures / "traces" / rel
    whole = _columns_of(path)
    monkeypatch.setattr(decode, "_CHUNK", 4093)
    monkeypatch.setattr(decode, "_BATCH", 8192)
    assert _columns_of(path) == whole


def test_columns_that_outgrow_their_reservation_are_the_same(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reservation of one row (as for a file whose size says nothing: a >4 GiB gzip) doubles
    # its way up, batch after batch, to the same columns and extras.
    from gpuwarden.traces import column_store

    path = fixtures / "traces" / NCCL
    reserved = _columns_of(path)
    monkeypatch.setattr(column_store, "_MIN_CAPACITY", 1)
    monkeypatch.setattr(column_store, "_JSON_BYTES_PER_ROW", 1 << 62)
    grown = _columns_of(path)
    assert len(grown["index"]) > 20_000 and grown["args"]
    assert grown == reserved


def test_odd_values_and_cut_traps_load_like_hta(
    fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A string holding `}, {` (where the streaming cutter may cut), an args value of an
    unexpected type (strict Structs reject the batch, lenient ones take it) and a gzip file made
    of two members all load to the same columns as the plain file."""
    from gpuwarden.traces import decode

    raw = _raw(fixtures / "traces" / LEGACY)
    events = raw["traceEvents"]
    kernel = next(e for e in events if e.get("cat") == "Kernel")
    kernel["name"] = "trap" + '"}, {"ph": "X", "name": "x' * 40
    runtime = next(e for e in events if e.get("cat") == "Runtime")
    runtime["args"]["External id"] = "not-a-number"
    runtime["args"]["Input Dims"] = [[1, 2]]
    data = orjson.dumps(raw, option=orjson.OPT_INDENT_2)
    plain = tmp_path / "plain.json"
    plain.write_bytes(data)
    half = len(data) // 2
    two = tmp_path / "two.json.gz"
    two.write_bytes(gzip.compress(data[:half]) + gzip.compress(data[half:]))
    expected = _columns_of(plain)
    monkeypatch.setattr(decode, "_CHUNK", 64)
    monkeypatch.setattr(decode, "_BATCH", 64)
    whole_calls: list[Path] = []
    whole = decode._whole

    def counting_whole(path: Path, *rest: Any) -> Any:
        whole_calls.append(path)
        return whole(path, *rest)

    monkeypatch.setattr(decode, "_whole", counting_whole)
    got = _columns_of(two)
    assert got == expected
    assert whole_calls == [two], "a cut inside the trap string must fall back to one piece"
    (rank,) = load_traces([plain]).ranks.values()
    assert kernel["name"] in rank.names
    row = int(np.flatnonzero(rank.index == events.index(runtime))[0])
    assert rank.external_id[row] == -1


def test_input_dims_kept_for_matmul_ops_only(fixtures: Path) -> None:
    path = (
        fixtures
        / "traces"
        / "tracelens_h100_hf_inference/gaunernst_bert-small-uncased__1016001.json.gz"
    )
    raw = _raw(path)
    matmuls = MATMUL_OPS
    expected = [
        e["args"]["Input Dims"]
        for e in raw["traceEvents"]
        if e.get("cat") == "cpu_op"
        and e.get("name") in matmuls
        and "Input Dims" in e.get("args", {})
    ]
    rank = load_traces([path]).ranks[0]
    got = [a["Input Dims"] for r, a in sorted(rank.args.items()) if "Input Dims" in a]
    assert expected and got == expected


def test_missing_trace_extra_is_reported(
    fixtures: Path, monkeypatch: pytest.MonkeyPatch, decoder: str
) -> None:
    # msgspec decodes what the scanner does not take: without it, only msgspec's path fails
    import sys

    from gpuwarden.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "msgspec", None)
    if decoder == "simdjson":
        assert len(load_traces([fixtures / "traces" / LEGACY]).ranks) == 1
        return
    with pytest.raises(MissingExtraError) as err:
        load_traces([fixtures / "traces" / LEGACY])
    assert err.value.extra == "trace"


@pytest.mark.parametrize(
    ("field", "value"), [("dur", 2.68e154), ("ts", -1e300), ("ts", 2**64), ("dur", 9.3e15)]
)
def test_a_time_beyond_any_profiler_clock_is_rejected_naming_file_and_event(
    fixtures: Path, tmp_path: Path, field: str, value: float
) -> None:
    doc = _raw(fixtures / "traces" / AMD)
    index = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
    doc["traceEvents"][index][field] = value
    path = tmp_path / "rank-0.json"
    path.write_text(json.dumps(doc))  # the stdlib writer: ints beyond 64 bits too
    with pytest.raises(CorruptInputError) as err:
        load_traces([path])
    assert err.value.reference == "trace-absurd-time"
    assert str(path) in err.value.message
    assert f"event {index} of traceEvents: {field}" in err.value.message
    assert err.value.hint


def test_a_time_just_inside_the_clock_range_loads(fixtures: Path, tmp_path: Path) -> None:
    doc = _raw(fixtures / "traces" / AMD)
    index = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
    doc["traceEvents"][index]["dur"] = 9.2e15
    path = tmp_path / "rank-0.json"
    path.write_bytes(orjson.dumps(doc))
    rank = load_traces([path]).ranks[0]
    assert rank.dur[rank.index == index].tolist() == [9.2e15]


def test_id_columns_are_int32_when_every_value_fits(tmp_path: Path) -> None:
    # one width for all of a rank's integer columns: int32 saves a third of the rank's memory
    def load(correlation: int) -> Any:
        events = [
            {"cat": "kernel", "name": "k", "pid": 1, "tid": 7, "ts": 10, "dur": 2,
             "args": {"correlation": correlation, "stream": 7, "bytes": 4}},
            {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 9,
             "dur": 1, "args": {"correlation": 5, "External id": 3}},
        ]  # fmt: skip
        path = tmp_path / f"rank-0-{correlation}.json"
        path.write_text(json.dumps({"traceEvents": events}))
        (rank,) = load_traces([path]).ranks.values()
        return rank

    small, wide = load(5), load(1 << 40)
    columns = ("index", "pid", "tid", "stream", "correlation", "external_id", "device", "bytes")
    assert {getattr(small, k).dtype for k in columns} == {np.dtype(np.int32)}
    assert {getattr(wide, k).dtype for k in columns} == {np.dtype(np.int64)}
    assert wide.correlation.tolist() == [1 << 40, 5] and small.correlation.tolist() == [5, 5]
    assert small.external_id.tolist() == wide.external_id.tolist() == [-1, 3]
