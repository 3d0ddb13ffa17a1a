"""Real dcgm-exporter scrapes changed the way scrapes found in the wild differ from them: blob
fields the exporter could not convert, kubectl port-forward chatter in the same terminal, no
FB_TOTAL, board readings only on a MIG GPU's instance series. Values must stay those of the
untouched scrape.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.dcgm import open_dcgm, parse_scrape
from gpuwarden.telemetry.dcgm.scrape import BOARD_FIELDS
from gpuwarden.types.telemetry import EventKind, PodSample

A100 = "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"
T4 = "datadog-integrations-core__tesla-t4__metrics.prom"
MIB = 1 << 20
# what dcgm-exporter writes for a field it cannot print as a number (blog scrape, 535.129.03)
UNCONVERTED = "ERROR - FAILED TO CONVERT TO STRING"


def _lines(fixtures: Path, name: str) -> list[str]:
    return (fixtures / "dcgm" / name).read_text().splitlines()


def _labels(line: str) -> str:
    return line[line.index("{") : line.index("}") + 1]


def test_unconvertible_blob_samples_are_skipped_and_counted(fixtures: Path) -> None:
    lines = _lines(fixtures, A100)
    expected = parse_scrape("\n".join(lines), "a100", 0.0).snapshot
    blob = "DCGM_FI_DEV_VGPU_PER_PROCESS_UTILIZATION"
    edited = [*lines[:3], *(f"{blob}{_labels(lines[0])} {UNCONVERTED}" for _ in range(2))]
    edited += [f"# TYPE {blob} gauge", *lines[3:]]
    snap = parse_scrape("\n".join(edited), "a100", 0.0).snapshot
    assert snap.samples == expected.samples
    (note,) = [e for e in snap.events if e.kind is EventKind.BACKEND_ERROR]
    assert f"2 sample(s) of {blob}" in note.message and note.uuid is None


def test_port_forward_line_is_skipped(fixtures: Path) -> None:
    lines = _lines(fixtures, A100)
    expected = parse_scrape("\n".join(lines), "a100", 0.0).snapshot
    edited = ["Forwarding from 127.0.0.1:9400 -> 9400", "Handling connection for 9400", *lines]
    snap = parse_scrape("\n".join(edited), "a100", 0.0).snapshot
    assert snap.samples == expected.samples
    (note,) = [e.message for e in snap.events if e.kind is EventKind.BACKEND_ERROR]
    assert "skipped 2 line(s)" in note and "line 1" in note


def test_text_that_is_mostly_not_exposition_is_refused(fixtures: Path) -> None:
    with pytest.raises(CorruptInputError, match=r"line 1: not a metric line") as err:
        parse_scrape("Handling connection for 9400\nHandling connection for 9400\n", "pf", 0.0)
    assert err.value.reference == "dcgm-scrape-unreadable"
    sample = _lines(fixtures, A100)[0]
    prose = ["Here is what the exporter printed for our node today"] * 2
    with pytest.raises(CorruptInputError, match="not a metric line"):
        parse_scrape("\n".join([*prose, sample]), "notes.md", 0.0)


def test_a_flawed_sample_is_still_an_error(fixtures: Path) -> None:
    """Noise is skipped; a sample line with a broken value is corruption, named by its line
    (line 7 of the file: the port-forward line comes first)."""
    lines = _lines(fixtures, A100)
    lines[5] = lines[5].rsplit(" ", 1)[0] + " lots"
    with pytest.raises(CorruptInputError, match=r"line 7: DCGM_FI_DEV_TOTAL_ENERGY"):
        parse_scrape("\n".join(["Handling connection for 9400", *lines]), "a100", 0.0)


def test_saved_scrape_says_what_it_skipped_once(fixtures: Path, tmp_path: Path) -> None:
    path = tmp_path / "pf.prom"
    path.write_text("\n".join(["Handling connection for 9400", *_lines(fixtures, A100)]))
    backend = open_dcgm(str(path))
    assert [e.kind for e in backend.read().events] == [EventKind.BACKEND_ERROR]
    assert backend.read().events == ()


def test_memory_total_without_fb_total(fixtures: Path) -> None:
    old, new = parse_scrape("\n".join(_lines(fixtures, T4)), "t4", 0.0).snapshot.samples
    # the driver-460 scrape has FB_USED + FB_FREE only; the 470 one of the same T4 model prints
    # DCGM_FI_DEV_FB_TOTAL 15109: used + free is that total
    assert new.info.memory_total_bytes == 15109 * MIB
    assert old.info.memory_total_bytes == old.memory_used_bytes + old.memory_free_bytes
    assert old.info.memory_total_bytes == new.info.memory_total_bytes
    # with FB_RESERVED, Total = Reserved + Used + Free (NVML memory_v2, nvidia-smi's FB block);
    # 605 MiB is what nvidia-smi -q -x reports reserved on an A100-SXM4-40GB (netdata fixture)
    lines = _lines(fixtures, A100)
    free = next(line for line in lines if line.startswith("DCGM_FI_DEV_FB_FREE"))
    reserved = f"DCGM_FI_DEV_FB_RESERVED{_labels(free)} 605"
    parent = parse_scrape("\n".join([*lines, reserved]), "a100", 0.0).snapshot.samples[0]
    assert parent.memory_reserved_bytes == 605 * MIB
    assert parent.info.memory_total_bytes == (4845 + 35690 + 605) * MIB


def test_board_readings_on_instance_series_belong_to_the_gpu(fixtures: Path) -> None:
    """dcgm-exporter on a GPU in MIG mode may print temperature, power, clocks and energy only
    on the GPU_I_ID series (blog A800 scrape): they are the board's, read back on the GPU."""
    lines = _lines(fixtures, A100)
    original = parse_scrape("\n".join(lines), "a100", 0.0).snapshot.samples[0]
    instance = next(line for line in lines if 'GPU_I_ID="13"' in line)
    board = (
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    )
    moved = [
        line.split("{")[0] + _labels(instance) + " " + line.rsplit(" ", 1)[1]
        if line.startswith(board) and "GPU_I_ID" not in line
        else line
        for line in lines
    ]
    assert moved != lines
    parent, gi = parse_scrape("\n".join(moved), "a100", 0.0).snapshot.samples
    assert gi.info.gpu_instance_id == 13
    lifted = [n for n in BOARD_FIELDS if getattr(original, n) is not None]
    assert len(lifted) == 6
    assert {n: getattr(parent, n) for n in lifted} == {n: getattr(original, n) for n in lifted}
    assert parent.temperature_gpu_celsius == 61 and parent.power_draw_watts == 409.692


