"""open_backend: each name reaches its backend, lazily; bad combinations are clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpuwarden.errors import (
    EnvironmentProblemError,
    GpuwardenError,
    InvalidConfigError,
    UnknownNameError,
)
from gpuwarden.telemetry.backend import Backend
from gpuwarden.telemetry.open import detect_backend, open_backend
from gpuwarden.telemetry.sim import open_sim
from gpuwarden.telemetry.store import Store


def test_sim_by_default_scenario() -> None:
    backend = open_backend("sim", None, seed=2, gpus=3)
    assert isinstance(backend, Backend)
    snap = backend.read()
    assert backend.name == "sim" and snap.simulated and len(snap.samples) == 3
    assert snap.host == "sim-healthy-training"


def test_smi_file(fixtures: Path) -> None:
    path = fixtures / "nvidia-smi" / "netdata__tesla-p100.xml"
    backend = open_backend("smi", str(path))
    snap = backend.read()
    assert backend.name == "smi" and not backend.simulated
    assert snap.samples[0].info.name.endswith("P100-PCIE-16GB")


def test_dcgm_file(fixtures: Path) -> None:
    path = fixtures / "dcgm" / "datadog-integrations-core__tesla-t4__metrics.prom"
    backend = open_backend("dcgm", str(path))
    snap = backend.read()
    assert backend.name == "dcgm" and not snap.simulated
    # the scrape: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION ... 128996013 (mJ)
    energies = {s.energy_consumed_joules for s in snap.samples}
    assert 128996.013 in energies


def test_replay_of_a_recorded_simulation(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    now = [1_800_000_000.0]
    sim = open_sim("fake-load", clock=lambda: now[0])
    with Store.open(db) as store:
        for _ in range(3):
            now[0] += 1.0
            store.write(sim.read())
    backend = open_backend("replay", str(db))
    try:
        snap = backend.read()
        assert backend.name == "replay" and backend.simulated and snap.simulated
        assert snap.samples[0].sm_active_ratio < 0.05
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("kind", "source", "kw", "reference"),
    [
        ("dcgm", None, {}, "backend-needs-source"),
        ("replay", None, {}, "backend-needs-source"),
        ("nvml", "x.xml", {}, "backend-takes-no-source"),
        ("sim", "x.xml", {}, "backend-takes-no-source"),
        ("smi", None, {"scenario": "fake-load"}, "sim-option-without-sim"),
        ("dcgm", "x", {"gpus": 2}, "sim-option-without-sim"),
        (None, "x.xml", {}, "source-needs-backend"),
    ],
)
def test_bad_combinations(kind: str | None, source: str | None, kw: dict, reference: str) -> None:
    with pytest.raises(InvalidConfigError) as err:
        open_backend(kind, source, **kw)
    assert err.value.reference == reference and err.value.hint


def test_unknown_backend_name() -> None:
    with pytest.raises(UnknownNameError) as err:
        open_backend("nvm", None)
    assert "nvml" in err.value.suggestions


def test_only_the_chosen_backend_is_imported() -> None:
    for name in [m for m in sys.modules if m.startswith("gpuwarden.telemetry.nvml")]:
        del sys.modules[name]
    open_backend("sim", None).read()
    assert "gpuwarden.telemetry.nvml" not in sys.modules


def test_nvml_here_is_an_error_not_a_crash() -> None:
    """This machine has no NVIDIA driver: NVML must fail with a GpuwardenError."""
    with pytest.raises(GpuwardenError):
        open_backend("nvml", None)


def test_detect_without_nvml_or_nvidia_smi() -> None:
    with pytest.raises(EnvironmentProblemError) as err:
        detect_backend(which=lambda name: None)
    assert err.value.reference == "no-gpu-backend"
    assert "NVML:" in err.value.message and "nvidia-smi: not on PATH" in err.value.message


def test_detect_falls_back_to_nvidia_smi_when_it_is_on_path() -> None:
    backend = detect_backend(which=lambda name: "/usr/bin/nvidia-smi")
    assert backend.name == "smi"
