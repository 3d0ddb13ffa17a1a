"""Issue 13, fourth hostile pass (b): `to_float("٣٠٠")` was 300. Python's float(), int() and the
regex \\d read every Unicode decimal digit (Arabic-Indic, Devanagari, fullwidth...), but
nvidia-smi prints numbers with printf: ASCII digits. A number in other digits is not one
nvidia-smi wrote: it is refused as "abc" is ("not a number", the parsers name the line), never
read as a value the GPU did not report."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from gpuwarden.telemetry.smi.cells import parse_smi_time, to_bytes, to_float, to_int, to_version

SMI = "nvidia-smi/captures/linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt"

# "300" in Arabic-Indic, Devanagari and fullwidth digits
OTHER_DIGITS = ["\u0663\u0660\u0660", "\u0969\u0966\u0966", "\uff13\uff10\uff10"]


@pytest.mark.parametrize("digits", OTHER_DIGITS)
@pytest.mark.parametrize(
    "cell", ["{}", "{} W", "{}.5 MHz", "1e{}", "-{} C"], ids=["bare", "W", "MHz", "exp", "C"]
)
def test_a_number_in_other_digits_is_not_a_number(cell: str, digits: str) -> None:
    text = cell.format(digits)
    for read in (to_float, to_int, to_bytes):
        with pytest.raises(ValueError, match="not a number"):
            read(text)  # before: 300.0, 300, 300 MiB


@pytest.mark.parametrize("digits", OTHER_DIGITS)
def test_other_digits_are_no_hex_mask_version_or_time(digits: str) -> None:
    with pytest.raises(ValueError, match="not a number"):
        to_int(f"0x{digits}")  # before: 768 (int("0x٣٠٠", 16))
    assert to_version(f"{digits}.{digits}") is None  # before: the digits as a version
    assert parse_smi_time(f"2026/07/14 09:00:44.{digits}") is None  # before: + 0.3 s


def test_ascii_numbers_read_as_before() -> None:
    assert to_float("39.32 W") == 39.32
    assert to_float("300") == 300.0
    assert to_float("3\u00a0W") == 3.0  # a pasted no-break space is still a space
    assert to_int("0x000000000000001F") == 31
    assert to_bytes("8192 MiB") == 8192 << 20
    assert to_version("610.57.04") == "610.57.04"
    assert parse_smi_time("2026/07/14 09:00:44.579") == pytest.approx(1784019644.579)


def test_doctor_refuses_a_capture_whose_power_is_in_other_digits(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (fixtures / SMI).read_text()
    line = next(x for x in text.splitlines() if "Instantaneous Power Draw" in x)
    damaged = text.replace(line, line.replace("37.62", "\u0663\u0667.\u0666\u0662"), 1)
    assert damaged != text
    path = tmp_path / "smi.txt"
    path.write_text(damaged)
    assert main(["doctor", "--from", str(path)]) == 2  # before: 0, 37.62 W read from ٣٧.٦٢
    err = capsys.readouterr().err
    assert "Power Draw: not a number: '٣٧.٦٢ W'" in err
    assert f"line {text.splitlines().index(line) + 1}" in err
