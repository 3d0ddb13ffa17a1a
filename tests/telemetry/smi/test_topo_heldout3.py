"""A third held-out set of `nvidia-smi topo -m` / `nvlink -s` outputs pasted in public threads
(tests/data/topo_public3/: SOURCES.md says where each comes from, expected.json holds the values
read off each sample by hand). It leans on what sets 1-2 lack: `topo -p2p` peer-access matrices
(OK/GNS cells that are not links: refused with exit 2 and a hint), a `topo -m` followed in the
same paste by a shell session or by a `topo -p2p` matrix, a header printed on the command's own
line, and an `nvlink -s` GPU whose links are all inactive (a lost-NVLink fault).
"""

from __future__ import annotations

import pytest

from gpuwarden.health.topology import topology_findings
from gpuwarden.types.topology import GpuNvLinks, NvLinkStatus, NvLinkSupport
from tests.telemetry.smi.heldout import load_set, topo_set_checks

DATA, SAMPLES = load_set("topo_public3")

# Samples the code cannot take yet, and why.
XFAIL: dict[str, str] = {}

(
    test_the_set_is_the_one_described,
    test_reads_the_matrix,
    test_reads_the_links,
    test_doctor_finds_what_the_sample_shows_and_nothing_else,
    test_a_cut_or_spliced_sample_reads_or_is_refused_clearly,
) = topo_set_checks(DATA, SAMPLES, XFAIL)


# The rule the gpud-1085 sample needs, and where it must stay silent: every link of a GPU
# inactive with no peer listing links is a fault only on a server module (SXM / HGX / Superchip)
# seen on a node of several GPUs; a lone module (a one-GPU VM) or a bridged PCIe card cannot tell.
ALL_INACTIVE = "NVML: Unable to retrieve NVLink information as all links are inActive"


def _all_inactive(*gpus: tuple[int, str]) -> NvLinkStatus:
    return NvLinkStatus(
        gpus=tuple(
            GpuNvLinks(index, name, None, NvLinkSupport.ALL_INACTIVE, (), ALL_INACTIVE)
            for index, name in gpus
        )
    )


@pytest.mark.parametrize(
    ("gpus", "codes"),
    [
        pytest.param([(2, "NVIDIA B200")], ["nvlink-down"], id="hgx-module-index-2"),
        pytest.param(
            [(0, "NVIDIA H100 80GB HBM3"), (1, "NVIDIA H100 80GB HBM3")],
            ["nvlink-down"],
            id="two-sxm-modules",
        ),
        pytest.param([(0, "NVIDIA B200")], [], id="lone-module-gpu-0"),
        pytest.param([(0, "NVIDIA GH200 480GB")], [], id="lone-superchip"),
        pytest.param([(1, "NVIDIA GeForce RTX 3090")], [], id="pcie-card-bridge-may-be-absent"),
        pytest.param([(3, "NVIDIA H100 PCIe")], [], id="pcie-datacenter-card"),
        pytest.param([(1, "Some Future GPU")], [], id="unknown-model"),
    ],
)
def test_all_links_inactive_is_judged_by_the_board(
    gpus: list[tuple[int, str]], codes: list[str]
) -> None:
    found, _ = topology_findings((), (_all_inactive(*gpus),))
    assert sorted({f.code for f in found if f.severity.rank > 0}) == codes
