"""The fake NVML read by independent NVML clients (gpustat, nvitop) shows the capture's values.

This checks the fake itself against code we did not write: if gpustat and nvitop, through the
real nvidia-ml-py wrappers, see what nvidia-smi printed, the fake speaks NVML's contract.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.fakes.fake_pynvml import installed
from tests.fakes.fake_pynvml.captures import H100, RTX_4080

MIB = 1 << 20


@pytest.fixture
def fresh_imports() -> Iterator[None]:
    """gpustat/nvitop bind pynvml at import: import them over the fake, forget them after."""

    def forget() -> None:
        for name in [m for m in sys.modules if m.split(".")[0] in ("gpustat", "nvitop")]:
            del sys.modules[name]

    forget()
    yield
    forget()


def test_gpustat_sees_the_capture(fake_host, fresh_imports):
    host = fake_host(H100, RTX_4080)
    with installed(host.module):
        import gpustat

        h100, rtx = gpustat.new_query()
    # query-gpu CSV: memory.used 19818 MiB, power.draw 631.95 W, temperature.gpu 59, util 100 %
    assert (h100.name, h100.memory_used, h100.memory_total) == (
        "NVIDIA H100 80GB HBM3",
        19818,
        81559,
    )
    assert (h100.power_draw, h100.temperature, h100.utilization) == (631, 59, 100)
    assert h100.fan_speed is None  # [N/A]
    assert (rtx.utilization_enc, rtx.fan_speed) == (72, 0)


def test_nvitop_sees_the_capture(fake_host, fresh_imports):
    host = fake_host(H100, RTX_4080)
    with installed(host.module):
        from nvitop import Device

        h100, rtx = Device.all()
        assert h100.memory_used() == 19818 * MIB
        assert h100.power_usage() == 631_950  # mW
        assert (h100.sm_clock(), h100.performance_state()) == (1980, "P0")
        assert rtx.memory_used() == 1474 * MIB
        assert rtx.temperature() == 46


def test_backend_survives_gpustat_patching_pynvml(fake_host, fresh_imports):
    """gpustat replaces pynvml.nvmlDeviceGetMemoryInfo with a one-argument function on import;
    the backend, in the same process, must still read memory v2."""
    host = fake_host(H100)
    with installed(host.module):
        import gpustat  # noqa: F401  (imported for its side effect on the module)

        from gpuwarden.telemetry.nvml import NvmlBackend

        sample = NvmlBackend(host.module).read().samples[0]
    assert sample.memory_used_bytes == 19818 * MIB
    assert sample.memory_reserved_bytes == 479 * MIB
