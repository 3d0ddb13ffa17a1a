"""What the held-out nvidia-smi sets (tests/data/smi_public, smi_forum, smi_testdata,
smi_xml_public, topo_public) share: how a set is loaded and checked against its SOURCES.md, the
per-GPU values their expected.json files hold, the doctor check, and the cut-and-splice check
every parser gets (a damaged capture reads, or is refused with exit 2 and a hint naming it)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.doctor.node import DoctorOptions, diagnose_captures
from gpuwarden.errors import CorruptInputError, GpuwardenError, InputError
from gpuwarden.telemetry.smi import parse_nvlink_status, parse_smi_output, parse_topology
from gpuwarden.types.telemetry import DeviceSample
from gpuwarden.types.topology import NvLinkStatus, Ranges, Topology
from gpuwarden.units import MIB

DATA_ROOT = Path(__file__).resolve().parents[2] / "data"
_NOT_SAMPLES = frozenset({"SOURCES.md", "expected.json"})


def load_set(name: str) -> tuple[Path, list[dict[str, Any]]]:
    """The folder of a held-out set under tests/data and the samples its expected.json lists."""
    data = DATA_ROOT / name
    samples: list[dict[str, Any]] = json.loads((data / "expected.json").read_text())["samples"]
    return data, samples


def assert_set_is_described(data: Path, samples: list[dict[str, Any]]) -> None:
    """Every file of the set is a sample of expected.json and is named in SOURCES.md."""
    files = sorted(p.name for p in data.iterdir() if p.name not in _NOT_SAMPLES)
    assert files == sorted(sample_ids(samples))
    sources = (data / "SOURCES.md").read_text()
    assert all(name in sources for name in files)


def sample_text(data: Path, sample: dict[str, Any]) -> str:
    file: str = sample["file"]
    return (data / file).read_text()


def sample_gpus(data: Path, sample: dict[str, Any]) -> list[DeviceSample]:
    """The GPUs of a sample that reads as one nvidia-smi reading."""
    (snap,) = parse_smi_output(sample_text(data, sample), sample["file"], 0.0)
    return list(snap.samples)


def samples_read_as(samples: list[dict[str, Any]], reads: str) -> list[dict[str, Any]]:
    """The samples expected.json says are read as ``reads`` ("smi", "rejected", "topo"...)."""
    return [s for s in samples if s["reads"] == reads]


def sample_param(sample: dict[str, Any], xfails: dict[str, str]) -> Any:
    """The sample as a test parameter named by its file, a strict xfail when ``xfails`` gives
    its file a reason."""
    reason = xfails.get(sample["file"])
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(sample, id=sample["file"], marks=marks)


def mib(value: int | None) -> float | None:
    return None if value is None else value / MIB


def key_values(device: DeviceSample) -> dict[str, Any]:
    """The per-GPU values an expected.json records, as read (a set may record a subset)."""
    return {
        "index": device.info.index,
        "name": device.info.name or None,
        "mem_total_mib": mib(device.info.memory_total_bytes),
        "mem_used_mib": mib(device.memory_used_bytes),
        "temp_c": device.temperature_gpu_celsius,
        "power_w": device.power_draw_watts,
        "power_limit_w": device.power_limit_watts,
        "util_pct": device.gpu_utilization_percent,
    }


def assert_reads_or_refused_clearly(
    parse: Callable[[str], object], text: str, cut: float, noise: str, name: str | None = None
) -> None:
    """``text`` with ``noise`` spliced in at ``cut`` (0..1 of its length): ``parse`` reads it or
    refuses it as bad input (exit 2) with a hint — naming the file, when ``name`` is given."""
    at = int(len(text) * cut)
    refused: GpuwardenError | None = None
    try:
        parse(text[:at] + noise + text[at:])
    except GpuwardenError as exc:
        refused = exc
    if refused is not None:
        assert (refused.exit_code, bool(refused.hint)) == (2, True)
        assert name is None or name in str(refused)


def printed_uuid(device: DeviceSample) -> str | None:
    """The GPU UUID as printed; the reader names a GPU whose UUID was not printed by its index."""
    uuid = device.info.uuid
    return None if uuid.startswith("index:") else uuid


def identity_values(device: DeviceSample) -> dict[str, Any]:
    """The identity and mode cells the -q sets' expected.json record per GPU, as read."""
    return {
        "uuid": printed_uuid(device),
        "pci_bus_id": device.info.pci_bus_id,
        "persistence_mode": device.persistence_mode,
        "pstate": device.pstate,
        "mig_mode": device.mig_mode,
    }


