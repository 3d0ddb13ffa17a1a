"""dcgm-exporter scrapes → DeviceSamples: every fixture, with the values printed in it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError, GpuwardenError
from gpuwarden.report.snapshot_document import snapshot_document
from gpuwarden.telemetry.backend import Backend
from gpuwarden.telemetry.dcgm import open_dcgm, parse_scrape
from gpuwarden.telemetry.dcgm.exposition import parse_exposition

MIB = 1 << 20
A100 = "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"
T4 = "datadog-integrations-core__tesla-t4__metrics.prom"
H100 = "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom"
GB200 = "issue-dcgm-exporter-581__gb200__excerpt.prom"
A100_UUID = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"


def _path(fixtures: Path, name: str) -> str:
    return str(fixtures / "dcgm" / name)


def test_every_scrape_fixture_parses(fixtures: Path) -> None:
    files = sorted((fixtures / "dcgm").glob("*.prom"))
    assert len(files) == 4
    for path in files:
        backend = open_dcgm(str(path))
        assert isinstance(backend, Backend)
        snap = backend.read()
        assert snap.backend == "dcgm" and snap.simulated is False and snap.source == str(path)
        assert snap.samples and snap.host


def test_same_series_as_prometheus_client(fixtures: Path) -> None:
    """Our reader and the reference parser see the same (name, labels, value) in every file."""
    parser = pytest.importorskip("prometheus_client.parser")
    for path in sorted((fixtures / "dcgm").glob("*.prom")):
        text = path.read_text()
        ours = parse_exposition(text, str(path)).samples
        # prometheus_client names counter samples "<family>_total"; the scrape does not
        reference = [
            (s.name.removesuffix("_total"), tuple(sorted(s.labels.items())), s.value)
            for family in parser.text_string_to_metric_families(text)
            for s in family.samples
        ]
        assert sorted((s.name, tuple(sorted(s.labels.items())), s.value) for s in ours) == sorted(
            reference
        ), path.name


def test_a100_mig_scrape(fixtures: Path) -> None:
    snap = open_dcgm(_path(fixtures, A100)).read()
    parent, instance = snap.samples
    assert parent.info.uuid == A100_UUID and parent.info.mig_parent_uuid is None
    assert snap.host == "ub20-a100-k8s"  # label Hostname
    assert parent.clock_sm_mhz == 1215 and parent.clock_memory_mhz == 1215
    assert (parent.temperature_gpu_celsius, parent.temperature_memory_celsius) == (61, 69)
    assert parent.power_draw_watts == pytest.approx(409.692)
    assert parent.energy_consumed_joules == pytest.approx(319159.391)  # 319159391 mJ
    assert (parent.memory_free_bytes, parent.memory_used_bytes) == (35690 * MIB, 4845 * MIB)
    assert parent.xid_last is None  # DCGM_FI_DEV_XID_ERRORS 0
    assert parent.graphics_engine_active_ratio == pytest.approx(0.995630)
    assert parent.tensor_active_ratio == pytest.approx(0.929260)
    assert parent.dram_active_ratio == pytest.approx(0.690789)
    assert parent.pcie_tx_bytes_per_second == 33011804
    assert parent.pcie_rx_bytes_per_second == 97863601
    assert parent.extra["dcgm_dev_nvlink_bandwidth_total"] == 0
    assert parent.mig_mode is True
    assert parent.mig_devices is not None
    (mig,) = parent.mig_devices
    assert (mig.gpu_instance_id, mig.profile) == (13, "1g.5gb")
    # the GPU_I_ID="13" series' pillars land on the parent's MIG row too
    assert mig.graphics_engine_active_ratio == pytest.approx(0.995687)
    assert mig.tensor_active_ratio == pytest.approx(0.930433)
    assert mig.dram_active_ratio == pytest.approx(0.800339)
    assert mig.sm_active_ratio is None  # not in this scrape
    assert instance.info.mig_parent_uuid == A100_UUID
    assert (instance.info.gpu_instance_id, instance.info.mig_profile) == (13, "1g.5gb")
    assert instance.graphics_engine_active_ratio == pytest.approx(0.995687)
    assert instance.dram_active_ratio == pytest.approx(0.800339)
    assert instance.info.uuid != parent.info.uuid
    assert [d.uuid for d in open_dcgm(_path(fixtures, A100)).devices()] == [A100_UUID]


def test_t4_two_concatenated_scrapes(fixtures: Path) -> None:
    snap = open_dcgm(_path(fixtures, T4)).read()
    old, new = snap.samples  # driver 460 and 470 scrapes, both gpu="0"
    assert old.info.driver_version == "460.106.00" and new.info.driver_version == "470.182.03"
    assert old.info.name == new.info.name == "Tesla T4"
    assert snap.host == "424773df46e0,551bdf382151"
    assert old.memory_free_bytes == 15109 * MIB and old.memory_used_bytes == 0
    assert old.power_draw_watts == pytest.approx(8.969)
    assert old.energy_consumed_joules == pytest.approx(128996.013)
    assert new.temperature_slowdown_celsius == 93  # DCGM_FI_DEV_SLOWDOWN_TEMP
    assert new.power_limit_watts == 70  # DCGM_FI_DEV_POWER_MGMT_LIMIT
    assert new.pstate == "P8"
    assert new.clock_event_reasons == ("gpu_idle",)  # DCGM_FI_DEV_CLOCK_THROTTLE_REASONS 1
    assert new.info.memory_total_bytes == 15109 * MIB  # DCGM_FI_DEV_FB_TOTAL
    assert new.info.cuda_driver_version == "12.1"  # DCGM_FI_CUDA_DRIVER_VERSION="12010"
    assert new.info.serial == "1565220008176"
    assert new.extra["dcgm_dev_fb_used_percent"] == pytest.approx(0.000008)


def test_h100_mig_pods(fixtures: Path) -> None:
    backend = open_dcgm(_path(fixtures, H100))
    snap = backend.read()
    parent = snap.samples[0]
    assert parent.info.name == "NVIDIA H100 80GB HBM3"
    assert parent.info.pci_bus_id == "00000000:1A:00.0"
    assert parent.info.driver_version == "535.129.03"
    assert parent.mig_devices is not None
    assert [m.gpu_instance_id for m in parent.mig_devices] == [7, 8, 9]
    assert [s.info.gpu_instance_id for s in snap.samples[1:]] == [7, 8, 9]
    assert all(s.graphics_engine_active_ratio == 0 for s in snap.samples[1:])
    pods = backend.pods()
    assert [(p.gpu_instance_id, p.namespace, p.container) for p in pods] == [
        (7, "model-playground-stg", "kserve-container"),
        (9, "model-playground-stg", "kserve-container"),
    ]
    assert pods[1].pod == "tts-predictor-00011-deployment-5554f75554-8j8pl"


def test_gb200_nvlink_counters_go_to_extra(fixtures: Path) -> None:
    snap = open_dcgm(_path(fixtures, GB200)).read()
    assert [s.info.index for s in snap.samples] == [0, 1, 2, 3]
    gpu3 = snap.samples[3]
    assert gpu3.info.pci_bus_id == "00000019:01:00.0"
    assert gpu3.extra["dcgm_dev_nvlink_count_tx_discards"] == 0
    assert "dcgm_dev_nvlink_count_link_recovery_successful_events" in gpu3.extra


def test_hostname_label_case_drift(fixtures: Path) -> None:
    text = (fixtures / "dcgm" / A100).read_text()
    renamed = text.replace("Hostname=", "hostname=")
    assert renamed != text
    assert parse_scrape(renamed, "new-exporter", 0.0).snapshot.host == "ub20-a100-k8s"


def test_xid_and_blank_sentinels(fixtures: Path) -> None:
    text = (fixtures / "dcgm" / A100).read_text()
    lines = text.splitlines()
    xid = next(i for i, line in enumerate(lines) if line.startswith("DCGM_FI_DEV_XID_ERRORS"))
    lines[xid] = lines[xid].rsplit(" ", 1)[0] + " 79"
    temp = next(i for i, line in enumerate(lines) if line.startswith("DCGM_FI_DEV_MEMORY_TEMP"))
    # the NOT_SUPPORTED sentinel old exporters published (telemetry.md §2.5)
    lines[temp] = lines[temp].rsplit(" ", 1)[0] + " 9223372036854775794"
    sample = parse_scrape("\n".join(lines), "edited", 0.0).snapshot.samples[0]
    assert sample.xid_last == 79
    assert sample.temperature_memory_celsius is None


def test_bad_line_names_file_and_line(fixtures: Path, tmp_path: Path) -> None:
    lines = (fixtures / "dcgm" / A100).read_text().splitlines()
    lines[4] = lines[4].replace('gpu="0"', 'gpu="0', 1)
    path = tmp_path / "bad.prom"
    path.write_text("\n".join(lines))
    with pytest.raises(CorruptInputError, match=r"bad\.prom, line 5: ") as err:
        open_dcgm(str(path))
    assert err.value.reference == "dcgm-scrape-unreadable"
    assert err.value.hint and "9400/metrics" in err.value.hint
    lines = (fixtures / "dcgm" / A100).read_text().splitlines()
    lines[2] = lines[2].rsplit(" ", 1)[0] + " hot"
    path.write_text("\n".join(lines))
    with pytest.raises(CorruptInputError, match=r"line 3: DCGM_FI_DEV_MEMORY_TEMP: 'hot'"):
        open_dcgm(str(path))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CorruptInputError, match="cannot be read"):
        open_dcgm(str(tmp_path / "none.prom"))


def test_special_values() -> None:
    text = (
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-x"} NaN\n'
        'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-x"} +Inf 1700000000000\n'
    )
    samples = parse_exposition(text, "special").samples
    assert math.isnan(samples[0].value) and samples[1].value == math.inf
    sample = parse_scrape(text, "special", 0.0).snapshot.samples[0]
    assert sample.temperature_gpu_celsius is None  # NaN is "no value"


_FUZZ = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def seeds(fixtures: Path) -> list[str]:
    return [p.read_text() for p in sorted((fixtures / "dcgm").glob("*.prom"))]


def _parse_or_error(text: str) -> None:
    """A Snapshot whose JSON is strict (no NaN/Infinity), or the scrape error; any other
    exception fails the test."""
    try:
        scrape = parse_scrape(text, "fuzz", 0.0)
    except GpuwardenError as exc:
        reference = exc.reference
    else:
        json.dumps(snapshot_document(scrape.snapshot), allow_nan=False)
        reference = None
    assert reference in (None, "dcgm-scrape-unreadable", "dcgm-scrape-no-gpus")


@_FUZZ
@given(which=st.integers(0, 3), cut=st.floats(0, 1))
def test_fuzz_truncations(seeds: list[str], which: int, cut: float) -> None:
    _parse_or_error(seeds[which][: int(len(seeds[which]) * cut)])


@_FUZZ
@given(
    which=st.integers(0, 3),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_fuzz_byte_flips(seeds: list[str], which: int, flips: list[tuple[float, int]]) -> None:
    data = bytearray(seeds[which].encode())
    for where, byte in flips:
        data[min(int(where * len(data)), len(data) - 1)] = byte
    _parse_or_error(data.decode("utf-8", errors="replace"))


@_FUZZ
@given(which=st.integers(0, 3), data=st.data())
def test_fuzz_line_shuffles(seeds: list[str], which: int, data: st.DataObject) -> None:
    _parse_or_error("\n".join(data.draw(st.permutations(seeds[which].splitlines()))))


@_FUZZ
@given(text=st.text(alphabet=st.sampled_from('DCGM_FI{}="0,.\n #x9e+-'), max_size=200))
def test_fuzz_exposition_alphabet(text: str) -> None:
    _parse_or_error(text)


def test_every_sample_value_made_unreadable(fixtures: Path) -> None:
    """Each sample line's value replaced by text: always the scrape error, naming that line."""
    for path in sorted((fixtures / "dcgm").glob("*.prom")):
        lines = path.read_text().splitlines()
        checked = 0
        for number, line in enumerate(lines):
            if not line or line.startswith("#"):
                continue
            broken = [*lines[:number], line.rsplit(" ", 1)[0] + " lots", *lines[number + 1 :]]
            with pytest.raises(CorruptInputError, match=rf", line {number + 1}: "):
                parse_scrape("\n".join(broken), path.name, 0.0)
            checked += 1
        assert checked >= 3, path.name


