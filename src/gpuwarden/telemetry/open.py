"""Open a backend by name, importing only the one asked for (nvml needs an extra, sim none)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence

from gpuwarden.errors import (
    EnvironmentProblemError,
    GpuwardenError,
    InvalidConfigError,
    UnknownNameError,
)
from gpuwarden.telemetry.backend import Backend

BACKENDS = ("nvml", "smi", "dcgm", "replay", "sim")
DEFAULT_SCENARIO = "healthy-training"
_NO_BACKEND_HINT = (
    "on a machine without an NVIDIA driver, read a capture or simulate: "
    "--backend smi --from FILE (nvidia-smi -q -x / --query-gpu output), "
    "--backend dcgm --from URL (a dcgm-exporter /metrics endpoint or a saved scrape), "
    "--backend sim [--scenario NAME]"
)


def _needs_source(kind: str, source: str | None) -> str:
    if source is None:
        what = {"dcgm": "a dcgm-exporter URL or saved scrape", "replay": "a recorded .db file"}
        raise InvalidConfigError(
            f"--backend {kind} needs --from {what[kind]}",
            reference="backend-needs-source",
            hint=f"e.g. --backend {kind} --from "
            + ("http://localhost:9400/metrics" if kind == "dcgm" else "telemetry.db"),
        )
    return source


def _no_source(kind: str, source: str | None) -> None:
    if source is not None:
        raise InvalidConfigError(
            f"--backend {kind} reads the local GPUs and takes no --from ({source!r} given)",
            reference="backend-takes-no-source",
            hint="drop --from, or use --backend smi --from FILE to read a saved nvidia-smi output",
        )


def open_backend(
    kind: str | None,
    source: str | None = None,
    *,
    scenario: str | None = None,
    seed: int = 0,
    gpus: int | None = None,
    clock: Callable[[], float] = time.time,
    sim_speed: float = 1.0,
    query_fields: Sequence[str] | None = None,
) -> Backend:
    """The backend ``kind`` (one of ``BACKENDS``; None = detect: nvml, else nvidia-smi).

    ``source``: file or URL for smi/dcgm, the database for replay. ``scenario``/``seed``/``gpus``
    configure sim (and are refused for the others), as do ``clock`` and ``sim_speed``.
    ``query_fields``: the columns of a saved header-less nvidia-smi CSV (smi with a source only)."""
    if query_fields is not None and (kind != "smi" or source is None):
        raise InvalidConfigError(
            "--query-fields names the columns of a saved nvidia-smi CSV",
            reference="query-fields-without-smi-file",
            hint="use it with --backend smi --from FILE (or '-' for stdin)",
        )
    if kind is None:
        if source is not None:
            raise InvalidConfigError(
                f"--from {source!r} needs --backend (smi, dcgm or replay)",
                reference="source-needs-backend",
                hint="e.g. --backend smi --from nvidia-smi.xml",
            )
        return detect_backend()
    if kind != "sim" and (scenario is not None or gpus is not None):
        raise InvalidConfigError(
            f"--scenario and --gpus only apply to --backend sim, not {kind!r}",
            reference="sim-option-without-sim",
            hint="add --backend sim, or drop --scenario/--gpus",
        )
    if kind == "sim":
        from gpuwarden.telemetry.sim import open_sim

        if source is not None:
            raise InvalidConfigError(
                "--backend sim simulates and reads no --from",
                reference="backend-takes-no-source",
                hint="pick a scenario with --scenario NAME instead",
            )
        return open_sim(
            scenario or DEFAULT_SCENARIO, gpus=gpus, seed=seed, clock=clock, speed=sim_speed
        )
    if kind == "nvml":
        _no_source(kind, source)
        from gpuwarden.telemetry.nvml import open_nvml

        return open_nvml()
    if kind == "smi":
        from gpuwarden.telemetry.smi import open_smi

        return open_smi(source, query_fields=query_fields)
    if kind == "dcgm":
        from gpuwarden.telemetry.dcgm import open_dcgm

        return open_dcgm(_needs_source(kind, source))
    if kind == "replay":
        from gpuwarden.telemetry.replay import open_replay

        return open_replay(_needs_source(kind, source))
    import difflib

    raise UnknownNameError(
        "backend",
        kind,
        difflib.get_close_matches(kind, BACKENDS, n=2),
        reference="unknown-backend",
        hint=f"use one of: {', '.join(BACKENDS)}",
    )


def detect_backend(
    *,
    which: Callable[[str], str | None] = shutil.which,
) -> Backend:
    """NVML if it initialises, else nvidia-smi if it is on PATH, else ``no-gpu-backend``."""
    reasons: list[str] = []
    try:
        from gpuwarden.telemetry.nvml import open_nvml

        return open_nvml()
    except GpuwardenError as exc:
        reasons.append(f"NVML: {exc.message}")
    except ImportError as exc:  # a broken install must not hide nvidia-smi
        reasons.append(f"NVML: the backend cannot be loaded ({exc})")
    if which("nvidia-smi"):
        from gpuwarden.telemetry.smi import open_smi

        return open_smi(None)
    reasons.append("nvidia-smi: not on PATH")
    raise EnvironmentProblemError(
        "no GPU backend available here (" + "; ".join(reasons) + ")",
        reference="no-gpu-backend",
        hint=_NO_BACKEND_HINT,
    )
