"""doctor asks each of the topo -m, nvlink -e and nvlink -s detectors once per capture.

classify looks for those outputs in a capture's head; what it ruled out of a text it read whole
(``Capture.ruled_out``) is not looked for again when the capture is read. Measured on the code
before (the first test failed on it): an nvidia-smi output (table, -q, dmon, CSV) was asked
``looks_like_topo`` and ``looks_like_nvlink_status`` twice, by classify and again by the reading
(for the topology and NVLink outputs only an nvidia_gpu_exporter capture holds beside its
readings), and an `nvlink -s` listing was asked ``looks_like_nvlink_counters`` twice, by
classify and again for an `nvlink -e` part. What doctor says of every capture is unchanged
(1,278 fixture and held-out inputs, their doctor text, --json and remediate readings, byte for
byte); a text longer than classify's head is still looked through whole (the last test).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuwarden.doctor import captures
from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.telemetry.smi import nvlink_counters, topo

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURES = Path("/work/shared/fixtures")
_DETECTORS = (
    (topo, "looks_like_topo"),
    (topo, "looks_like_nvlink_status"),
    (nvlink_counters, "looks_like_nvlink_counters"),
)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """How many times each detector is asked, wherever doctor asks it from."""
    calls: collections.Counter[str] = collections.Counter()

    def counting(name: str, detector: Callable[[str], bool]) -> Callable[[str], bool]:
        def counted(text: str) -> bool:
            calls[name] += 1
            return detector(text)

        return counted

    for module, name in _DETECTORS:
        wrapper = counting(name, getattr(module, name))
        monkeypatch.setattr(module, name, wrapper)
        monkeypatch.setattr(captures, name, wrapper)
    return calls


@pytest.mark.parametrize(
    "path",
    [
        DATA / "smi_public" / "csv__nvsmi-2__gtx-1050-ti-fan.txt",
        DATA / "smi_public" / "dmon__deepspeech-178__4-gpu__pucvmet.txt",
        DATA / "smi_heldout6" / "q__isaac-sim-guidance-kr__rtx-5080-laptop__580.173.02.txt",
        DATA / "topo_public" / "nvlink__hpe-e-learning__2x-h100-pcie-bridged-indented.txt",
        DATA
        / "nvlink_counters_public"
        / "nvlink-e__brev-node-report__8x-a100-sxm4-535-loop-per-gpu.txt",
    ],
    ids=lambda p: p.name[:40],
)
def test_each_detector_is_asked_once(path: Path, asked: collections.Counter[str]) -> None:
    diagnose_captures([str(path)], DoctorOptions())
    assert asked and set(asked.values()) == {1}


def test_an_exporter_capture_is_asked_for_its_topology_and_links_once(
    asked: collections.Counter[str],
) -> None:
    capture = (
        FIXTURES / "nvidia-smi" / "captures" / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"
    )
    report = diagnose_captures([str(capture)], DoctorOptions())
    assert dict(asked) == {"looks_like_topo": 1, "looks_like_nvlink_status": 1}
    checks = {c.name: c.detail for c in report.checks}
    assert checks["gpu-count"] == "1 GPU(s) reporting, 1 in nvidia-smi topo -m"
    assert checks["nvlink-topology"] == "18 NVLink(s) active, none lost"


def test_a_topology_past_the_head_classify_read_is_still_read(tmp_path: Path) -> None:
    """A -q loop of more than classify's 64 KiB, then `topo -m`: classify saw only -q readings,
    the reading looks through the whole text and finds the topology (as before)."""
    report = DATA / "smi_heldout6" / "q__isaac-sim-guidance-kr__rtx-5080-laptop__580.173.02.txt"
    matrix = next((DATA / "topo_public").glob("topo__*"))
    readings = (report.read_text() + "\n") * 6
    assert len(readings) > 64 << 10
    paste = tmp_path / "paste.txt"
    paste.write_text(
        f"$ nvidia-smi -q -l 5\n{readings}\n$ nvidia-smi topo -m\n{matrix.read_text()}"
    )
    checks = {
        c.name: c.status.value for c in diagnose_captures([str(paste)], DoctorOptions()).checks
    }
    assert checks["nvlink-topology"] == "pass"
    assert checks["gpu-count"] == "fail"  # one GPU reads, the matrix lists more
