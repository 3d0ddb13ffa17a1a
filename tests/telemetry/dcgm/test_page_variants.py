"""The pages a fleet's Prometheus stack serves of one dcgm-exporter scrape, generated here from
every real page (fixtures and the held-out sets), each as the tool that serves it writes it:

- dcgm-exporter's own label spellings across releases: ``Hostname`` (2.x) / ``hostname`` (4.x),
  3.3.x's ``err_code``/``err_msg`` on DCGM_FI_DEV_XID_ERRORS, the ``pci_bus_id`` and
  ``DCGM_FI_DRIVER_VERSION`` labels, DCGM 4.6's field names (fields.DCGM4_RENAMED);
- Prometheus' ``/federate`` endpoint: ``# TYPE <name> untyped``, labels sorted, the target's
  labels added (Kubernetes service discovery's ``pod``/``namespace``/``container`` rename the
  series' own to ``exported_*`` under honor_labels false), a millisecond timestamp on every
  sample, values as Go's strconv writes them (``1.28996013e+08``); VictoriaMetrics'
  ``/api/v1/export/prometheus`` (no metadata, timestamps);
- OpenMetrics (Prometheus' expfmt encoder, an agent's re-export): a counter family ``X`` with
  samples ``X_total`` and ``X_created``, seconds timestamps, ``# EOF``;
- node_exporter serving the page from its textfile collector (every family sorted by name, its
  own go_/node_/process_ families among them), and the ``.prom`` file a cron job writes (a
  header comment, another exporter's family, HELP/TYPE repeated per GPU block).

Each must read the same GPUs and values as the page itself, and doctor must find what it finds
on the page (nothing on a healthy one).
"""

from __future__ import annotations

import dataclasses
import decimal
import io
import json
import math
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from gpuwarden.errors import GpuwardenError
from gpuwarden.telemetry.dcgm import parse_scrape
from gpuwarden.telemetry.dcgm.exposition import Sample, parse_exposition
from gpuwarden.telemetry.dcgm.fields import DCGM4_RENAMED
from gpuwarden.types.telemetry import DeviceSample, EventKind, Snapshot

DATA_ROOT = Path(__file__).resolve().parents[2] / "data"
Families = dict[str, list[Sample]]
Variant = Callable[[Families, dict[str, str]], str]


def _real_pages(fixtures: Path) -> list[tuple[str, str]]:
    """(name, text) of every real dcgm-exporter page that reads as a scrape."""
    paths = [*sorted((fixtures / "dcgm").glob("*.prom"))]
    paths += sorted(DATA_ROOT.glob("dcgm_public*/*.prom"))
    pages = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        try:
            parse_scrape(text, path.name, 0.0)
        except GpuwardenError:  # a held-out page refused as no scrape: nothing to vary
            continue
        pages.append((path.name, text))
    return pages


def _families(text: str) -> tuple[Families, dict[str, str]]:
    """The page's samples by family, in page order, and its declared types."""
    exposition = parse_exposition(text, "page")
    families: Families = {}
    for sample in exposition.samples:
        families.setdefault(sample.name, []).append(sample)
    return families, exposition.types


def _go_float(value: float) -> str:
    """A value as Prometheus' expfmt writes it: strconv.AppendFloat(f, 'g', -1, 64), which
    turns to an exponent from 1e+06 on (shortest digits, "precision 6 for this decision")."""
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    number = decimal.Decimal(repr(value)).normalize()
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    power = len(digits) + exponent - 1
    if -4 <= power < 6:
        return format(number, "f")
    mantissa = "".join(map(str, digits))
    mantissa = mantissa[0] + ("." + mantissa[1:] if len(mantissa) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name: str, labels: dict[str, str], value: str) -> str:
    pairs = ",".join(f'{key}="{_escaped(text)}"' for key, text in labels.items())
    return f"{name}{{{pairs}}} {value}" if labels else f"{name} {value}"


def _page(
    families: Families,
    types: dict[str, str],
    name_of: Callable[[str], str] = lambda name: name,
    labels_of: Callable[[Sample], dict[str, str]] = lambda sample: sample.labels,
) -> str:
    """The families re-written as dcgm-exporter writes a page (HELP, TYPE, its series)."""
    lines = []
    for family, samples in families.items():
        name = name_of(family)
        lines += [f"# HELP {name} {family}", f"# TYPE {name} {types.get(family, 'gauge')}"]
        lines += [_series(name, labels_of(s), _go_float(s.value)) for s in samples]
    return "\n".join(lines) + "\n"


# dcgm-exporter's own spellings -------------------------------------------------------------