# what the sets of default tables, -q text and CSV record per GPU (their outputs print no limit)
TABLE_KEYS = ("index", "name", "mem_used_mib", "mem_total_mib", "temp_c", "power_w", "util_pct")


def table_values(device: DeviceSample) -> dict[str, Any]:
    values = key_values(device)
    return {key: values[key] for key in TABLE_KEYS}


def sample_ids(samples: list[dict[str, Any]]) -> list[str]:
    return [s["file"] for s in samples]


def assert_reads_table_values(sample: dict[str, Any], text: str) -> None:
    """One reading whose GPUs hold the values (and driver, fan) the sample records."""
    (snap,) = parse_smi_output(text, sample["file"], 0.0)
    assert [table_values(d) for d in snap.samples] == sample["gpus"]
    assert {d.info.driver_version for d in snap.samples} == {sample["driver"]}
    if "fan_pct" in sample:
        assert [d.fan_speed_percent for d in snap.samples] == [sample["fan_pct"]]


def doctor_codes_above_info(path: Path) -> list[str]:
    """The codes of doctor's findings above info on one capture, sorted."""
    report = diagnose_captures([str(path)], DoctorOptions())
    return sorted({f.code for f in report.findings if f.severity.rank > 0})


def assert_doctor_finds(path: Path, codes: list[str] | None) -> None:
    """doctor finds exactly ``codes`` above info; ``None``: it refuses the file as bad input."""
    if codes is None:
        with pytest.raises(InputError) as caught:
            diagnose_captures([str(path)], DoctorOptions())
        assert caught.value.exit_code == 2 and caught.value.hint
        return
    assert doctor_codes_above_info(path) == sorted(codes)


def nvlink_states(status: NvLinkStatus) -> dict[str, dict[str, Any]]:
    """Per GPU index: how many links are active and which are inactive (expected.json's form)."""
    return {
        str(gpu.index): {
            "active": sum(1 for link in gpu.links if link.active),
            "inactive": [link.link for link in gpu.links if link.active is False],
        }
        for gpu in status.gpus
    }


def assert_refused_clearly(sample: dict[str, Any], text: str) -> None:
    """nvidia-smi's reader refuses the sample as corrupt input, naming its file, with a hint."""
    with pytest.raises(CorruptInputError) as caught:
        parse_smi_output(text, sample["file"], 0.0)
    assert sample["file"] in str(caught.value) and caught.value.hint


# the fuzz strategies of the cut-and-splice check: where to cut (0..1 of the text), what to splice
CUT = st.floats(0.0, 1.0)
NOISE = st.text(max_size=30)


def assert_smi_sample_reads_or_refused_clearly(
    sample: dict[str, Any], text: str, cut: float, noise: str
) -> None:
    assert_reads_or_refused_clearly(
        lambda damaged: parse_smi_output(damaged, sample["file"], 0.0), text, cut, noise
    )


def assert_topo_sample_reads_or_refused_clearly(
    sample: dict[str, Any], text: str, cut: float, noise: str
) -> None:
    """As above for a `topo -m` or `nvlink -s` sample, the refusal naming the file."""
    parse = parse_topology if sample["reads"] == "topo" else parse_nvlink_status
    assert_reads_or_refused_clearly(
        lambda damaged: parse(damaged, sample["file"]), text, cut, noise, sample["file"]
    )


def _ranges(value: Ranges | None) -> list[list[int]] | None:
    return None if value is None else [list(r) for r in value]


def _cells(topology: Topology, sample: dict[str, Any]) -> list[list[str] | None]:
    return [
        [a, b, link.code] if (link := topology.link(a, b)) else None for a, b, _ in sample["cells"]
    ]


def assert_reads_the_matrix(sample: dict[str, Any], text: str) -> None:
    """A `topo -m` sample reads to the GPUs, NICs, cells, affinities and NIC names recorded."""
    topology = parse_topology(text, sample["file"])
    assert (len(topology.gpus), len(topology.nics)) == (sample["gpus"], sample["nics"])
    assert _cells(topology, sample) == sample["cells"]
    by_label = {g.label: g for g in topology.gpus}
    affinity = {
        label: [
            _ranges(by_label[label].cpu_affinity),
            _ranges(by_label[label].numa_affinity),
            by_label[label].numa_id,
        ]
        for label in sample["affinity"]
    }
    assert affinity == sample["affinity"]
    names = {n.label: n.name for n in topology.nics if n.label in sample.get("nic_names", {})}
    assert names == sample.get("nic_names", {})


