"""`gpuwarden doctor` end to end: from real captures (clean ones are healthy, faults written the way
the tools print them are found), live over the fake NVML built from real captures, its JSON
contract (diagnosis.md §3), --fail-on, and bad inputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.doctor.captures import Capture, SkippedFile, read_capture
from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import InputError
from tests.doctor.judged import assert_judged_or_refused
from tests.fakes.fake_pynvml import installed
from tests.fakes.fake_pynvml.captures import A100_MIG_XML, H100
from tests.telemetry.nvml.conftest import fake_host  # noqa: F401  (the fixture)

SMI = "nvidia-smi"
H100_LOAD_Q = f"{SMI}/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
H100_NVLINK = "topo/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.nvlink-s.txt"
A100_X8_NVLINK = "topo/gpud__a100-sxm4-80gb-x8__nvlink-status.txt"
NV8_TOPO = "topo/issue-nccl-933__8gpu-nv8__topo-m.partial.txt"
XID_119 = "xid/gpud__dmesg-with-xid-119.log"
XID_13 = "xid/gpud__dmesg-decode-iso-xid13-43.log"
HEALTHY_XID = {"verdict": "healthy"}


def doctor_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _from(*paths: Path | str) -> list[str]:
    return [arg for p in paths for arg in ("--from", str(p))]


def _above_info(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["code"], f["title"]) for f in doc["findings"] if f["severity"] != "info"]


# ---- clean real captures: no finding above info, whatever the family -------------------------


def _capture_files(fixtures: Path) -> list[Path]:
    smi = sorted((fixtures / SMI).glob("*"))
    files = [p for p in smi if p.is_file() and "lgip" not in p.name and p.suffix != ".md"]
    files += sorted((fixtures / SMI / "captures").glob("*.txt"))
    files += sorted((fixtures / "dcgm").glob("*.prom"))
    files += [p for p in sorted((fixtures / "topo").glob("*.txt")) if "591.86.topo-m" not in p.name]
    return files


def test_every_clean_capture_is_healthy(fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _capture_files(fixtures)
    assert len(files) > 90
    for path in files:
        code, doc = doctor_json(capsys, *_from(path))
        assert code == 0
        assert _above_info(doc) == [], path.name
        # GPU readings judged: healthy; a process list, a topology or GPU names alone: no
        # health evidence, "unknown" (no evidence is no pass)
        judged = any(
            c["status"] == "pass" and c["name"] not in LISTING_CHECKS for c in doc["checks"]
        )
        assert doc["verdict"] == ("healthy" if doc["devices"] and judged else "unknown"), path.name
        if path.name.endswith(".query-compute-apps.csv"):
            assert doc["verdict"] == "unknown", path.name


# the checks that pass whenever GPUs are listed (doctor/node.py)
LISTING_CHECKS = {"devices", "mig", "processes", "gpu-count", "fabric-manager"}


def test_gpu_names_and_nothing_else_are_no_pass(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A dcgm-exporter page whose only series name the GPUs read "HEALTHY · 25 checks could not
    run"; with --fail-on a probe passed on no evidence. Now unknown, and the probe fails."""
    page = tmp_path / "names.prom"
    page.write_text(
        'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-0a",device="nvidia0",modelName="NVIDIA A100 '
        '80GB PCIe",Hostname="n1"} 0\n'
    )
    code, doc = doctor_json(capsys, *_from(page))
    assert (code, doc["verdict"]) == (0, "unknown")
    code, _ = doctor_json(capsys, *_from(page), "--fail-on", "critical")
    assert code == 1