def hostname_respelled(families: Families, types: dict[str, str]) -> str:
    """2.x writes ``Hostname``, 4.x ``hostname``: each page in the other spelling."""
    swap = {"Hostname": "hostname", "hostname": "Hostname"}
    return _page(
        families, types, labels_of=lambda s: {swap.get(k, k): v for k, v in s.labels.items()}
    )


def xid_err_code(families: Families, types: dict[str, str]) -> str:
    """3.3.x labels DCGM_FI_DEV_XID_ERRORS with the Xid's err_code and its err_msg."""

    def labels(sample: Sample) -> dict[str, str]:
        if sample.name != "DCGM_FI_DEV_XID_ERRORS" or "err_code" in sample.labels:
            return sample.labels
        message = "No Error" if sample.value == 0 else "Unknown Error"
        return {**sample.labels, "err_code": _go_float(sample.value), "err_msg": message}

    return _page(families, types, labels_of=labels)


# a driver label the variant adds: a branch years from its end of life (R580, 2028-06), so the
# label brings no finding of its own (an R550 one would: past its end of life, info)
DRIVER = "580.95.05"


def bus_id(labels: dict[str, str]) -> str:
    return f"00000000:{int(labels['gpu'] or 0) + 0x18:02X}:00.0"


def driver_and_bus_labels(families: Families, types: dict[str, str]) -> str:
    """The pci_bus_id label and the DCGM_FI_DRIVER_VERSION label-type field on every series of
    a GPU that lacks them (dcgm-exporter 3.x on)."""

    def labels(sample: Sample) -> dict[str, str]:
        if "gpu" not in sample.labels:
            return sample.labels
        return {"pci_bus_id": bus_id(sample.labels), "DCGM_FI_DRIVER_VERSION": DRIVER} | {
            k: v for k, v in sample.labels.items() if v
        }

    return _page(families, types, labels_of=labels)


_DCGM46_NAME = {older: newer for newer, older in DCGM4_RENAMED.items()}


def dcgm46_names(families: Families, types: dict[str, str]) -> str:
    """A counters file written with DCGM 4.6's field names."""
    return _page(families, types, name_of=lambda name: _DCGM46_NAME.get(name, name))


# Prometheus re-exposing the page -------------------------------------------------------------

# the target labels prometheus-operator's ServiceMonitor gives a gpu-operator dcgm-exporter pod
KUBERNETES_TARGET = {
    "container": "nvidia-dcgm-exporter",
    "endpoint": "gpu-metrics",
    "instance": "10.0.3.7:9400",
    "job": "nvidia-dcgm-exporter",
    "namespace": "gpu-operator",
    "pod": "nvidia-dcgm-exporter-x7k2p",
    "service": "nvidia-dcgm-exporter",
}
STATIC_TARGET = {"instance": "gpu-node-1:9400", "job": "dcgm"}


def _as_stored(labels: dict[str, str], target: dict[str, str]) -> dict[str, str]:
    """A series' labels as Prometheus stores them under honor_labels false: its own labels
    that the target also has renamed to exported_*, then the target's, sorted by name."""
    stored = {(f"exported_{k}" if k in target else k): v for k, v in labels.items()}
    return dict(sorted((stored | target).items()))


def _federated(families: Families, target: dict[str, str]) -> str:
    """What /federate?match[]={__name__=~"DCGM_.*"} serves: families sorted, each untyped,
    series sorted by labels, each with a millisecond timestamp."""
    lines = []
    for family in sorted(families):
        lines.append(f"# TYPE {family} untyped")
        stored = [(_as_stored(s.labels, target), s.value) for s in families[family]]
        for labels, value in sorted(stored, key=lambda pair: list(pair[0].items())):
            lines.append(_series(family, labels, _go_float(value)) + " 1764270000123")
    return "\n".join(lines) + "\n"


def federated_kubernetes(families: Families, types: dict[str, str]) -> str:
    return _federated(families, KUBERNETES_TARGET)


def federated_static(families: Families, types: dict[str, str]) -> str:
    return _federated(families, STATIC_TARGET)


def victoriametrics_export(families: Families, types: dict[str, str]) -> str:
    """/api/v1/export/prometheus: series with millisecond timestamps and no HELP/TYPE."""
    return "\n".join(
        _series(family, _as_stored(s.labels, STATIC_TARGET), _go_float(s.value)) + " 1764270000123"
        for family, samples in families.items()
        for s in samples
    )


