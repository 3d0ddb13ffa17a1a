"""The same GPU captured in several nvidia-smi formats parses to the same values.

The split captures (nvidia_gpu_exporter) ran `-q`, `--query-gpu`, `dmon` a few seconds apart on
one GPU in one state, so identity and configuration must match exactly, while sensor readings
(power, temperatures, utilisation, clocks, counters that tick) may move between the commands:
those are compared with a tolerance and the differences counted, never ignored.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuwarden.telemetry.smi import open_smi
from gpuwarden.types.telemetry import DeviceSample

SMI = "nvidia-smi"
# Sensor readings that change between two nvidia-smi runs seconds apart, with how far they may.
MOVING = {
    "power_draw_watts": 0.15,  # relative
    "temperature_gpu_celsius": 5.0,  # absolute
    "temperature_memory_celsius": 5.0,
    "gpu_utilization_percent": 10.0,
    "memory_utilization_percent": 10.0,
    "encoder_utilization_percent": 10.0,
    "decoder_utilization_percent": 10.0,
    "fan_speed_percent": 2.0,
}
# A GPU near idle changes clocks, clock-event reasons and the power-cap counter between runs
# (the Windows load capture shows "gpu_idle" in the CSV but not in -q a second earlier).
STATE_MOVING = {
    "clock_sm_mhz",
    "clock_graphics_mhz",
    "clock_memory_mhz",
    "clock_video_mhz",
    "clock_event_reasons",
    "power_violation_ns_total",
}


def _flat(sample: DeviceSample) -> dict[str, object]:
    skip = {"info", "timestamp_s", "extra", "state", "error", "processes", "mig_devices"}
    out = {
        f.name: getattr(sample, f.name) for f in dataclasses.fields(sample) if f.name not in skip
    }
    out.update(
        {f"info.{f.name}": getattr(sample.info, f.name) for f in dataclasses.fields(sample.info)}
    )
    return {k: v for k, v in out.items() if v is not None}


def _captures(fixtures: Path) -> list[str]:
    return sorted(p.name.removesuffix(".q.txt") for p in (fixtures / SMI).glob("*.q.txt"))


def _compare(
    a: dict[str, object],
    b: dict[str, object],
    moving: set[str],
    tolerance: dict[str, float] = MOVING,
) -> tuple[int, int]:
    """(exactly equal fields, moving fields within tolerance); fails on anything else."""
    exact = within = 0
    for key in sorted(set(a) & set(b)):
        left, right = a[key], b[key]
        if left == right:
            exact += 1
            continue
        if key in tolerance and isinstance(left, float) and isinstance(right, float):
            tol = tolerance[key] * abs(left) if key == "power_draw_watts" else tolerance[key]
            assert abs(left - right) <= tol, (key, left, right)
            within += 1
            continue
        assert key in moving, (key, left, right)
        within += 1
    return exact, within


def test_q_text_and_query_gpu_csv_agree(fixtures: Path) -> None:
    names = _captures(fixtures)
    assert len(names) == 14
    for name in names:
        q = _flat(open_smi(str(fixtures / SMI / f"{name}.q.txt")).read().samples[0])
        csv = _flat(open_smi(str(fixtures / SMI / f"{name}.query-gpu.csv")).read().samples[0])
        exact, within = _compare(q, csv, STATE_MOVING)
        assert exact >= 25, (name, exact)  # identity, memory, PCIe, modes, limits, ECC ...
        assert within <= 8, (name, within)


def test_dmon_agrees_with_q_text(fixtures: Path) -> None:
    for name in _captures(fixtures):
        q = _flat(open_smi(str(fixtures / SMI / f"{name}.q.txt")).read().samples[0])
        readings = open_smi(str(fixtures / SMI / f"{name}.dmon.txt")).snapshots()
        dmon = _flat(readings[0].samples[0])
        for key in ("info.uuid", "info.name"):  # dmon prints neither
            dmon.pop(key)
        common = set(q) & set(dmon)
        assert {"power_draw_watts", "temperature_gpu_celsius", "clock_memory_mhz"} <= common
        _compare(q, dmon, STATE_MOVING)


def test_compute_apps_csv_agrees_with_q_text_processes(fixtures: Path) -> None:
    checked = 0
    for name in _captures(fixtures):
        q = open_smi(str(fixtures / SMI / f"{name}.q.txt")).read().samples[0]
        apps = open_smi(str(fixtures / SMI / f"{name}.query-compute-apps.csv")).read()
        if not apps.samples:
            continue
        (gpu,) = apps.samples
        assert gpu.info.uuid == q.info.uuid and gpu.info.pci_bus_id == q.info.pci_bus_id
        assert q.processes is not None and gpu.processes is not None
        by_pid = {p.pid: p for p in q.processes}
        for proc in gpu.processes:
            if proc.pid not in by_pid:  # a process that started between the two commands
                continue
            twin = by_pid[proc.pid]
            assert proc.name == twin.name, (name, proc.pid)
            assert proc.used_memory_bytes == twin.used_memory_bytes, (name, proc.pid)
            checked += 1
    assert checked >= 20


def test_p100_xml_and_csv_agree_on_what_both_print(fixtures: Path) -> None:
    """netdata's P100 XML and CSV: same GPU model and state, but not the same capture (the UUID,
    temperature and power differ), so only the memory, clocks and P-state are compared."""
    xml = open_smi(str(fixtures / SMI / "netdata__tesla-p100.xml")).read().samples[0]
    csv = open_smi(str(fixtures / SMI / "netdata__tesla-p100.csv")).read().samples[0]
    for key in (
        "memory_reserved_bytes",
        "memory_used_bytes",
        "memory_free_bytes",
        "clock_graphics_mhz",
        "clock_sm_mhz",
        "clock_memory_mhz",
        "clock_video_mhz",
        "pstate",
        "gpu_utilization_percent",
        "memory_utilization_percent",
        "fan_speed_percent",
    ):
        assert getattr(xml, key) == getattr(csv, key), key
    assert xml.info.name == csv.info.name
    assert xml.info.uuid != csv.info.uuid


@pytest.mark.parametrize("state", ["idle", "load"])
def test_query_gpu_mig_mode_matches_q_text_mig_devices(fixtures: Path, state: str) -> None:
    name = f"linux-x86_64__nvidia-h100-mig__590.48.01.{state}"
    q = open_smi(str(fixtures / SMI / f"{name}.q.txt")).read().samples[0]
    csv = open_smi(str(fixtures / SMI / f"{name}.query-gpu.csv")).read().samples[0]
    assert q.mig_mode is csv.mig_mode is True
    assert q.mig_devices is not None
    # the MIG instances' memory adds up to no more than the GPU's
    total = sum(m.memory_total_bytes or 0 for m in q.mig_devices)
    assert csv.info.memory_total_bytes is not None
    assert 0 < total <= csv.info.memory_total_bytes


def test_table_screen_agrees_with_q_text(fixtures: Path) -> None:
    """The screen truncates names; identity and modes must match. It was the first command of
    each capture: the H100 MIG idle screen shows 98 W where -q a few seconds later shows 71 W,
    so power and used memory are not compared."""
    for name in _captures(fixtures):
        q_sample = open_smi(str(fixtures / SMI / f"{name}.q.txt")).read().samples[0]
        screen = open_smi(str(fixtures / SMI / f"{name}.table.txt")).read().samples[0]
        assert q_sample.info.name.startswith(screen.info.name.removesuffix("..."))
        q, t = _flat(q_sample), _flat(screen)
        for key in ("info.name", "info.uuid"):
            t.pop(key, None)
        sensors = {k: v for k, v in MOVING.items() if k != "power_draw_watts"}
        moving = STATE_MOVING | {"memory_used_bytes", "power_draw_watts"}
        exact, _ = _compare(q, t, moving, sensors)
        assert exact >= 8, (name, exact)
        assert q_sample.processes is not None and screen.processes is not None
        q_names = {p.pid: p.name or "" for p in q_sample.processes}
        for proc in screen.processes:
            if proc.pid in q_names and proc.name:
                assert q_names[proc.pid].endswith(proc.name.removeprefix("...")), proc


HEALTH = (
    "temperature_margin_celsius",
    "temperature_gpu_max_celsius",
    "sram_threshold_exceeded",
    "remapped_rows_banks_exhausted",
    "recovery_action",
    "fabric_state",
    "fabric_status",
)


def test_health_readings_agree_between_q_text_and_csv(fixtures: Path) -> None:
    """The same capture's -q and CSV: every health reading both print is the same (margins and
    the max operating temperature derived from them included: both ran at the same
    temperature), and the H100 captures print all of them in both."""
    compared = 0
    for name in _captures(fixtures):
        q = open_smi(str(fixtures / SMI / f"{name}.q.txt")).read().samples[0]
        csv = open_smi(str(fixtures / SMI / f"{name}.query-gpu.csv")).read().samples[0]
        for field in HEALTH:
            left, right = getattr(q, field), getattr(csv, field)
            if left is None or right is None:
                continue
            assert left == right, (name, field)
            compared += 1
        if "h100-80gb" in name:
            assert all(getattr(csv, f) is not None for f in HEALTH), name
    # the 10 consumer captures share the recovery action only; the 4 H100 ones six readings,
    # plus the remap banks outside MIG mode (-q prints "Remapped Rows : N/A" in MIG mode)
    assert compared == 10 + 4 * 6 + 2