def test_a_whole_bundle_directory_is_read_and_junk_is_skipped(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = doctor_json(capsys, *_from(fixtures / "topo"))
    assert code == 0
    kinds = {i["kind"] for i in doc["inputs"]}
    assert kinds == {"topo", "nvlink-status"}
    assert _above_info(doc) == []
    skipped = {Path(s["path"]).name: s["reason"] for s in doc["skipped"]}
    assert "SOURCES.md" in skipped
    # Windows R591 printed an error instead of a matrix: not a capture, said so
    assert "windows-x86_64__nvidia-geforce-rtx-2080-super__591.86.topo-m.txt" in skipped


def test_the_json_contract(fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = doctor_json(capsys, *_from(fixtures / H100_LOAD_Q, fixtures / XID_119))
    assert code == 0
    assert doc["schema"] == "gpuwarden.doctor/1"
    assert doc["verdict"] == "critical"
    assert doc["devices"][0]["name"] == "NVIDIA H100 80GB HBM3"
    for finding in doc["findings"]:
        assert {"code", "severity", "device", "evidence", "cause", "remedy", "action"} <= set(
            finding
        )
        assert set(finding["device"] or {}) >= {"index", "uuid", "pci_bus_id"} or (
            finding["device"] is None
        )
    for check in doc["checks"]:
        assert check["status"] in {"pass", "warn", "fail", "skip"}
        assert check["detail"]
    names = [c["name"] for c in doc["checks"]]
    assert len(names) == len(set(names))
    # what captures cannot say is a skip with its reason, never a pass
    by_name = {c["name"]: c for c in doc["checks"]}
    assert by_name["framework-arch"]["status"] == "skip"
    assert "not in the captures" in by_name["framework-arch"]["detail"]


# ---- faults -----------------------------------------------------------------------------------


def test_xid_119_burst_in_a_kernel_log_is_critical(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, doc = doctor_json(capsys, *_from(fixtures / XID_119))
    xid = [f for f in doc["findings"] if f["code"] == "xid"]
    assert len(xid) == 1
    assert xid[0]["severity"] == "critical"
    assert xid[0]["action"] == "RESET_GPU"
    assert xid[0]["device"]["pci_bus_id"] == "0000:9b:00.0"
    assert xid[0]["count"] == 5
    check = next(c for c in doc["checks"] if c["name"] == "xid")
    assert check["status"] == "fail" and "Xid 119 ×5" in check["detail"]


def test_app_xid_13_is_a_warning_not_a_hardware_verdict(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, doc = doctor_json(capsys, *_from(fixtures / XID_13))
    codes = {(f["code"], f["severity"]) for f in doc["findings"]}
    assert ("xid", "warning") in codes
    assert not any(sev == "critical" for _, sev in codes)


def test_an_inactive_nvlink_among_active_ones(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (fixtures / A100_X8_NVLINK).read_text()
    lines = text.splitlines()
    gpu3 = next(i for i, ln in enumerate(lines) if ln.startswith("GPU 3:"))
    lines[gpu3 + 5] = "         Link 4: <inactive>"  # how nvidia-smi prints a link that is down
    path = tmp_path / "nvlink-s.txt"
    path.write_text("\n".join(lines) + "\n")
    _, doc = doctor_json(capsys, *_from(path))
    down = [f for f in doc["findings"] if f["code"] == "nvlink-down"]
    assert [f["device"]["index"] for f in down] == [3]
    assert down[0]["severity"] == "critical"
    assert "11 of 12" in down[0]["title"]
    # the clean capture: 8 GPUs x 12 links, nothing lost
    _, clean = doctor_json(capsys, *_from(fixtures / A100_X8_NVLINK))
    assert _above_info(clean) == []


def test_a_gpu_pair_with_fewer_nvlinks_than_the_others(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (fixtures / NV8_TOPO).read_text()
    lines = text.splitlines()
    row = next(i for i, ln in enumerate(lines) if ln.startswith("GPU2"))
    cells = lines[row].split("\t") if "\t" in lines[row] else None
    # GPU2's cell towards GPU5 (the 7th column of the row): NV8 -> NV4
    parts = lines[row].split()
    parts[6] = "NV4"
    lines[row] = "\t".join(parts) if cells else "     ".join(parts)
    path = tmp_path / "topo.txt"
    path.write_text("\n".join(lines) + "\n")
    _, doc = doctor_json(capsys, *_from(path))
    weak = [f for f in doc["findings"] if f["code"] == "nvlink-down"]
    assert weak and weak[0]["severity"] == "warning"
    assert "GPU2–GPU5" in weak[0]["title"] and "NV8" in weak[0]["title"]


def test_expect_gpus_and_fail_on(fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = doctor_json(capsys, *_from(fixtures / H100_LOAD_Q), "--expect-gpus", "8")
    assert code == 0  # the verdict is in the output
    missing = next(f for f in doc["findings"] if f["code"] == "gpu-missing")
    assert missing["severity"] == "critical" and "1 of 8" in missing["title"]
    code, _ = doctor_json(
        capsys, *_from(fixtures / H100_LOAD_Q), "--expect-gpus", "8", "--fail-on", "critical"
    )
    assert code == 1
    code, _ = doctor_json(capsys, *_from(fixtures / H100_LOAD_Q), "--fail-on", "warning")
    assert code == 0


def test_expect_gpus_when_the_driver_counts_none(capsys: pytest.CaptureFixture[str]) -> None:
    """A real `nvidia-smi` that printed "No devices were found" (tests/data/smi_heldout12, an RTX
    5090 the open module did not take): with --expect-gpus the node misses all of them; without,
    the count cannot be judged and nothing is claimed."""
    paste = (
        Path(__file__).parents[1]
        / "data/smi_heldout12"
        / "failure__open-gpu-kernel-modules-862__rtx-5090-no-devices.fragment.txt"
    )
    code, doc = doctor_json(capsys, *_from(paste), "--expect-gpus", "2", "--fail-on", "critical")
    assert code == 1 and doc["verdict"] == "critical"
    (missing,) = doc["findings"]
    assert missing["code"] == "gpu-missing" and "0 of 2" in missing["title"]
    assert {"field": "nvidia-smi", "value": "No devices were found"}.items() <= (
        missing["evidence"][1].items()
    )
    code, doc = doctor_json(capsys, *_from(paste))
    assert code == 0 and doc["verdict"] == "unknown" and doc["findings"] == []


def test_driver_module_and_library_disagree(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # /proc/driver/nvidia/version of a node whose user-space was upgraded under the module
    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.173.02  Release Build  "
        "(dvs-builder@U22-I3-AF02-09-1)  Thu Oct  2 21:32:17 UTC 2025\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    _, doc = doctor_json(capsys, *_from(fixtures / H100_LOAD_Q, version))
    mismatch = [f for f in doc["findings"] if f["code"] == "nvml-driver-mismatch"]
    assert mismatch and mismatch[0]["severity"] == "critical"
    assert "580.173.02" in json.dumps(mismatch[0]) and "590.48.01" in json.dumps(mismatch[0])


def test_a_fault_in_the_gpu_reading_is_judged_by_the_health_rules(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (fixtures / H100_LOAD_Q).read_text()
    faulty = text.replace(
        "        Pending                                        : No\n        Remapping",
        "        Pending                                        : Yes\n        Remapping",
    )
    assert faulty != text
    path = tmp_path / "q.txt"
    path.write_text(faulty)
    _, doc = doctor_json(capsys, *_from(path))
    assert [
        (f["code"], f["device"]["index"]) for f in doc["findings"] if f["severity"] != "info"
    ] == [("row-remap-pending", 0)]
    assert doc["verdict"] == "warning"


# ---- live over the fake NVML ------------------------------------------------------------------


def test_live_over_fake_nvml_is_healthy_on_healthy_captures(
    fake_host: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    host = fake_host(H100, A100_MIG_XML)
    with installed(host.module):
        code, doc = doctor_json(capsys, "--no-kernel-log")
    assert code == 0
    assert [d["name"] for d in doc["devices"]] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]
    assert doc["mode"] == "live"
    # the probe reads this machine, whose torch is the CPU build: true next to GPUs, and the
    # only thing said above info
    assert [code for code, _ in _above_info(doc) if code != "cpu-only-build"] == []


def test_live_over_fake_nvml_finds_throttling_an_xid_and_a_lost_gpu(
    fake_host: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    host = fake_host(H100, A100_MIG_XML)
    host.gpus[0].set_clock_event_reasons(0x40)  # NVML HW_THERMAL_SLOWDOWN
    host.gpus[0].add_xid(48)  # a double-bit ECC error, as NVML's event set delivers it
    host.gpus[1].lost_after_calls = 0  # gone before the first reading
    with installed(host.module):
        code, doc = doctor_json(capsys, "--no-kernel-log", "--fail-on", "critical")
    assert code == 1
    found = {(f["code"], f["device"]["index"] if f["device"] else None) for f in doc["findings"]}
    assert ("thermal-slowdown", 0) in found
    assert ("gpu-lost", 1) in found
    assert ("xid", 0) in found
    assert doc["verdict"] == "critical"


def test_live_over_fake_nvml_a_gpu_that_requires_a_reset(
    fake_host: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    host = fake_host(H100, A100_MIG_XML)
    host.gpus[1].reset_required_after_calls = 0
    with installed(host.module):
        code, doc = doctor_json(capsys, "--no-kernel-log", "--fail-on", "critical")
    assert code == 1 and doc["verdict"] == "critical"
    pending = [f for f in doc["findings"] if f["code"] == "recovery-action-pending"]
    assert [(f["severity"], f["device"]["index"]) for f in pending] == [("critical", 1)]
    assert "requires a reset" in pending[0]["title"]


def test_live_over_fake_nvml_a_gpu_nvml_cannot_open(
    fake_host: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    """nvmlDeviceGetHandleByIndex answers NVML_ERROR_UNKNOWN for one GPU (nvidia-smi then prints
    "Unable to determine the device handle for GPU...: Unknown Error"): gpu-lost, medium."""
    host = fake_host(H100, A100_MIG_XML)
    host.gpus[1].fail["nvmlDeviceGetHandleByIndex_v2"] = 999  # NVML_ERROR_UNKNOWN (the C name)
    with installed(host.module):
        code, doc = doctor_json(capsys, "--no-kernel-log")
    lost = [f for f in doc["findings"] if f["code"] == "gpu-lost"]
    assert [(f["severity"], f["confidence"], f["device"]["index"]) for f in lost] == [
        ("critical", "medium", 1)
    ]
    assert doc["verdict"] == "critical" and code == 0


def test_live_over_fake_nvml_a_gpu_nvml_may_not_open_is_not_lost(
    fake_host: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    """NVML_ERROR_NO_PERMISSION for one GPU's handle (a device node this user or container may
    not open): the GPU answered, so no gpu-lost; the device says why it has no reading."""
    host = fake_host(H100, A100_MIG_XML)
    host.gpus[1].fail["nvmlDeviceGetHandleByIndex_v2"] = 4  # NVML_ERROR_NO_PERMISSION
    with installed(host.module):
        code, doc = doctor_json(capsys, "--no-kernel-log")
    assert not [f for f in doc["findings"] if f["code"] == "gpu-lost"]
    assert code == 0 and doc["verdict"] != "critical"


def test_live_on_this_machine_without_a_gpu_is_unknown_not_healthy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, doc = doctor_json(capsys, "--no-kernel-log")
    assert code == 0
    if doc["devices"]:
        pytest.skip("this machine has GPUs")
    assert doc["verdict"] == "unknown"
    assert any(c["name"] == "gpu-backend" and c["status"] == "fail" for c in doc["checks"])
    code, _ = doctor_json(capsys, "--no-kernel-log", "--fail-on", "critical")
    assert code == 1  # no evidence is no pass for a probe


def test_live_simulated_node_is_labelled(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = doctor_json(capsys, "--backend", "sim", "--scenario", "healthy-training")
    assert code == 0 and doc["simulated"] is True and len(doc["devices"]) == 8


# ---- bad input --------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", "doctor", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "COLUMNS": "120"},
    )


@pytest.mark.parametrize(
    ("content", "reference"),
    [
        (b"hello world\nthis is not a capture\n", "capture-not-recognised"),
        (b"\x00\x01\x02binary", "capture-not-recognised"),
        (b"", "capture-not-recognised"),
    ],
)
def test_a_named_file_that_is_no_capture_exits_2(
    tmp_path: Path, content: bytes, reference: str
) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(content)
    result = _cli("--from", str(path))
    assert result.returncode == 2
    assert f"error: {reference}" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_file_long_name_and_live_options_with_captures(tmp_path: Path) -> None:
    result = _cli("--from", str(tmp_path / "nope.txt"))
    assert result.returncode == 2 and "capture-not-found" in result.stderr
    result = _cli("--from", str(tmp_path / ("x" * 300)))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    result = _cli("--from", str(tmp_path), "--readings", "3")
    assert result.returncode == 2 and "doctor-live-option-with-captures" in result.stderr


def test_a_truncated_capture_is_refused_naming_it(fixtures: Path, tmp_path: Path) -> None:
    text = (fixtures / SMI / "netdata__tesla-p100.xml").read_text()
    path = tmp_path / "cut.xml"
    path.write_text(text[: text.index("<product_name>") + 20])  # before its GPU's name (h184)
    result = _cli("--from", str(path), "--json")
    assert result.returncode == 2
    error = json.loads(result.stderr)
    assert error["schema"] == "gpuwarden.error/1"
    assert "cut.xml" in error["message"]


def test_a_huge_capture_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    with path.open("wb") as handle:
        handle.write(b"==============NVSMI LOG==============\n\nTimestamp : x\n")
        handle.truncate(70 << 20)  # sparse: 70 MiB of zeros after a -q header
    result = _cli("--from", str(path))
    assert result.returncode == 2
    assert "capture-too-large" in result.stderr or "capture-not-recognised" in result.stderr


def test_processes_holding_memory_are_listed(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, doc = doctor_json(capsys, *_from(fixtures / H100_LOAD_Q))
    check = next(c for c in doc["checks"] if c["name"] == "processes")
    # the capture's three compute processes: gpu_burn 15,690 MiB, memhog 2,566 and 1,542 MiB
    assert check["detail"].startswith("GPU 0: 3 process(es) hold 19.3 GiB (./gpu_burn pid 11345")


# ---- fuzz: what --from reads ---------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(head=st.binary(max_size=2048) | st.text(max_size=2048).map(str.encode))
def test_any_file_is_a_capture_or_skipped_with_a_reason(head: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "f"
        path.write_bytes(head)
        found = read_capture(str(path))
    assert isinstance(found, Capture | SkippedFile)
    if isinstance(found, SkippedFile):
        assert found.reason


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_damaged_capture_is_judged_or_refused_never_a_crash(
    data: st.DataObject, fixtures: Path
) -> None:
    """Real captures of every kind, cut or with text spliced in: a verdict with strict JSON,
    or an error of the tree (exit 2), never another exception (exit 70)."""
    names = [H100_LOAD_Q, H100_NVLINK, NV8_TOPO, XID_13, f"{SMI}/netdata__tesla-p100.xml"]
    names += [str(p.relative_to(fixtures)) for p in sorted((fixtures / "dcgm").glob("*.prom"))[:2]]
    text = (fixtures / data.draw(st.sampled_from(names))).read_text()
    at = data.draw(st.integers(0, len(text)))
    spliced = data.draw(st.text(max_size=40) | st.sampled_from(["nan", "inf", "-1", "1e400"]))
    text = text[:at] + spliced + text[at + data.draw(st.integers(0, 60)) :]
    assert_judged_or_refused(text, "capture.txt")


def test_the_kernel_log_check_names_a_driver_message_without_an_xid() -> None:
    """A log whose only fault is the module refusing a client of another version (a blog's
    paste, tests/data/xid_forum): the check says so (it said only " in <file>" before)."""
    [path] = (Path(__file__).resolve().parents[1] / "data" / "xid_forum").glob("07__*")
    report = diagnose_captures([str(path)], DoctorOptions())
    [check] = [c for c in report.checks if c.name == "xid"]
    assert check.codes == ("nvml-driver-mismatch",)
    assert check.detail.startswith("the kernel module refused a driver client")
    assert check.detail.endswith(f"API mismatch ×1) in {path}")


def test_a_bundle_file_that_does_not_read_is_listed_and_the_rest_judged(
    fixtures: Path, tmp_path: Path
) -> None:
    """In a directory, a file that looks like a capture but does not read (a DGX-1 topo -m,
    tests/data/topo_public, pasted without its header row: its rows cannot tell GPU columns from
    NIC columns) is listed as skipped with why; named alone on the command line it is the error."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    smi = fixtures / "nvidia-smi" / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.load.q.txt"
    shutil.copy(smi, bundle / "smi.txt")
    mesh = next(
        (Path(__file__).resolve().parents[1] / "data" / "topo_public").glob("topo__vllm-5727__*")
    )
    lines = mesh.read_text().splitlines()
    first_row = next(i for i, line in enumerate(lines) if line.split()[:2] == ["GPU0", "X"])
    (bundle / "topo.txt").write_text("\n".join(lines[first_row:]) + "\n")
    report = diagnose_captures([str(bundle)], DoctorOptions())
    assert [Path(s.path).name for s in report.skipped] == ["topo.txt"]
    assert "cannot tell GPU columns from NIC columns" in report.skipped[0].reason
    assert report.samples  # the -q capture was judged
    with pytest.raises(InputError):
        diagnose_captures([str(bundle / "topo.txt")], DoctorOptions())
