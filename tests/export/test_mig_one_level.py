"""A MIG GPU's families at the one level dcgm-exporter publishes them: its default ``--devices f``
watches a GPU that has GPU instances only through them, so every series of such a GPU carries
``GPU_I_ID`` and none is the GPU's own. ``sum(DCGM_FI_DEV_FB_USED)`` — what dashboards and cost
queries write — then counts a MIG GPU's memory once, not its instances' plus the whole GPU's.

Inputs: the fake NVML built from the real H100 MIG capture (its q.txt states the GPU's FB and each
instance's), and real dcgm-exporter pages of MIG nodes (tests/data/dcgm_public*)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.export.helpers import read_scrape
from tests.export.test_nvml_mig import H100_MIG, exporter

from gpuwarden.cli.main import main
from gpuwarden.telemetry.dcgm.exposition import parse_exposition

DATA = Path(__file__).resolve().parents[1] / "data"
# dcgm-exporter 3.3 on 535.129.03: GPU 0 in MIG mode (2g.20gb GIs 3, 5, 6), GPUs 1-7 not
A800_PAGE = DATA / "dcgm_public2" / "08__doc-a800-sxm4-mig-2g20gb__process-name-label.prom"
# MIG pages whose instances carry FB_USED
FB_PAGES = (
    DATA / "dcgm_public3" / "06__dcgm-exporter-544__h100-nvl-mig-1g-markdown-bold-profile.prom",
    DATA / "dcgm_public8"
    / "12__della-gpu-exporter-readme__a100-80gb-pcie-mig-1g10gb-535.104.05-jobid-labels.prom",
)  # fmt: skip

_GPU_FB_USED = re.compile(r"^ {4}FB Memory Usage\n(?: {8}.*\n)*? {8}Used\s*: (\d+) MiB", re.M)
_INSTANCE_FB = re.compile(
    r"GPU Instance ID\s*: (\d+)\n(?:.*\n)*? {8}Shared FB Memory Usage\n"
    r" {12}Total\s*: (\d+) MiB\n {12}Reserved\s*: \d+ MiB\n {12}Used\s*: (\d+) MiB"
)


def _mig_scrape(fixtures: Path):
    loop, exposition, _, clock = exporter(fixtures, H100_MIG)
    loop.poll()
    clock.advance(1.0)
    loop.poll()
    return read_scrape(exposition.text())


def test_a_mig_gpus_memory_is_counted_once(fixtures):
    capture = (fixtures / "nvidia-smi" / f"{H100_MIG}.load.q.txt").read_text()
    gpu_used = int(_GPU_FB_USED.findall(capture)[0])  # 11125 MiB
    instances = {gi: (int(total), int(used)) for gi, total, used in _INSTANCE_FB.findall(capture)}
    assert set(instances) == {"2", "3", "9", "10"}
    scrape = _mig_scrape(fixtures)
    used = scrape.series("DCGM_FI_DEV_FB_USED")
    # the instances' memory once: nvidia-smi rounds each instance, so a MiB per instance at most
    assert abs(sum(v for _, v in used) - gpu_used) <= len(instances)
    assert {lab["GPU_I_ID"]: v for lab, v in used} == {gi: u for gi, (_, u) in instances.items()}
    totals = {lab["GPU_I_ID"]: v for lab, v in scrape.series("DCGM_FI_DEV_FB_TOTAL")}
    assert totals == {gi: t for gi, (t, _) in instances.items()}
    free = {lab["GPU_I_ID"]: v for lab, v in scrape.series("DCGM_FI_DEV_FB_FREE")}
    assert free == {gi: t - u for gi, (t, u) in instances.items()}
    # the GPU's reserved FB (479 MiB) is no instance's: no series rather than the GPU's value
    assert "DCGM_FI_DEV_FB_RESERVED" not in scrape.names()


def test_a_mig_gpu_has_no_series_of_its_own_and_its_readings_repeat_per_instance(fixtures):
    capture = (fixtures / "nvidia-smi" / f"{H100_MIG}.load.q.txt").read_text()
    gpu_temp = float(re.search(r"GPU Current Temp\s*: (\d+) C", capture).group(1))
    scrape = _mig_scrape(fixtures)
    dcgm = [(name, dict(labels)) for name, labels in scrape.values if name.startswith("DCGM_FI_")]
    assert dcgm and all("GPU_I_ID" in labels for _, labels in dcgm)
    temps = {lab["GPU_I_ID"]: v for lab, v in scrape.series("DCGM_FI_DEV_GPU_TEMP")}
    assert temps == dict.fromkeys(("2", "3", "9", "10"), gpu_temp)
    # gpuwarden's own per-GPU families stay the GPU's
    assert [lab.get("GPU_I_ID") for lab, _ in scrape.series("gpuwarden_gpu_lost")] == [None]


def _re_exported(capsys, path: Path):
    assert main(["export", "--backend", "dcgm", "--from", str(path), "--once"]) == 0
    return read_scrape(capsys.readouterr().out)


def test_a_scraped_mig_gpu_gets_no_series_the_page_did_not_have(capsys):
    source = parse_exposition(A800_PAGE.read_text(), "source").samples
    mig_uuid = next(s.labels["UUID"] for s in source if s.labels.get("GPU_I_ID"))
    assert not [s for s in source if s.labels["UUID"] == mig_uuid and "GPU_I_ID" not in s.labels]
    scrape = _re_exported(capsys, A800_PAGE)
    gpu_level = [
        name
        for (name, labels), _ in scrape.values.items()
        if name.startswith("DCGM_FI_") and ("UUID", mig_uuid) in labels
        if not any(key == "GPU_I_ID" for key, _ in labels)
    ]
    assert gpu_level == []
    # every GPU_I_ID series of the page is still there, with its value
    for sample in source:
        if sample.labels.get("GPU_I_ID") and sample.name.startswith("DCGM_FI_"):
            gi = sample.labels["GPU_I_ID"]
            assert scrape.one(sample.name, UUID=mig_uuid, GPU_I_ID=gi) == sample.value


@pytest.mark.parametrize("path", FB_PAGES, ids=lambda p: p.name[:24])
def test_a_scraped_mig_gpus_memory_sums_as_on_the_page(capsys, path):
    source = parse_exposition(path.read_text(), "source").samples
    page_sum = sum(s.value for s in source if s.name == "DCGM_FI_DEV_FB_USED")
    assert page_sum > 0
    scrape = _re_exported(capsys, path)
    assert sum(v for _, v in scrape.series("DCGM_FI_DEV_FB_USED")) == page_sum