def assert_reads_the_links(sample: dict[str, Any], text: str) -> None:
    status = parse_nvlink_status(text, sample["file"])
    assert nvlink_states(status) == sample["nvlink"]


TestFn = Callable[..., None]


def topo_set_checks(
    data: Path, samples: list[dict[str, Any]], xfails: dict[str, str]
) -> tuple[TestFn, TestFn, TestFn, TestFn, TestFn]:
    """The five checks every held-out topology set runs, as test functions for its module: the
    set is the one described; each `topo -m` reads to its matrix and each `nvlink -s` to its
    links; doctor gives exactly the codes the sample shows; a cut or spliced copy reads or is
    refused clearly."""

    def param(sample: dict[str, Any]) -> Any:
        return sample_param(sample, xfails)

    def test_the_set_is_the_one_described() -> None:
        assert_set_is_described(data, samples)

    @pytest.mark.parametrize("sample", [param(s) for s in samples if s["reads"] == "topo"])
    def test_reads_the_matrix(sample: dict[str, Any]) -> None:
        assert_reads_the_matrix(sample, sample_text(data, sample))

    @pytest.mark.parametrize("sample", [param(s) for s in samples if s["reads"] == "nvlink"])
    def test_reads_the_links(sample: dict[str, Any]) -> None:
        assert_reads_the_links(sample, sample_text(data, sample))

    @pytest.mark.parametrize("sample", [param(s) for s in samples])
    def test_doctor_finds_what_the_sample_shows_and_nothing_else(sample: dict[str, Any]) -> None:
        assert_doctor_finds(data / sample["file"], sample["doctor_codes"])
        assert bool(sample["doctor_codes"]) == sample["fault"]

    readable = [s for s in samples if s["file"] not in xfails and s["reads"] != "refused"]

    @settings(max_examples=60, deadline=None)
    @given(sample=st.sampled_from(readable), cut=CUT, noise=NOISE)
    def test_a_cut_or_spliced_sample_reads_or_is_refused_clearly(
        sample: dict[str, Any], cut: float, noise: str
    ) -> None:
        assert_topo_sample_reads_or_refused_clearly(sample, sample_text(data, sample), cut, noise)

    return (
        test_the_set_is_the_one_described,
        test_reads_the_matrix,
        test_reads_the_links,
        test_doctor_finds_what_the_sample_shows_and_nothing_else,
        test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
    )


def smi_set_checks(
    data: Path,
    samples: list[dict[str, Any]],
    read_xfails: dict[str, str],
    doctor_xfails: dict[str, str],
    min_samples: int = 0,
) -> tuple[TestFn, TestFn, TestFn, TestFn]:
    """The four checks every held-out nvidia-smi set runs besides reading its values, as test
    functions for its module: the set is the one described; what holds no reading is refused
    clearly; doctor gives exactly the codes the sample shows; a cut or spliced copy of a sample
    read as nvidia-smi output reads or is refused clearly. ``min_samples``: the least samples the
    set holds."""
    rejected = samples_read_as(samples, "rejected")
    readable = [s for s in samples_read_as(samples, "smi") if s["file"] not in read_xfails]

    def test_the_set_is_the_one_described() -> None:
        assert_set_is_described(data, samples)
        assert len(samples) >= min_samples

    @pytest.mark.parametrize("sample", rejected, ids=sample_ids(rejected))
    def test_what_holds_no_reading_is_refused_clearly(sample: dict[str, Any]) -> None:
        assert_refused_clearly(sample, sample_text(data, sample))

    @pytest.mark.parametrize("sample", [sample_param(s, doctor_xfails) for s in samples])
    def test_doctor_finds_what_the_sample_shows_and_nothing_else(sample: dict[str, Any]) -> None:
        assert_doctor_finds(data / sample["file"], sample["doctor_codes"])

    @settings(max_examples=60, deadline=None)
    @given(sample=st.sampled_from(readable), cut=CUT, noise=NOISE)
    def test_a_cut_or_spliced_sample_reads_or_is_refused_clearly(
        sample: dict[str, Any], cut: float, noise: str
    ) -> None:
        assert_smi_sample_reads_or_refused_clearly(sample, sample_text(data, sample), cut, noise)

    return (
        test_the_set_is_the_one_described,
        test_what_holds_no_reading_is_refused_clearly,
        test_doctor_finds_what_the_sample_shows_and_nothing_else,
        test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
    )


