"""The health readings survive a recording: stored and replayed as read (nvidia-smi captures)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpuwarden.telemetry.replay import open_replay
from gpuwarden.telemetry.smi import open_smi
from gpuwarden.telemetry.store import Store

HEALTH = (
    "temperature_margin_celsius",
    "temperature_gpu_max_celsius",
    "temperature_memory_max_celsius",
    "temperature_slowdown_celsius",
    "temperature_shutdown_celsius",
    "sram_threshold_exceeded",
    "remapped_rows_banks_exhausted",
    "recovery_action",
    "fabric_state",
    "fabric_status",
)
CAPTURES = (
    "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt",  # every reading filled
    "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.load.q.txt",  # degrees, no fabric
    "netdata__a100-sxm4-mig.xml",  # memory max, no recovery action
)


def test_replay_returns_the_recorded_health_readings(fixtures: Path, tmp_path: Path) -> None:
    read = [open_smi(str(fixtures / "nvidia-smi" / name)).read() for name in CAPTURES]
    path = tmp_path / "health.db"
    with Store.open(path) as store:
        for i, snap in enumerate(read):
            store.write(dataclasses.replace(snap, timestamp_s=1e9 + i))
    replay = open_replay(path)
    for original in read:
        back = replay.read().samples[0]
        want = {n: getattr(original.samples[0], n) for n in HEALTH}
        assert {n: getattr(back, n) for n in HEALTH} == want
    replay.close()
    filled = [sum(getattr(s.samples[0], n) is not None for n in HEALTH) for s in read]
    assert filled == [9, 4, 4]
