"""Store test data: real captures (see captures.py) turned into snapshots."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpuwarden.types.telemetry import DeviceEvent, DeviceSample, EventKind

from . import captures


@pytest.fixture(scope="session")
def h100_row(fixtures: Path) -> dict[str, str]:
    return captures.query_gpu_rows(fixtures / f"{captures.H100_LOAD}.query-gpu.csv")[0]


@pytest.fixture(scope="session")
def h100_idle_row(fixtures: Path) -> dict[str, str]:
    return captures.query_gpu_rows(fixtures / f"{captures.H100_IDLE}.query-gpu.csv")[0]


@pytest.fixture(scope="session")
def t0(h100_row: dict[str, str]) -> float:
    """The H100 load capture's own timestamp."""
    return captures.capture_timestamp(h100_row)


@pytest.fixture(scope="session")
def rich_samples(fixtures: Path, t0: float) -> tuple[DeviceSample, ...]:
    """Three real devices with every nested kind filled: H100 (+ its compute apps and, from the
    A100 x8 capture, 12 NVLinks), H100 in MIG mode (+ its MIG devices), RTX 4080 SUPER."""
    h100 = captures.h100_samples(fixtures, 1, t0)[0]
    h100 = replace(
        h100,
        nvlinks=captures.nvlinks(fixtures / captures.A100_NVLINK, gpu=0),
        extra={"power.draw.instant": 625.68},  # the capture's power.draw.instant [W]
    )
    mig_row = captures.query_gpu_rows(fixtures / f"{captures.H100_MIG_LOAD}.query-gpu.csv")[0]
    mig = captures.sample_from_row(mig_row, t0 + 0.002)
    mig = replace(
        mig,
        info=replace(mig.info, index=1, uuid=mig.info.uuid[:-1] + "1"),
        mig_devices=captures.mig_devices(fixtures / f"{captures.H100_MIG_LOAD}.table.txt"),
        processes=captures.processes(fixtures / f"{captures.H100_MIG_LOAD}.query-compute-apps.csv"),
    )
    rtx_row = captures.query_gpu_rows(fixtures / f"{captures.RTX4080_LOAD}.query-gpu.csv")[0]
    rtx = captures.sample_from_row(rtx_row, t0 + 0.005)
    rtx = replace(
        rtx,
        info=replace(rtx.info, index=2, uuid=rtx.info.uuid[:-1] + "2"),
        processes=captures.processes(fixtures / f"{captures.RTX4080_LOAD}.query-compute-apps.csv"),
    )
    return (h100, mig, rtx)


@pytest.fixture(scope="session")
def xid_lines(fixtures: Path) -> dict[int, str]:
    """First real kernel-log line per Xid code (fixtures/xid/xid_lines_from_issues.tsv)."""
    rows = captures.query_gpu_rows(fixtures / "xid" / "xid_lines_from_issues.tsv", delimiter="\t")
    lines: dict[int, str] = {}
    for row in rows:
        if row["xid"].isdigit():
            lines.setdefault(int(row["xid"]), row["log_line"])
    return lines


def xid_event(sample: DeviceSample, timestamp_s: float, code: int, line: str) -> DeviceEvent:
    return DeviceEvent(
        kind=EventKind.XID,
        timestamp_s=timestamp_s,
        uuid=sample.info.uuid,
        index=sample.info.index,
        code=code,
        message=line,
    )
