"""`nvidia-smi topo -m` / `topo -mp` and `nvidia-smi nvlink -s` captures (fixtures/topo): the
values printed in each file, the forms other drivers and pastes take, and damage refused.

Expected values are read off the fixture named in each test (the comment quotes the line).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuwarden.errors import CorruptInputError, GpuwardenError
from gpuwarden.telemetry.smi import open_smi
from gpuwarden.telemetry.smi.topo import (
    looks_like_nvlink_status,
    looks_like_topo,
    parse_nvlink_status,
    parse_topology,
)
from gpuwarden.types.topology import LinkKind, NvLinkSupport, Topology

TOPO = "topo"
NV8 = "issue-nccl-933__8gpu-nv8__topo-m.partial.txt"
PCIE = "issue-deepep-60__8gpu-pcie__topo-mp.partial.txt"
A100X8 = "gpud__a100-sxm4-80gb-x8__nvlink-status.txt"
H100 = "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01"
H100_MIG = "linux-x86_64__nvidia-h100-mig__590.48.01"
RTX_2080 = "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05"
RTX_2080_610 = "linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04"
RTX_4080 = "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05"
WIN_591 = "windows-x86_64__nvidia-geforce-rtx-2080-super__591.86"
WIN_610 = "windows-x86_64__nvidia-geforce-rtx-2080-super__610.62"


def _text(fixtures: Path, name: str) -> str:
    return (fixtures / TOPO / name).read_text()


# ---- topo -m ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stem", "cpus"),
    # "GPU0<tab> X <tab>0-23<tab>0<tab><tab>N/A" (ANSI-underlined header, tabs)
    [(RTX_2080, (0, 23)), (RTX_2080_610, (0, 23)), (RTX_4080, (0, 15)), (H100, (0, 19))],
)
def test_single_gpu_captures(fixtures: Path, stem: str, cpus: tuple[int, int]) -> None:
    text = _text(fixtures, f"{stem}.topo-m.txt")
    assert "\x1b[4m" in text and "\t" in text
    assert looks_like_topo(text) and not looks_like_nvlink_status(text)
    topo = parse_topology(text, "topo")
    (gpu,) = topo.gpus
    assert (gpu.index, gpu.label) == (0, "GPU0")
    assert gpu.cpu_affinity == (cpus,)
    assert gpu.numa_affinity == ((0, 0),)
    assert gpu.numa_id is None  # "N/A"
    assert topo.nics == () and topo.links == () and topo.missing_rows == ()
    assert dict(topo.legend)["NV#"] == "Connection traversing a bonded set of # NVLinks"
    assert [code for code, _ in topo.legend] == ["X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#"]


def test_windows_capture_without_affinity(fixtures: Path) -> None:
    # "GPU0<tab> X <tab><tab><tab><tab>N/A": no CPU or NUMA affinity on Windows
    (gpu,) = parse_topology(_text(fixtures, f"{WIN_610}.topo-m.txt"), "win").gpus
    assert (gpu.cpu_affinity, gpu.numa_affinity, gpu.numa_id) == (None, None, None)


def test_error_instead_of_a_matrix(fixtures: Path) -> None:
    text = _text(fixtures, f"{WIN_591}.topo-m.txt")  # "ERROR: Option -m is missing its value."
    assert not looks_like_topo(text)
    with pytest.raises(CorruptInputError) as err:
        parse_topology(text, "win-topo.txt")
    assert err.value.reference == "smi-output-unreadable"
    assert "win-topo.txt, line 1: no `nvidia-smi topo -m` matrix" in err.value.message
    assert "Option -m is missing its value" in err.value.message
    assert err.value.hint and "topo -m" in err.value.hint


def test_nv8_node_with_nics(fixtures: Path) -> None:
    topo = parse_topology(_text(fixtures, NV8), "nv8")
    assert [g.label for g in topo.gpus] == [f"GPU{i}" for i in range(8)]
    assert [n.label for n in topo.nics] == [f"NIC{i}" for i in range(9)]
    assert all(n.name is None for n in topo.nics)  # no NIC legend in the excerpt
    gpu_pairs = [x for x in topo.links if x.a.startswith("GPU") and x.b.startswith("GPU")]
    assert len(gpu_pairs) == 8 * 7 // 2  # GPU7's row is cut, its column is not
    assert {(x.kind, x.code, x.nvlinks) for x in gpu_pairs} == {(LinkKind.NVLINK, "NV8", 8)}
    # "GPU0 ... NODE SYS PIX ..." under NIC0 NIC1 NIC2; "GPU4 ... SYS PIX ..."
    assert topo.link("GPU0", "NIC2") == topo.link("NIC2", "GPU0")
    assert (topo.link("GPU0", "NIC2") or _no()).kind is LinkKind.PIX
    assert (topo.link("GPU0", "NIC1") or _no()).kind is LinkKind.SYS
    assert (topo.link("GPU4", "NIC1") or _no()).kind is LinkKind.PIX
    assert topo.gpus[4].cpu_affinity == ((48, 95), (144, 191))  # "48-95,144-191"
    assert topo.gpus[4].numa_affinity == ((1, 1),)
    assert topo.gpus[7].cpu_affinity is None  # its row is not in the excerpt
    assert topo.missing_rows == ("GPU7", *(f"NIC{i}" for i in range(9)))


def _no() -> object:
    raise AssertionError("no such link")


def test_pcie_only_matrix_topo_mp(fixtures: Path) -> None:
    topo = parse_topology(_text(fixtures, PCIE), "mp")
    assert len(topo.gpus) == 8 and len(topo.nics) == 14
    assert all(x.kind is not LinkKind.NVLINK and x.nvlinks is None for x in topo.links)
    # "GPU0  X  NODE NODE NODE SYS SYS SYS SYS PIX ..."
    assert [(topo.link("GPU0", f"GPU{i}") or _no()).code for i in range(1, 8)] == [
        "NODE",
        "NODE",
        "NODE",
        "SYS",
        "SYS",
        "SYS",
        "SYS",
    ]
    assert (topo.link("GPU3", "NIC7") or _no()).kind is LinkKind.PIX
    assert topo.gpus[0].numa_id is None  # "GPU NUMA ID" column: N/A
    assert topo.link("GPU4", "GPU5") is None  # neither row is in the excerpt


def test_tabs_turned_into_spaces_read_the_same(fixtures: Path) -> None:
    for stem in (RTX_2080, H100, WIN_610):
        text = _text(fixtures, f"{stem}.topo-m.txt")
        pasted = "\n".join(line.expandtabs(8) for line in text.splitlines())
        assert parse_topology(pasted, "paste") == parse_topology(text, "file"), stem


def test_older_driver_names_nics_by_device_and_says_soc(fixtures: Path) -> None:
    text = _text(fixtures, NV8)
    for i in reversed(range(9)):  # NIC8 before NIC1x: whole names only
        text = text.replace(f"NIC{i}", f"mlx5_{i}")
    text = text.replace("SYS", "SOC")
    topo = parse_topology(text, "old")
    assert [n.label for n in topo.nics] == [f"mlx5_{i}" for i in range(9)]
    assert [n.name for n in topo.nics] == [f"mlx5_{i}" for i in range(9)]
    link = topo.link("GPU0", "mlx5_1") or _no()
    assert (link.kind, link.code) == (LinkKind.SYS, "SOC")


def test_nic_legend_names_the_nics(fixtures: Path) -> None:
    legend = "\n\nNIC Legend:\n\n" + "\n".join(f"  NIC{i}: mlx5_{i}" for i in range(9)) + "\n"
    topo = parse_topology(_text(fixtures, NV8) + legend, "nv8")
    assert [n.name for n in topo.nics] == [f"mlx5_{i}" for i in range(9)]


def test_prompt_and_capture_file_around_the_output(fixtures: Path) -> None:
    text = _text(fixtures, f"{H100}.topo-m.txt")
    want = parse_topology(text, "topo")
    assert parse_topology("user@node:~$ nvidia-smi topo -m\n" + text, "paste") == want
    capture = (fixtures / "nvidia-smi" / "captures" / f"{H100}.txt").read_text()
    assert looks_like_topo(capture)
    assert parse_topology(capture, "capture") == want


def test_asymmetric_cells_give_both_links(fixtures: Path) -> None:
    lines = _text(fixtures, NV8).splitlines()
    row = lines[2].split()  # GPU1: "GPU1 NV8 X NV8 ..."
    row[1] = "NV4"
    lines[2] = "    ".join(row)
    topo = parse_topology("\n".join(lines), "asym")
    pair = [x for x in topo.links if {x.a, x.b} == {"GPU0", "GPU1"}]
    assert [(x.a, x.b, x.nvlinks) for x in pair] == [("GPU0", "GPU1", 8), ("GPU1", "GPU0", 4)]
    assert (topo.link("GPU1", "GPU0") or _no()).nvlinks == 4


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda r: r.replace(" X ", " NV8 ", 1), "'NV8' on the diagonal"),
        (lambda r: r.replace("NODE", "X", 1), "'X' off the diagonal"),
        (lambda r: r.replace("PIX", "7-9", 1), "'7-9' is not a link"),
        (lambda r: r.replace("GPU2", "GPU9", 1), "'GPU9' is not a device of the header"),
        (lambda r: " ".join(r.split()[:6]), "fewer cells than the 17 devices"),
        (lambda r: r.replace("0-47,96-143", "0-47,x"), "not a CPU/NUMA list"),
        (lambda r: r + "  extra  cells", "more cells than columns"),
    ],
)
def test_damaged_rows_name_the_line(fixtures: Path, edit: object, problem: str) -> None:
    lines = _text(fixtures, NV8).splitlines()
    lines[3] = edit(lines[3])  # type: ignore[operator]  # GPU2's row
    with pytest.raises(CorruptInputError, match=rf"bad, line 4: .*{problem}"):
        parse_topology("\n".join(lines), "bad")


# ---- nvlink -s ----------------------------------------------------------------------------


def test_a100_x8_twelve_links_each(fixtures: Path) -> None:
    status = parse_nvlink_status(_text(fixtures, A100X8), "a100")
    assert [g.index for g in status.gpus] == list(range(8))
    # "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5269b708-678a-b1a8-60f0-c90406537486)"
    assert status.gpus[0].uuid == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    for gpu in status.gpus:
        assert gpu.name == "NVIDIA A100-SXM4-80GB" and gpu.support is NvLinkSupport.REPORTED
        assert [x.link for x in gpu.links] == list(range(12))
        assert {(x.active, x.speed_bytes_per_s) for x in gpu.links} == {(True, 25e9)}  # 25 GB/s


@pytest.mark.parametrize(
    ("stem", "support", "message"),
    [
        (RTX_2080, NvLinkSupport.ALL_INACTIVE, "as all links are inActive"),
        (RTX_2080_610, NvLinkSupport.ALL_INACTIVE, "as all links are inActive"),
        (WIN_591, NvLinkSupport.ALL_INACTIVE, "as all links are inActive"),
        (RTX_4080, NvLinkSupport.NOT_SUPPORTED, "Device does not have or support Nvlink"),
        (H100_MIG, NvLinkSupport.MIG_MODE, "not supported for Devices in MIG mode"),
    ],
)
def test_gpus_without_listed_links(
    fixtures: Path, stem: str, support: NvLinkSupport, message: str
) -> None:
    text = _text(fixtures, f"{stem}.nvlink-s.txt")
    assert looks_like_nvlink_status(text) and not looks_like_topo(text)
    (gpu,) = parse_nvlink_status(text, "nvlink").gpus
    assert gpu.support is support and gpu.links == ()
    assert gpu.message is not None and message in gpu.message
    assert gpu.uuid == "GPU-00000000-0000-0000-0000-000000000000"  # masked, kept


def test_h100_eighteen_links(fixtures: Path) -> None:
    # "<tab> Link 0: 26.562 GB/s" ... "Link 17"
    (gpu,) = parse_nvlink_status(_text(fixtures, f"{H100}.nvlink-s.txt"), "h100").gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert [x.link for x in gpu.links] == list(range(18))
    assert all(x.active and x.speed_bytes_per_s == pytest.approx(26.562e9) for x in gpu.links)


def test_inactive_link_and_unknown_state(fixtures: Path) -> None:
    text = _text(fixtures, f"{H100}.nvlink-s.txt")
    text = text.replace("Link 7: 26.562 GB/s", "Link 7: <inactive>")
    text = text.replace("Link 9: 26.562 GB/s", "Link 9: <degraded>")
    (gpu,) = parse_nvlink_status(text, "h100").gpus
    assert (gpu.links[7].active, gpu.links[7].speed_bytes_per_s) == (False, None)
    assert (gpu.links[9].active, gpu.links[9].state) == (None, "<degraded>")
    assert sum(x.active is True for x in gpu.links) == 16


def test_capture_file_section_and_the_next_section_cut_off(fixtures: Path) -> None:
    # the R610 split file carries the capture's next section (nvml-symbols) after the output
    assert "####" in _text(fixtures, f"{RTX_2080_610}.nvlink-s.txt")
    capture = (fixtures / "nvidia-smi" / "captures" / f"{H100}.txt").read_text()
    want = parse_nvlink_status(_text(fixtures, f"{H100}.nvlink-s.txt"), "split")
    assert looks_like_nvlink_status(capture)
    assert parse_nvlink_status(capture, "capture") == want


def test_host_wide_statement() -> None:
    status = parse_nvlink_status("NVLink is not supported\n", "consumer")
    assert status.gpus == () and status.message == "NVLink is not supported"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Failed to initialize NVML: Driver/library version mismatch\n", "not NVLink status"),
        ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n", "GPU lines without any link"),
        (
            "GPU 0: NVIDIA A100 (UUID: GPU-1)\n  MIG 1g.5gb Device 0: (UUID: MIG-2)\n",
            "`nvidia-smi -L` output",
        ),
        ("\t Link 0: 26.562 GB/s\n", "a link before any GPU line"),
        ("GPU 0: X (UUID: GPU-1)\n\t Link 0: 26.5x2 GB/s\n", "link 0: '26.5x2 GB/s'"),
        ("", "no `nvidia-smi nvlink -s` output"),
    ],
)
def test_not_nvlink_status(text: str, problem: str) -> None:
    with pytest.raises(CorruptInputError, match=problem):
        parse_nvlink_status(text, "nvlink")
    assert not looks_like_nvlink_status(text) or "Link 0" in text


# ---- fuzz: mutations of the real captures give a result or the smi input error -----------

SEEDS = (
    NV8,
    PCIE,
    A100X8,
    f"{H100}.topo-m.txt",
    f"{WIN_610}.topo-m.txt",
    f"{H100}.nvlink-s.txt",
    f"{RTX_4080}.nvlink-s.txt",
    f"{RTX_2080_610}.nvlink-s.txt",
)
_FUZZ = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def seed_texts(fixtures: Path) -> list[str]:
    return [(fixtures / TOPO / name).read_text() for name in SEEDS]


def _parse_or_smi_error(text: str) -> None:
    looks_like_topo(text)
    looks_like_nvlink_status(text)
    for parse in (parse_topology, parse_nvlink_status):
        reference = None
        try:
            parse(text, "fuzz")
        except GpuwardenError as exc:
            reference = exc.reference
        assert reference in (None, "smi-output-unreadable")


@_FUZZ
@given(which=st.integers(0, len(SEEDS) - 1), cut=st.floats(0, 1))
def test_fuzz_truncations(seed_texts: list[str], which: int, cut: float) -> None:
    text = seed_texts[which]
    _parse_or_smi_error(text[: int(len(text) * cut)])


@_FUZZ
@given(
    which=st.integers(0, len(SEEDS) - 1),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_fuzz_byte_flips(seed_texts: list[str], which: int, flips: list[tuple[float, int]]) -> None:
    data = bytearray(seed_texts[which].encode())
    for where, byte in flips:
        data[min(int(where * len(data)), len(data) - 1)] = byte
    _parse_or_smi_error(data.decode("utf-8", errors="replace"))


@_FUZZ
@given(which=st.integers(0, len(SEEDS) - 1), data=st.data())
def test_fuzz_line_shuffles(seed_texts: list[str], which: int, data: st.DataObject) -> None:
    lines = seed_texts[which].splitlines()
    _parse_or_smi_error("\n".join(data.draw(st.permutations(lines))))


@_FUZZ
@given(
    text=st.text(
        alphabet=st.sampled_from(list("GPUNIC0123456789 X\t\nNV8SYSPIXLink:<>inactive-,/AB")),
        max_size=300,
    )
)
def test_fuzz_matrix_like_text(text: str) -> None:
    _parse_or_smi_error(text)


@pytest.mark.parametrize(
    ("name", "what"),
    [(f"{H100}.topo-m.txt", "`nvidia-smi topo -m` matrix"), (A100X8, "`nvidia-smi nvlink -s`")],
)
def test_telemetry_reader_names_what_it_was_given(fixtures: Path, name: str, what: str) -> None:
    with pytest.raises(CorruptInputError, match="which is not telemetry") as err:
        open_smi(str(fixtures / TOPO / name))
    assert what in err.value.message and "gpuwarden doctor" in err.value.message


# --- rows pasted without their header row ---------------------------------------------------------

_ROW_LABELS = st.sampled_from(["GPU0", "GPU1", "GPU2", "GPU9", "  GPU3", "NIC0", "NIC1", "mlx5_0"])
_ROW_CELLS = st.sampled_from(
    ["X", "NV18", "NV1", "PIX", "PHB", "NODE", "SYS", "0-7", "N/A", "0", "", "GPU1", "NIC0"]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(_ROW_LABELS, st.lists(_ROW_CELLS, max_size=9), st.sampled_from([" ", "\t"])),
        min_size=1,
        max_size=6,
    )
)
@example([("GPU0 NODE NIC0 ", [" X"], "\t")])  # a tab makes the whole head one label
@example([("NIC0", [], " "), ("GPU0 NODE X PHB ", ["  X"], "\t")])
def test_rows_without_a_header_read_or_are_refused_clearly(
    rows: list[tuple[str, list[str], str]],
) -> None:
    """Whatever rows are pasted without a header: a matrix whose GPUs are GPU rows, or the file
    named with the line and a hint (never another exception)."""
    text = "\n".join(sep.join([label, *cells]) for label, cells, sep in rows)
    outcome: Topology | CorruptInputError
    try:
        outcome = parse_topology(text, "rows.txt")
    except CorruptInputError as error:
        outcome = error
    if isinstance(outcome, CorruptInputError):
        assert "rows.txt" in str(outcome) and outcome.hint
    else:
        assert all(g.label.startswith("GPU") for g in outcome.gpus)
