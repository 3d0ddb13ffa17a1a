"""Review r26a of this stop's trace changes (sets 14 and 15), as a hostile user.

The host-call reading of ``cpu-launch-bound`` (insights/host_idle.py) names the call the host ran
during the GPU's idle time, among the calls that queue no GPU work. Two inputs made it name a
call where the host was not computing:

- a trace without its runtime calls (``cudaLaunchKernel`` and kin left out): no call then holds a
  launch, and the frame around every launch (set 14's ``do_work`` loop) was named as "a Python
  call that queues no GPU work";
- a host blocked in ``torch.cuda.synchronize``: the GPU's gaps between the kernels queued before
  the call fall inside it, so the call covered all of the idle time (the tracelens captures
  below, 100 %), though the host waits for the GPU there.

The decoders' closing-comma reading (decode.py ``_closing_comma``) is checked on texts around it:
only a whole object's last comma is blanked, by both decoders, gzip members or not.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.traces.insights.host_idle import host_op_in_idle
from gpuwarden.traces.insights.view import build_view
from gpuwarden.traces.load import load_traces
from gpuwarden.types.trace import VerdictKind
from tests.traces.insights.raw import covered, union
from tests.traces.public_sets import analyze_subset
from tests.traces.test_traces_public14 import A100, _comma_free

DATA = Path(__file__).resolve().parents[1] / "data"
# tracelens' ROCm eval captures: ten launches, then torch.cuda.synchronize while they run
SYNCED = [
    "traces_public2/tracelens_rocm_eval/elem_01_add_poor_bw.json",
    "traces_public3/tracelens_rocm_eval/sdpa_01_long_seq_low_eff.json",
    "traces_public3/tracelens_rocm_eval/sdpa_02_very_long_seq_head_waste.json",
]
SYNCHRONIZE = "torch/cuda/__init__.py(1098): synchronize"
LAUNCH_LOOP = "cuda_launch_queue.py(28): do_work"


def test_without_runtime_calls_no_frame_is_named() -> None:
    """Set 14's A100 capture without its runtime calls: ``do_work``, the loop that launches every
    kernel, holds no recorded launch any more; the trace cannot tell it from a computing call, so
    the verdict stays the launch reading (before: it named ``do_work`` as a Python call that
    queues no GPU work, over 100 % of the idle time)."""
    raw = _comma_free(A100)
    kept = [e for e in raw["traceEvents"] if e.get("cat") != "cuda_runtime"]
    frames = {e["name"] for e in kept if e.get("cat") == "python_function"}
    assert LAUNCH_LOOP in frames
    verdict = analyze_subset(raw, kept).verdict
    assert verdict.kind is VerdictKind.CPU_LAUNCH_BOUND
    assert verdict.summary.endswith("waiting for the host to launch work")
    assert not any(LAUNCH_LOOP in line for line in (verdict.summary, *verdict.evidence))


def _sync_covers_idle(document: dict[str, Any]) -> tuple[float, float]:
    """By hand: the GPU's idle time inside its active span, and how much of it the
    ``synchronize`` frames cover."""
    complete = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    gpu = union([(e["ts"], e["ts"] + e["dur"]) for e in complete if e.get("cat") == "kernel"])
    lo, hi = gpu[0][0], gpu[-1][1]
    gaps = [(a[1], b[0]) for a, b in itertools.pairwise(gpu)]
    syncs = [
        (e["ts"], e["ts"] + e["dur"])
        for e in complete
        if e.get("cat") == "python_function" and e["name"] == SYNCHRONIZE
    ]
    idle = sum(b - a for a, b in gaps)
    inside = sum(covered(syncs, a, b) for a, b in gaps)
    assert hi > lo
    return idle, inside


@pytest.mark.parametrize("rel", SYNCED)
def test_a_host_waiting_in_synchronize_is_not_named(rel: str) -> None:
    """The host launches ten kernels and waits in ``torch.cuda.synchronize`` (its
    ``hipDeviceSynchronize`` inside) while they run: the gaps between them are the GPU's, the
    frame covers all of them. No call is the host computing there (before: ``synchronize``,
    100 % of the idle time, read as "a Python call that queues no GPU work")."""
    document = json.loads((DATA / rel).read_text())
    idle, inside = _sync_covers_idle(document)
    assert idle > 0
    assert inside == pytest.approx(idle)
    (rank,) = load_traces([DATA / rel]).ranks.values()
    assert host_op_in_idle(build_view(rank)) is None


def test_a_sleep_is_still_named() -> None:
    """The sleep of set 14's A100 capture holds neither a launch nor a wait: still named."""
    (rank,) = load_traces([DATA / "traces_public14" / A100]).ranks.values()
    op = host_op_in_idle(build_view(rank))
    assert op is not None
    assert (op.name, op.python) == ("<built-in function sleep>", True)


_EVENTS = ",".join(
    json.dumps(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 10 * i,
            "dur": 5,
            "args": {"stream": 7, "device": 0, "correlation": i},
        }
    )
    for i in range(3)
)
_OPEN = '{"schemaVersion":1,"traceEvents":[' + _EVENTS


def _write(tmp_path: Path, text: str, members: int) -> Path:
    """``text`` as a trace file: plain (0) or gzip of that many members."""
    if members == 0:
        path = tmp_path / "rank0.json"
        path.write_text(text)
        return path
    data, size = text.encode(), -(-len(text) // members)
    path = tmp_path / "rank0.json.gz"
    path.write_bytes(b"".join(gzip.compress(data[i : i + size]) for i in range(0, len(data), size)))
    return path


@pytest.mark.usefixtures("decoder")
@pytest.mark.parametrize("members", [0, 1, 2])
def test_the_old_writers_closing_comma_is_read(tmp_path: Path, members: int) -> None:
    text = _OPEN + '],"deviceProperties":[],\r\n}\n'
    (rank,) = load_traces([_write(tmp_path, text, members)]).ranks.values()
    assert rank.meta.event_count == 3
    assert rank.ts.tolist() == [0.0, 10.0, 20.0]


@pytest.mark.usefixtures("decoder")
@pytest.mark.parametrize("members", [0, 2])
@pytest.mark.parametrize(
    "text",
    [
        _OPEN + ",}",  # cut inside the events, "}" pasted after the comma
        _OPEN + '],"x":"a,}',  # the comma inside a string left open
        _OPEN + "],,}",  # two commas: one blanked, one left
        _OPEN + ",]}",  # a comma closing the events, not the object
    ],
    ids=["cut-events", "open-string", "two-commas", "events-comma"],
)
def test_other_commas_stay_refused(tmp_path: Path, members: int, text: str) -> None:
    with pytest.raises(CorruptInputError, match="invalid or truncated JSON"):
        load_traces([_write(tmp_path, text, members)])
