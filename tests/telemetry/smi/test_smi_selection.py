"""The GPUs an nvidia-smi command's `-i` / `--id` selects, read with the output under it (h188).

nvidia-smi's -i takes a GPU's index, board serial, UUID or PCI bus id (its man page), and a
comma-separated list of them (`nvidia-smi -i 0,1,2` in XuehaiPan/nvitop#145; "Comma separated
Enumeration index, PCI bus ID or UUID" in `dmon -h` / `pmon -h`); it prints the GPUs selected in
its own enumeration order. A list of indices gives the GPUs printed in order those indices,
ascending; a UUID or a bus id names one GPU but not its index (said, not invented); a count of
GPUs the output contradicts is refused, naming the input, with a hint.

Measured before: the two rows under `nvidia-smi -i 0,2 --query-gpu=...` read as GPUs 0 and 1;
under `-i 0,2,3`, or under one UUID or one bus id, the same two rows read as GPUs 0 and 1 too;
two `-l` readings of `-i 0,2` read as one reading of four GPUs; the -q report under `-i 2` and
the -q -x document under `-i 1` read as GPU 0; two rows under `-i 3` (no -l) read as two readings
of GPU 3. The rows are real ones of tests/data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.errors import CorruptInputError
from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.telemetry.smi.paste import command_selection
from gpuwarden.types.telemetry import Snapshot
from tests.telemetry.smi.heldout import DATA_ROOT

# two GPUs' rows without index or identity (GTX 1080 Ti at 60 C, GTX 1060 at 49 C)
_BPYTOP = DATA_ROOT / "smi_heldout20"
_BPYTOP /= "csv__bpytop-26__gtx-1080-ti-and-gtx-1060-under-time-second-run-cut.partial.txt"
_BPYTOP_QUERY = (
    "--query-gpu=gpu_name,fan.speed,memory.total,memory.used,utilization.gpu,temperature.gpu,"
    "power.draw,clocks.gr,clocks.mem --format=csv"
)
# two GPUs' UUID rows; four GPUs' UUID rows
_TWO_UUIDS = (
    DATA_ROOT
    / "smi_heldout23"
    / "csv__51cto-u15357586-3788127__uuid-only-2-gpus-under-docker-command.txt"
)
_FOUR_UUIDS = (
    DATA_ROOT / "smi_heldout8" / "csv__dra-driver-nvidia-gpu-852__4x-mig-mode-current-pending.txt"
)
_V100_ECC = (
    DATA_ROOT
    / "smi_heldout12"
    / "q-d-ecc-x2__sxm2-board-nvlink-notes__v100-sxm2-prompt-between__580.105.08.txt"
)
_XID48 = (
    DATA_ROOT
    / "smi_heldout11"
    / "q-d-ecc-row-remapper__xid48-runbook__row-remap-pending-ecc-mode-unknown-error__550.90.07.txt"
)
_A10G = DATA_ROOT / "smi_xml_public" / "telegraf__a10g-aws__v11__515.105.01.xml"
_K80 = DATA_ROOT / "smi_xml_public3" / "pai__4x-tesla-k80-azure__v10__430.26.xml"

_UUID = "GPU-18a3e86f-4c0e-cd9f-59c3-55488c4b0c24"  # smi_heldout23's GPU 3
_INDEX_NOT_PRINTED = "its index: the command selects by UUID, PCI bus id or board serial"


def _bpytop_rows() -> tuple[str, list[str]]:
    lines = _BPYTOP.read_text().splitlines()
    return lines[1], lines[2:4]


def _bpytop_paste(selection: str, repeat: int = 1) -> str:
    header, rows = _bpytop_rows()
    return "\n".join([f"$ nvidia-smi {selection} {_BPYTOP_QUERY}", header, *rows * repeat]) + "\n"


def _read(text: str) -> list[Snapshot]:
    return parse_smi_output(text, "paste.txt", 0.0)


def _gpus(text: str) -> list[list[tuple[int, float | None]]]:
    return [[(d.info.index, d.temperature_gpu_celsius) for d in r.samples] for r in _read(text)]


def _notes(readings: list[Snapshot]) -> list[str]:
    return [e.message for r in readings for e in r.events]


def _refusal(text: str) -> CorruptInputError:
    with pytest.raises(CorruptInputError) as refused:
        _read(text)
    assert (refused.value.exit_code, bool(refused.value.hint)) == (2, True)
    assert refused.value.message.startswith("paste.txt")
    return refused.value


@pytest.mark.parametrize("selection", ["-i 0,2", "-i 2,0", "--id=0,2", "-i0,2", "-i 0,2,2"])
def test_a_list_of_indices_is_those_gpus_in_ascending_order(selection: str) -> None:
    """Failed before: GPUs 0 and 1."""
    assert _gpus(_bpytop_paste(selection)) == [[(0, 60.0), (2, 49.0)]]
    assert _notes(_read(_bpytop_paste(selection))) == []


def test_a_loop_of_a_list_is_one_reading_per_list() -> None:
    """Failed before: one reading of four GPUs (0-3)."""
    assert _gpus(_bpytop_paste("-i 0,2 -l 1", repeat=2)) == [[(0, 60.0), (2, 49.0)]] * 2


@pytest.mark.parametrize(
    "selection",
    ["-i 0,2,3", "-i 0,3 -l 1", "-i 3", f"-i {_UUID}", "-i 00000000:3B:00.0", "-i 3b:00.0"],
)
def test_rows_the_selection_contradicts_are_refused(selection: str) -> None:
    """Failed before: GPUs 0 and 1 ("-i 3": two readings of GPU 3). Three GPUs selected, two
    rows printed; one GPU selected, two rows printed by a command without -l, which reports
    once (nvidia-smi's man page); "-i 0,3 -l 1": three rows, not whole readings of two GPUs."""
    text = _bpytop_paste(selection)
    if "-l" in selection:
        header, rows = _bpytop_rows()
        text = "\n".join([f"$ nvidia-smi {selection} {_BPYTOP_QUERY}", header, *rows, rows[0]])
    refused = _refusal(text)
    assert f"({selection.split(' -l', maxsplit=1)[0]})" in refused.message


def test_a_list_of_indices_names_the_gpus_of_uuid_rows() -> None:
    """Failed before: GPUs 0 and 1."""
    uuids = [line for line in _TWO_UUIDS.read_text().splitlines() if line.startswith("GPU-")]
    text = "\n".join(["nvidia-smi -i 1,2 --query-gpu=uuid --format=csv", "uuid", *uuids]) + "\n"
    (reading,) = _read(text)
    assert [(d.info.index, d.info.uuid) for d in reading.samples] == list(
        zip([1, 2], uuids, strict=True)
    )


def test_one_uuid_names_the_gpu_of_a_row_without_one_and_says_its_index_is_unknown() -> None:
    """Failed before: the GPU read as 'index:0', its UUID the placeholder of index 0, nothing
    said."""
    header, rows = _bpytop_rows()
    text = "\n".join([f"$ nvidia-smi -i {_UUID} {_BPYTOP_QUERY}", header, rows[0]]) + "\n"
    readings = _read(text)
    ((gpu,),) = [r.samples for r in readings]
    assert (gpu.info.uuid, gpu.info.name, gpu.temperature_gpu_celsius) == (
        _UUID,
        "GeForce GTX 1080 Ti",
        60.0,
    )
    (note,) = _notes(readings)
    assert note.startswith(_INDEX_NOT_PRINTED)


def test_one_bus_id_names_the_gpu_in_nvidia_smi_s_spelling() -> None:
    header, rows = _bpytop_rows()
    text = "\n".join([f"$ nvidia-smi -i 3b:00.0 {_BPYTOP_QUERY}", header, rows[1]]) + "\n"
    ((gpu,),) = [r.samples for r in _read(text)]
    assert gpu.info.pci_bus_id == "00000000:3B:00.0"


def test_several_uuids_over_rows_without_identity_say_which_is_which_is_not_known() -> None:
    two = [line for line in _TWO_UUIDS.read_text().splitlines() if line.startswith("GPU-")]
    readings = _read(_bpytop_paste(f"-i {','.join(two)}"))
    assert [d.info.uuid for d in readings[0].samples] == ["index:0", "index:1"]
    (note,) = _notes(readings)
    assert note.startswith("its index and which of the GPUs selected each row is: ")


def test_several_uuids_over_uuid_rows_read_them_and_say_the_index_is_not_known() -> None:
    lines = _FOUR_UUIDS.read_text().splitlines()
    header, rows = lines[4], [lines[5], lines[7]]
    uuids = [row.split(",")[0] for row in rows]
    command = f"nvidia-smi -i {','.join(uuids)} --query-gpu=uuid,mig.mode.current --format=csv"
    readings = _read("\n".join([command, header, *rows]) + "\n")
    assert [d.info.uuid for d in readings[0].samples] == uuids
    (note,) = _notes(readings)
    assert note.startswith(_INDEX_NOT_PRINTED)


def test_a_q_report_under_one_index_is_that_gpu() -> None:
    """Failed before: GPU 0. The V100 board's report of `nvidia-smi -i 2 -q -d ECC`, pasted
    alone under its command."""
    text = _V100_ECC.read_text()
    second = text[text.index("nvidia-smi -i 2") :]
    (reading,) = _read(second)
    assert [(d.info.index, d.info.pci_bus_id) for d in reading.samples] == [(2, "00000000:61:00.0")]
    assert _notes([reading]) == []


def test_a_paste_of_two_q_reports_of_two_selections_reads_each_under_its_own() -> None:
    """Two reports under `-i 0` and `-i 2` (the second under a zsh theme's "➜ $" prompt): each
    is read under its own command (h215 changed this deliberately: read in order as GPUs 0 and 1
    before; tests/telemetry/smi/test_smi_several_commands.py has more)."""
    (reading,) = _read(_V100_ECC.read_text())
    assert [d.info.index for d in reading.samples] == [0, 2]


def test_a_q_report_under_a_bus_id_says_its_index_is_unknown() -> None:
    (reading,) = _read(_XID48.read_text())
    assert [d.info.index for d in reading.samples] == [0]
    (note,) = _notes([reading])
    assert note.startswith(_INDEX_NOT_PRINTED) and "(-i 52:00.0)" in note


def test_an_xml_document_under_one_index_is_that_gpu() -> None:
    """Failed before: GPU 0."""
    text = f"$ nvidia-smi -q -x -i 1\n{_A10G.read_text()}"
    (reading,) = _read(text)
    assert [d.info.index for d in reading.samples] == [1]


def test_an_xml_document_of_fewer_gpus_than_selected_is_refused_unless_cut() -> None:
    """Failed before: read as GPU 0. A document cut short keeps the first GPUs selected."""
    assert "(-i 0,1)" in _refusal(f"$ nvidia-smi -q -x -i 0,1\n{_A10G.read_text()}").message
    k80 = _K80.read_text()
    second_gpu_closed = k80.index("</gpu>", k80.index("</gpu>") + 1) + len("</gpu>")
    (cut,) = _read(f"$ nvidia-smi -q -x -i 0,1,5,7\n{k80[:second_gpu_closed]}")
    assert [d.info.index for d in cut.samples] == [0, 1]
    (whole,) = _read(f"$ nvidia-smi -q -x -i 0,1,5,7\n{k80}")
    assert [d.info.index for d in whole.samples] == [0, 1, 5, 7]


@pytest.mark.parametrize(
    ("command", "ids"),
    [
        ("nvidia-smi -i 0,2 -q", ("0", "2")),
        ("nvidia-smi -i0,2 -q", ("0", "2")),
        ("nvidia-smi --id=GPU-a,GPU-b -q", ("GPU-a", "GPU-b")),
        ("nvidia-smi -i ' 1, 3,,1' -q", ("1", "3")),
        ("nvidia-smi -i 1 -i 3 -q", None),  # which one counts is not documented
        ("nvidia-smi --id= -q", None),
        ("nvidia-smi -q", None),
    ],
)
def test_the_ids_of_a_command(command: str, ids: tuple[str, ...] | None) -> None:
    selection = command_selection(command)
    assert (None if selection is None else selection.ids) == ids


def test_a_list_of_many_ids_is_read_in_bounded_time() -> None:
    """A hostile -i of 10^5 ids: only the first 1024 are looked at."""
    selection = command_selection("nvidia-smi -i " + ",".join(["1"] * 100_000) + " -q")
    assert selection is not None and selection.indices == (1,)


def test_the_cli_names_the_file_and_exits_2_for_a_list_the_rows_contradict(
    tmp_path: Path,
) -> None:
    from tests.cli.test_fuzz_verbs import problem, run_in_process

    paste = tmp_path / "three-selected.txt"
    paste.write_text(_bpytop_paste("-i 0,2,3"))
    outcome = run_in_process(["doctor", "--from", str(paste), "--json"])
    assert problem(outcome) is None
    assert outcome.code == 2
    assert outcome.err.count("three-selected.txt") == 1
