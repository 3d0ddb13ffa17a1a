"""``SmiBackend``: Snapshots from saved nvidia-smi output, or from running the local binary.

A file is parsed once, when the backend is opened (bad input fails early, naming the file);
``read()`` then hands out its Snapshots in order and repeats the last one. With no source,
each ``read()`` runs ``nvidia-smi -q -x``.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import replace

from gpuwarden.errors import CorruptInputError, EnvironmentProblemError, InputError
from gpuwarden.files import CaptureTooLargeError, decode_text, read_capped
from gpuwarden.telemetry.smi.detect import parse_smi_output
from gpuwarden.telemetry.smi.xml_format import parse_xml
from gpuwarden.types.telemetry import DeviceInfo, Snapshot

NVIDIA_SMI = "nvidia-smi"
LIVE_COMMAND = ("-q", "-x")
DEFAULT_TIMEOUT_S = 30.0  # nvidia-smi -q can take seconds per GPU on a busy 8-GPU node


def read_source_text(source: str) -> tuple[str, float]:
    """The text of a file (or stdin for "-"), cut at MAX_CAPTURE_BYTES, and the time it was
    written."""
    try:
        raw, written = read_capped(source)
    except FileNotFoundError:
        raise CorruptInputError(
            f"{source}: no such file",
            reference="smi-output-not-found",
            hint="pass the path of a saved `nvidia-smi -q -x` output, or no source to run it",
        ) from None
    except OSError as exc:
        raise CorruptInputError(
            f"{source}: cannot be read ({exc.strerror or exc})",
            reference="smi-output-not-found",
            hint="check the path and its permissions",
        ) from None
    except CaptureTooLargeError as exc:
        raise InputError(
            f"{source}: {exc}, too large for an nvidia-smi output",
            reference="smi-output-too-large",
            hint="pass one reading (`nvidia-smi -q -x > smi.xml`), or the newest part of a long "
            "log (a CSV with its header line: `(head -1 log.csv; tail -n 10000 log.csv) > "
            "part.csv`)",
        ) from None
    return decode_text(raw), written


def run_nvidia_smi(args: Sequence[str] = LIVE_COMMAND, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    command = [NVIDIA_SMI, *args]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        raise EnvironmentProblemError(
            "nvidia-smi is not installed or not on PATH",
            reference="nvidia-smi-not-found",
            hint="install the NVIDIA driver (it ships nvidia-smi), or read a saved output: "
            "`nvidia-smi -q -x > smi.xml` on the GPU host, then pass smi.xml",
        ) from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblemError(
            f"`{' '.join(command)}` did not answer within {timeout_s:g} s",
            reference="nvidia-smi-timeout",
            hint="the driver may be hung (check `dmesg` for Xid errors); retry, or reboot the node",
        ) from None
    except OSError as exc:
        raise EnvironmentProblemError(
            f"`{' '.join(command)}` could not be started: {exc}",
            reference="nvidia-smi-not-found",
            hint="check that nvidia-smi is an executable on PATH",
        ) from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or "(no output)").splitlines()[0]
        raise EnvironmentProblemError(
            f"`{' '.join(command)}` failed with exit code {done.returncode}: {said}",
            reference="nvidia-smi-failed",
            hint="nvidia-smi cannot talk to the driver: check that the driver is loaded "
            "(`lsmod | grep nvidia`) and matches the kernel module version",
        )
    return done.stdout


class SmiBackend:
    """The ``smi`` telemetry backend (telemetry.backend.Backend)."""

    name = "smi"
    simulated = False

    def __init__(
        self,
        source: str | None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        query_fields: Sequence[str] | None = None,
    ) -> None:
        """``query_fields``: the columns of a CSV saved with ``noheader`` (parse_smi_output)."""
        self.source = source
        self.timeout_s = timeout_s
        self._snapshots: tuple[Snapshot, ...] = ()
        self._next = 0
        if source is not None:
            text, written = read_source_text(source)
            self._snapshots = tuple(
                parse_smi_output(text, source, written, query_fields=query_fields)
            )

    def snapshots(self) -> tuple[Snapshot, ...]:
        """Every Snapshot of a file source, oldest first (empty for the live binary)."""
        return self._snapshots

    def latest(self) -> Snapshot:
        """The newest reading: the last Snapshot of a file, or a fresh run of the binary."""
        return self._snapshots[-1] if self._snapshots else self._run()

    def devices(self) -> tuple[DeviceInfo, ...]:
        first = self._snapshots[0] if self._snapshots else self._run()
        return tuple(sample.info for sample in first.samples)

    def read(self) -> Snapshot:
        if self.source is None:
            return self._run()
        current = self._snapshots[min(self._next, len(self._snapshots) - 1)]
        self._next += 1
        if self._next > len(self._snapshots):
            # the file's last reading, repeated: what it said (its events) was said once
            return replace(current, events=())
        return current

    def close(self) -> None:
        self._next = 0

    def _run(self) -> Snapshot:
        text = run_nvidia_smi(LIVE_COMMAND, self.timeout_s)
        source = f"{NVIDIA_SMI} {' '.join(LIVE_COMMAND)}"
        return replace(parse_xml(text, source, time.time()), host=socket.gethostname())
