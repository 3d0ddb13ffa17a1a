"""Point rules on real readings (one field changed where the rule needs it): what fires, what
never does (diagnosis.md §2's no-false-alarm list), and the check each family reports."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.health.evaluate import HealthResult, evaluate_snapshot
from gpuwarden.health.rules import CHECK_NAMES
from gpuwarden.health.rules.links import board_links
from gpuwarden.telemetry.open import open_backend
from gpuwarden.types.health import CheckStatus, Confidence, Severity
from gpuwarden.types.telemetry import DeviceSample, DeviceState, NvLinkSample, Snapshot

SMI = "nvidia-smi"
H100_LOAD = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
RTX2080_IDLE = "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle.q.txt"
RTX2080_IDLE_CSV = "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle.query-gpu.csv"
RTX4080_LOAD = "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.load.q.txt"
WINDOWS_IDLE = "windows-x86_64__nvidia-geforce-rtx-2080-super__610.62.idle.q.txt"
A100_MIG = "netdata__a100-sxm4-mig.xml"
P100 = "netdata__tesla-p100.xml"


@pytest.fixture(scope="module")
def read(fixtures: Path) -> Any:
    cache: dict[str, DeviceSample] = {}

    def sample(name: str, **changes: Any) -> DeviceSample:
        if name not in cache:
            cache[name] = open_backend("smi", str(fixtures / SMI / name)).read().samples[0]
        return dataclasses.replace(cache[name], **changes)

    return sample


def judge(*samples: DeviceSample) -> HealthResult:
    snapshot = Snapshot(samples[0].timestamp_s, "host-a", "smi", False, samples, source="/x/q.txt")
    return evaluate_snapshot(snapshot)


def above_info(result: HealthResult) -> list[str]:
    return [f.code for f in result.findings if f.severity is not Severity.INFO]


def codes(result: HealthResult) -> list[tuple[str, str, int | None]]:
    return [
        (f.code, f.severity.value, f.device.index if f.device else None) for f in result.findings
    ]


def check(result: HealthResult, name: str) -> tuple[CheckStatus, str]:
    found = next(c for c in result.checks if c.name == name)
    return found.status, found.detail


def test_one_check_per_family_in_a_stable_order(read: Any) -> None:
    result = judge(read(H100_LOAD))
    assert [c.name for c in result.checks] == list(CHECK_NAMES)
    assert set(CHECK_NAMES) >= {
        "persistence",
        "ecc",
        "retired-pages",
        "row-remap",
        "sram",
        "clock-events",
        "temperature",
        "power",
        "pcie",
        "nvlink",
        "fabric",
        "mig",
        "memory",
        "utilization",
        "peers",
    }
    # the real H100 under gpu_burn is healthy: every check it can read passes
    assert result.findings == ()
    assert check(result, "fabric")[0] is CheckStatus.PASS
    assert check(result, "utilization")[0] is CheckStatus.SKIP  # one reading
    assert "need a series of readings" in check(result, "utilization")[1]


# --- temperature


def test_slowdown_threshold_minus_five(read: Any) -> None:
    # the H100 -q capture: slowdown 87 °C (T.Limit -2 °C past max operating 85)
    hot = judge(read(H100_LOAD, temperature_gpu_celsius=82.0, temperature_margin_celsius=3.0))
    (finding,) = hot.findings
    assert (finding.code, finding.severity) == ("temperature-high", Severity.WARNING)
    assert finding.evidence[0].detail == "82 °C ≥ 82 °C = slowdown 87 − 5"
    assert finding.evidence[0].source == "smi:/x/q.txt"
    assert judge(read(H100_LOAD, temperature_gpu_celsius=81.0)).findings == ()


def test_relative_tlimit_thresholds_are_margins_not_degrees(read: Any) -> None:
    # a slowdown "threshold" of -2 °C is the relative T.Limit number: never compared as degrees
    relative = read(H100_LOAD, temperature_slowdown_celsius=-2.0, temperature_gpu_max_celsius=None)
    assert judge(relative).findings == ()
    near = dataclasses.replace(relative, temperature_margin_celsius=4.0)
    (finding,) = judge(near).findings
    assert finding.evidence[0].field == "temperature_margin_celsius"
    assert "margin 4 °C ≤ 5 °C" in finding.evidence[0].detail


def test_83_c_only_when_the_board_states_no_threshold(read: Any) -> None:
    bare: dict[str, Any] = {
        "temperature_slowdown_celsius": None,
        "temperature_margin_celsius": None,
        "temperature_gpu_max_celsius": None,
        # a model the catalog holds no line for (the H100's is derived from its T.Limit)
        "info": dataclasses.replace(read(H100_LOAD).info, name="NVIDIA H100 NVL"),
    }
    assert codes(judge(read(H100_LOAD, temperature_gpu_celsius=83.0, **bare))) == [
        ("temperature-high", "warning", 0)
    ]
    assert judge(read(H100_LOAD, temperature_gpu_celsius=82.0, **bare)).findings == ()
    # with the real thresholds 83 °C is 4 °C under the H100's 87 °C slowdown: still a warning
    assert judge(read(H100_LOAD, temperature_gpu_celsius=83.0)).findings != ()
    # the RTX 2080 SUPER slows down at 97 °C: 83 °C is fine there
    assert judge(read(RTX2080_IDLE, temperature_gpu_celsius=83.0)).findings[0].code != (
        "temperature-high"
    )


def test_a_zero_reading_is_a_missing_sensor(read: Any) -> None:
    zero = read(
        H100_LOAD,
        temperature_gpu_celsius=0.0,
        temperature_memory_celsius=0.0,
        temperature_margin_celsius=None,
        temperature_gpu_max_celsius=None,
    )
    result = judge(zero)
    assert result.findings == ()
    assert check(result, "temperature")[0] is CheckStatus.SKIP


def test_memory_near_its_max(read: Any) -> None:
    # the A100 XML states the memory max: 95 °C
    hot = judge(read(A100_MIG, temperature_memory_celsius=90.0))
    assert above_info(hot) == ["temperature-high"]
    assert "memory at 90 °C (max 95 °C)" in hot.findings[0].title
    assert above_info(judge(read(A100_MIG, temperature_memory_celsius=89.0))) == []


# --- clocks and power


def test_thermal_slowdown_and_power_brake(read: Any) -> None:
    reasons = ("hw_slowdown", "hw_thermal_slowdown")
    assert codes(judge(read(H100_LOAD, clock_event_reasons=reasons))) == [
        ("thermal-slowdown", "warning", 0)
    ]
    brake = ("hw_slowdown", "hw_power_brake_slowdown")
    assert codes(judge(read(H100_LOAD, clock_event_reasons=brake))) == [
        ("power-brake", "warning", 0)
    ]
    # HW Slowdown alone is also reported around P-state changes (NVML): not a finding
    assert judge(read(H100_LOAD, clock_event_reasons=("hw_slowdown",))).findings == ()


def test_sw_power_cap_is_information_under_load_and_nothing_at_idle(read: Any) -> None:
    # the real RTX 2080 SUPER idle CSV reads "SW Power Cap: Active" at P8
    idle = judge(read(RTX2080_IDLE_CSV))
    assert [f.code for f in idle.findings] == ["persistence-off"]
    capped = judge(read(H100_LOAD, clock_event_reasons=("sw_power_cap",)))
    assert codes(capped) == [("power-capped", "info", 0)]
    assert check(capped, "power")[0] is CheckStatus.PASS


# --- PCIe


def test_idle_downtraining_is_normal(read: Any) -> None:
    idle = read(RTX2080_IDLE)  # the capture: Gen1 of Gen3 at P8, 0 % busy
    assert (idle.pcie_link_gen_current, idle.pcie_link_gen_max, idle.pstate) == (1, 3, "P8")
    assert check(judge(idle), "pcie") == (
        CheckStatus.PASS,
        "1 device reading(s) judged; "
        "windowed rules need a series of readings (watch, a "
        "recorded run, an nvidia-smi -l or dmon log); this input "
        "is one reading",
    )


def test_a_slow_link_under_load_is_degraded(read: Any) -> None:
    busy = read(RTX2080_IDLE, gpu_utilization_percent=97.0)
    (finding,) = [f for f in judge(busy).findings if f.code == "pcie-link-degraded"]
    assert finding.title == "GPU 0: PCIe link at Gen1 of Gen3 under load (97 % busy)"
    assert finding.action == "CHECK_MECHANICALS"
    narrow = read(RTX4080_LOAD, gpu_utilization_percent=95.0, pcie_link_width_current=8)
    assert [f.title for f in judge(narrow).findings if f.code == "pcie-link-degraded"] == [
        "GPU 0: PCIe link at x8 of x16 under load (95 % busy)"
    ]


def test_p0_counts_as_load_only_when_the_gpu_is_not_idle(read: Any) -> None:
    unknown = {
        "gpu_utilization_percent": None,
        "encoder_utilization_percent": None,
        "decoder_utilization_percent": None,
        "pcie_link_gen_current": 3,
    }
    at_work = read(H100_LOAD, pstate="P0", clock_event_reasons=(), **unknown)
    assert "pcie-link-degraded" in [f.code for f in judge(at_work).findings]
    idle_p0 = read(H100_LOAD, pstate="P0", clock_event_reasons=("gpu_idle",), **unknown)
    assert judge(idle_p0).findings == ()


def test_an_encoder_job_is_load(read: Any) -> None:
    # the RTX 4080 load capture: ffmpeg on NVENC, 7 % GPU and 72 % encoder utilization
    busy = read(RTX4080_LOAD, pcie_link_gen_current=2)
    assert busy.gpu_utilization_percent == 7 and busy.encoder_utilization_percent == 72
    assert "pcie-link-degraded" in [f.code for f in judge(busy).findings]


# --- memory errors


def test_uncorrectable_ecc(read: Any) -> None:
    (finding,) = judge(read(H100_LOAD, ecc_errors_uncorrected_volatile=3)).findings
    assert (finding.code, finding.severity, finding.action) == (
        "ecc-uncorrectable",
        Severity.CRITICAL,
        "RESET_GPU",
    )
    assert finding.evidence[0].value == 3
    assert check(judge(read(RTX2080_IDLE)), "ecc")[0] is CheckStatus.SKIP  # no ECC on GeForce


def test_retired_pages(read: Any) -> None:
    p100 = read(P100)
    assert (p100.retired_pages_double_bit, p100.retired_pages_pending) == (0, False)
    assert check(judge(p100), "retired-pages")[0] is CheckStatus.PASS
    pending = judge(read(P100, retired_pages_pending=True))
    assert above_info(pending) == ["retired-pages-pending"]
    assert pending.findings[0].action == "RESET_GPU"
    assert above_info(judge(read(P100, retired_pages_double_bit=60))) == ["retired-pages-limit"]
    assert above_info(judge(read(P100, retired_pages_double_bit=59))) == []
    table = judge(read(P100, retired_pages_double_bit=23, retired_pages_single_bit=40))
    (limit,) = [f for f in table.findings if f.code == "retired-pages-limit"]
    assert limit.action == "CONTACT_SUPPORT" and "63 retired pages" in limit.title


def test_row_remapping(read: Any) -> None:
    assert codes(judge(read(H100_LOAD, remapped_rows_pending=True))) == [
        ("row-remap-pending", "warning", 0)
    ]
    (failure,) = judge(read(H100_LOAD, remapped_rows_banks_exhausted=2)).findings
    assert (
        failure.code == "row-remap-failure"
        and "2 memory bank(s) out of spare rows" in failure.title
    )
    assert judge(read(H100_LOAD, sram_threshold_exceeded=True)).findings[0].action == (
        "CONTACT_SUPPORT"
    )


# --- NVLink


def _links(active: list[bool]) -> tuple[NvLinkSample, ...]:
    return tuple(NvLinkSample(link=i, active=a) for i, a in enumerate(active))


def test_catalog_link_counts_are_on_board_links_only() -> None:
    assert board_links("NVIDIA H100 80GB HBM3") == 18  # NVLink4: 900 GB/s over 18 links
    assert board_links("NVIDIA A100-SXM4-40GB") == 12
    assert board_links("Tesla V100-SXM2-16GB") == 6
    assert board_links("NVIDIA B200") == 18  # NVLink5: 1800 GB/s over 18 links
    assert board_links("NVIDIA H100 PCIe") is None  # a bridge, maybe absent
    assert board_links("NVIDIA GeForce RTX 4080 SUPER") is None
    assert board_links("no such GPU") is None


def test_an_inactive_link_among_active_ones_is_down(read: Any) -> None:
    healthy = judge(read(H100_LOAD, nvlinks=_links([True] * 18)))
    assert healthy.findings == () and check(healthy, "nvlink")[0] is CheckStatus.PASS
    down = [True] * 18
    down[7] = False
    (finding,) = judge(read(H100_LOAD, nvlinks=_links(down))).findings
    assert (finding.code, finding.severity) == ("nvlink-down", Severity.CRITICAL)
    assert finding.title == "GPU 0: NVLink 7 down (17 of 18 links active)"


def test_fewer_links_than_the_sku_has(read: Any) -> None:
    (finding,) = judge(read(H100_LOAD, nvlinks=_links([True] * 16))).findings
    assert finding.severity is Severity.CRITICAL and finding.confidence is Confidence.MEDIUM
    assert "16 of 18" in finding.title


def test_no_link_active_is_information_only(read: Any) -> None:
    # one SXM GPU handed to a VM has no active link; so has a node whose fabric never trained
    (finding,) = judge(read(H100_LOAD, nvlinks=_links([False] * 18))).findings
    assert (finding.severity, finding.confidence) == (Severity.INFO, Confidence.LOW)
    assert "fabricmanager" in finding.remedy
    # a PCIe card without a bridge: nothing at all
    assert above_info(judge(read(RTX4080_LOAD, nvlinks=()))) == []
    assert [f.code for f in judge(read(RTX4080_LOAD, nvlinks=())).findings] == ["persistence-off"]


# --- fabric, MIG, memory, persistence, recovery, lost


@pytest.mark.parametrize(
    ("state", "status", "expected"),
    [
        ("completed", "success", None),
        ("not-supported", None, None),
        ("completed", "NVML_ERROR_NOT_READY", ("critical", Confidence.HIGH)),
        ("not-started", None, ("critical", Confidence.HIGH)),
        ("in-progress", None, ("warning", Confidence.MEDIUM)),
    ],
)
def test_fabric_registration(read: Any, state: str, status: str | None, expected: Any) -> None:
    result = judge(read(H100_LOAD, fabric_state=state, fabric_status=status))
    if expected is None:
        assert result.findings == ()
        return
    (finding,) = result.findings
    assert finding.code == "fabric-manager-down"
    assert (finding.severity.value, finding.confidence) == expected


def test_mig(read: Any) -> None:
    a100 = read(A100_MIG)  # the real XML: MIG on, two 3g.20gb instances
    assert a100.mig_mode is True and len(a100.mig_devices or ()) == 2
    assert check(judge(a100), "mig")[0] is CheckStatus.PASS
    empty = judge(read(A100_MIG, mig_devices=()))
    assert "mig-no-instances" in [f.code for f in empty.findings]
    assert check(judge(read(A100_MIG, mig_devices=None)), "mig")[0] is CheckStatus.SKIP


def test_memory_held_on_an_idle_gpu_is_info(read: Any) -> None:
    """A GPU in P8 doing nothing with 96 % of its memory held: a serving engine's pool or a
    forgotten process (tests/data/smi_heldout13: vLLM on an RTX PRO 6000), not a job short of
    memory. Busy, or in P0 between two bursts, it stays a warning."""
    h100 = read(H100_LOAD)
    total = h100.info.memory_total_bytes
    assert total is not None
    held = int(total * 0.96)
    idle = judge(read(H100_LOAD, memory_used_bytes=held, gpu_utilization_percent=0.0, pstate="P8"))
    assert codes(idle) == [("memory-nearly-full", "info", 0)]
    assert "while the GPU is idle (P8, 0 % busy)" in idle.findings[0].title
    paused = judge(
        read(H100_LOAD, memory_used_bytes=held, gpu_utilization_percent=0.0, pstate="P0")
    )
    assert codes(paused) == [("memory-nearly-full", "warning", 0)]
    busy = judge(read(H100_LOAD, memory_used_bytes=held, gpu_utilization_percent=3.0, pstate="P8"))
    assert codes(busy) == [("memory-nearly-full", "warning", 0)]


def test_memory_nearly_full_on_the_gpu_and_on_one_mig_instance(read: Any) -> None:
    h100 = read(H100_LOAD)
    total = h100.info.memory_total_bytes
    assert total is not None
    full = judge(read(H100_LOAD, memory_used_bytes=int(total * 0.96)))
    assert codes(full) == [("memory-nearly-full", "warning", 0)]
    assert "(96 %)" in full.findings[0].title
    a100 = read(A100_MIG)
    first = a100.mig_devices[0]  # type: ignore[index]
    assert first.memory_total_bytes is not None
    filled = dataclasses.replace(first, memory_used_bytes=int(first.memory_total_bytes * 0.99))
    result = judge(dataclasses.replace(a100, mig_devices=(filled, *a100.mig_devices[1:])))
    (finding,) = [f for f in result.findings if f.code == "memory-nearly-full"]
    assert finding.device is not None
    assert (finding.device.mig_profile, finding.device.gpu_instance_id) == ("3g.20gb", 1)


def test_memory_just_over_the_limit_reads_with_the_decimal_that_shows_it(read: Any) -> None:
    """95.4 % used against the 95 % limit (smi_heldout28's RTX 6000 Ada) printed "95 % > 95 %":
    the reading and the limit take the fewest decimals that tell them apart."""
    h100 = read(H100_LOAD)
    total = h100.info.memory_total_bytes
    assert total is not None
    result = judge(read(H100_LOAD, memory_used_bytes=int(total * 0.954)))
    (finding,) = [f for f in result.findings if f.code == "memory-nearly-full"]
    assert "(95.4 %)" in finding.title
    assert finding.evidence[0].detail.startswith("95.4 % > 95.0 % of ")
    wide = judge(read(H100_LOAD, memory_used_bytes=int(total * 0.97)))
    assert wide.findings[0].evidence[0].detail.startswith("97 % > 95 % of ")


def test_persistence_is_judged_on_linux_only(read: Any) -> None:
    assert codes(judge(read(RTX2080_IDLE))) == [("persistence-off", "info", 0)]
    windows = judge(read(WINDOWS_IDLE))  # WDDM prints persistence mode N/A
    assert windows.findings == () and check(windows, "persistence")[0] is CheckStatus.SKIP


@pytest.mark.parametrize(
    ("action", "severity", "bucket"),
    [
        ("reset", "critical", "RESET_GPU"),
        ("reboot", "critical", "RESTART_BM"),
        ("drain-and-reset", "critical", "RESET_GPU"),
        ("drain-p2p", "warning", None),
        # NVML 615's actions: the same bucket as Xid 154 gives them (catalog.xid)
        ("bus-reset", "critical", "RESET_GPU"),
        ("system-reboot", "critical", "RESTART_BM"),
        ("recover-imex-domain", "warning", None),  # no NVIDIA bucket: still a request
        ("unknown-9", "warning", None),  # a newer action than NVML's table
    ],
)
def test_recovery_action(read: Any, action: str, severity: str, bucket: str | None) -> None:
    assert judge(read(H100_LOAD, recovery_action="none")).findings == ()
    (finding,) = judge(read(H100_LOAD, recovery_action=action)).findings
    assert (finding.code, finding.severity.value, finding.action) == (
        "recovery-action-pending",
        severity,
        bucket,
    )
    assert action.replace("-", " ") in finding.title


def test_a_lost_gpu_among_healthy_ones(read: Any) -> None:
    healthy = read(H100_LOAD)
    lost = DeviceSample(
        info=dataclasses.replace(healthy.info, index=1, uuid="GPU-lost"),
        timestamp_s=healthy.timestamp_s,
        state=DeviceState.GPU_LOST,
        error="GPU is lost",
    )
    result = judge(healthy, lost)
    assert codes(result) == [("gpu-lost", "critical", 1)]
    status, detail = check(result, "devices")
    assert status is CheckStatus.FAIL and detail.startswith("GPU 1 is lost")
    assert result.findings[0].device is not None and result.findings[0].device.uuid == "GPU-lost"
    assert result.findings[0].device.host == "host-a"


def test_a_gpu_nvml_may_not_open_is_no_lost_gpu(read: Any) -> None:
    """nvmlDeviceGetHandleByIndex's NVML_ERROR_NO_PERMISSION ("Insufficient Permissions"): the
    GPU answered, this user or container may not open it; any other reason is gpu-lost, medium."""
    healthy = read(H100_LOAD)

    def unopened(reason: str) -> DeviceSample:
        return DeviceSample(
            info=dataclasses.replace(healthy.info, index=1, uuid="nvml-index-1"),
            timestamp_s=healthy.timestamp_s,
            state=DeviceState.ERROR,
            error=f"Unable to determine the device handle for GPU 1: {reason}",
        )

    assert codes(judge(healthy, unopened("Unknown Error"))) == [("gpu-lost", "critical", 1)]
    assert above_info(judge(healthy, unopened("Insufficient Permissions"))) == []


def test_memory_held_on_a_gpu_not_known_idle_stays_a_warning(read: Any) -> None:
    """The idle reading needs both 0 % and P8 or deeper: a P8 whose utilisation was not reported
    (a MIG-enabled GPU prints N/A) may be a GPU between kernels, and a MIG instance's own memory
    is judged apart from the GPU's idleness."""
    h100 = read(H100_LOAD)
    total = h100.info.memory_total_bytes
    assert total is not None
    held = int(total * 0.96)
    unknown = read(H100_LOAD, memory_used_bytes=held, gpu_utilization_percent=None, pstate="P8")
    assert codes(judge(unknown)) == [("memory-nearly-full", "warning", 0)]
    mig = read(A100_MIG)
    assert mig.mig_devices
    first = mig.mig_devices[0]
    assert first.memory_total_bytes is not None
    full = dataclasses.replace(first, memory_used_bytes=int(first.memory_total_bytes * 0.99))
    idle_mig = read(
        A100_MIG,
        mig_devices=(full, *mig.mig_devices[1:]),
        gpu_utilization_percent=0.0,
        pstate="P8",
    )
    assert ("memory-nearly-full", "warning", 0) in codes(judge(idle_mig))


def test_findings_come_most_severe_first_then_by_gpu(read: Any) -> None:
    a = read(H100_LOAD, clock_event_reasons=("sw_thermal_slowdown",))
    b = read(
        H100_LOAD,
        info=dataclasses.replace(a.info, index=1, uuid="GPU-b"),
        ecc_errors_uncorrected_volatile=1,
        persistence_mode=False,
    )
    c = read(
        H100_LOAD,
        info=dataclasses.replace(a.info, index=2, uuid="GPU-c"),
        remapped_rows_pending=True,
    )
    assert codes(judge(c, b, a)) == [
        ("ecc-uncorrectable", "critical", 1),
        ("thermal-slowdown", "warning", 0),
        ("row-remap-pending", "warning", 2),
        ("persistence-off", "info", 1),
    ]
