"""record's live status line on a real pseudo-terminal: it keeps the last row, and follows the
terminal when it is resized (the scrolling region and the line move to the new last row)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios
from collections.abc import Iterator

import pytest

from gpuwarden.report import record as report
from gpuwarden.telemetry.open import open_backend
from gpuwarden.types.telemetry import Snapshot


def _resize(fd: int, rows: int, columns: int = 120) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def _drain(fd: int) -> str:
    out = b""
    os.set_blocking(fd, False)
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return out.decode()
        if not chunk:
            return out.decode()
        out += chunk


@pytest.fixture
def terminal() -> Iterator[tuple[int, int]]:
    leader, follower = pty.openpty()
    _resize(follower, 40)
    yield leader, follower
    os.close(leader)
    os.close(follower)


@pytest.fixture
def snapshot() -> Snapshot:
    return open_backend("sim", None, seed=1, gpus=2).read()


def test_the_line_follows_a_resized_terminal(
    terminal: tuple[int, int], snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader, follower = terminal
    monkeypatch.setattr(report, "_REDRAW_EVERY_S", 0.0)
    with open(follower, "w", closefd=False) as stream:
        line = report.LiveLine(stream)
        assert line.enabled
        line.update(snapshot)
        first = _drain(leader)
        assert "\x1b[1;39r" in first and "\x1b[40;1H\x1b[2K" in first

        _resize(follower, 30)  # smaller: row 40 is gone, nothing to clear there
        line.update(snapshot)
        smaller = _drain(leader)
        assert "\x1b[1;29r" in smaller and "\x1b[30;1H\x1b[2K" in smaller
        assert "\x1b[40;1H" not in smaller

        _resize(follower, 50)  # larger: the old line (row 30) is cleared, row 50 reserved
        line.update(snapshot)
        larger = _drain(leader)
        assert larger.index("\x1b[30;1H\x1b[2K") < larger.index("\x1b[1;49r")
        assert "\x1b[50;1H\x1b[2K" in larger

        line.update(snapshot)  # same size: no new region
        assert "r" not in _drain(leader).split("\x1b[50;1H")[0].replace("\x1b7", "")

        _resize(follower, 1)  # one row: the whole screen back, no more line
        line.update(snapshot)
        assert "\x1b[r" in _drain(leader) and not line.enabled
        line.update(snapshot)
        line.close()
        assert _drain(leader) == ""
