"""Issue 13, round 6: a MIG GPU's per-instance series (export.families) under hostile readings —
no instance, seven, instances without memory fields, two MIG devices of one GPU instance (two
compute instances share its GPU_I_ID), NaN and infinite values. The exposition stays one that
prometheus_client's parser reads back, with no series twice, and a GPU instance's memory is
counted once."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from gpuwarden.export.families import build_families
from gpuwarden.export.prometheus import render_text, to_metric
from gpuwarden.export.state import ExportSettings, View
from gpuwarden.types.telemetry import DeviceInfo, DeviceSample, MigDeviceSample, Snapshot

GIB = 1 << 30
_SIZES = st.one_of(st.none(), st.integers(0, 80 * 1024).map(lambda mib: mib << 20))
# NVML's names: a whole GPU instance's profile, or a compute instance's of a split one
_PROFILES = (None, "1g.10gb", "3g.40gb", "1c.3g.40gb", "2c.3g.40gb", 'a"b\\c\nd')
_RATIOS = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))


@st.composite
def _mig_devices(draw: st.DrawFn) -> tuple[MigDeviceSample, ...]:
    count = draw(st.integers(0, 7))
    return tuple(
        MigDeviceSample(
            gpu_instance_id=draw(st.integers(0, 14)),  # drawn from few: duplicates come
            compute_instance_id=draw(st.one_of(st.none(), st.integers(0, 7))),
            profile=draw(st.sampled_from(_PROFILES)),
            uuid=f"MIG-{n}",
            memory_total_bytes=draw(_SIZES),
            memory_used_bytes=draw(_SIZES),
            sm_active_ratio=draw(_RATIOS),
        )
        for n in range(count)
    )


def _exposition(migs: tuple[MigDeviceSample, ...]) -> str:
    info = DeviceInfo(0, "GPU-00000000", "NVIDIA A100-SXM4-80GB")
    gpu = DeviceSample(
        info=info,
        timestamp_s=1.0,
        memory_used_bytes=GIB,
        memory_free_bytes=79 * GIB,
        temperature_gpu_celsius=40.0,
        mig_devices=migs,
    )
    snapshot = Snapshot(1.0, "node-1", "nvml", False, (gpu,), (), "test")
    view = View(
        version=1,
        settings=ExportSettings(backend="nvml", simulated=False, hostname="node-1"),
        snapshot=snapshot,
        received_s=1.0,
        final=True,
    )
    return render_text(to_metric(f) for f in build_families(view, now_s=1.0, version="t"))


def _series(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


@settings(max_examples=60, deadline=None)
@given(_mig_devices())
def test_a_mig_gpu_stays_a_valid_exposition_and_counts_each_instance_once(
    migs: tuple[MigDeviceSample, ...],
) -> None:
    series = _series(_exposition(migs))
    keys = [(name, tuple(sorted(labels.items()))) for name, labels, _ in series]
    assert len(keys) == len(set(keys)), "a series twice"
    assert all(math.isfinite(v) for _, _, v in series)
    used = [(labels, v) for name, labels, v in series if name == "DCGM_FI_DEV_FB_USED"]
    if not migs:  # no GPU instance: the GPU's own series, as without MIG
        assert [(labels.get("GPU_I_ID"), v) for labels, v in used] == [(None, 1024.0)]
        return
    # each GPU instance once, with its first MIG device's memory (its compute instances share it)
    first: dict[int, MigDeviceSample] = {}
    for mig in migs:
        first.setdefault(mig.gpu_instance_id, mig)
    expected = {
        str(gi): mig.memory_used_bytes / (1 << 20)
        for gi, mig in first.items()
        if mig.memory_used_bytes is not None
    }
    published = {labels["GPU_I_ID"]: v for labels, v in used}
    assert len(published) == len(used)  # one series per GPU instance
    assert published == expected


def test_the_compute_instances_of_a_gpu_instance_are_one_series_with_its_profile() -> None:
    # NVML names the MIG devices of a 3g.40gb GPU instance split 1 + 2 compute slices
    # "MIG 1c.3g.40gb" and "MIG 2c.3g.40gb"; both report the instance's shared memory
    shared = {"memory_total_bytes": 40_192 << 20, "memory_used_bytes": 300 << 20}
    migs = (
        MigDeviceSample(1, 0, "1c.3g.40gb", "MIG-a", **shared),
        MigDeviceSample(1, 1, "2c.3g.40gb", "MIG-b", **shared),
        MigDeviceSample(2, 0, "3g.40gb", "MIG-c", 40_192 << 20, 100 << 20),
    )
    used = [(s[1], s[2]) for s in _series(_exposition(migs)) if s[0] == "DCGM_FI_DEV_FB_USED"]
    assert [(lab["GPU_I_ID"], lab["GPU_I_PROFILE"], v) for lab, v in used] == [
        ("1", "3g.40gb", 300.0),
        ("2", "3g.40gb", 100.0),
    ]
