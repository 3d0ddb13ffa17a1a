"""What an alert is made of, as data: its name, diagnosis code, failure mode, the PromQL of each
source it reads, and the promtool unit-test cases that show it firing and staying quiet."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from gpuwarden.types.health import Severity

# The unit tests' node and the scrape targets of its two exporters: rule_tests labels a test GPU's
# series with them, and an alert's cases name them where they expect a node-level series back.
TEST_NODE = "gpu-node-1"
DCGM_TARGET: Mapping[str, str] = {"instance": "10.0.0.1:9400", "job": "nvidia-dcgm-exporter"}
GPUWARDEN_TARGET: Mapping[str, str] = {"instance": "10.0.0.2:9400", "job": "gpuwarden-exporter"}


class FailureMode(StrEnum):
    """The rule groups and dashboards (fleet.md §5.2), also each alert's ``failure_mode`` label."""

    HEALTH = "health"
    THROUGHPUT = "throughput"
    BOTTLENECKS = "bottlenecks"
    DISTRIBUTED = "distributed"
    COST = "cost"


@dataclass(frozen=True, slots=True)
class InputSeries:
    """One input series of a unit test: ``values`` in promtool's expanding notation, one value a
    minute; ``gpu`` is the index of the test GPU whose labels it carries (None: no GPU labels)."""

    metric: str
    values: str
    labels: Mapping[str, str] = field(default_factory=dict)
    gpu: int | None = 0


def series(metric: str, values: str, gpu: int | None = 0, **labels: str) -> InputSeries:
    """An input series of test GPU ``gpu`` (None: no GPU labels), with ``labels`` besides."""
    return InputSeries(metric, values, labels, gpu)


@dataclass(frozen=True, slots=True)
class Case:
    """A unit test: these series, evaluated at ``at_minutes``, fire on the GPUs ``fires_on``
    (empty: the alert stays quiet) with ``labels`` beyond the GPU's and the alert's own."""

    name: str
    series: tuple[InputSeries, ...]
    fires_on: tuple[int, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    at_minutes: int = 20
    node_level: bool = False  # the alert is about the node or the exporter, not a GPU


@dataclass(frozen=True, slots=True)
class Text:
    """The words of an alert, when its code's row in ``health.rules.codes`` does not fit."""

    cause: str
    remedy: str


@dataclass(frozen=True, slots=True)
class AlertSpec:
    name: str
    code: str | None  # diagnosis.md §2; None: the series' own ``code`` label (gpuwarden's)
    mode: FailureMode
    severity: Severity  # for the dcgm-exporter branch; gpuwarden's findings carry their own
    summary: str  # a short title; the rule adds where (GPU, node)
    evidence: str  # what the dcgm-exporter branch reads, in words, for the description
    dcgm: str | None  # the PromQL over dcgm-exporter's own names, None: gpuwarden's only
    gpuwarden: str | None  # the PromQL over gpuwarden's series, None: dcgm-exporter's only
    for_: str = "0m"
    text: Text | None = None  # None: the code's cause and remedy from health.rules.codes
    runbook_url: str | None = None
    topic: str = ""  # a smaller rule group within the failure mode: gpuwarden-health-memory
    per_gpu: bool = True  # the alert names a GPU (else a node or an exporter)
    defers: bool | None = None  # wrap the dcgm branch in not_watched; None: as per_gpu
    # The failure kills the work on the GPU, so the other ranks of its job hang in their
    # collectives: doctor then tells its node peers' fake load to restart without the failed GPU
    # (health.rules.utilization.failed_gpus: a lost GPU, an uncorrectable ECC error). Alertmanager
    # inhibits those peers' performance alerts while it fires (deploy.alertmanager).
    fails_job: bool = False
    cases: tuple[Case, ...] = ()

    @property
    def defers_to_gpuwarden(self) -> bool:
        return self.per_gpu if self.defers is None else self.defers


@dataclass(frozen=True, slots=True)
class Sample:
    """An expected sample of a recording rule's unit test: labels (the test GPU's, when ``gpu``
    is set, plus ``labels``) and value."""

    value: float
    labels: Mapping[str, str] = field(default_factory=dict)
    gpu: int | None = None


@dataclass(frozen=True, slots=True)
class RecordCase:
    name: str
    series: tuple[InputSeries, ...]
    expected: tuple[Sample, ...]
    at_minutes: int = 10


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """A recording rule: the series a dashboard, the fleet report or an alert reads."""

    record: str
    expr: str
    mode: FailureMode
    meaning: str  # what the series is, for the rules file's comments and the README
    cases: tuple[RecordCase, ...] = ()
    topic: str = ""


def group_name(mode: FailureMode, topic: str = "") -> str:
    """The rule group: ``gpuwarden-<failure mode>[-<topic>]``. Prometheus evaluates groups
    concurrently and a group's rules in order, so a recording rule and the alerts reading it
    share a group."""
    return f"gpuwarden-{mode.value}" + (f"-{topic}" if topic else "")