def openmetrics(families: Families, types: dict[str, str]) -> str:
    """The page in OpenMetrics text as Prometheus' expfmt encodes it: a counter family's
    samples named <family>_total (and <family>_created), "unknown" for an untyped family,
    timestamps in seconds, "# EOF" last."""
    lines = []
    for family, samples in families.items():
        kind = {"untyped": "unknown"}.get(types.get(family, "unknown"), types.get(family))
        lines += [f"# HELP {family} {family}.", f"# TYPE {family} {kind}"]
        for s in samples:
            name = f"{family}_total" if kind == "counter" else family
            lines.append(_series(name, s.labels, _go_float(s.value)) + " 1764270000.123")
            if kind == "counter":
                lines.append(_series(f"{family}_created", s.labels, "1764260000.0"))
    return "\n".join([*lines, "# EOF"]) + "\n"


def federated_after_otel(families: Families, types: dict[str, str]) -> str:
    """The page scraped by an OpenTelemetry Collector (or Grafana Alloy) and re-exposed by its
    Prometheus exporter, whose add_metric_suffixes (default true) names each counter's series
    <family>_total; a Prometheus stores them under that name and federates them untyped."""
    counters = {family for family in families if types.get(family) == "counter"}
    renamed = {(f"{f}_total" if f in counters else f): samples for f, samples in families.items()}
    return _federated(renamed, STATIC_TARGET)


# textfile collectors -------------------------------------------------------------------------

OTHER_FAMILIES = {
    "go_goroutines": ["go_goroutines 9"],
    "node_cpu_seconds_total": [
        'node_cpu_seconds_total{cpu="0",mode="idle"} 1.23456789e+06',
        'node_cpu_seconds_total{cpu="0",mode="user"} 45678.9',
    ],
    "node_textfile_scrape_error": ["node_textfile_scrape_error 0"],
    "process_start_time_seconds": ["process_start_time_seconds 1.76426e+09"],
}
TEXTFILE = "/var/lib/node_exporter/textfile_collector/dcgm.prom"


def node_exporter_page(families: Families, types: dict[str, str]) -> str:
    """node_exporter serving dcgm.prom from its textfile collector: its own families and the
    file's, all sorted by name, HELP on each ("Metric read from <file>" for the file's)."""
    blocks = {
        family: [
            f"# HELP {family} Metric read from {TEXTFILE}",
            f"# TYPE {family} {types.get(family, 'untyped')}",
            *(_series(family, dict(sorted(s.labels.items())), _go_float(s.value)) for s in samples),
        ]
        for family, samples in families.items()
    }
    for family, lines in OTHER_FAMILIES.items():
        blocks[family] = [f"# HELP {family} {family}.", f"# TYPE {family} gauge", *lines]
    return "\n".join(line for family in sorted(blocks) for line in blocks[family]) + "\n"


def _gpu_of(sample: Sample) -> str:
    return sample.labels.get("UUID") or sample.labels.get("uuid") or sample.labels.get("gpu", "")


def cron_textfile(families: Families, types: dict[str, str]) -> str:
    """The .prom file a cron job writes: a header comment, another exporter's family, then one
    block per GPU that repeats each family's HELP and TYPE."""
    lines = ["# written by /etc/cron.d/gpu-metrics every minute; do not edit", "#"]
    lines += ["# TYPE go_goroutines gauge", *OTHER_FAMILIES["go_goroutines"]]
    gpus = dict.fromkeys(_gpu_of(s) for samples in families.values() for s in samples)
    for gpu in gpus:
        lines.append(f"# GPU {gpu}")
        for family, samples in families.items():
            mine = [s for s in samples if _gpu_of(s) == gpu]
            if mine:
                kind = types.get(family, "gauge")
                lines += [f"# HELP {family} {family}", f"# TYPE {family} {kind}"]
                lines += [_series(family, s.labels, _go_float(s.value)) for s in mine]
    return "\n".join(lines) + "\n"


VARIANTS: dict[str, Variant] = {
    "hostname_respelled": hostname_respelled,
    "xid_err_code": xid_err_code,
    "driver_and_bus_labels": driver_and_bus_labels,
    "dcgm46_names": dcgm46_names,
    "federated_static": federated_static,
    "victoriametrics_export": victoriametrics_export,
    "openmetrics": openmetrics,
    "federated_after_otel": federated_after_otel,
    "node_exporter_page": node_exporter_page,
    "cron_textfile": cron_textfile,
}
# the identity fields a variant adds labels for (compared on their own)
ADDED_INFO = {"driver_and_bus_labels": ("driver_version", "pci_bus_id")}