def mixed_set_checks(
    data: Path,
    samples: list[dict[str, Any]],
    read_xfails: dict[str, str],
    doctor_xfails: dict[str, str],
    min_samples: int,
) -> tuple[TestFn, TestFn, TestFn, TestFn, TestFn]:
    """The checks of a held-out set of nvidia-smi screens and `topo -m` matrices, as test
    functions for its module: ``smi_set_checks``' set, refusal and doctor checks; each screen
    reads to the values, power limits and driver printed; a cut or spliced copy of a screen or a
    matrix reads or is refused clearly."""
    described, refused, doctor, _ = smi_set_checks(
        data, samples, read_xfails, doctor_xfails, min_samples
    )
    screens = samples_read_as(samples, "smi")
    readable = [
        s for s in screens + samples_read_as(samples, "topo") if s["file"] not in read_xfails
    ]

    @pytest.mark.parametrize("sample", [sample_param(s, read_xfails) for s in screens])
    def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
        (snap,) = parse_smi_output(sample_text(data, sample), sample["file"], 0.0)
        assert [table_values(d) for d in snap.samples] == sample["gpus"]
        assert [d.power_limit_watts for d in snap.samples] == sample["power_limit_w"]
        assert {d.info.driver_version for d in snap.samples} == {sample["driver"]}

    @settings(max_examples=60, deadline=None)
    @given(sample=st.sampled_from(readable), cut=CUT, noise=NOISE)
    def test_a_cut_or_spliced_sample_reads_or_is_refused_clearly(
        sample: dict[str, Any], cut: float, noise: str
    ) -> None:
        def parse(text: str) -> object:
            if sample["reads"] == "topo":
                return parse_topology(text, sample["file"])
            return parse_smi_output(text, sample["file"], 0.0)

        assert_reads_or_refused_clearly(parse, sample_text(data, sample), cut, noise)

    return (
        described,
        test_reads_the_printed_values,
        refused,
        doctor,
        test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
    )


def matrix_check(data: Path, samples: list[dict[str, Any]]) -> TestFn:
    """Each `topo -m` matrix of a set reads to the rows recorded (``assert_reads_the_matrix``),
    as a test function for its module."""
    matrices = samples_read_as(samples, "topo")

    def test_reads_the_matrix(sample: dict[str, Any]) -> None:
        assert_reads_the_matrix(sample, sample_text(data, sample))

    check: TestFn = pytest.mark.parametrize("sample", matrices, ids=sample_ids(matrices))(
        test_reads_the_matrix
    )
    return check


