"""Thresholds: defaults with a source each, and a user's TOML overrides with clear errors."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.errors import InputError
from gpuwarden.health.thresholds import (
    DEFAULT_THRESHOLDS,
    THRESHOLD_SOURCES,
    Thresholds,
    thresholds_from_toml,
)

FIELDS = [f.name for f in dataclasses.fields(Thresholds)]
UNITS = ("_celsius", "_percent", "_ratio", "_share", "_s", "_count", "_min", "_second", "_minute")


def test_every_threshold_names_its_unit_and_its_source() -> None:
    assert sorted(THRESHOLD_SOURCES) == sorted(FIELDS)
    for name in FIELDS:
        assert name.endswith(UNITS), name
        assert len(THRESHOLD_SOURCES[name]) > 20, name


def test_defaults_are_the_documented_numbers() -> None:
    # diagnosis.md §2 and DCGM's hardware limits, as THRESHOLD_SOURCES cites them
    t = DEFAULT_THRESHOLDS
    assert t.gpu_temperature_slowdown_headroom_celsius == 5.0
    assert t.gpu_temperature_fallback_celsius == 83.0
    assert t.retired_pages_dbe_limit_count == 60
    assert t.memory_used_max_ratio == 0.95
    assert t.fake_load_sm_active_max_ratio == 0.20
    assert t.pcie_replay_max_per_minute == 8.0
    assert t.nvlink_crc_max_per_second == 100.0


def test_toml_overrides_only_the_keys_it_names() -> None:
    t = thresholds_from_toml("memory_used_max_ratio = 0.9\nwindow_min_span_s = 4\n")
    assert t.memory_used_max_ratio == 0.9
    assert t.window_min_span_s == 4.0 and isinstance(t.window_min_span_s, float)
    assert t.gpu_temperature_fallback_celsius == DEFAULT_THRESHOLDS.gpu_temperature_fallback_celsius
    assert thresholds_from_toml("") == DEFAULT_THRESHOLDS


def test_whole_number_thresholds_stay_integers() -> None:
    t = thresholds_from_toml("retired_pages_dbe_limit_count = 48")
    assert t.retired_pages_dbe_limit_count == 48
    assert isinstance(t.retired_pages_dbe_limit_count, int)
    with pytest.raises(InputError, match=r"'retired_pages_dbe_limit_count'.*whole number"):
        thresholds_from_toml("retired_pages_dbe_limit_count = 47.5")


def test_unknown_key_suggests_the_close_one() -> None:
    with pytest.raises(InputError) as caught:
        thresholds_from_toml("memory_used_max_ration = 0.9")
    error = caught.value
    assert error.reference == "thresholds-invalid"
    assert "unknown threshold 'memory_used_max_ration'" in error.message
    assert error.hint is not None and "memory_used_max_ratio" in error.hint


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('gpu_temperature_fallback_celsius = "hot"', "'hot' is not a number"),
        ("gpu_temperature_fallback_celsius = true", "True is not a number"),
        ("window_min_span_s = -1", "negative"),
        ("memory_used_max_ratio = 95", "above 1"),
        ("low_utilization_max_percent = 150", "above 100"),
        ("window_min_span_s = inf", "not a finite number"),
        ("[thresholds]\nwindow_min_span_s = 5", "unknown threshold 'thresholds'"),
        ("window_min_span_s = ", "not valid TOML"),
        # integers past a float's range and past int()'s 4300 digits: an error, not a traceback
        ("window_min_samples_count = 1" + "0" * 400, "not a finite number"),
        ("window_min_span_s = 1" + "0" * 5000, "not valid TOML"),
    ],
)
def test_bad_values_name_the_key_and_the_problem(text: str, problem: str) -> None:
    with pytest.raises(InputError, match=problem) as caught:
        thresholds_from_toml(text)
    assert caught.value.reference == "thresholds-invalid"
    assert caught.value.hint


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(FIELDS),
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(-(10**6), 10**6),
            st.integers(10**300, 10**400),
            st.booleans(),
            st.text(max_size=5),
        ),
        max_size=4,
    )
)
def test_any_document_gives_thresholds_or_an_input_error(values: dict[str, object]) -> None:
    lines = []
    for key, value in values.items():
        if isinstance(value, str):
            lines.append(f"{key} = {value!r}".replace("'", '"'))
        elif isinstance(value, bool):
            lines.append(f"{key} = {str(value).lower()}")
        elif isinstance(value, float) and math.isnan(value):
            lines.append(f"{key} = nan")
        elif isinstance(value, float) and math.isinf(value):
            lines.append(f"{key} = {'-' if value < 0 else ''}inf")
        else:
            lines.append(f"{key} = {value!r}")
    document = "\n".join(lines)
    try:
        t = thresholds_from_toml(document)
    except InputError:
        with pytest.raises(InputError) as caught:
            thresholds_from_toml(document)
        assert caught.value.reference == "thresholds-invalid"
        return
    for key in values:
        assert math.isfinite(getattr(t, key)) and getattr(t, key) >= 0