@pytest.mark.parametrize(
    ("label", "version"),
    [("12010", "12.1"), ("11080", "11.8"), ("²", "²"), ("", None), (None, None)],
)
def test_cuda_driver_version_label(label: str | None, version: str | None) -> None:
    """The integer form converts; anything int() cannot read (a superscript passes isdigit) is
    kept as written, never a traceback."""
    from gpuwarden.telemetry.dcgm.fields import cuda_version

    assert cuda_version(label) == version


@pytest.mark.parametrize(
    "masked", ["GPU-********", "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", "<redacted>"]
)
def test_a_blanked_uuid_names_no_gpu_the_index_names_each(masked: str) -> None:
    """A UUID blanked before a scrape was shared names no GPU: each GPU (the first too) and its
    MIG instances are named by host and index, as without a UUID; a real UUID is kept."""
    real = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"
    lines = [
        f'DCGM_FI_DEV_GPU_TEMP{{gpu="{gpu}",UUID="{uuid}",Hostname="n1"{mig}}} 40'
        for gpu, uuid, mig in (
            (0, masked, ',GPU_I_ID="1",GPU_I_PROFILE="3g.40gb"'),
            (0, masked, ""),
            (1, masked, ""),
            (2, real, ""),
        )
    ]
    snap = parse_scrape("\n".join(lines) + "\n", "scrape.prom", 0.0).snapshot
    names = sorted((s.info.uuid, s.info.index) for s in snap.samples)
    assert names == [(real, 2), ("n1/index:0", 0), ("n1/index:0:gi1", 0), ("n1/index:1", 1)]
