"""`gpuwarden export`: a Prometheus endpoint with dcgm-exporter's metric names and labels, and the
health verdicts, from any backend (nvml, smi, dcgm, replay, sim)."""

from __future__ import annotations

import argparse
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from gpuwarden.cli.commands.watch import MAX_WINDOW_S, MIN_INTERVAL_S
from gpuwarden.cli.live_backend import add_live_backend_options, open_live_backend
from gpuwarden.cli.options import bounded_seconds
from gpuwarden.errors import InvalidConfigError
from gpuwarden.export import DEFAULT_LISTEN, KUBELET_SOCKET

if TYPE_CHECKING:
    from gpuwarden.export.service import CollectionLoop

# 1 s, as `watch`: the windowed verdicts (data starvation's sawtooth, fake load, stragglers) need
# several readings per pattern, and Hopper's GPM pillars are averages since the previous reading,
# so a reading a second is what they were written against. dcgm-exporter's 30 s default suits
# scraping only; here a scrape serves the newest reading whatever its interval.
DEFAULT_INTERVAL_S = 1.0


def register(parser: argparse.ArgumentParser) -> None:
    add_live_backend_options(parser)
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where to serve /metrics (default {DEFAULT_LISTEN}; 0.0.0.0:9400 or :9400 for every "
        "interface, port 0 for any free port)",
    )
    parser.add_argument(
        "--interval",
        type=bounded_seconds(MIN_INTERVAL_S, 3600.0),
        default=DEFAULT_INTERVAL_S,
        metavar="SECONDS",
        help="time between readings (default 1: what the windowed health rules need; a scrape "
        "always serves the newest reading, never a backend call)",
    )
    parser.add_argument(
        "--window",
        type=bounded_seconds(1.0, MAX_WINDOW_S),
        default=60.0,
        metavar="SECONDS",
        help="history the windowed health rules judge (default 60)",
    )
    parser.add_argument(
        "--thresholds",
        metavar="FILE",
        help="a TOML file overriding health thresholds (README: verdict codes, health thresholds)",
    )
    parser.add_argument(
        "--web-config-file",
        metavar="FILE",
        help="Prometheus web configuration (YAML): TLS certificate and key, client CA, and "
        "basic_auth_users with bcrypt hashes, as every Prometheus exporter reads it",
    )
    parser.add_argument(
        "--kubernetes",
        action="store_true",
        help="label GPU series with the namespace/pod/container that holds the GPU (kubelet "
        "pod-resources API)",
    )
    parser.add_argument(
        "--kubelet-socket",
        metavar="PATH",
        help=f"with --kubernetes: the pod-resources socket (default {KUBELET_SOCKET})",
    )
    parser.add_argument(
        "--hostname",
        metavar="NAME",
        help="the Hostname label: the node's name (default: $NODE_NAME, which a DaemonSet sets "
        "from spec.nodeName, else this machine's host name; a capture, recording or simulation "
        "keeps its own)",
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="read once (a saved series: all of it), print the exposition to stdout and exit",
    )


def _check(args: argparse.Namespace) -> None:
    if args.kubelet_socket is not None and not args.kubernetes:
        raise InvalidConfigError(
            "--kubelet-socket only applies with --kubernetes",
            reference="kubelet-socket-without-kubernetes",
            hint="add --kubernetes, or drop --kubelet-socket",
        )


@contextmanager
def _stop_on_sigterm(loop: CollectionLoop) -> Iterator[None]:
    """SIGTERM (what Kubernetes sends a pod) ends the loop like Ctrl-C does."""

    def stop(signum: int, frame: Any) -> None:
        loop.stop()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace) -> int:
    from gpuwarden import __version__
    from gpuwarden.doctor.thresholds import load_thresholds
    from gpuwarden.export.prometheus import Exposition
    from gpuwarden.export.server import parse_listen, start_server, stop_server
    from gpuwarden.export.service import (
        CollectionLoop,
        ExporterSite,
        node_name,
        stale_after,
    )
    from gpuwarden.export.state import ExporterState, ExportSettings
    from gpuwarden.export.webconfig import WebConfigSource
    from gpuwarden.report import export as report

    _check(args)
    address = parse_listen(args.listen)
    thresholds = load_thresholds(args.thresholds)
    web = WebConfigSource(args.web_config_file) if args.web_config_file else None
    backend = open_live_backend(args)
    pods = None
    try:
        if args.kubernetes:
            from gpuwarden.export.kubelet import PodResourcesClient

            pods = PodResourcesClient(args.kubelet_socket or KUBELET_SOCKET)
        local = backend.name == "nvml" or (backend.name == "smi" and args.source is None)
        settings = ExportSettings(
            backend=backend.name,
            simulated=backend.simulated,
            hostname=node_name(args.hostname, reads_this_machine=local),
            window_s=args.window,
            stale_after_s=stale_after(args.interval),
        )
        state = ExporterState(settings, thresholds=thresholds)
        exposition = Exposition(state, version=__version__)
        loop = CollectionLoop(
            backend,
            state,
            interval_s=args.interval,
            pods=pods,
            on_collection=exposition.observe_collection,
        )
        loop.poll()
        if args.once:
            loop.read_saved()
            report.print_exposition(exposition.text())
            return 0
        report.start_logging()
        server, thread = start_server(address, ExporterSite(state, exposition), web)
        try:
            snapshot = state.view.snapshot
            active = web.current() if web is not None else None
            scheme = "https" if active is not None and active.context is not None else "http"
            report.print_serving(
                url=f"{scheme}://{server.bound}/metrics",
                backend=backend.name,
                simulated=backend.simulated,
                interval_s=args.interval,
                devices=0
                if snapshot is None
                else sum(1 for s in snapshot.samples if s.info.mig_parent_uuid is None),
                basic_auth=active is not None and active.auth is not None,
                kubernetes=pods is not None,
            )
            with _stop_on_sigterm(loop):
                loop.run()
        except KeyboardInterrupt:
            pass  # Ctrl-C is how a server ends
        finally:
            stop_server(server, thread)
    finally:
        backend.close()
        if pods is not None:
            pods.close()
    return 0
