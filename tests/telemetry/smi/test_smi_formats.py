"""Every nvidia-smi fixture parses, and the values are the ones printed in the file.

Expected values are read off the fixture named in each test (the comment quotes the line).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import SmiFormat, detect_format, open_smi, parse_smi_output
from gpuwarden.types.telemetry import DeviceSample

MIB = 1 << 20
SMI = "nvidia-smi"
H100_LOAD_CSV = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.query-gpu.csv"
NOT_TELEMETRY = (".partial.txt",)  # `mig -lgip` profile tables


def _all_files(fixtures: Path) -> list[Path]:
    root = fixtures / SMI
    files = [p for p in sorted(root.iterdir()) if p.is_file() and p.name != "SOURCES.md"]
    return files + sorted((root / "captures").iterdir())


def _first(fixtures: Path, name: str) -> DeviceSample:
    return open_smi(str(fixtures / SMI / name)).read().samples[0]


def test_every_telemetry_fixture_parses_and_the_others_are_named(fixtures: Path) -> None:
    files = _all_files(fixtures)
    assert len(files) >= 80  # 70 split captures + 5 netdata + 3 partial + 7 captures
    parsed = 0
    for path in files:
        if path.name.endswith(NOT_TELEMETRY):
            with pytest.raises(CorruptInputError, match="not a supported nvidia-smi format") as err:
                open_smi(str(path))
            assert path.name in err.value.message
            assert err.value.hint and "nvidia-smi -q -x" in err.value.hint
            continue
        backend = open_smi(str(path))
        snapshots = backend.snapshots()
        assert snapshots, path.name
        for snap in snapshots:
            assert snap.backend == "smi" and snap.simulated is False
            assert snap.source == str(path)
        if not path.name.endswith("query-compute-apps.csv"):
            assert all(s.samples for s in snapshots), path.name
        parsed += 1
    assert parsed == len(files) - 3


@pytest.mark.parametrize(
    ("suffix", "kind"),
    [
        (".q.txt", SmiFormat.Q_TEXT),
        (".query-gpu.csv", SmiFormat.QUERY_GPU),
        (".query-compute-apps.csv", SmiFormat.COMPUTE_APPS),
        (".dmon.txt", SmiFormat.DMON),
        (".table.txt", SmiFormat.TABLE),
    ],
)
def test_format_is_detected_from_content(fixtures: Path, suffix: str, kind: SmiFormat) -> None:
    files = sorted((fixtures / SMI).glob(f"*{suffix}"))
    assert len(files) == 14
    for path in files:
        assert detect_format(path.read_text()) is kind, path.name


def test_xml_a100_mig(fixtures: Path) -> None:
    s = _first(fixtures, "netdata__a100-sxm4-mig.xml")
    assert s.info.name == "NVIDIA A100-SXM4-40GB"
    assert s.info.uuid == "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a"
    assert s.info.architecture == "Ampere"
    assert (s.info.driver_version, s.info.cuda_driver_version) == ("510.47.03", "11.6")
    assert s.info.memory_total_bytes == 40960 * MIB  # <total>40960 MiB</total>
    assert s.memory_reserved_bytes == 605 * MIB
    assert (s.memory_used_bytes, s.memory_free_bytes) == (38 * MIB, 40315 * MIB)
    assert s.gpu_utilization_percent is None  # <gpu_util>N/A</gpu_util> under MIG
    assert (s.temperature_gpu_celsius, s.temperature_memory_celsius) == (36, 44)
    assert (s.temperature_slowdown_celsius, s.temperature_shutdown_celsius) == (89, 92)
    assert (s.power_draw_watts, s.power_limit_watts, s.power_enforced_limit_watts) == (
        66.92,
        400,
        400,
    )
    assert s.clock_event_reasons == ()  # every reason "Not Active" (one split over two lines)
    assert s.ecc_mode_enabled is True
    assert s.ecc_errors_corrected_volatile is None  # volatile sram/dram counts are N/A
    assert s.ecc_errors_corrected_aggregate == 0
    assert (s.pcie_link_gen_current, s.pcie_link_width_current) == (4, 16)
    assert s.mig_mode is True and s.mig_mode_pending is True
    assert s.mig_devices is not None
    assert [(m.gpu_instance_id, m.compute_instance_id, m.sm_count) for m in s.mig_devices] == [
        (1, 0, 42),
        (2, 0, 42),
    ]
    assert s.mig_devices[0].memory_total_bytes == 19968 * MIB
    assert s.mig_devices[0].memory_used_bytes == 19 * MIB
    assert s.processes == ()


def test_xml_old_ecc_layout_and_retired_pages_p100(fixtures: Path) -> None:
    s = _first(fixtures, "netdata__tesla-p100.xml")
    # <aggregate><single_bit>...<total>3</total>
    assert s.ecc_errors_corrected_aggregate == 3
    assert s.ecc_errors_uncorrected_aggregate == 0
    assert (s.retired_pages_single_bit, s.retired_pages_double_bit) == (0, 0)
    assert s.retired_pages_pending is False
    assert s.clock_event_reasons == ("gpu_idle",)
    assert s.fan_speed_percent is None
    assert (s.clock_sm_max_mhz, s.clock_memory_max_mhz) == (1328, 715)


def test_xml_windows_processes_without_memory(fixtures: Path) -> None:
    s = _first(fixtures, "netdata__rtx-2080-win.xml")
    assert s.persistence_mode is None  # N/A on WDDM
    assert s.processes is not None and len(s.processes) > 20
    assert all(p.used_memory_bytes is None and p.kind == "C+G" for p in s.processes)
    assert s.processes[0].pid == 7724
    assert s.processes[1].name is None  # <process_name></process_name>
    assert s.pcie_tx_bytes_per_second == 13000 * 1000  # <tx_util>13000 KB/s</tx_util>
    assert (s.pcie_link_width_current, s.pcie_link_width_max) == (8, 16)


def test_xml_laptop_power_limit_not_reported(fixtures: Path) -> None:
    s = _first(fixtures, "netdata__rtx-3060.xml")
    assert s.power_draw_watts == 8.70
    assert s.power_limit_watts is None  # <power_limit>N/A</power_limit>
    assert s.processes is not None
    (xorg,) = s.processes
    assert (xorg.pid, xorg.name, xorg.kind, xorg.used_memory_bytes) == (
        28543,
        "/usr/libexec/Xorg",
        "G",
        4 * MIB,
    )


def test_q_text_h100_mig_load(fixtures: Path) -> None:
    s = _first(fixtures, "linux-x86_64__nvidia-h100-mig__590.48.01.load.q.txt")
    assert s.info.uuid == "GPU-00000000-0000-0000-0000-000000000000"  # masked, kept as printed
    assert s.info.pci_bus_id == "00000000:00:09.0"
    assert s.memory_used_bytes == 11125 * MIB
    assert s.power_draw_watts == 432.21  # Average Power Draw
    assert s.extra["power_draw_instant_watts"] == 444.72
    assert "temperature_tlimit_margin_celsius" not in s.extra  # a typed field now
    assert s.temperature_margin_celsius == 24  # "GPU T.Limit Temp : 24 C"
    # only T.Limit-relative thresholds are printed: "GPU Slowdown T.Limit Temp : -2 C" is 2 °C
    # past the max operating temperature, 53 (current) + 24 (margin) = 77 °C
    assert s.temperature_gpu_max_celsius == 77
    assert s.temperature_slowdown_celsius == 79
    assert s.pcie_replay_total == 9
    assert s.pcie_rx_bytes_per_second == 19191 * 1000
    assert s.mig_devices is not None
    assert [m.gpu_instance_id for m in s.mig_devices] == [2, 3, 9, 10]
    assert s.mig_devices[0].memory_used_bytes == 11091 * MIB
    assert s.processes is not None
    assert [(p.pid, p.gpu_instance_id, p.compute_instance_id) for p in s.processes] == [
        (21180, 2, 0),
        (21181, 2, 0),
        (21198, 2, 0),
    ]
    assert s.processes[2].name == "./gpu_burn"
    assert s.processes[2].used_memory_bytes == 7484 * MIB


def test_q_text_new_driver_versions_and_wddm(fixtures: Path) -> None:
    s = _first(fixtures, "windows-x86_64__nvidia-geforce-rtx-2080-super__610.62.load.q.txt")
    # "Driver Version : 610.62 [Deprecated; ...]" and "KMD Version : 610.62"
    assert s.info.driver_version == "610.62"
    assert s.processes is not None
    assert all(p.used_memory_bytes is None for p in s.processes)  # "Not available in WDDM..."
    assert s.persistence_mode is None
    assert s.power_limit_watts == 250  # nested under "GPU Ceiling Power Limit"


def test_query_gpu_csv_units_in_cells(fixtures: Path) -> None:
    s = _first(
        fixtures, "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle.query-gpu.csv"
    )
    assert s.power_draw_watts == 39.32  # "39.32 W"
    assert s.power_violation_ns_total == 212553937 * 1000  # "212553937 us"
    assert s.clock_event_reasons == ("sw_power_cap",)  # 0x0000000000000004
    assert s.fan_speed_percent == 38
    assert s.ecc_mode_enabled is None  # [N/A]
    assert s.temperature_memory_celsius is None  # N/A
    assert s.info.memory_total_bytes == 8192 * MIB
    assert (s.pcie_link_gen_current, s.pcie_link_gen_max) == (1, 3)


def test_query_gpu_csv_nounits_header_units(fixtures: Path) -> None:
    s = _first(fixtures, "netdata__tesla-p100.csv")
    assert s.memory_reserved_bytes == 103 * MIB  # header "memory.reserved [MiB]", cell "103"
    assert s.memory_free_bytes == 16280 * MIB
    assert s.power_draw_watts == 28.16
    assert s.fan_speed_percent is None  # [N/A]
    assert s.clock_video_mhz == 835


def test_compute_apps_csv(fixtures: Path) -> None:
    snap = open_smi(
        str(
            fixtures
            / SMI
            / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.query-compute-apps.csv"
        )
    ).read()
    (gpu,) = snap.samples
    assert gpu.info.name == "NVIDIA H100 80GB HBM3"
    assert gpu.processes is not None and len(gpu.processes) >= 1
    idle = open_smi(
        str(fixtures / SMI / "linux-x86_64__nvidia-h100-mig__590.48.01.idle.query-compute-apps.csv")
    ).read()
    assert idle.samples == ()  # header only: no process, no GPU named


def test_dmon_blocks_and_dashes(fixtures: Path) -> None:
    backend = open_smi(
        str(fixtures / SMI / "linux-x86_64__nvidia-h100-mig__590.48.01.load.dmon.txt")
    )
    snaps = backend.snapshots()
    assert len(snaps) == 5  # `dmon -c 5`; the capture's nvml-symbols section after it is not read
    first = snaps[0].samples[0]
    assert (first.power_draw_watts, first.temperature_gpu_celsius) == (438, 55)
    assert first.temperature_memory_celsius == 61
    assert first.gpu_utilization_percent is None  # "-" under MIG
    assert (first.clock_memory_mhz, first.clock_graphics_mhz) == (2619, 1980)
    assert [s.samples[0].power_draw_watts for s in snaps] == [438, 440, 437, 439, 439]
    assert snaps[1].timestamp_s - snaps[0].timestamp_s == 1.0
    assert first.info.uuid == "index:0"


def test_capture_file_sections_equal_the_split_files(fixtures: Path) -> None:
    """The -q sections of a capture are the same text as the split *.q.txt fixtures."""
    for capture in sorted((fixtures / SMI / "captures").iterdir()):
        stem = capture.name.removesuffix(".txt")
        idle, load = open_smi(str(capture)).snapshots()
        for state, snap in (("idle", idle), ("load", load)):
            split = open_smi(str(fixtures / SMI / f"{stem}.{state}.q.txt")).read()
            assert snap.samples == split.samples, (capture.name, state)


def test_backend_reads_in_order_then_repeats_the_last(fixtures: Path) -> None:
    backend = open_smi(
        str(fixtures / SMI / "windows-x86_64__nvidia-geforce-rtx-2080-super__610.62.idle.dmon.txt")
    )
    stamps = [backend.read().timestamp_s for _ in range(7)]
    assert stamps[:5] == sorted(stamps[:5]) and len(set(stamps[:5])) == 5
    assert stamps[5] == stamps[6] == stamps[4]
    assert [d.index for d in backend.devices()] == [0]


def test_table_screen_mig_and_processes(fixtures: Path) -> None:
    s = _first(fixtures, "linux-x86_64__nvidia-h100-mig__590.48.01.load.table.txt")
    # "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:00:09.0 Off |                   On |"
    assert (s.info.index, s.info.name, s.info.pci_bus_id) == (
        0,
        "NVIDIA H100 80GB HBM3",
        "00000000:00:09.0",
    )
    assert s.persistence_mode is True and s.ecc_mode_enabled is True
    # "| N/A   52C    P0            432W /  700W |   11125MiB /  81559MiB |     N/A      Default |"
    assert (s.fan_speed_percent, s.temperature_gpu_celsius, s.pstate) == (None, 52, "P0")
    assert (s.power_draw_watts, s.power_limit_watts) == (432, 700)
    assert (s.memory_used_bytes, s.info.memory_total_bytes) == (11125 * MIB, 81559 * MIB)
    assert s.gpu_utilization_percent is None and s.compute_mode == "Default"
    assert s.mig_mode is True
    assert (s.info.driver_version, s.info.cuda_driver_version) == ("590.48.01", "13.1")
    assert s.mig_devices is not None
    assert [(m.gpu_instance_id, m.sm_count) for m in s.mig_devices] == [
        (2, 60),
        (3, 32),
        (9, 16),
        (10, 16),
    ]
    assert s.mig_devices[0].memory_used_bytes == 11091 * MIB
    assert s.processes is not None
    assert [(p.pid, p.gpu_instance_id, p.used_memory_bytes) for p in s.processes] == [
        (21180, 2, 2296 * MIB),
        (21181, 2, 1272 * MIB),
        (21198, 2, 7484 * MIB),
    ]


def test_table_screen_windows_kmd_versions(fixtures: Path) -> None:
    s = _first(fixtures, "windows-x86_64__nvidia-geforce-rtx-2080-super__610.62.load.table.txt")
    # "| NVIDIA-SMI 610.62                 KMD Version: 610.62        CUDA UMD Version: 13.3     |"
    assert (s.info.driver_version, s.info.cuda_driver_version) == ("610.62", "13.3")
    assert s.info.name == "NVIDIA GeForce RTX 2080 ..."  # truncated by nvidia-smi, kept
    assert s.persistence_mode is None  # the column shows the driver model (WDDM)
    assert s.ecc_errors_uncorrected_volatile is None
    assert s.processes is not None and len(s.processes) == 21
    assert s.processes[2].kind == "C" and s.processes[2].used_memory_bytes is None


def test_xml_new_element_names_read_like_the_old(fixtures: Path) -> None:
    """R535+ renamed <power_readings> and <clocks_throttle_reasons> (names as in newer drivers'
    -q -x: average/instant_power_draw, current/requested_power_limit, clocks_event_reason_*)."""
    old_text = (fixtures / SMI / "netdata__tesla-p100.xml").read_text()
    new_text = (
        old_text.replace("power_readings>", "gpu_power_readings>")
        .replace(
            "<power_draw>26.16 W</power_draw>",
            "<average_power_draw>26.16 W</average_power_draw>"
            "<instant_power_draw>31.50 W</instant_power_draw>",
        )
        .replace(
            "power_limit>250.00 W</power_limit>",
            "requested_power_limit>250.00 W</requested_power_limit>",
        )
        .replace("enforced_power_limit>", "current_power_limit>")
        .replace("clocks_throttle_reason", "clocks_event_reason")
    )
    assert "<power_readings>" not in new_text and "<clocks_event_reasons>" in new_text
    (old,) = parse_smi_output(old_text, "old", 0.0)
    (new,) = parse_smi_output(new_text, "new", 0.0)
    assert new.samples[0].power_draw_watts == old.samples[0].power_draw_watts == 26.16
    assert new.samples[0].extra["power_draw_instant_watts"] == 31.5
    assert new.samples[0].power_limit_watts == old.samples[0].power_limit_watts == 250
    assert new.samples[0].power_enforced_limit_watts == 250
    assert new.samples[0].clock_event_reasons == old.samples[0].clock_event_reasons == ("gpu_idle",)


def test_query_gpu_loop_and_several_gpus(fixtures: Path) -> None:
    """`-l 1` repeats the rows: a GPU index seen again starts the next Snapshot."""
    header, row = (fixtures / SMI / H100_LOAD_CSV).read_text().splitlines()[:2]
    second_gpu = row.replace(", 16, 16, 0, ", ", 16, 16, 1, ", 1)
    assert second_gpu != row
    text = "\n".join([header, row, second_gpu, row, second_gpu])
    first, second = parse_smi_output(text, "loop.csv", 0.0)
    assert [s.info.index for s in first.samples] == [0, 1]
    assert [s.info.index for s in second.samples] == [0, 1]
    assert first.samples[0] == second.samples[0]
