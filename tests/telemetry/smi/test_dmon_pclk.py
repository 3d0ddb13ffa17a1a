"""`nvidia-smi dmon`'s pclk is the SM clock (and the graphics clock, one domain on these GPUs).

dmon -h: "c - Proc and Mem Clocks": pclk is the processor clock, the clock of the streaming
multiprocessors. Each dmon fixture has a `-q` report of the same GPU in the same state (idle or
under load), whose "Clocks" section prints Graphics and SM: in all 14 pairs both equal dmon's
pclk (300, 2055, 2070, 210, 2805, 345, 1980 MHz). Before, pclk was read as the graphics clock
only, so snapshot and watch (whose clock column is the SM clock) showed none for a dmon capture.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwarden.telemetry.smi import open_smi
from gpuwarden.types.telemetry import DeviceSample
from tests.cli.test_main import run_cli

SMI = "nvidia-smi"


def _dmon_fixtures() -> list[str]:
    """The captures of /work/shared/fixtures/nvidia-smi with a dmon and a -q file each."""
    return [
        f"{system}__{gpu}__{driver}.{state}"
        for system, gpu, driver in (
            ("linux-x86_64", "nvidia-geforce-rtx-2080-super", "595.71.05"),
            ("linux-x86_64", "nvidia-geforce-rtx-2080-super", "610.57.04"),
            ("linux-x86_64", "nvidia-geforce-rtx-4080-super", "595.71.05"),
            ("linux-x86_64", "nvidia-h100-80gb-hbm3", "590.48.01"),
            ("linux-x86_64", "nvidia-h100-mig", "590.48.01"),
            ("windows-x86_64", "nvidia-geforce-rtx-2080-super", "591.86"),
            ("windows-x86_64", "nvidia-geforce-rtx-2080-super", "610.62"),
        )
        for state in ("idle", "load")
    ]


def _gpus(path: Path) -> list[DeviceSample]:
    return [s for s in open_smi(str(path)).read().samples if s.info.mig_parent_uuid is None]


@pytest.mark.parametrize("capture", _dmon_fixtures())
def test_pclk_is_the_sm_clock_the_q_report_of_the_same_state_prints(
    fixtures: Path, capture: str
) -> None:
    dmon = _gpus(fixtures / SMI / f"{capture}.dmon.txt")
    report = _gpus(fixtures / SMI / f"{capture}.q.txt")
    assert [(d.clock_sm_mhz, d.clock_graphics_mhz) for d in dmon] == [
        (q.clock_sm_mhz, q.clock_graphics_mhz) for q in report
    ]
    assert all(d.clock_sm_mhz for d in dmon)


def test_snapshot_json_prints_pclk_as_the_sm_clock(fixtures: Path) -> None:
    """The H100 under load: dmon prints "2619 1980" under "mclk pclk"."""
    path = fixtures / SMI / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.dmon.txt"
    done = run_cli("snapshot", "--backend", "smi", "--from", str(path), "--json")
    assert done.returncode == 0, done.stderr
    (device,) = json.loads(done.stdout)["devices"]
    assert (device["clock_sm_mhz"], device["clock_memory_mhz"]) == (1980.0, 2619.0)
