"""The health readings (T.Limit margin and limits, SRAM threshold, exhausted remap banks, recovery
action, fabric) from every nvidia-smi format, with the values the captures print.

Expected values are read off the fixture named in each test (the comment quotes the line).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import cells, open_smi, parse_smi_output
from gpuwarden.types.telemetry import DeviceSample

SMI = "nvidia-smi"
H100 = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
H100_MIG = "linux-x86_64__nvidia-h100-mig__590.48.01"
RTX_2080 = "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05"
RTX_4080 = "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05"
RTX_2080_610 = "linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04"
HEALTH = (
    "temperature_margin_celsius",
    "temperature_gpu_max_celsius",
    "temperature_slowdown_celsius",
    "temperature_shutdown_celsius",
    "sram_threshold_exceeded",
    "remapped_rows_banks_exhausted",
    "recovery_action",
    "fabric_state",
    "fabric_status",
)


def _sample(fixtures: Path, name: str) -> DeviceSample:
    return open_smi(str(fixtures / SMI / name)).read().samples[0]


def _health(sample: DeviceSample) -> dict[str, object]:
    return {name: getattr(sample, name) for name in HEALTH}


@pytest.mark.parametrize(
    ("state", "temperature", "margin"),
    [("idle", 41, 46), ("load", 59, 26)],  # "GPU Current Temp : 59 C", "GPU T.Limit Temp : 26 C"
)
def test_h100_q_text(fixtures: Path, state: str, temperature: int, margin: int) -> None:
    s = _sample(fixtures, f"{H100}.{state}.q.txt")
    assert s.temperature_gpu_celsius == temperature
    assert s.extra.get("temperature_tlimit_margin_celsius") is None  # typed, not kept twice
    # "GPU Shutdown T.Limit Temp : -8 C", "GPU Slowdown T.Limit Temp : -2 C": margins at which
    # the GPU acts, 8 and 2 °C past its max operating temperature (current + margin)
    assert _health(s) == {
        "temperature_margin_celsius": margin,
        "temperature_gpu_max_celsius": temperature + margin,
        "temperature_slowdown_celsius": temperature + margin + 2,
        "temperature_shutdown_celsius": temperature + margin + 8,
        "sram_threshold_exceeded": False,  # "SRAM Threshold Exceeded : No"
        "remapped_rows_banks_exhausted": 0,  # "None : 0 bank(s)"
        "recovery_action": "none",  # "GPU Recovery Action : None"
        "fabric_state": "completed",  # Fabric "State : Completed"
        "fabric_status": "success",  # "Status : Success"
    }
    # "Memory Max Operating T.Limit Temp : 0 C" is a margin too, with no memory margin to
    # turn it into degrees
    assert s.temperature_memory_max_celsius is None


def test_h100_csv_says_what_q_text_says(fixtures: Path) -> None:
    """The query-gpu CSV of the same capture: temperature.gpu.tlimit 26, gpu_recovery_action
    None, ...sram.thresholdExceeded No, remapped_rows.histogram.none 0, fabric.state Completed,
    fabric.status Success; it prints no threshold, so only the max operating is derived."""
    csv = _sample(fixtures, f"{H100}.load.query-gpu.csv")
    q = _sample(fixtures, f"{H100}.load.q.txt")
    assert "temperature_tlimit_margin_celsius" not in csv.extra
    for name in HEALTH:
        if name in ("temperature_slowdown_celsius", "temperature_shutdown_celsius"):
            assert getattr(csv, name) is None, name
        else:
            assert getattr(csv, name) == getattr(q, name), name
    assert csv.temperature_gpu_max_celsius == 85


def test_h100_mig_remap_banks_only_in_the_csv(fixtures: Path) -> None:
    """In MIG mode -q prints "Remapped Rows : N/A" while the CSV still has the histogram (2560,
    0, 0, 0, 0): each format says what it printed."""
    q = _sample(fixtures, f"{H100_MIG}.idle.q.txt")
    csv = _sample(fixtures, f"{H100_MIG}.idle.query-gpu.csv")
    assert q.remapped_rows_banks_exhausted is None and q.remapped_rows_correctable is None
    assert csv.remapped_rows_banks_exhausted == 0
    assert (q.temperature_margin_celsius, csv.temperature_margin_celsius) == (45, 45)
    assert q.fabric_state == csv.fabric_state == "completed"


@pytest.mark.parametrize(
    ("stem", "limits"),
    [
        # "GPU Shutdown Temp : 100 C", "GPU Slowdown Temp : 97 C", "GPU Max Operating Temp : 89 C"
        (RTX_2080, (89, 97, 100)),
        (RTX_2080_610, (89, 97, 100)),  # R610: "GPU Current T.Limit Temp : N/A"
        (RTX_4080, (90, 96, 101)),
    ],
)
def test_consumer_cards_print_absolute_limits(
    fixtures: Path, stem: str, limits: tuple[int, int, int]
) -> None:
    s = _sample(fixtures, f"{stem}.idle.q.txt")
    got = (
        s.temperature_gpu_max_celsius,
        s.temperature_slowdown_celsius,
        s.temperature_shutdown_celsius,
    )
    assert got == limits
    assert s.temperature_margin_celsius is None  # "GPU T.Limit Temp : N/A"
    assert s.temperature_memory_max_celsius is None  # "Memory Max Operating Temp : N/A"
    assert s.recovery_action == "none"
    # Fabric "State : N/A", "SRAM Threshold Exceeded : N/A", "Remapped Rows : N/A"
    assert (s.fabric_state, s.fabric_status, s.sram_threshold_exceeded) == (None, None, None)
    assert s.remapped_rows_banks_exhausted is None


def test_xml_v11_absolute_thresholds(fixtures: Path) -> None:
    a100 = _sample(fixtures, "netdata__a100-sxm4-mig.xml")
    # gpu_temp_max_gpu_threshold 85 C, gpu_temp_max_mem_threshold 95 C, slow 89, max 92
    assert a100.temperature_gpu_max_celsius == 85
    assert a100.temperature_memory_max_celsius == 95
    assert (a100.temperature_slowdown_celsius, a100.temperature_shutdown_celsius) == (89, 92)
    # nvsmi_device_v11 has no T.Limit, recovery action, fabric or histogram element
    assert a100.temperature_margin_celsius is None
    assert (a100.recovery_action, a100.fabric_state, a100.remapped_rows_banks_exhausted) == (
        None,
        None,
        None,
    )
    p100 = _sample(fixtures, "netdata__tesla-p100.xml")
    assert p100.temperature_gpu_max_celsius is None  # "N/A"
    assert p100.temperature_slowdown_celsius == 82


def _v12(fixtures: Path) -> str:
    """The RTX 3060 XML with the temperature block, recovery action, fabric, SRAM flag and remap
    histogram of nvsmi_device_v12 documents (element names as driver 555+ prints them; the
    T.Limit values are an Ada card's: gpu_temp_tlimit 39, max -5, slow -2, max_gpu 0)."""
    text = (fixtures / SMI / "netdata__rtx-3060.xml").read_text()
    start, end = text.index("<temperature>"), text.index("</temperature>")
    temperature = (
        "<temperature><gpu_temp>45 C</gpu_temp><gpu_temp_tlimit>39 C</gpu_temp_tlimit>"
        "<gpu_temp_max_tlimit_threshold>-5 C</gpu_temp_max_tlimit_threshold>"
        "<gpu_temp_slow_tlimit_threshold>-2 C</gpu_temp_slow_tlimit_threshold>"
        "<gpu_temp_max_gpu_tlimit_threshold>0 C</gpu_temp_max_gpu_tlimit_threshold>"
        "<gpu_target_temperature>N/A</gpu_target_temperature><memory_temp>N/A</memory_temp>"
        "<gpu_temp_max_mem_tlimit_threshold>N/A</gpu_temp_max_mem_tlimit_threshold>"
    )
    health = (
        "<gpu_recovery_action>Drain and Reset</gpu_recovery_action>"
        "<fabric><state>In Progress</state><status>N/A</status></fabric>"
        "<remapped_rows><remapped_row_corr>0</remapped_row_corr>"
        "<row_remapper_histogram><row_remapper_histogram_max>93 bank(s)"
        "</row_remapper_histogram_max><row_remapper_histogram_none>3 bank(s)"
        "</row_remapper_histogram_none></row_remapper_histogram></remapped_rows>"
        "<ecc_errors><aggregate><sram_threshold_exceeded>Yes</sram_threshold_exceeded>"
        "</aggregate></ecc_errors>"
    )
    text = text[:start] + temperature + text[end:]
    text = text.replace("<remapped_rows>N/A</remapped_rows>", "")
    return text.replace("<temperature>", health + "<temperature>", 1)


def test_xml_v12_tlimit_elements_are_margins(fixtures: Path) -> None:
    (snap,) = parse_smi_output(_v12(fixtures), "v12.xml", 0.0)
    s = snap.samples[0]
    assert s.temperature_margin_celsius == 39
    assert s.temperature_gpu_max_celsius == 45 + 39
    assert s.temperature_slowdown_celsius == 45 + 39 + 2
    assert s.temperature_shutdown_celsius == 45 + 39 + 5
    assert s.temperature_memory_max_celsius is None
    assert s.recovery_action == "drain-and-reset"
    assert (s.fabric_state, s.fabric_status) == ("in-progress", None)
    assert s.remapped_rows_banks_exhausted == 3
    assert s.sram_threshold_exceeded is True


def test_q_text_unhealthy_values(fixtures: Path) -> None:
    """The H100 capture with the values a failing GPU prints in the same lines."""
    text = (fixtures / SMI / f"{H100}.load.q.txt").read_text()
    edits = {
        "SRAM Threshold Exceeded                    : No": "SRAM Threshold Exceeded : Yes",
        "None                                       : 0 bank(s)": "None : 4 bank(s)",
        "GPU Recovery Action                                : None": "GPU Recovery Action : Reset",
        "State                                          : Completed": "State : Completed",
        "Status                                         : Success": "Status : Timeout",
        "GPU T.Limit Temp                               : 26 C": "GPU T.Limit Temp : -3 C",
    }
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    (snap,) = parse_smi_output(text, "failing.q.txt", 0.0)
    s = snap.samples[0]
    assert s.sram_threshold_exceeded is True
    assert s.remapped_rows_banks_exhausted == 4
    assert s.recovery_action == "reset"
    assert (s.fabric_state, s.fabric_status) == ("completed", "Timeout")
    assert s.temperature_margin_celsius == -3  # 3 °C over the max operating temperature
    assert s.temperature_slowdown_celsius == 59 - 3 + 2


@pytest.mark.parametrize(
    ("cell", "action"),
    [
        ("None", "none"),
        ("Reset", "reset"),
        ("GPU Reset", "reset"),
        ("Node Reboot", "reboot"),
        ("Drain P2P", "drain-p2p"),
        ("Drain and Reset", "drain-and-reset"),
        ("Recover IMEX Domain", "recover-imex-domain"),
        ("Something New", "something-new"),  # a newer driver's action stays visible
        ("N/A", None),
        ("[N/A]", None),
        ("[Not Supported]", None),
        ("[Unknown Error]", None),
    ],
)
def test_recovery_action_spellings(cell: str, action: str | None) -> None:
    assert cells.to_recovery_action(cell) == action


@pytest.mark.parametrize(
    ("state", "status", "want"),
    [
        ("Completed", "Success", ("completed", "success")),
        ("In Progress", "N/A", ("in-progress", None)),
        ("Not Started", "N/A", ("not-started", None)),
        ("Not Supported", "N/A", ("not-supported", None)),  # NVML state 0, not an error
        ("[Not Supported]", "[Not Supported]", (None, None)),  # the query failed
        ("Completed", "Unknown Error", ("completed", "Unknown Error")),
    ],
)
def test_fabric_spellings(state: str, status: str, want: tuple[str | None, str | None]) -> None:
    assert (cells.to_fabric_state(state), cells.to_fabric_status(status)) == want


@pytest.mark.parametrize(
    "line",
    ["GPU T.Limit Temp                               : 26 C", "GPU Slowdown T.Limit Temp"],
)
def test_unreadable_tlimit_names_its_line(fixtures: Path, line: str) -> None:
    text = (fixtures / SMI / f"{H100}.load.q.txt").read_text()
    number = next(i for i, ln in enumerate(text.splitlines(), start=1) if line in ln)
    lines = text.splitlines()
    lines[number - 1] = lines[number - 1].replace(" C", " degrees C").replace("-2", "minus 2")
    with pytest.raises(CorruptInputError, match=rf"bad\.q\.txt, line {number}: Temperature"):
        parse_smi_output("\n".join(lines), "bad.q.txt", 0.0)
