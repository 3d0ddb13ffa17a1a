"""dcgm-exporter scrapes with values no GPU reports (+Inf, 1e308, NaN, negative sizes), bad
device labels, pages that are no scrape, scrapes of several hosts: never a crash, never a
non-finite number in the reading, an event for what was left out, one refusal rule."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from gpuwarden.errors import CorruptInputError, InputError
from gpuwarden.report.snapshot_document import snapshot_document
from gpuwarden.telemetry.dcgm import open_dcgm, parse_scrape
from gpuwarden.types.telemetry import EventKind, Snapshot

MIB = 1 << 20
T4 = "datadog-integrations-core__tesla-t4__metrics.prom"
T4_UUID = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"  # host 424773df46e0
T4_OTHER_UUID = "GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5"  # host 551bdf382151
A100 = "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"


@pytest.fixture(scope="module")
def t4(fixtures: Path) -> str:
    return (fixtures / "dcgm" / T4).read_text()


def _set(text: str, metric: str, uuid: str, value: str) -> str:
    """``text`` with the value of ``metric``'s series of GPU ``uuid`` replaced."""
    pattern = re.compile(rf'^({metric}\{{[^}}]*UUID="{uuid}"[^}}]*\}}) \S+$', re.MULTILINE)
    changed, count = pattern.subn(rf"\1 {value}", text)
    assert count == 1, (metric, uuid)
    return changed


def _add(text: str, metric: str, uuid: str, value: str) -> str:
    """``text`` plus a ``metric`` series with the labels of GPU ``uuid``'s XID series."""
    labels = re.search(rf'^DCGM_FI_DEV_XID_ERRORS(\{{[^}}]*UUID="{uuid}"[^}}]*\}})', text, re.M)
    assert labels is not None
    return f"{text}{metric}{labels[1]} {value}\n"


def _parse(text: str) -> Snapshot:
    snapshot = parse_scrape(text, "scrape.prom", 0.0).snapshot
    json.dumps(snapshot_document(snapshot), allow_nan=False)  # strict JSON, whatever was read
    return snapshot


def _said(snapshot: Snapshot) -> list[str]:
    return [e.message for e in snapshot.events if e.kind is EventKind.BACKEND_ERROR]


def _gpu(snapshot: Snapshot, uuid: str = T4_UUID):  # type: ignore[no-untyped-def]
    return next(s for s in snapshot.samples if s.info.uuid == uuid)


def test_the_fixture_reads_as_expected(t4: str) -> None:
    gpu = _gpu(_parse(t4))
    assert gpu.memory_free_bytes == 15109 * MIB and gpu.power_draw_watts == 8.969
    assert _said(_parse(t4)) == []


@pytest.mark.parametrize("value", ["+Inf", "-Inf", "1e308", "NaN", "-8192"])
def test_framebuffer_free_beyond_any_memory(t4: str, value: str) -> None:
    """The crash of issue 13 (OverflowError in _mib): now the field is left out and said."""
    snapshot = _parse(_set(t4, "DCGM_FI_DEV_FB_FREE", T4_UUID, value))
    gpu = _gpu(snapshot)
    assert gpu.memory_free_bytes is None
    assert gpu.memory_used_bytes == 0  # "DCGM_FI_DEV_FB_USED ... 0": the rest is kept
    if value == "NaN":  # DCGM's own "no value": not reported, nothing to say
        assert _said(snapshot) == []
        return
    (message,) = _said(snapshot)
    assert "not reported (null)" in message
    assert message.startswith(("DCGM_FI_DEV_FB_FREE = ", "memory_free_bytes = "))


def test_infinite_power_is_null_not_infinity_in_json(t4: str) -> None:
    snapshot = _parse(_set(t4, "DCGM_FI_DEV_POWER_USAGE", T4_UUID, "+Inf"))
    assert _gpu(snapshot).power_draw_watts is None
    assert _said(snapshot) == ["power_draw_watts = inf is not a finite number; not reported (null)"]
    document = json.dumps(snapshot_document(snapshot), allow_nan=False)
    assert "Infinity" not in document


