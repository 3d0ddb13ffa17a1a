"""The window (--range, --start/--end) and the prices (flat, catalog, --prices FILE)."""

from __future__ import annotations

import itertools
import statistics
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.catalog import instances_for_gpu
from gpuwarden.errors import InputError
from gpuwarden.fleet.pricing import catalog, catalog_price, flat, parse_prices
from gpuwarden.fleet.window import make_window, parse_duration, parse_time

NOW = 1_704_067_200 + 3 * 3600 + 25 * 60 + 42  # 2024-01-01 03:25:42 UTC


def test_durations_read_like_prometheus() -> None:
    assert parse_duration("24h") == 86400
    assert parse_duration("1d12h") == 129600
    assert parse_duration("90m") == 5400
    assert parse_duration("1w") == 604800
    for bad in ("", "24", "h", "1.5h", "24 h", "-1h", "1h-"):
        with pytest.raises(InputError) as info:
            parse_duration(bad)
        assert info.value.reference == "fleet-range-invalid"


def test_times_in_rfc3339_dates_or_unix_seconds() -> None:
    assert parse_time("2024-01-01T00:00:00Z", "--start") == 1_704_067_200
    assert parse_time("2024-01-01T02:00:00+02:00", "--start") == 1_704_067_200
    assert parse_time("2024-01-01", "--start") == 1_704_067_200
    assert parse_time("1704067200", "--start") == 1_704_067_200
    with pytest.raises(InputError, match="--end 'yesterday'"):
        parse_time("yesterday", "--end")


def test_a_range_ends_a_whole_minute_before_now() -> None:
    w = make_window(NOW, range_s=parse_duration("24h"))
    assert w.end_s == NOW - 42 - 60  # the newest minute is left out (settle)
    assert w.end_s - w.start_s == 86400 and w.start_s % 60 == 0
    assert w.bucket_s == 3600 and len(w.buckets()) == 24
    assert w.buckets()[0] == (w.start_s, w.start_s + 3600)


def test_buckets_tile_the_window_from_its_end() -> None:
    w = make_window(NOW, start_s=1_704_067_200 - 150 * 60, end_s=1_704_067_200)
    assert w.bucket_s == 3600
    assert w.buckets() == (
        (1_704_067_200 - 9000, 1_704_067_200 - 7200),  # the short bucket is the oldest
        (1_704_067_200 - 7200, 1_704_067_200 - 3600),
        (1_704_067_200 - 3600, 1_704_067_200),
    )
    month = make_window(NOW, range_s=30 * 86400)
    assert month.bucket_s == 5 * 3600 and len(month.buckets()) == 144
    short = make_window(NOW, range_s=20 * 60)
    assert short.bucket_s == 1200 and len(short.buckets()) == 1


def test_windows_that_cannot_be() -> None:
    with pytest.raises(InputError, match="empty"):
        make_window(NOW, range_s=30)
    with pytest.raises(InputError, match="empty"):
        make_window(NOW, start_s=NOW + 3600)
    with pytest.raises(InputError) as info:
        make_window(NOW, range_s=500 * 86400)
    assert info.value.reference == "fleet-window-too-long"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20))
def test_duration_and_time_parsers_only_raise_input_errors(text: str) -> None:
    for parse in (parse_duration, lambda t: parse_time(t, "--start")):
        try:
            value = parse(text)
        except InputError:
            continue
        assert isinstance(value, int)


