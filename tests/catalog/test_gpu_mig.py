"""Whether a GPU can run MIG, as a catalog fact (gpus.csv ``mig_instances_max``, data/SOURCES.md).

NVIDIA's MIG user guide, "Supported GPUs": MIG starts at compute capability 8.0, and the
products it lists split into at most 7 (A100, H100, H200, GH200, B200, GB200) or 4 (A30, RTX PRO
6000 Blackwell) instances; "MIG is supported only on GPUs and systems listed here"."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from gpuwarden.catalog.gpus import compute_capability_of, gpu_catalog, mig_slices, resolve_gpu
from gpuwarden.catalog.tables import Row
from gpuwarden.errors import CorruptInputError

# the guide's "Supported GPUs" table: product row → its "Max Number of Instances"
_GUIDE_TABLE = {
    "a100-sxm4-40gb": 7,
    "a100-sxm4-80gb": 7,
    "a100-pcie-40gb": 7,
    "a100-pcie-80gb": 7,
    "a30-24gb": 4,
    "h100-sxm5-80gb": 7,
    "h100-pcie-80gb": 7,
    "h100-nvl-94gb": 7,  # "H100-PCIE 94GB"
    "h200-sxm-141gb": 7,
    "h200-nvl-141gb": 7,
    "gh200-96gb": 7,  # "H100 on GH200 96GB"
    "b200-hgx-180gb": 7,
    "gb200-186gb": 7,
    "rtx-pro-6000-ws-96gb": 4,
    "rtx-pro-6000-maxq-96gb": 4,
    "rtx-pro-6000-server-96gb": 4,
}
_FIRST_MIG_CAPABILITY = (8, 0)  # "GPUs with compute capability >= 8.0"


def test_the_guides_products_have_its_instance_counts() -> None:
    for key, instances in _GUIDE_TABLE.items():
        gpu = resolve_gpu(key)
        assert gpu.mig_instances_max == instances, key
        assert gpu.has_mig is True, key


def test_modules_whose_profile_names_are_not_listed_still_have_mig() -> None:
    # the catalog lists no profile names for these (not verified); the guide lists the products
    for key in ("h200-nvl-141gb", "gb200-186gb"):
        gpu = resolve_gpu(key)
        assert gpu.mig_profiles == (), key
        assert gpu.has_mig is True, key


def test_every_row_says_whether_it_has_mig() -> None:
    unknown = [gpu.key for gpu in gpu_catalog() if gpu.has_mig is None]
    assert unknown == []


def test_gpus_below_the_guides_capability_floor_have_none() -> None:
    below = [
        gpu
        for gpu in gpu_catalog()
        if (cc := compute_capability_of(gpu.compute_capability or "")) is not None
        and cc < _FIRST_MIG_CAPABILITY
    ]
    assert {gpu.family for gpu in below} >= {"V100", "P100", "T4", "RTX 2080"}
    for gpu in below:
        assert gpu.mig_instances_max == 0, gpu.key


def test_gpus_the_guide_leaves_out_have_none() -> None:
    for key in ("rtx-4090-24gb", "rtx-5090-32gb", "l4-24gb", "l40s-48gb", "a40-48gb", "gb10-128gb"):
        gpu = resolve_gpu(key)
        assert gpu.mig_instances_max == 0, key
        assert gpu.has_mig is False, key


def test_listed_profiles_agree_with_the_instance_count() -> None:
    # the whole-GPU profile's slices ("7g.80gb" → 7) is the number of 1-slice instances
    with_profiles = [gpu for gpu in gpu_catalog() if gpu.mig_profiles]
    assert len(with_profiles) >= 15
    for gpu in with_profiles:
        slices = [mig_slices(profile) for profile in gpu.mig_profiles]
        assert max(s for s in slices if s is not None) == gpu.mig_instances_max, gpu.key


def _sources_table() -> dict[str, int]:
    """Each key's value in data/SOURCES.md's `mig_instances_max` table."""
    text = resources.files("gpuwarden.catalog.data").joinpath("SOURCES.md").read_text("utf-8")
    section = text.split("## `gpus.csv`: `mig_instances_max`", 1)[1]
    table: dict[str, int] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].isdigit():
            for key in re.findall(r"`([a-z0-9-]+)`", cells[0]):
                table[key] = int(cells[1])
    return table


def test_sources_cite_every_rows_value() -> None:
    catalog = {gpu.key: gpu.mig_instances_max for gpu in gpu_catalog()}
    assert _sources_table() == catalog


def _row(cell: str) -> Row:
    return Row("gpus.csv", 7, {"mig_instances_max": cell})


def test_the_cell_reads_zero_as_none_and_empty_as_unknown() -> None:
    assert _row("0").tally("mig_instances_max") == 0
    assert _row(" 7 ").tally("mig_instances_max") == 7
    assert _row("").tally("mig_instances_max") is None


# "²" and "٣" pass str.isdigit() (int() refuses the first); 5,000 digits pass int() no more
@pytest.mark.parametrize("cell", ["-1", "4.5", "seven", "7g", "²", "٣", "7" * 5_000])
def test_a_bad_cell_is_a_clear_error(cell: str) -> None:
    with pytest.raises(CorruptInputError, match="mig_instances_max"):
        _row(cell).tally("mig_instances_max")
