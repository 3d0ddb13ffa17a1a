"""The collection loop and what the node is called: NODE_NAME over the pod's host name, a backend
that fails mid-run, /health."""

from __future__ import annotations

from tests.export.helpers import read_scrape

from gpuwarden.errors import EnvironmentProblemError
from gpuwarden.export.prometheus import Exposition
from gpuwarden.export.service import CollectionLoop, ExporterSite, node_name, stale_after
from gpuwarden.export.state import ExporterState, ExportSettings
from gpuwarden.telemetry.open import open_backend
from gpuwarden.types.telemetry import DeviceInfo, Snapshot


def test_the_hostname_label_is_the_nodes_name():
    pod_name = lambda: "gpuwarden-exporter-7d9f8"  # noqa: E731 - what gethostname() is in a pod
    node = {"NODE_NAME": "gpu-node-12"}
    assert (
        node_name(None, reads_this_machine=True, environ=node, gethostname=pod_name)
        == "gpu-node-12"
    )
    assert node_name(None, reads_this_machine=True, environ={}, gethostname=pod_name) == pod_name()
    assert (
        node_name("rack3-n4", reads_this_machine=True, environ=node, gethostname=pod_name)
        == "rack3-n4"
    )
    # a capture, a recording, a dcgm scrape, the simulator: their own host, not ours
    assert node_name(None, reads_this_machine=False, environ=node, gethostname=pod_name) is None


def test_readings_go_stale_after_three_intervals_and_never_before_ten_seconds():
    assert stale_after(1.0) == 10.0
    assert stale_after(30.0) == 90.0


class Flaky:
    """The sim backend, failing from the second read on (a driver that went away)."""

    def __init__(self, clock) -> None:
        self.inner = open_backend("sim", gpus=2, clock=clock)
        self.name, self.simulated = self.inner.name, self.inner.simulated
        self.reads = 0

    def devices(self) -> tuple[DeviceInfo, ...]:
        return self.inner.devices()

    def read(self) -> Snapshot:
        self.reads += 1
        if self.reads > 1:
            raise EnvironmentProblemError(
                "NVML: Driver Not Loaded", reference="nvml-driver-not-loaded"
            )
        return self.inner.read()

    def close(self) -> None:
        self.inner.close()


def test_a_backend_that_fails_mid_run_is_counted_and_goes_stale():
    now = [1000.0]
    clock = lambda: now[0]  # noqa: E731
    backend = Flaky(clock)
    state = ExporterState(ExportSettings(backend="sim", simulated=True, hostname=None), clock=clock)
    exposition = Exposition(
        state, version="t", clock=clock, wall_clock=clock, process_metrics=False
    )
    loop = CollectionLoop(backend, state, interval_s=1.0, clock=clock)
    site = ExporterSite(state, exposition, clock=clock)
    assert site.health() == (False, "no reading yet")
    loop.poll()
    assert site.health()[0]
    for _ in range(3):
        now[0] += 1.0
        loop.poll()
    scrape = read_scrape(exposition.text())
    assert scrape.one("gpuwarden_collection_errors_total", backend="sim") == 3
    assert scrape.one("gpuwarden_collections_total", backend="sim") == 4
    assert len(scrape.series("DCGM_FI_DEV_GPU_TEMP")) == 2  # the last reading, 3 s old
    now[0] += 10.0
    stale = read_scrape(exposition.text())
    assert stale.series("DCGM_FI_DEV_GPU_TEMP") == []
    assert stale.one("gpuwarden_reading_age_seconds") == 13.0
    healthy, line = site.health()
    assert not healthy and line.startswith("stale")
