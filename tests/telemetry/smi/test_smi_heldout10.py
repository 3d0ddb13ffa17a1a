"""Held-out set 10: nvidia-smi output on R570+ drivers in MIG mode (R580's "Shared Memory-Usage"
heading, a GPU instance split into compute instances), vGPU guests (GRID A10-24Q), WSL 2, a Jetson
Thor, R610's KMD/UMD heading, and pastes reshaped on the way: lines prefixed by a job launcher,
cells narrowed by hand, versions hidden by the author, copies cut inside a row
(tests/data/smi_heldout10/: SOURCES.md says where each one comes from, expected.json holds the
values read off each sample by hand). Every sample reads to the values printed in it, and
`doctor` finds nothing above info on a healthy GPU.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwarden.telemetry.smi import parse_smi_output
from gpuwarden.types.telemetry import MigDeviceSample
from tests.telemetry.smi.heldout import (
    load_set,
    mib,
    sample_gpus,
    sample_param,
    samples_read_as,
    smi_set_checks,
    table_values,
)

DATA, SAMPLES = load_set("smi_heldout10")

# Samples a parser still cannot read, and why (see the report).
READ_XFAIL: dict[str, str] = {}
# Samples doctor cannot judge as an engineer does yet, and why.
DOCTOR_XFAIL: dict[str, str] = {}

SMI_SAMPLES = samples_read_as(SAMPLES, "smi")

# every sample of this set holds a reading: the refusal check has nothing to run, and is left out
(
    test_the_set_is_the_one_described,
    _,
    test_doctor_finds_what_the_engineer_finds_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = smi_set_checks(DATA, SAMPLES, READ_XFAIL, DOCTOR_XFAIL)


def _total(device: MigDeviceSample) -> list[float | int | None]:
    return [mib(device.memory_total_bytes), device.sm_count]


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES])
def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
    gpus = sample_gpus(DATA, sample)
    assert [table_values(d) for d in gpus] == sample["gpus"]
    assert {d.info.driver_version for d in gpus} == {sample["driver"]}
    if "fan_pct" in sample:
        assert [d.fan_speed_percent for d in gpus] == [sample["fan_pct"]]


@pytest.mark.parametrize("sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES if "mig" in s])
def test_reads_the_mig_devices(sample: dict[str, Any]) -> None:
    (gpu,) = sample_gpus(DATA, sample)
    read = [
        [m.gpu_instance_id, m.compute_instance_id, mib(m.memory_used_bytes), *_total(m)]
        for m in gpu.mig_devices or ()
    ]
    assert read == sample["mig"]


@pytest.mark.parametrize(
    "sample", [sample_param(s, READ_XFAIL) for s in SMI_SAMPLES if "processes" in s]
)
def test_reads_the_process_rows(sample: dict[str, Any]) -> None:
    (gpu,) = sample_gpus(DATA, sample)
    read = [[p.pid, mib(p.used_memory_bytes)] for p in gpu.processes or ()]
    assert read == sample["processes"]


def test_the_set_holds_only_healthy_readings() -> None:
    # the one thread with a GPU in trouble (john#5835) pasted a reading from before the fault
    assert all(s["doctor_codes"] == [] for s in SAMPLES)
    assert any("falls off" in s["fault"] for s in SAMPLES)


def _sample(file_part: str) -> dict[str, Any]:
    (sample,) = [s for s in SAMPLES if file_part in s["file"]]
    return sample


def test_compute_instances_sharing_a_gpu_instance_are_not_named_by_their_sms() -> None:
    # nvidia-smi -L under the Korean note names GI 3's devices "1c.2g.10gb": their 14 SMs with
    # the GPU instance's 9984 MiB would read as "1g.10gb"
    (gpu,) = sample_gpus(DATA, _sample("mig-shared-heading"))
    shared = [m.profile for m in gpu.mig_devices or () if m.gpu_instance_id == 3]
    assert shared == [None, None]
    (whole,) = sample_gpus(DATA, _sample("openshift-dra"))  # one compute instance per GPU instance
    assert [m.profile for m in whole.mig_devices or ()][:2] == ["3g.40gb", "2g.20gb"]


_SCREEN = (
    "+-----------------------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 570.172.08             Driver Version: {driver}     CUDA Version: 12.8     |\n"
    "|=========================================+========================+======================|\n"
    "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:0F:00.0 Off |                    0 |\n"
    "| N/A   29C    P0             69W /  700W |       0MiB /  81559MiB |      0%      Default |\n"
)


@pytest.mark.parametrize(
    "prefix", ["(pid=4150) ", "(RayWorker pid=81, ip=10.0.0.2) ", "(worker1, rank=1, pid=9) "]
)
def test_a_job_launchers_line_prefix_is_taken_off(prefix: str) -> None:
    text = "Job started.\n" + "".join(
        prefix + line + "\n" for line in _SCREEN.format(driver="570.172.08").splitlines()
    )
    (snap,) = parse_smi_output(text, "launcher.txt", 0.0)
    assert [(d.info.name, d.temperature_gpu_celsius) for d in snap.samples] == [
        ("NVIDIA H100 80GB HBM3", 29.0)
    ]


@pytest.mark.parametrize("hidden", ["XXX.XX", "xxx.xx.xx", "<version>"])
def test_a_version_the_author_hid_is_not_read_as_one(hidden: str) -> None:
    (snap,) = parse_smi_output(_SCREEN.format(driver=hidden), "hidden.txt", 0.0)
    assert [d.info.driver_version for d in snap.samples] == [None]


_ROW_2 = "| N/A   29C    P0             69W /  700W |"


@pytest.mark.parametrize(
    ("cut_row", "memory_used_mib", "util_pct"),
    [
        # the cut cell holds a number with its unit: the number is whole
        (_ROW_2 + "       0MiB /  81559MiB |      0%", 0.0, 0.0),
        # a number without its unit may be cut short ("1" of "13%"): its cell is not read
        (_ROW_2 + "       0MiB /  81559MiB |      1", 0.0, None),
        (_ROW_2 + "       0MiB /  8", None, None),
        (_ROW_2 + "       0MiB /  81559MiB |      ", 0.0, None),
    ],
)
def test_a_row_cut_at_the_end_of_the_text_reads_its_whole_cells(
    cut_row: str, memory_used_mib: float | None, util_pct: float | None
) -> None:
    screen, _, _ = _SCREEN.format(driver="570.172.08").rstrip("\n").rpartition("\n")
    (snap,) = parse_smi_output(screen + "\n" + cut_row + "\n", "cut.txt", 0.0)
    (gpu,) = snap.samples
    read = (gpu.temperature_gpu_celsius, mib(gpu.memory_used_bytes), gpu.gpu_utilization_percent)
    assert read == (29.0, memory_used_mib, util_pct)
