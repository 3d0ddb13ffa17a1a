"""vGPU guest licensing through NVML (brief h38b): the real nvidia-ml-py over the fake library.

A vGPU guest answers nvmlDeviceGetGridLicensableFeatures_v4 (featureState non-zero = licensed,
featureEnabled = the feature its vGPU type enables) and nvmlDeviceGetVirtualizationMode = VGPU;
bare metal answers NOT_SUPPORTED (the fake's default for every capture) and old drivers lack the
function. The state lands in DeviceSample.vgpu_license_status and the ``vgpu-license`` rule judges
it as it judges nvidia-smi's "License Status"."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.evaluate import evaluate_snapshot
from gpuwarden.telemetry.nvml import NvmlBackend
from gpuwarden.telemetry.nvml.vgpu import license_state
from gpuwarden.types.health import Severity
from gpuwarden.types.telemetry import Snapshot
from tests.fakes.fake_pynvml import FakeGpu, FakeGridFeature
from tests.fakes.fake_pynvml.captures import A100_MIG_XML, H100, P100_XML, RTX_2080, RTX_4080

_NOT_SUPPORTED, _FUNCTION_NOT_FOUND = 3, 13
_BARE, _PASSTHROUGH, _GUEST, _HOST = 0, 1, 2, 3  # nvmlGpuVirtualizationMode_t
_COMPUTE, _RTX = 4, 2  # nvmlGridLicenseFeatureCode_t
_VCS = "NVIDIA Virtual Compute Server"


def _guest(gpu: FakeGpu, *, licensed: bool, mode: int = _GUEST) -> None:
    """Make a fake GPU a vGPU guest whose Compute Server feature is (not) licensed; the RTX
    workstation feature is listed but not enabled, as on a C-series vGPU type."""
    gpu.virtualization_mode = mode
    gpu.grid_features = (
        FakeGridFeature(_RTX, "NVIDIA RTX Virtual Workstation", licensed=False, enabled=False),
        FakeGridFeature(_COMPUTE, _VCS, licensed=licensed),
    )


def _snapshot(host: Any, reads: int = 1, every_s: float = 30.0) -> Snapshot:
    backend = NvmlBackend(host.module, clock=host.clock, settings_every_s=every_s)
    try:
        for _ in range(reads - 1):
            backend.read()
            host.clock.advance(every_s)
        return backend.read()
    finally:
        backend.close()


def _vgpu_findings(snap: Snapshot) -> list[Any]:
    return [f for f in evaluate_snapshot(snap).findings if f.code == "vgpu-unlicensed"]


@pytest.mark.parametrize("capture", [H100, RTX_4080, RTX_2080, P100_XML, A100_MIG_XML])
def test_bare_metal_captures_report_no_license_state(fake_host: Any, capture: str) -> None:
    """Every capture is bare metal: NOT_SUPPORTED -> None, no finding (no behaviour change)."""
    snap = _snapshot(fake_host(capture))
    assert [s.vgpu_license_status for s in snap.samples] == [None] * len(snap.samples)
    assert _vgpu_findings(snap) == []


def test_a_licensed_guest_reads_licensed_and_is_not_judged(fake_host: Any) -> None:
    host = fake_host(H100)
    _guest(host.gpus[0], licensed=True)
    snap = _snapshot(host)
    assert snap.samples[0].vgpu_license_status == "licensed"
    assert _vgpu_findings(snap) == []


def test_an_unlicensed_guest_fires_the_rule_once_on_its_gpu(fake_host: Any) -> None:
    """Unlicensed (restricted or still in its grace period: the guest call cannot tell, NVML's
    restricted/unrestricted split is the host's nvmlVgpuInstanceGetLicenseInfo) -> "unlicensed",
    one warning on the guest GPU, none on the bare-metal one beside it."""
    host = fake_host(H100, RTX_4080)
    _guest(host.gpus[1], licensed=False)
    snap = _snapshot(host, reads=3)
    assert [s.vgpu_license_status for s in snap.samples] == [None, "unlicensed"]
    (finding,) = _vgpu_findings(snap)
    assert finding.severity is Severity.WARNING
    assert finding.device is not None and finding.device.index == 1
    assert any(
        e.field == "vgpu_license_status" and e.value == "unlicensed" for e in finding.evidence
    )


def test_a_licence_granted_mid_run_is_read_with_the_settings(fake_host: Any) -> None:
    host = fake_host(H100)
    _guest(host.gpus[0], licensed=False)
    backend = NvmlBackend(host.module, clock=host.clock, settings_every_s=30.0)
    try:
        assert backend.read().samples[0].vgpu_license_status == "unlicensed"
        _guest(host.gpus[0], licensed=True)
        host.clock.advance(31.0)
        assert backend.read().samples[0].vgpu_license_status == "licensed"
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("mode", "licensed", "state"),
    [
        (_PASSTHROUGH, True, "licensed"),
        (_PASSTHROUGH, False, None),  # NVIDIA Virtual Applications: no licence asked for
        (_BARE, False, None),  # licensing answered on bare metal: nothing to judge
        (_HOST, False, None),  # a hypervisor host's GPU is not a guest
    ],
)
def test_outside_a_vgpu_guest_a_zero_state_is_no_verdict(
    fake_host: Any, mode: int, licensed: bool, state: str | None
) -> None:
    host = fake_host(H100)
    _guest(host.gpus[0], licensed=licensed, mode=mode)
    snap = _snapshot(host)
    assert snap.samples[0].vgpu_license_status == state
    assert _vgpu_findings(snap) == []


@pytest.mark.parametrize("code", [_NOT_SUPPORTED, _FUNCTION_NOT_FOUND])
def test_a_driver_that_does_not_answer_reports_none(fake_host: Any, code: int) -> None:
    host = fake_host(H100)
    _guest(host.gpus[0], licensed=False)
    host.gpus[0].fail["nvmlDeviceGetGridLicensableFeatures_v4"] = code
    snap = _snapshot(host)
    assert snap.samples[0].vgpu_license_status is None
    assert _vgpu_findings(snap) == []


def test_no_virtualization_mode_decides_nothing_about_an_unlicensed_feature(
    fake_host: Any,
) -> None:
    host = fake_host(H100)
    _guest(host.gpus[0], licensed=False)
    host.gpus[0].fail["nvmlDeviceGetVirtualizationMode"] = _NOT_SUPPORTED
    assert _snapshot(host).samples[0].vgpu_license_status is None


def _features(entries: list[tuple[int, int]], supported: int, count: int) -> Any:
    features = pynvml.c_nvmlGridLicensableFeatures_v4_t()
    features.isGridLicenseSupported = supported
    features.licensableFeaturesCount = count
    for slot, (state, enabled) in zip(features.gridLicensableFeatures, entries, strict=False):
        slot.featureState, slot.featureEnabled = state, enabled
    return features


_U32 = st.integers(0, 2**32 - 1)


@settings(max_examples=80, deadline=None)
@given(
    entries=st.lists(st.tuples(_U32, _U32), max_size=3),
    supported=st.integers(-(2**31), 2**31 - 1),
    count=_U32,
    mode=st.one_of(st.none(), _U32),
)
def test_any_struct_reads_as_one_of_the_states(
    entries: list[tuple[int, int]], supported: int, count: int, mode: int | None
) -> None:
    """Whatever a driver fills (a count past the array, unknown modes), the reading is a state
    the rule knows or None, and "unlicensed" only ever inside a vGPU guest."""
    state = license_state(_features(entries, supported, count), mode)
    assert state in (None, "licensed", "unlicensed")
    if state == "unlicensed":
        assert mode == _GUEST and supported != 0