def snapshot_json_devices(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """``gpuwarden snapshot --backend smi --from PATH --json``'s devices, the command run in
    process (its exit code must be 0)."""
    from gpuwarden.cli.main import main

    code = main(["snapshot", "--backend", "smi", "--from", str(path), "--json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, document
    devices: list[dict[str, Any]] = document["devices"]
    return devices


def _json_values(device: dict[str, Any]) -> dict[str, Any]:
    """``key_values``' readings as ``snapshot --json`` prints them."""
    return {
        "index": device["index"],
        "name": device["name"],
        "mem_total_mib": mib(device["memory_total_bytes"]),
        "mem_used_mib": mib(device["memory_used_bytes"]),
        "temp_c": device["temperature_gpu_celsius"],
        "power_w": device["power_draw_watts"],
        "power_limit_w": device["power_limit_watts"],
        "util_pct": device["gpu_utilization_percent"],
    }


# a DTD named by reference, or by the comment heading the inline copy `nvidia-smi --dtd` prints
_DOCTYPE = re.compile(
    r"<!DOCTYPE nvidia_smi_log "
    r'(?:SYSTEM "(nvsmi_device_v\d+)\.dtd"|\[\s*<!-- (nvsmi_device_v\d+)\.dtd -->)'
)


def declared_schema(text: str) -> str | None:
    """The nvsmi_device_vN a ``-q -x`` report declares, or None without a DOCTYPE."""
    found = _DOCTYPE.search(text)
    return (found.group(1) or found.group(2)) if found else None


def xml_extra_values(device: DeviceSample) -> dict[str, Any]:
    """The further values a ``-q -x`` set's expected.json may record per GPU, as read."""
    reasons = device.clock_event_reasons
    return {
        "fan_pct": device.fan_speed_percent,
        "processes": None if device.processes is None else len(device.processes),
        "slowdown_c": device.temperature_slowdown_celsius,
        "shutdown_c": device.temperature_shutdown_celsius,
        "temp_margin_c": device.temperature_margin_celsius,
        "clock_event_reasons": None if reasons is None else list(reasons),
        "replay_total": device.pcie_replay_total,
        "link_width": [device.pcie_link_width_current, device.pcie_link_width_max],
        "fabric": [device.fabric_state, device.fabric_status, device.fabric_health_summary],
        "retired_pending": device.retired_pages_pending,
        "retired_pages": [device.retired_pages_single_bit, device.retired_pages_double_bit],
        "ecc_uncorrected": [
            device.ecc_errors_uncorrected_volatile,
            device.ecc_errors_uncorrected_aggregate,
        ],
    }


def sample_named(samples: list[dict[str, Any]], file: str) -> dict[str, Any]:
    (found,) = [s for s in samples if s["file"] == file]
    return found


def xml_set_checks(
    data: Path,
    samples: list[dict[str, Any]],
    schema_of: Callable[[str], str | None] = declared_schema,
    extra_of: Callable[[DeviceSample], dict[str, Any]] = xml_extra_values,
) -> tuple[TestFn, TestFn, TestFn, TestFn, TestFn, TestFn]:
    """The checks every held-out ``-q -x`` set runs, as test functions for its module: the set is
    the one described; each file is a whole report of the schema it declares (``schema_of``);
    it reads to the values recorded (``extra_of``: the further values a sample's ``extra`` and
    ``per_gpu`` name; its ``cuda`` where recorded); ``snapshot --json`` prints the same; doctor
    gives exactly the codes the file shows (none for a sample whose fault is "none ..."); a cut
    or spliced copy reads or is refused clearly."""
    ids = sample_ids(samples)

    def test_the_set_is_the_one_described() -> None:
        assert_set_is_described(data, samples)

    def test_the_file_is_a_complete_capture_of_its_schema(sample: dict[str, Any]) -> None:
        text = sample_text(data, sample)
        assert text.rstrip().endswith("</nvidia_smi_log>")
        assert schema_of(text) == sample["schema"]

    def test_reads_the_printed_values(sample: dict[str, Any]) -> None:
        gpus = sample_gpus(data, sample)
        assert [key_values(d) for d in gpus] == sample["gpus"]
        assert {d.info.driver_version for d in gpus} == {sample["driver"]}
        if "cuda" in sample:
            assert {d.info.cuda_driver_version for d in gpus} == {sample["cuda"]}
        for device in gpus:
            seen = extra_of(device)
            assert {key: seen[key] for key in sample["extra"]} == sample["extra"]
        for key, per_gpu in sample.get("per_gpu", {}).items():
            assert [extra_of(d)[key] for d in gpus] == per_gpu

    def test_snapshot_json_prints_the_same_values(
        sample: dict[str, Any], capsys: pytest.CaptureFixture[str]
    ) -> None:
        printed = snapshot_json_devices(data / sample["file"], capsys)
        assert [_json_values(d) for d in printed] == sample["gpus"]
        assert {d["driver_version"] for d in printed} == {sample["driver"]}
        if "cuda" in sample:
            assert {d["cuda_driver_version"] for d in printed} == {sample["cuda"]}

    def test_doctor_finds_what_the_file_shows_and_nothing_else(sample: dict[str, Any]) -> None:
        assert_doctor_finds(data / sample["file"], sample["doctor_codes"])
        assert bool(sample["doctor_codes"]) == (not sample["fault"].startswith("none"))

    @settings(max_examples=60, deadline=None)
    @given(sample=st.sampled_from(samples), cut=CUT, noise=NOISE)
    def test_a_cut_or_spliced_capture_reads_or_is_refused_clearly(
        sample: dict[str, Any], cut: float, noise: str
    ) -> None:
        assert_smi_sample_reads_or_refused_clearly(sample, sample_text(data, sample), cut, noise)

    each = pytest.mark.parametrize("sample", samples, ids=ids)
    return (
        test_the_set_is_the_one_described,
        each(test_the_file_is_a_complete_capture_of_its_schema),
        each(test_reads_the_printed_values),
        each(test_snapshot_json_prints_the_same_values),
        each(test_doctor_finds_what_the_file_shows_and_nothing_else),
        test_a_cut_or_spliced_capture_reads_or_is_refused_clearly,
    )
