"""Held-out public Kineto traces (tests/data/traces_public/, SOURCES.md there): every breakdown
``hta_report`` gives must equal what HTA 0.5.0 returned when it was run on the same file
(recorded in expected.json; HTA itself does not run here), the facts read from each trace by hand
must come out of ``trace analyze``, and the CLI must give JSON, exit 0, no traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.traces import decode
from gpuwarden.traces.load import load_traces
from gpuwarden.traces.native import DECODER_ENV
from tests.traces.public_sets import (
    analyze_json,
    breakdowns_check,
    expected_traces,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "traces_public"
EXPECTED = expected_traces(DATA)
TRACES = sorted(EXPECTED)


test_breakdowns_match_recorded_hta = breakdowns_check(DATA, EXPECTED)


@pytest.mark.parametrize("name", TRACES)
def test_cli_reports_the_facts_read_from_the_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = EXPECTED[name]["facts"]
    document = analyze_json(DATA / name, capsys)
    (file,) = document["files"]
    assert file["device"] == facts["device"]
    assert file["events"] > 0
    (rank,) = document["ranks"].values()
    # the kernel/memcpy/memset events of the rank (cuda_sync markers are not GPU work)
    assert rank["gpu_events"] == facts["kernels"] + facts["memcpy"]
    assert len(rank["steps"]) == facts["profiler_steps"]
    assert document["verdict"]["kind"] == facts["verdict"]


def test_legacy_gpu_list_is_read_by_both_decoders(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2021 trace names its GPUs under ``computeProperties``: the simdjson scanner and the
    msgspec reference decoder both find the GPU the kernels ran on (args.device 0)."""
    path = DATA / "kineto_tb_plugin_v100" / "gpu_metrics_input.json"
    native = load_traces([path])
    monkeypatch.setenv(DECODER_ENV, "msgspec")
    reference = load_traces([path])
    for trace in (native, reference):
        (rank,) = trace.ranks.values()
        names = [p["name"] for p in rank.meta.device_properties]
        assert names == ["Tesla V100-DGXS-32GB"] * 4
    from gpuwarden.traces import kineto_structs

    assert kineto_structs.LEGACY_DEVICES_KEY == decode.LEGACY_DEVICES_KEY == "computeProperties"


def test_current_gpu_list_wins_over_a_legacy_one(tmp_path: Path) -> None:
    """Both keys present (a hand-merged file): ``deviceProperties`` is the one Kineto reads."""
    path = tmp_path / "both.json"
    path.write_text(
        json.dumps(
            {
                "computeProperties": [{"id": 0, "name": "old"}],
                "deviceProperties": [{"id": 0, "name": "new"}],
                "traceEvents": [],
            }
        )
    )
    (rank,) = load_traces([path]).ranks.values()
    assert [p["name"] for p in rank.meta.device_properties] == ["new"]


@settings(max_examples=150, deadline=None)
@given(
    before=st.text(max_size=40),
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=8,
    ),
    cut=st.integers(min_value=0, max_value=200),
)
def test_legacy_gpu_list_reader_never_raises(before: str, value: Any, cut: int) -> None:
    """Any opening text naming the legacy key: a dict back (the key's value when it parses,
    else the head unchanged), never an exception."""
    text = '{"x": ' + json.dumps(before) + ', "computeProperties": ' + json.dumps(value) + ", "
    opening = (text + '"traceEvents":[]}').encode()
    for data in (opening, opening[:cut]):
        head = decode._with_legacy_devices({}, data)
        assert isinstance(head, dict)
    assert decode._with_legacy_devices({}, opening)["computeProperties"] == value