def _reading(snapshot: Snapshot, added: tuple[str, ...] = ()) -> tuple[Any, ...]:
    """What a page says of its GPUs, in an order no re-exposition changes (series sorted by
    label, as Prometheus returns them, reorder GPUs of one index and MIG instances): devices
    by uuid, instances by id, events but the reader's notes on what it skipped."""

    def device(sample: DeviceSample) -> DeviceSample:
        unread: dict[str, Any] = dict.fromkeys(added)
        info = dataclasses.replace(sample.info, **unread)
        instances = sorted(sample.mig_devices or (), key=lambda m: m.gpu_instance_id)
        return dataclasses.replace(sample, info=info, mig_devices=tuple(instances) or None)

    devices = sorted((device(s) for s in snapshot.samples), key=lambda s: s.info.uuid)
    events = sorted(
        (e.kind.value, e.uuid, e.message)
        for e in snapshot.events
        if e.kind is not EventKind.BACKEND_ERROR
    )
    return tuple(devices), tuple(events)


def _variants_that_differ(fixtures: Path, variant: Variant, added: tuple[str, ...]) -> list[str]:
    differ = []
    for name, text in _real_pages(fixtures):
        page = parse_scrape(text, name, 0.0).snapshot
        served = parse_scrape(variant(*_families(text)), name, 0.0).snapshot
        if _reading(served, added) != _reading(page, added):
            differ.append(name)
    return differ


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_real_page_reads_the_same_as_served(variant: str, fixtures: Path) -> None:
    """Before the fix, the OpenMetrics page and the federated OpenTelemetry re-export each
    differed on 7 of 65 pages (a counter's X_total read as an extra: energy, PCIe replays and
    remapped rows lost); the others read the same."""
    assert _variants_that_differ(fixtures, VARIANTS[variant], ADDED_INFO.get(variant, ())) == []


T4 = "datadog-integrations-core__tesla-t4__metrics.prom"
A100 = "cloud-native-docs__a100-40gb-mig__dcgm-exporter-2.1.8-2.4.0-rc.2.prom"
H100_MIG_PODS = "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom"


def _fixture(fixtures: Path, name: str) -> str:
    return (fixtures / "dcgm" / name).read_text(encoding="utf-8")


