"""A capture saved by Windows PowerShell 5.1 (`nvidia-smi -q > smi.txt`, `curl ... > scrape.prom`)
is UTF-16LE with a byte-order mark and CRLF line ends: it reads as the same capture, not as a
binary file (the hostile-input sweep 3 found both verbs refusing it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main

SMI = "nvidia-smi/captures/linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt"


def _powershell(source: Path, target: Path, encoding: str = "utf-16") -> Path:
    text = source.read_text(encoding="utf-8")
    target.write_bytes(text.replace("\n", "\r\n").encode(encoding))
    return target


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    """The verb's document with what differs between two files of the same reading left out:
    the path (in sources) and the times taken from the file's modification time."""
    assert main([*args, "--json"]) == 0
    text = capsys.readouterr().out.replace(args[-1], "FILE")
    return _timeless(json.loads(text))


def _timeless(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if "time" not in k and k != "at"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_doctor_and_snapshot_read_a_utf16_smi_capture_as_the_utf8_one(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str
) -> None:
    original = fixtures / SMI
    if encoding == "utf-16-be":  # Python writes no BOM for an explicit byte order: add it
        saved = tmp_path / "smi.txt"
        text = original.read_text(encoding="utf-8").replace("\n", "\r\n")
        saved.write_bytes(b"\xfe\xff" + text.encode("utf-16-be"))
    else:
        saved = _powershell(original, tmp_path / "smi.txt")
    for verb in (["doctor", "--from"], ["snapshot", "--backend", "smi", "--from"]):
        assert _json([*verb, str(saved)], capsys) == _json([*verb, str(original)], capsys)
    doctor = _json(["doctor", "--from", str(saved)], capsys)
    assert [d["name"] for d in doctor["devices"]] == ["NVIDIA GeForce RTX 2080 SUPER"]


def test_a_utf16_dcgm_scrape_reads_as_the_utf8_one(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scrape = sorted((fixtures / "dcgm").glob("*.prom"))[0]
    saved = _powershell(scrape, tmp_path / "scrape.prom")
    utf16 = _json(["doctor", "--from", str(saved)], capsys)
    assert utf16 == _json(["doctor", "--from", str(scrape)], capsys)
    assert len(utf16["devices"]) >= 1
