"""A damaged text field (hostile-input sweep 3: a -q whose driver version ran to 100,010
characters) is no reading: it is not echoed into every finding title and evidence that names it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from gpuwarden.telemetry.smi.cells import MAX_TEXT_CHARS, to_text, to_version

SMI = "nvidia-smi/captures/linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt"


def test_a_text_or_version_past_its_bound_is_not_a_reading() -> None:
    assert to_version("610.57.04 [Deprecated; use 610.57.05]") == "610.57.04"
    assert to_version("5" * 65) is None
    assert to_text("/opt/app/" + "x" * 100) is not None
    assert to_text("x" * (MAX_TEXT_CHARS + 1)) is None


def test_doctor_does_not_echo_a_100k_character_driver_version(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (fixtures / SMI).read_text()
    damaged = re.sub(
        r"^(Driver Version\s*:\s*)(\S+)", lambda m: m[1] + m[2] * 10_000, text, flags=re.M
    )
    assert len(damaged) > len(text) + 90_000
    path = tmp_path / "smi.txt"
    path.write_text(damaged)
    assert main(["doctor", "--from", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    assert len(out) < 50_000
    document = json.loads(out)
    assert document["devices"][0]["driver_version"] is None