H100_MIG_PODS = "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom"


def test_kubernetes_labels_stay_on_the_sample(fixtures: Path) -> None:
    snap = parse_scrape("\n".join(_lines(fixtures, H100_MIG_PODS)), "h100", 0.0).snapshot
    parent, *instances = snap.samples
    assert parent.pods is None  # the pods hold MIG instances, not the whole GPU
    pods = {s.info.gpu_instance_id: s.pods for s in instances}
    assert pods[8] is None
    assert pods[7] == (
        PodSample(
            pod="text-embedding-predictor-00008-deployment-57946f6c67-vdtjl",
            namespace="model-playground-stg",
            container="kserve-container",
        ),
    )
    (tts,) = pods[9] or ()
    assert tts.pod == "tts-predictor-00011-deployment-5554f75554-8j8pl"


def test_a_zero_degree_sensor_is_not_reported(fixtures: Path) -> None:
    """Boards without a memory sensor (GDDR: T4, Ada) publish DCGM_FI_DEV_MEMORY_TEMP 0: it reads
    as not reported, while the A100's real 69 °C stays."""
    lines = _lines(fixtures, A100)
    expected = parse_scrape("\n".join(lines), "a100", 0.0).snapshot
    assert expected.samples[0].temperature_memory_celsius == 69
    edited = [
        f"{line.rsplit(' ', 1)[0]} 0" if line.startswith("DCGM_FI_DEV_MEMORY_TEMP{") else line
        for line in lines
    ]
    snap = parse_scrape("\n".join(edited), "a100", 0.0).snapshot
    assert all(s.temperature_memory_celsius is None for s in snap.samples)
    assert [s.temperature_gpu_celsius for s in snap.samples] == [
        s.temperature_gpu_celsius for s in expected.samples
    ]