def test_a_negative_total_is_not_an_identity(t4: str) -> None:
    snapshot = _parse(_set(t4, "DCGM_FI_DEV_FB_TOTAL", T4_OTHER_UUID, "-8192"))
    other = _gpu(snapshot, T4_OTHER_UUID)
    assert other.info.memory_total_bytes is None
    (message,) = _said(snapshot)
    assert message.startswith("memory_total_bytes = -8589934592 is outside 0..")


@pytest.mark.parametrize(
    ("metric", "value", "field", "said"),
    [
        ("DCGM_FI_DEV_GPU_TEMP", "-300", "temperature_gpu_celsius", "is outside -40..200 °C"),
        ("DCGM_FI_DEV_GPU_UTIL", "1000", "gpu_utilization_percent", "is outside 0..100 %"),
        ("DCGM_FI_DEV_XID_ERRORS", "+Inf", "xid_last", "is not a finite number"),
        ("DCGM_FI_DEV_SM_CLOCK", "1e308", "clock_sm_mhz", "is outside 0..100000 MHz"),
    ],
)
def test_impossible_readings_of_the_first_gpu(
    t4: str, metric: str, value: str, field: str, said: str
) -> None:
    snapshot = _parse(_set(t4, metric, T4_UUID, value))
    assert getattr(_gpu(snapshot), field) is None
    (message,) = _said(snapshot)
    assert said in message and "not reported (null)" in message


@pytest.mark.parametrize(
    ("metric", "value", "field"),
    [
        ("DCGM_FI_DEV_PSTATE", "+Inf", "pstate"),
        ("DCGM_FI_DEV_PSTATE", "32", "pstate"),  # NVML_PSTATE_UNKNOWN is no state
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "-1", "clock_event_reasons"),
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "+Inf", "clock_event_reasons"),
    ],
)
def test_codes_and_masks_that_are_no_code(t4: str, metric: str, value: str, field: str) -> None:
    snapshot = _parse(_set(t4, metric, T4_OTHER_UUID, value))
    assert getattr(_gpu(snapshot, T4_OTHER_UUID), field) is None
    (message,) = _said(snapshot)
    assert "not reported (null)" in message


@pytest.mark.parametrize(
    ("metric", "value"),
    [
        ("DCGM_FI_DEV_GPU_RECOVERY_ACTION", "1e300"),
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "NaN"),
        ("DCGM_FI_DEV_FABRIC_MANAGER_STATUS", "+Inf"),
        ("DCGM_EXP_XID_ERRORS_COUNT", "+Inf"),
        ("DCGM_EXP_XID_ERRORS_COUNT", "-Inf"),
        ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "+Inf"),
    ],
)
def test_added_series_with_absurd_values_never_crash(t4: str, metric: str, value: str) -> None:
    text = _add(t4, metric, T4_UUID, value)
    if metric.startswith("DCGM_EXP"):
        text = text.replace(f"{metric}{{", f'{metric}{{xid="31",window_size_in_ms="300000",')
    snapshot = _parse(text)
    gpu = _gpu(snapshot)
    assert gpu.recovery_action is None and gpu.fabric_state is None
    assert all(math.isfinite(v) for v in gpu.extra.values())
    assert not any(e.kind is EventKind.XID for e in snapshot.events)


