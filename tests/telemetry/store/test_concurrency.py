"""Several writer processes storing snapshots of the same GPUs in the same milliseconds: every
snapshot stays, with its own run, origin, samples and events."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuwarden.telemetry.store import Store

HERE = Path(__file__).resolve().parent
WRITERS = 3
SNAPSHOTS = 60
GPUS = 4

# One writer: its own host (origin) and run, the same 4 GPUs (real H100 capture) at the same
# timestamps as the others, small batches so the writers' transactions interleave; an event on
# snapshot 7 names the writer. It starts when the parent says "go" on stdin.
_WRITER = """
import sys
sys.path.insert(0, {here!r})
from dataclasses import replace
from pathlib import Path
import captures
from gpuwarden.telemetry.store import Store
from gpuwarden.types.telemetry import DeviceEvent, EventKind

me = int(sys.argv[1])
fixtures, t0 = Path({fixtures!r}), {t0!r}
samples = captures.h100_samples(fixtures, {gpus}, t0)
store = Store.open({path!r}, flush_every_samples=2 * {gpus}, flush_every_s=10**9)
sys.stdin.readline()
run = store.begin_run([f"writer-{{me}}"], started_s=t0, host=f"node-{{me}}", backend="smi",
                      simulated=False, pid=None)
for k in range({snapshots}):
    events = ()
    if k == 7:
        events = (DeviceEvent(EventKind.XID, t0 + k, samples[0].info.uuid, 0, 79,
                              f"writer {{me}}"),)
    snap = replace(captures.snapshot(samples, t0 + k * 0.02, events=events), host=f"node-{{me}}")
    store.write(snap)
store.end_run(run, ended_s=t0 + 2, exit_code=0)
store.close()
print(run)
"""


def test_concurrent_writers_keep_every_snapshot_under_its_own_run(
    tmp_path: Path, fixtures: Path, t0: float
) -> None:
    path = tmp_path / "t.db"
    Store.open(path).close()
    code = _WRITER.format(
        here=str(HERE), fixtures=str(fixtures), t0=t0, path=str(path), gpus=GPUS,
        snapshots=SNAPSHOTS,
    )  # fmt: skip
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(me)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me in range(WRITERS)
    ]
    for proc in procs:  # all started (and their imports done) before any writes
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    runs = {}
    for me, proc in enumerate(procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        runs[int(out)] = me
    with Store.open(path, readonly=True) as store:
        stored = store.stored_samples()
        snapshots = store.snapshots()
        recorded = store.runs()
    assert len(snapshots) == WRITERS * SNAPSHOTS
    assert len(stored) == WRITERS * SNAPSHOTS * GPUS
    assert {r.id for r in recorded} == set(runs)
    for run, me in runs.items():
        mine = [s for s in stored if s.run_id == run]
        assert len(mine) == SNAPSHOTS * GPUS
        assert {s.origin.host for s in mine} == {f"node-{me}"}
        times = sorted({round(s.sample.timestamp_s - t0, 3) for s in mine})
        assert times == [round(k * 0.02, 3) for k in range(SNAPSHOTS)]
    by_host: dict[str, list[str]] = {}
    for snap in snapshots:
        assert len(snap.samples) == GPUS
        by_host.setdefault(snap.host, []).extend(e.message for e in snap.events)
    assert by_host == {f"node-{me}": [f"writer {me}"] for me in range(WRITERS)}
