"""Names and messages a capture carries print as written in the tables: rich reads "[...]" in a
string cell as markup, and a GPU name holding "[/bold]" ended doctor and snapshot with exit 70
(MarkupError) before report.output.console read no markup."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.cli.main import main

Q_TEXT = "nvidia-smi/linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.idle.q.txt"


@pytest.fixture
def marked_q(fixtures: Path, tmp_path: Path) -> Path:
    text = (fixtures / Q_TEXT).read_text()
    assert "NVIDIA GeForce RTX 2080 SUPER" in text
    path = tmp_path / "q.txt"
    path.write_text(text.replace("NVIDIA GeForce RTX 2080 SUPER", "NVIDIA [/bold] RTX [red]2080"))
    return path


@pytest.mark.parametrize(
    "verb", [("doctor", "--from"), ("snapshot", "--backend", "smi", "--from")], ids=str
)
def test_a_gpu_name_with_markup_prints_as_written(
    verb: tuple[str, ...], marked_q: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*verb, str(marked_q)]) == 0
    out = capsys.readouterr().out
    assert "[/bold]" in out and "[red]" in out


def test_an_nvidia_smi_message_with_markup_prints_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = tmp_path / "smi.txt"
    failed.write_text(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. [/bold] "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    assert main(["doctor", "--from", str(failed)]) == 0
    assert "[/bold]" in capsys.readouterr().out