@pytest.mark.parametrize(("label", "value"), [("gpu", "-1"), ("gpu", "1e3"), ("GPU_I_ID", "-3")])
def test_a_device_label_that_is_no_index_names_its_line(t4: str, label: str, value: str) -> None:
    text = t4.replace(f'{label}="0"', f'{label}="{value}"', 1)
    if label == "GPU_I_ID":
        text = _add(t4, "DCGM_FI_PROF_SM_ACTIVE", T4_UUID, "0.5").replace(
            'DCGM_FI_PROF_SM_ACTIVE{gpu="0"', f'DCGM_FI_PROF_SM_ACTIVE{{GPU_I_ID="{value}",gpu="0"'
        )
    with pytest.raises(CorruptInputError) as info:
        parse_scrape(text, "scrape.prom", 0.0)
    assert info.value.reference == "dcgm-scrape-unreadable"
    assert re.search(
        rf"scrape\.prom, line \d+: .*{label} label '{re.escape(value)}'", str(info.value)
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "no metrics at all"),
        ("\n\n# HELP nothing here\n", "no metrics at all"),
        (
            'node_cpu_seconds_total{cpu="0",mode="idle"} 1234.5\nnode_load1 0.3\n',
            "2 series, none of them DCGM_* (the first is 'node_cpu_seconds_total')",
        ),
        ("DCGM_EXP_BUILD_INFO 1\n", "DCGM_* series, but none of a GPU"),
    ],
)
def test_a_page_without_gpu_series_is_refused(text: str, said: str, tmp_path: Path) -> None:
    """One rule with smi: an empty or foreign input is refused (exit 2), never "no devices"."""
    path = tmp_path / "scrape.prom"
    path.write_text(text)
    with pytest.raises(CorruptInputError) as info:
        open_dcgm(str(path))
    assert info.value.reference == "dcgm-scrape-no-gpus" and info.value.exit_code == 2
    assert said in info.value.message and info.value.hint


def test_a_file_past_the_limit_is_refused(
    t4: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(/dev/zero itself is read in a child with a memory limit: tests/cli/test_fuzz_verbs.py)"""
    from gpuwarden import files as capped

    monkeypatch.setattr(capped, "MAX_CAPTURE_BYTES", 1 << 20)
    path = tmp_path / "scrapes.prom"
    path.write_text(t4 * (2 * (1 << 20) // len(t4)))
    with pytest.raises(InputError) as info:
        open_dcgm(str(path))
    assert info.value.reference == "dcgm-scrape-too-large" and info.value.exit_code == 2
    assert "larger than 1 MiB" in info.value.message


def test_a_fleet_of_gpus_is_not_a_scrape(t4: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwarden.telemetry.dcgm import scrape

    monkeypatch.setattr(scrape, "MAX_DEVICES", 1)
    with pytest.raises(CorruptInputError, match=r"line \d+: more than 1 GPUs and MIG instances"):
        parse_scrape(t4, "scrape.prom", 0.0)


def test_each_gpu_keeps_its_host(fixtures: Path) -> None:
    backend = open_dcgm(str(fixtures / "dcgm" / T4))
    assert backend.device_hosts() == {T4_UUID: "424773df46e0", T4_OTHER_UUID: "551bdf382151"}
    assert backend.read().host == "424773df46e0,551bdf382151"


def test_old_exporters_without_uuid_keep_gpu_0_of_each_host(t4: str) -> None:
    """No UUID label: the index names the GPU, on its host (not one GPU 0 for both)."""
    text = re.sub(r'UUID="[^"]*",', "", t4)
    snapshot = _parse(text)
    assert sorted(s.info.uuid for s in snapshot.samples) == [
        "424773df46e0/index:0",
        "551bdf382151/index:0",
    ]
    assert {s.info.index for s in snapshot.samples} == {0}


def test_a_live_exporter_says_what_it_left_out_once(
    t4: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A URL is scraped on every read: the same impossible value is said the first time."""
    from gpuwarden.telemetry.dcgm import fetch

    page = _set(t4, "DCGM_FI_DEV_POWER_USAGE", T4_UUID, "+Inf")
    monkeypatch.setattr(fetch, "fetch_scrape", lambda url, timeout_s: page)
    backend = open_dcgm("http://node:9400/metrics")
    first, second = backend.read(), backend.read()
    assert len(_said(first)) == 1 and _said(second) == []
    assert _gpu(second).power_draw_watts is None