_OFFSETS = st.timedeltas(
    min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)
)
_TIMES = st.builds(
    lambda when, offset: when.replace(tzinfo=timezone(offset)).isoformat(),
    st.sampled_from([datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59)])
    | st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
    _OFFSETS.map(lambda d: timedelta(minutes=d // timedelta(minutes=1))),
)


@settings(max_examples=200, deadline=None)
@given(_TIMES, _TIMES | st.none())
def test_any_start_and_end_make_a_window_or_an_input_error(start: str, end: str | None) -> None:
    # a time whose UTC date is outside the years 1-9999 once crashed the error message
    try:
        window = make_window(
            NOW,
            start_s=parse_time(start, "--start"),
            end_s=None if end is None else parse_time(end, "--end"),
        )
    except InputError:
        return
    assert window.start_s < window.end_s


def test_a_time_past_the_year_9999_in_utc_is_refused() -> None:
    with pytest.raises(InputError) as info:
        parse_time("9999-12-31T23:59:59-23:59", "--start")
    assert info.value.reference == "fleet-time-invalid" and "9999" in info.value.message


@settings(max_examples=100, deadline=None)
@given(st.integers(60, 399 * 86400), st.integers(1_000_000_000, 2_000_000_000))
def test_buckets_always_cover_the_window_exactly(range_s: int, now: int) -> None:
    w = make_window(now, range_s=range_s)
    buckets = w.buckets()
    assert buckets[0][0] == w.start_s and buckets[-1][1] == w.end_s
    assert all(a[1] == b[0] for a, b in itertools.pairwise(buckets))
    assert all(end - start == w.bucket_s for start, end in buckets[1:])
    assert len(buckets) <= 168 + 1


def test_catalog_price_is_the_median_per_gpu_price() -> None:
    expected = statistics.median(
        i.usd_per_hour / i.gpu_count for i in instances_for_gpu("h100-sxm5-80gb") if i.usd_per_hour
    )
    price = catalog_price("NVIDIA H100 80GB HBM3")  # dcgm-exporter's modelName
    assert price.usd_per_gpu_hour == pytest.approx(expected)
    assert "p5.48xlarge" in price.source and "median" in price.source
    assert catalog().price("NVIDIA A100-SXM4-40GB").usd_per_gpu_hour is not None


def test_unknown_models_stay_unpriced_never_free() -> None:
    assert catalog_price("NVIDIA GeForce RTX 4090").usd_per_gpu_hour is None  # no instance
    assert catalog_price("Some Future GPU").usd_per_gpu_hour is None
    assert catalog().price(None).usd_per_gpu_hour is None


PRICES = """
# contract prices
usd_per_kwh = 0.11
default_usd_per_gpu_hour = 1.25

[usd_per_gpu_hour]
"h100-sxm5-80gb" = 2.49
"NVIDIA A100-SXM4-40GB" = 1.10
"""


def test_a_prices_file_matches_models_by_catalog_identity() -> None:
    book = parse_prices(PRICES)
    assert book.usd_per_kwh == 0.11
    h100 = book.price("NVIDIA H100 80GB HBM3")
    assert (h100.usd_per_gpu_hour, h100.source) == (2.49, "prices file: 'h100-sxm5-80gb'")
    assert book.price("NVIDIA A100-SXM4-40GB").usd_per_gpu_hour == 1.10
    assert book.price("Tesla T4").usd_per_gpu_hour == 1.25  # the default
    no_default = parse_prices('[usd_per_gpu_hour]\n"t4-16gb" = 0.3\n')
    assert no_default.price("NVIDIA L4").usd_per_gpu_hour is None
    assert flat(3.0).price("anything").usd_per_gpu_hour == 3.0


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("usd_per_gpu_hour = 3", "must be a table"),
        ('[usd_per_gpu_hour]\n"h100" = "cheap"', "not a number"),
        ('[usd_per_gpu_hour]\n"h100" = -1', "between 0"),
        ('[usd_per_gpu_hour]\n"h100" = nan', "between 0"),
        ("usd_per_kwh = 0.1", "prices no GPU"),
        ("currency = 'EUR'", "unknown key 'currency'"),
        ("[usd_per_gpu_hour", "not valid TOML"),
    ],
)
def test_bad_prices_files_say_why(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says) as info:
        parse_prices(text)
    assert info.value.reference == "fleet-prices-invalid" and info.value.hint


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_prices_parser_fuzz(text: str) -> None:
    try:
        book = parse_prices(text)
    except InputError:
        return
    assert book.basis == "file"
