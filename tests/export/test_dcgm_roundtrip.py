"""A dcgm-exporter scrape passed through `gpuwarden export --backend dcgm` keeps dcgm-exporter's
names, labels, values and types: a dashboard or rule written for dcgm-exporter reads it unchanged.

What does not come through, by design, and only that: label fields that describe the exporter or
are off by default (DCGM_FI_PROCESS_NAME, CUDA/NVML versions, brand, serial, VBIOS, minor number,
DCGM_FI_DEV_NAME), and ``DCGM_FI_DEV_XID_ERRORS 0``: the dcgm backend reads 0 as "no Xid" (None),
which cannot be told from a scrape without the field, and the exporter never claims a 0 it was
not given."""

from __future__ import annotations

import pytest
from tests.export.helpers import read_scrape

from gpuwarden.cli.main import main
from gpuwarden.export.fields import DCGM_FIELDS, FB_TOTAL, PASSTHROUGH_KINDS, XID_LAST
from gpuwarden.telemetry.dcgm.exposition import parse_exposition

SCRAPES = (
    "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom",
    "datadog-integrations-core__tesla-t4__metrics.prom",
    "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom",
    "issue-dcgm-exporter-581__gb200__excerpt.prom",
)
KEPT_LABELS = frozenset(
    {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "hostname",
     "DCGM_FI_DRIVER_VERSION", "GPU_I_PROFILE", "GPU_I_ID", "container", "namespace", "pod"}
)  # fmt: skip
# The Datadog fixture concatenates two scrapes from two hosts; one reading has one host.
TWO_HOSTS = "datadog-integrations-core__tesla-t4__metrics.prom"


def _source_series(
    text: str, *, hosts: bool
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for sample in parse_exposition(text, "source").samples:
        if sample.name == "DCGM_FI_DEV_XID_ERRORS" and sample.value == 0:
            continue
        keep = KEPT_LABELS if hosts else KEPT_LABELS - {"Hostname", "hostname"}
        labels = {k: v for k, v in sample.labels.items() if k in keep}
        out[(sample.name, frozenset(labels.items()))] = sample.value
    return out


@pytest.mark.parametrize("name", SCRAPES)
def test_every_series_of_the_scrape_comes_back_with_its_labels_and_value(capsys, fixtures, name):
    path = fixtures / "dcgm" / name
    assert main(["export", "--backend", "dcgm", "--from", str(path), "--once"]) == 0
    scrape = read_scrape(capsys.readouterr().out)
    hosts = name != TWO_HOSTS
    source = _source_series(path.read_text(), hosts=hosts)
    assert source, "the fixture has series"
    came_back = {}
    for (metric, labels), value in scrape.values.items():
        if metric.startswith("DCGM_"):
            kept = {
                k: v for k, v in labels if k in KEPT_LABELS and (hosts or k.lower() != "hostname")
            }
            # newer exporters spell Hostname "hostname": both are set, the source has one of them
            came_back[(metric, frozenset(kept.items()))] = value
    for key, value in source.items():
        metric, labels = key
        matches = [
            v for (m, lab), v in came_back.items() if m == metric and labels <= lab and
            {k for k, _ in lab} - {k for k, _ in labels} <= {"Hostname", "hostname"}
        ]  # fmt: skip
        assert matches == [pytest.approx(value)], (metric, dict(labels))


@pytest.mark.parametrize("name", SCRAPES)
def test_types_are_dcgm_exporters(capsys, fixtures, name):
    path = fixtures / "dcgm" / name
    assert main(["export", "--backend", "dcgm", "--from", str(path), "--once"]) == 0
    ours = read_scrape(capsys.readouterr().out).types
    theirs = parse_exposition(path.read_text(), "source").types
    table = {f.name for f in (*DCGM_FIELDS, XID_LAST, FB_TOTAL)} | set(PASSTHROUGH_KINDS)
    for family, kind in theirs.items():
        if family in ours and kind in ("gauge", "counter"):
            # a field only passed through keeps its type where the catalog knows it; the dcgm
            # backend does not carry a scrape's TYPE lines, so others go out untyped
            assert ours[family] == kind if family in table else ours[family] in (kind, "untyped")


def test_pod_labels_of_the_scrape_stay_on_their_mig_instances(capsys, fixtures):
    path = fixtures / "dcgm" / "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom"
    assert main(["export", "--backend", "dcgm", "--from", str(path), "--once"]) == 0
    scrape = read_scrape(capsys.readouterr().out)
    pods = {
        lab["GPU_I_ID"]: lab.get("pod") for lab, _ in scrape.series("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    }
    assert pods == {
        "7": "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl",
        "8": None,
        "9": "tts-predictor-00011-deployment-5554f75554-8j8pl",
    }
    # MIG utilisation is the instance's own pillar (0 here, as the exporter said), per GI
    assert {lab["GPU_I_PROFILE"] for lab, _ in scrape.series("DCGM_FI_PROF_GR_ENGINE_ACTIVE")} == {
        "1g.10gb"
    }


def test_nothing_is_invented_for_what_the_scrape_lacks(capsys, fixtures):
    # the GB200 excerpt carries NVLink counters only: no temperature, power, Xid or FB series
    path = fixtures / "dcgm" / "issue-dcgm-exporter-581__gb200__excerpt.prom"
    assert main(["export", "--backend", "dcgm", "--from", str(path), "--once"]) == 0
    names = read_scrape(capsys.readouterr().out).names()
    dcgm = {n for n in names if n.startswith("DCGM_")}
    assert dcgm == {
        "DCGM_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_SUCCESSFUL_EVENTS",
        "DCGM_FI_DEV_NVLINK_COUNT_TX_DISCARDS",
    }


def test_a_simulated_export_read_back_is_still_simulated(capsys, tmp_path, fixtures):
    """sim → export → dcgm backend: the simulated="true" mark comes back as a simulated
    snapshot (snapshot's banner, record's origin, doctor's document say so); a real
    dcgm-exporter scrape through the same path stays real."""
    from gpuwarden.telemetry.dcgm import DcgmBackend

    assert main(["export", "--backend", "sim", "--gpus", "2", "--once"]) == 0
    page = tmp_path / "sim.prom"
    page.write_text(capsys.readouterr().out)
    backend = DcgmBackend(str(page))
    assert backend.simulated and backend.read().simulated
    assert main(["snapshot", "--backend", "dcgm", "--from", str(page), "--json"]) == 0
    assert '"simulated": true' in capsys.readouterr().out
    real = DcgmBackend(str(fixtures / "dcgm" / SCRAPES[2]))
    assert not real.simulated and not real.read().simulated
