"""doctor --from a saved output of an nvidia-smi that failed: the verdict the live probe gives
(the real texts are from the held-out explain sets, tests/data/explain, and the fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from gpuwarden.doctor.captures import CaptureKind, classify
from gpuwarden.telemetry.smi.failure import smi_failure_output

DATA = Path(__file__).resolve().parents[1] / "data" / "explain"


def _texts() -> dict[str, str]:
    texts = {}
    for name in ("heldout.jsonl", "heldout2.jsonl", "heldout3.jsonl"):
        for line in (DATA / name).read_text(encoding="utf-8").splitlines():
            example = json.loads(line)
            texts[example["id"]] = example["error_text"]
    return texts


TEXTS = _texts()


@pytest.mark.parametrize(
    ("example_id", "code"),
    [
        ("ver-nvml-mismatch-koelsch-60", "nvml-driver-mismatch"),
        ("drv-nvml-mismatch-p2p-module-570-tinygrad-47", "nvml-driver-mismatch"),
        ("hw-smi-curly-quote-qixuema-4", "driver-not-loaded"),
    ],
)
def test_a_failed_nvidia_smi_is_judged_as_the_probe_judges_it(
    example_id: str, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nvidia-smi.txt"
    path.write_text(TEXTS[example_id] + "\n")
    assert classify(path.read_text()) is CaptureKind.SMI_FAILURE
    assert main(["doctor", "--from", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in document["findings"] if f["severity"] == "critical"] == [code]


def test_the_nvml_version_of_a_mismatch_is_kept(fixtures: Path) -> None:
    status = smi_failure_output(TEXTS["drv-nvml-mismatch-p2p-module-570-tinygrad-47"])
    assert status is not None and status.failure == "version-mismatch"
    assert status.nvml_library_version == "570.124"
    # the line that says it, not the command pasted above it
    assert status.message == "Failed to initialize NVML: Driver/library version mismatch"


def test_a_long_text_that_mentions_a_failure_is_not_a_capture(fixtures: Path) -> None:
    # a kernel log or a question that quotes the message is read as what it is, or refused
    story = "\n".join(["we upgraded the kernel and then"] * 10)
    text = story + "\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
    assert smi_failure_output(text) is None
    assert classify(text) is None


def test_a_gpu_nvml_refused_this_user_is_not_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # nvidia-smi's line when nvmlDeviceGetHandleByIndex answers NVML_ERROR_NO_PERMISSION: the GPU
    # answered, its device node's access is the matter (the device-handle wording of a lost GPU
    # with NVML's permission string, catalog/nvml_enums.py)
    path = tmp_path / "nvidia-smi.txt"
    path.write_text(
        "$ nvidia-smi\n"
        "Unable to determine the device handle for GPU0000:34:00.0: Insufficient Permissions\n"
    )
    status = smi_failure_output(path.read_text())
    assert status is not None and status.failure == "permission"
    assert main(["doctor", "--from", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in document["findings"] if f["code"] == "gpu-lost"] == []
    (check,) = [c for c in document["checks"] if c["name"] == "nvml-driver"]
    assert check["status"] == "warn" and "permission" in check["detail"]


@pytest.mark.parametrize("refused_first", [True, False])
def test_a_lost_gpu_beside_a_refused_one_is_still_lost(refused_first: bool) -> None:
    # nvidia-smi prints a device-handle line a GPU it could not open: one refused this user
    # (NVML_ERROR_NO_PERMISSION) and one that did not answer ("Unknown Error", the R5xx line of
    # smi_heldout14's R610 screen): the lost GPU decides, whichever line comes first
    refused = "Unable to determine the device handle for GPU0000:34:00.0: Insufficient Permissions"
    lost = "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"
    lines = [refused, lost] if refused_first else [lost, refused]
    status = smi_failure_output("\n".join(lines) + "\n")
    assert status is not None
    assert (status.failure, status.message) == ("gpu-lost", lost)


def test_a_lost_gpu_said_in_another_line_is_not_hidden_by_a_refused_handle() -> None:
    text = (
        "Unable to determine the device handle for GPU0000:34:00.0: Insufficient Permissions\n"
        "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the "
        "system to recover this GPU\n"
    )
    status = smi_failure_output(text)
    assert status is not None and status.failure == "gpu-lost"
