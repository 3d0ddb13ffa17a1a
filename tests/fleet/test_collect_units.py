"""The collector's pure parts: level groups from the probe, state spans, chunks of buckets."""

from __future__ import annotations

import pytest

from gpuwarden.catalog.gpus import gpu_catalog, mig_slices
from gpuwarden.fleet.collect import (
    MAX_NARROWING_UUIDS,
    LevelGroup,
    chunks,
    level_groups,
    minute_shares,
    spans,
)
from gpuwarden.fleet.model import Holder, SeriesKey, Window


def _wheres(group: LevelGroup) -> tuple[str, ...]:
    return tuple(batch.where for batch in group.overlaps)


def test_each_gpu_reads_its_best_family_once() -> None:
    rows = {
        "sm_active": {("GPU-a", None): 1.0, ("GPU-b", None): 2.0},
        "gr_engine_active": {("GPU-a", None): 1.0, ("GPU-b", None): 2.0, ("GPU-c", None): 1.0},
        "gpu_util": {("GPU-a", None): 1.0, ("GPU-c", None): 1.0, ("GPU-d", None): 1.0},
    }
    groups = {g.source: g for g in level_groups(rows, 'cluster="x"')}
    assert {s: g.gpus for s, g in groups.items()} == {
        "sm_active": 2,
        "gr_engine_active": 1,
        "gpu_util": 1,
    }
    assert groups["sm_active"].where == 'cluster="x"'  # every GPU with SM reads SM: no filter
    assert groups["gr_engine_active"].where == 'cluster="x", UUID=~"GPU\\\\-c"'
    assert groups["gpu_util"].where == 'cluster="x", UUID=~"GPU\\\\-d"'
    # GPU-b has two series (a pod change): only it is asked for the minutes they share
    assert _wheres(groups["sm_active"]) == ('cluster="x", UUID=~"GPU\\\\-b"',)
    assert _wheres(groups["gpu_util"]) == ()


def test_mig_gpus_read_their_instances() -> None:
    rows = {
        "gr_engine_active": {
            ("GPU-m", None): 1.0,  # the whole-GPU series dcgm-exporter 2.x also serves
            ("GPU-m", "1"): 1.0,
            ("GPU-m", "2"): 1.0,
            ("GPU-w", None): 1.0,
        }
    }
    groups = level_groups(rows, "")
    whole, mig = groups
    assert (whole.gpus, mig.gpus) == (1, 1)
    assert whole.where == 'GPU_I_ID="", UUID=~"GPU\\\\-w"' and _wheres(whole) == ()
    assert mig.where == 'GPU_I_ID!=""' and _wheres(mig) == ('GPU_I_ID!=""',)  # 2 instances


def test_gpus_with_several_series_are_asked_for_in_batches() -> None:
    few = MAX_NARROWING_UUIDS + 1  # of 1,000 GPUs: two batches, each a short regex
    rows = {(f"GPU-{i:04d}", None): 2.0 if i < few else 1.0 for i in range(1000)}
    [group] = level_groups({"gpu_util": rows}, "")
    assert len(_wheres(group)) == 2
    assert all(w.startswith('UUID=~"') for w in _wheres(group))
    assert sum(w.count("|") + 1 for w in _wheres(group)) == few
    most = {(f"GPU-{i:04d}", None): 2.0 for i in range(1000)}
    [group] = level_groups({"gpu_util": most}, "")
    assert _wheres(group) == ("",)  # nearly all: one query over the group


def test_state_spans_from_edges() -> None:
    w = Window(0, 3600, 3600)
    assert spans([(600, "on"), (1200, "off")], False, w) == ((600, 1140),)
    assert spans([(1200, "off"), (3000, "on")], True, w) == ((60, 1140), (3000, 3600))
    assert spans([(600, "on"), (600, "on")], False, w) == ((600, 3600),)
    assert spans([], False, w) == ()


def test_chunks_group_buckets_of_one_length() -> None:
    w = Window(0, 10 * 3600 + 1800, 3600)
    assert chunks(w, 4) == [
        ([0], 1800),
        ([1, 2, 3, 4], 3600),
        ([5, 6, 7, 8], 3600),
        ([9, 10], 3600),
    ]


def _key(gi: str | None, profile: str | None, pod: str = "p") -> SeriesKey:
    return SeriesKey("GPU-m", Holder("ns", pod), gi, profile)


@pytest.mark.parametrize(
    ("keys", "shares"),
    [
        # MIG instances share the GPU by their compute slices
        ([_key("1", "3g.40gb"), _key("2", "1g.10gb")], [0.75, 0.25]),
        ([_key("1", "4g.20gb"), _key("2", "3g.20gb")], [4 / 7, 3 / 7]),
        ([_key("1", "1g.10gb+me"), _key("2", "1c.2g.20gb")], [1 / 3, 2 / 3]),
        # two pods taking turns on one instance split its share
        (
            [_key("1", "3g.40gb", "a"), _key("1", "3g.40gb", "b"), _key("2", "3g.40gb")],
            [0.25, 0.25, 0.5],
        ),
        # a profile that is not a MIG name, or a whole-GPU series: equal shares
        ([_key("1", "3g.40gb"), _key("2", "custom")], [0.5, 0.5]),
        ([_key("1", "3g.40gb"), _key("2", None)], [0.5, 0.5]),
        ([_key(None, None, "a"), _key(None, None, "b"), _key(None, None, "c")], [1 / 3] * 3),
    ],
)
def test_a_gpus_minute_is_shared_by_slices(keys: list[SeriesKey], shares: list[float]) -> None:
    assert minute_shares(keys) == pytest.approx(shares)
    assert sum(minute_shares(keys)) == pytest.approx(1)


def test_every_catalog_mig_profile_has_its_slices() -> None:
    profiles = {p for gpu in gpu_catalog() for p in gpu.mig_profiles}
    assert len(profiles) > 20
    assert all(mig_slices(p) == int(p.split("g.")[0]) for p in profiles)
    assert [mig_slices(p) for p in ("7g.80gb", "MIG 3g.40gb", "0g.1gb", "3g", None)] == [
        7, None, None, None, None
    ]  # fmt: skip