def test_openmetrics_counters_read_under_their_family(fixtures: Path) -> None:
    """Failed before: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total was an extra, the energy
    unknown, and the _created time an extra too."""
    served = openmetrics(*_families(_fixture(fixtures, T4)))
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total{" in served
    samples = {s.info.uuid: s for s in parse_scrape(served, "om", 0.0).snapshot.samples}
    newer = samples["GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5"]
    assert newer.energy_consumed_joules is None  # this scrape of the 470 driver has none
    older = samples["GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"]
    assert older.energy_consumed_joules == pytest.approx(128996.013)
    assert older.pcie_replay_total == 0
    page = parse_scrape(_fixture(fixtures, T4), "t4", 0.0).snapshot.samples
    assert {s.info.uuid: s.extra for s in page} == {u: s.extra for u, s in samples.items()}


def test_only_a_declared_counters_samples_are_named_by_their_family() -> None:
    """OpenMetrics' X_total / X_created are read as family X where "# TYPE X counter" says
    so; a name declared as a family of its own, or with no counter behind it, stays."""
    page = "\n".join(
        [
            "# TYPE requests counter",
            "requests_total 3 1764270000.5",
            "requests_created 1764260000.0",
            "# TYPE jobs counter",
            "# TYPE jobs_total gauge",
            "jobs_total 7",
            "# TYPE queue gauge",
            "queue_total 2",
            "# EOF",
        ]
    )
    samples = parse_exposition(page, "om").samples
    assert [(s.name, s.value) for s in samples] == [
        ("requests", 3),
        ("jobs_total", 7),
        ("queue_total", 2),
    ]


def test_a_federated_idle_gpu_gets_no_pod_of_the_exporter(fixtures: Path) -> None:
    """Failed before: federated from a Prometheus that scraped dcgm-exporter through
    Kubernetes service discovery (honor_labels false), the series of a MIG instance that ran
    no workload carry only the target's pod, the exporter's own, and were given it."""
    served = federated_kubernetes(*_families(_fixture(fixtures, H100_MIG_PODS)))
    assert 'exported_pod="tts-predictor' in served
    _, *instances = parse_scrape(served, "federate", 0.0).snapshot.samples
    pods = {s.info.gpu_instance_id: [p.pod for p in s.pods or ()] for s in instances}
    assert pods[8] == []
    assert pods[7] == ["text-embedding-predictor-00008-deployment-57946f6c67-vdtjl"]
    assert pods[9] == ["tts-predictor-00011-deployment-5554f75554-8j8pl"]


def test_a_federated_page_with_workloads_reads_the_same(fixtures: Path) -> None:
    """Every real page that names a workload's pod, federated through Kubernetes service
    discovery, reads as the page (the workload's pods from exported_*, none of the exporter)."""
    differ = []
    for name, text in _real_pages(fixtures):
        page = parse_scrape(text, name, 0.0)
        if not page.pods:
            continue
        served = parse_scrape(federated_kubernetes(*_families(text)), name, 0.0).snapshot
        if _reading(served) != _reading(page.snapshot):
            differ.append(name)
    assert differ == []


def test_an_older_pod_label_is_the_workloads_beside_a_target_pod(fixtures: Path) -> None:
    """Failed before: a page of an exporter that spells the workload's pod pod_name (1.x, the
    fork of dcgm-exporter issue 188's page), scraped through Kubernetes service discovery,
    also carries the target's pod="<exporter pod>", which won."""
    (path,) = DATA_ROOT.glob("dcgm_public8/10__*job-pod.prom")
    served = federated_kubernetes(*_families(path.read_text(encoding="utf-8")))
    assert 'pod="nvidia-dcgm-exporter-x7k2p"' in served and "exported_pod" not in served
    (pod,) = parse_scrape(served, "federate", 0.0).pods
    assert (pod.pod, pod.namespace, pod.container) == (
        "question-rank-59bc9c675c-nfqqj",
        "paidui",
        "question-rank",
    )


@pytest.mark.xfail(
    strict=True,
    reason="a page of a node where no GPU ran a workload, federated through Kubernetes service "
    "discovery, names only the exporter's pod (plain pod, no exported_*): the same labels as a "
    "workload's pod scraped with honor_labels true (dcgm-exporter issue 418's page), so which "
    "it is cannot be read from the page",
)
def test_a_federated_idle_node_gets_no_pod_of_the_exporter(fixtures: Path) -> None:
    served = federated_kubernetes(*_families(_fixture(fixtures, A100)))
    assert all(s.pods is None for s in parse_scrape(served, "federate", 0.0).snapshot.samples)


def test_added_labels_name_the_driver_and_bus(fixtures: Path) -> None:
    served = driver_and_bus_labels(*_families(_fixture(fixtures, A100)))
    gpu = parse_scrape(served, "a100", 0.0).snapshot.samples[0]
    assert gpu.info.driver_version == DRIVER and gpu.info.pci_bus_id == "00000000:18:00.0"


def _doctor(page: str, tmp_path: Path, name: str) -> list[tuple[str, str]]:
    path = tmp_path / name
    path.write_text(page, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["doctor", "--from", str(path), "--json"])
    assert code == 0, err.getvalue()
    return sorted((f["code"], f["severity"]) for f in json.loads(out.getvalue())["findings"])


HEALTHY = [A100, "01__dcgm-exporter-250__v100-sxm2-x4-hostname.prom"]


@pytest.mark.parametrize("page", HEALTHY, ids=["a100-mig", "v100-x4"])
def test_doctor_finds_on_each_variant_what_it_finds_on_the_page(
    page: str, fixtures: Path, tmp_path: Path
) -> None:
    """And nothing on a healthy page, however it is served."""
    (path,) = [*(fixtures / "dcgm").glob(page), *DATA_ROOT.glob(f"dcgm_public*/{page}")]
    text = path.read_text(encoding="utf-8")
    expected = _doctor(text, tmp_path, "page.prom")
    assert [code for code, severity in expected if severity != "info"] == []
    families = _families(text)
    variants = {**VARIANTS, "federated_kubernetes": federated_kubernetes}
    found = {
        name: _doctor(make(*families), tmp_path, f"{name}.prom") for name, make in variants.items()
    }
    assert found == dict.fromkeys(variants, expected)


@pytest.mark.parametrize(
    "body",
    [
        "Unauthorized\n",
        "Forbidden (user=system:serviceaccount:monitoring:prometheus-k8s, verb=get, "
        "resource=, subresource=)\n",
    ],
    ids=["401", "403"],
)
@pytest.mark.parametrize("command", ["snapshot", "doctor"])
def test_what_kube_rbac_proxy_refuses_with_is_refused(
    body: str, command: str, tmp_path: Path
) -> None:
    """kube-rbac-proxy in front of the exporter answers an unauthorised scrape with a line of
    text: saved as the page, it is refused with exit 2, never read as an empty node."""
    path = tmp_path / "metrics.prom"
    path.write_text(body, encoding="utf-8")
    args = ["snapshot", "--backend", "dcgm"] if command == "snapshot" else ["doctor"]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([*args, "--from", str(path), "--json"])
    assert code == 2
    assert json.loads(err.getvalue())["reference"] in (
        "dcgm-scrape-unreadable",
        "capture-not-recognised",
    )
