"""`gpuwarden export --kubernetes --kubelet-socket PATH` given a path that is no socket: the
directory the DaemonSet mounts (the likeliest mistake), a regular file, a name too long. Refused
at start, exit 2 naming the path, instead of an exporter that runs without pod labels warning
"List failed" at every collection."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.cli.main import main

pytest.importorskip("grpc")


def _export(capsys: pytest.CaptureFixture[str], socket: str) -> tuple[int, str]:
    code = main(
        ["export", "--backend", "sim", "--once", "--kubernetes", "--kubelet-socket", socket]
    )
    return code, capsys.readouterr().err


def _error(err: str) -> tuple[str, str, str]:
    lines = err.splitlines()
    assert lines[0].startswith("error: ") and lines[-1].startswith("hint: "), lines
    return lines[0].removeprefix("error: "), " ".join(lines[1:-1]), lines[-1]


def test_the_mounted_directory_is_named_with_the_socket_in_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before: exit 0 and 'pod attribution unavailable ... connect failed' on every reading."""
    code, err = _export(capsys, str(tmp_path))
    reference, message, hint = _error(err)
    assert (code, reference) == (2, "kubelet-socket-invalid")
    assert "is a directory" in message and str(tmp_path / "kubelet.sock") in hint


def test_a_regular_file_is_no_socket(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "kubelet.sock"
    path.write_text("")
    code, err = _export(capsys, str(path))
    reference, message, _ = _error(err)
    assert (code, reference) == (2, "kubelet-socket-invalid") and "not a unix socket" in message


def test_a_name_too_long_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _export(capsys, "/tmp/" + "s" * 300 + "/kubelet.sock")
    reference, message, _ = _error(err)
    assert (code, reference) == (2, "kubelet-socket-invalid") and "too long" in message


def test_a_socket_not_there_yet_is_still_the_environment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, err = _export(capsys, str(tmp_path / "kubelet.sock"))
    assert (code, _error(err)[0]) == (4, "kubelet-socket-missing")
