"""Generated DCGM series for the fleet tests and the benchmark, with the truth they plant.

The series look like dcgm-exporter's (or gpuwarden's exporter's) scrapes: the metric names, the
labels (``gpu``, ``UUID``, ``modelName``, ``Hostname`` or the newer ``hostname``, ``namespace`` /
``pod`` while a pod holds the GPU), one sample per scrape interval at a fixed offset in the minute,
and the utilisation calibrated to the published cluster traces (fleet.md §3.1: a large share of
GPU time sits at exactly 0 % — here about a third of the GPU-minutes; busy GPUs sit around
60-80 % SM active with noise).

``lab_fleet()`` is the test fleet with planted facts (idle hours, a straggler, a heterogeneous but
stable pod, a thermal outlier, Xids, ECC, a row-remap failure); ``healthy_fleet()`` has none.
Written as OpenMetrics (seconds; ``promtool tsdb create-blocks-from openmetrics``) or Prometheus
text with millisecond timestamps (VictoriaMetrics' ``/api/v1/import/prometheus``).
"""

from __future__ import annotations

import bisect
import math
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE = 1_704_067_200  # 2024-01-01T00:00:00Z: old data, as promtool's backfill wants
HOUR = 3600
WINDOW = (BASE, BASE + 24 * HOUR)  # the report's window: grid minutes in (start, end]
DATA_START = BASE - HOUR
DATA_END = BASE + 24 * HOUR + 30 * 60
STEP = 60  # the tests' scrape interval
OFFSET = 7  # scrapes land 7 s into the minute
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"


@dataclass
class Series:
    name: str
    labels: dict[str, str]
    samples: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class Gpu:
    """One GPU's plan: functions of the sample time."""

    host: str
    index: int
    model: str = H100
    host_label: str = "Hostname"
    profiling: bool = True  # SM_ACTIVE and GR_ENGINE_ACTIVE exported
    cluster: str = "lab"
    level: Callable[[int], float] = lambda t: 0.0  # percent
    holder: Callable[[int], tuple[str, str] | None] = lambda t: None
    temp_offset: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)  # more labels (exported_pod, GPU_I_ID)
    uuid: str = field(init=False)

    def __post_init__(self) -> None:
        seed = sum(ord(c) for c in self.host) * 100 + self.index
        self.uuid = f"GPU-{seed:08x}-{self.index:04x}-4{self.index:03x}-8000-{seed * 7919:012x}"[
            :40
        ]

    def labels(self, t: int) -> dict[str, str]:
        labels = {
            "gpu": str(self.index),
            "UUID": self.uuid,
            "device": f"nvidia{self.index}",
            "modelName": self.model,
            self.host_label: self.host,
            "cluster": self.cluster,
            **self.extra,
        }
        holder = self.holder(t)
        if holder is not None:
            labels.update(namespace=holder[0], pod=holder[1], container="main")
        return labels

    def power(self, t: int) -> float:
        # idle 70 W, 90 % of the 700 W TDP at full activity (H100 SXM)
        return 70.0 + 630.0 * 0.9 * self.level(t) / 100.0 + _noise(self.uuid, t, 4.0)

    def temperature(self, t: int) -> float:
        return 30.0 + 0.06 * self.power(t) + self.temp_offset + _noise(self.uuid + "T", t, 0.8)


def _uniform(key: str, t: int) -> float:
    """A deterministic number in [0, 1) from (key, t): the same fleet on every run."""
    return zlib.crc32(f"{key}:{t}".encode()) / 2**32


def _noise(key: str, t: int, scale: float) -> float:
    """Deterministic noise in [-scale, scale] from (key, t)."""
    return (_uniform(key, t) * 2 - 1) * scale


def sample_times(start: int = DATA_START, end: int = DATA_END, step: int = STEP) -> range:
    return range(start + OFFSET, end, step)


def _round(value: float, digits: int = 4) -> float:
    return round(value, digits)


def gpu_series(gpu: Gpu, times: Iterable[int]) -> list[Series]:
    """The level, temperature and power series of a GPU (a new series when its labels change)."""
    by_key: dict[tuple[str, tuple[str, str] | None], Series] = {}
    labels_of: dict[tuple[str, str] | None, dict[str, str]] = {}
    holder: tuple[str, str] | None = None

    def add(name: str, labels: dict[str, str], t: int, value: float) -> None:
        series = by_key.get((name, holder))
        if series is None:
            series = by_key[(name, holder)] = Series(name, labels)
        series.samples.append((t, value))

    for t in times:
        holder = gpu.holder(t)
        if holder not in labels_of:
            labels_of[holder] = gpu.labels(t)
        labels, level = labels_of[holder], gpu.level(t)
        if gpu.profiling:
            add("DCGM_FI_PROF_SM_ACTIVE", labels, t, _round(level / 100))
            add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, t, _round(min(level * 1.15, 100) / 100))
            add("DCGM_FI_DEV_GPU_UTIL", labels, t, float(min(100, round(level * 1.25))))
        else:
            add("DCGM_FI_DEV_GPU_UTIL", labels, t, level)
        add("DCGM_FI_DEV_GPU_TEMP", labels, t, _round(gpu.temperature(t), 1))
        add("DCGM_FI_DEV_POWER_USAGE", labels, t, _round(gpu.power(t), 3))
    return list(by_key.values())


def counter_series(
    gpu: Gpu,
    name: str,
    times: Iterable[int],
    increments: dict[int, float],
    *,
    from_zero: bool,
    extra: dict[str, str] | None = None,
) -> Series:
    """A counter on the GPU's labels (without pod labels, as per-GPU counters are exported):
    ``increments`` maps a sample time to what is added there. ``from_zero``: exported at 0 from
    the start (a configured DCGM field); else created at its first increment (a labelled
    prometheus_client counter)."""
    labels = {
        k: v
        for k, v in gpu.labels(DATA_START).items()
        if k not in {"namespace", "pod", "container"}
    }
    series = Series(name, {**labels, **(extra or {})})
    total, started = 0.0, from_zero
    for t in times:
        total += increments.get(t, 0.0)
        started = started or t in increments
        if started:
            series.samples.append((t, total))
    return series


def gauge_series(
    gpu: Gpu,
    name: str,
    times: Iterable[int],
    value: Callable[[int], float],
    extra: dict[str, str] | None = None,
) -> Series:
    labels = {
        k: v
        for k, v in gpu.labels(DATA_START).items()
        if k not in {"namespace", "pod", "container"}
    }
    return Series(name, {**labels, **(extra or {})}, [(t, value(t)) for t in times])


def at(hours: float) -> int:
    """The sample time nearest after BASE + hours."""
    return BASE + round(hours * HOUR) + OFFSET


def _busy(mean: float, key: str, spread: float = 4.0) -> Callable[[int], float]:
    return lambda t: max(0.0, min(100.0, mean + _noise(key, t, spread)))


# ---------------------------------------------------------------- the lab fleet


@dataclass
class Planted:
    """What the lab fleet plants, by GPU uuid (the report must find exactly these)."""

    straggler: str = ""
    heterogeneous: str = ""
    thermal: str = ""
    rma: set[str] = field(default_factory=set)
    xid: dict[tuple[str, int], int] = field(default_factory=dict)  # (uuid, xid) → count
    ecc_uncorrectable: str = ""
    sbe_storm: str = ""
    row_remap_failure: str = ""
    retired_pages_limit: str = ""
    low_utilization_pod: tuple[str, str] = ("", "")
    stall_idle_gpu_hours: float = 0.0


@dataclass
class Fleet:
    series: list[Series]
    gpus: list[Gpu]
    planted: Planted


def _constant(value: float) -> Callable[[int], float]:
    return lambda t: value


def _held(namespace: str, pod: str) -> Callable[[int], tuple[str, str] | None]:
    return lambda t: (namespace, pod)


def _node_a(times: list[int], planted: Planted) -> tuple[list[Gpu], list[Series]]:
    """One 8-GPU training pod: a stall 10:00-11:30 on all GPUs; GPU 5 straggles from 14:00; GPU 3
    runs 13 °C hot; GPU 1 shows Xid 13 then 31 on the last-Xid gauge (dcgm-exporter)."""
    gpus, series = [], []
    for i in range(8):
        base = _busy(78.0, f"a{i}")

        def level(t: int, i: int = i, base: Callable[[int], float] = base) -> float:
            if at(10) <= t < at(11.5):
                return 0.0
            if i == 5 and t >= at(14):
                return base(t) * 45 / 78
            return base(t)

        hot = 13.0 if i == 3 else (i % 3) - 1.0
        gpu = Gpu("node-a", i, level=level, holder=_held("ml-train", "train-llm"), temp_offset=hot)
        xids = {at(4 + 1 / 3): 13.0, at(16 + 1 / 12): 31.0} if i == 1 else {}
        gauge = gauge_series(gpu, "DCGM_FI_DEV_XID_ERRORS", times, lambda t, x=xids: _last(x, t))
        gpus.append(gpu)
        series += [*gpu_series(gpu, times), gauge]
    # GPU 7: dcgm-exporter's windowed count (5 min window): one Xid 94 at 06:00, two at 18:00
    counts = {at(6): 1.0, at(18): 2.0}

    def in_window(t: int) -> float:
        return sum(n for when, n in counts.items() if when <= t < when + 300)

    window_count = gauge_series(gpus[7], "DCGM_EXP_XID_ERRORS_COUNT", times, in_window)
    window_count.labels.update(xid="94", window_size_in_ms="300000")
    series.append(window_count)
    planted.straggler, planted.thermal = gpus[5].uuid, gpus[3].uuid
    planted.xid[(gpus[1].uuid, 13)] = 1
    planted.xid[(gpus[1].uuid, 31)] = 1
    planted.xid[(gpus[7].uuid, 94)] = 3
    planted.stall_idle_gpu_hours = 8 * 1.5
    return gpus, series


def _node_b(times: list[int], planted: Planted) -> tuple[list[Gpu], list[Series]]:
    """gpuwarden's exporter: a pipeline pod whose GPU 0 runs at half its peers' activity all day
    (heterogeneous, stable); a notebook holding 4 GPUs idle; Xid 119 six times on GPU 6; a
    row-remap failure on GPU 7 from 09:00."""
    gpus, series = [], []
    for i in range(8):
        if i < 4:
            level, holder = (
                _busy(40.0 if i == 0 else 80.0, f"b{i}"),
                _held("ml-infer", "pp-pipeline"),
            )
        else:
            level, holder = _constant(0.0), _held("research", "notebook-alice")
        gpu = Gpu("node-b", i, level=level, holder=holder, temp_offset=(i % 3) - 1.0)
        gpus.append(gpu)
        series += gpu_series(gpu, times)
        last_xid = (lambda t: 119.0 if t >= at(2) else 0.0) if i == 6 else _constant(0.0)
        series.append(gauge_series(gpu, "DCGM_FI_DEV_XID_ERRORS", times, last_xid))
        failed = (lambda t: 1.0 if t >= at(9) else 0.0) if i == 7 else _constant(0.0)
        series.append(gauge_series(gpu, "DCGM_FI_DEV_ROW_REMAP_FAILURE", times, failed))
    increments = {at(h): 1.0 for h in (2, 5, 8, 12, 16, 20)}
    xid = {"xid": "119"}
    series.append(
        counter_series(
            gpus[6], "gpuwarden_xid_total", times, increments, from_zero=False, extra=xid
        )
    )
    finding = {"code": "row-remap-failure", "severity": "critical"}
    on = [t for t in times if t >= at(9)]
    series.append(gauge_series(gpus[7], "gpuwarden_finding", on, _constant(1.0), extra=finding))
    planted.heterogeneous = gpus[0].uuid
    planted.low_utilization_pod = ("research", "notebook-alice")
    planted.xid[(gpus[6].uuid, 119)] = 6
    planted.row_remap_failure = gpus[7].uuid
    planted.rma |= {gpus[6].uuid, gpus[7].uuid}
    return gpus, series


def _node_c(times: list[int], planted: Planted) -> tuple[list[Gpu], list[Series]]:
    """A fine-tuning pod on GPUs 0-3 until 12:00 (busy, 20 % of its minutes at 0), then nobody;
    GPUs 4-7 unallocated all day. Uncorrectable ECC twice on GPU 2; an SBE burst on GPU 1."""
    gpus, series = [], []
    for i in range(8):
        busy = _busy(75.0, f"c{i}", 6.0)

        def level(t: int, i: int = i, busy: Callable[[int], float] = busy) -> float:
            if i >= 4 or t >= at(12):
                return 0.0
            return 0.0 if _uniform(f"c{i}z", t) < 0.2 else busy(t)

        def holder(t: int, i: int = i) -> tuple[str, str] | None:
            return ("ml-train", "finetune-7") if i < 4 and t < at(12) else None

        gpu = Gpu("node-c", i, level=level, holder=holder, temp_offset=(i % 3) - 1.0)
        gpus.append(gpu)
        dbe = {at(3 + 1 / 6): 1.0, at(15 + 2 / 3): 2.0} if i == 2 else {}
        sbe = (
            {at(7): 15.0}
            if i == 1
            else ({at(h): 1.0 for h in (1.5, 9.25, 19.75)} if i == 0 else {})
        )
        retired = _constant(64.0 if i == 5 else 0.0)  # GPU 5: past the 60-page RMA line
        series += [
            *gpu_series(gpu, times),
            counter_series(gpu, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", times, dbe, from_zero=True),
            counter_series(gpu, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", times, sbe, from_zero=True),
            gauge_series(gpu, "DCGM_FI_DEV_RETIRED_DBE", times, retired),
        ]
    planted.ecc_uncorrectable, planted.sbe_storm = gpus[2].uuid, gpus[1].uuid
    planted.retired_pages_limit = gpus[5].uuid
    planted.rma |= {gpus[2].uuid, gpus[5].uuid}
    return gpus, series


def _node_d(times: list[int]) -> tuple[list[Gpu], list[Series]]:
    """An older fleet: A100s, GPU_UTIL only, the newer "hostname" label, no pods. GPU 3 sits
    exactly on the idle line (5 %: not idle) for 6 h, then just below it."""
    gpus, series = [], []
    for i in range(4):

        def level(t: int, i: int = i) -> float:
            if i < 2:
                return float(round(70 + _noise(f"d{i}", t, 10)))
            if i == 2:
                return float(int(_uniform("d2", t) * 5))
            return 5.0 if t < at(6) else (4.9 if t < at(12) else 0.0)

        gpu = Gpu("node-d", i, model=A100, host_label="hostname", profiling=False, level=level)
        gpus.append(gpu)
        series += gpu_series(gpu, times)
    return gpus, series


def lab_fleet(times: Iterable[int] | None = None) -> Fleet:
    listed = list(times or sample_times())
    planted = Planted()
    gpus: list[Gpu] = []
    series: list[Series] = []
    for node_gpus, node_series in (
        _node_a(listed, planted),
        _node_b(listed, planted),
        _node_c(listed, planted),
        _node_d(listed),
    ):
        gpus += node_gpus
        series += node_series
    return Fleet(series, gpus, planted)


def _last(changes: dict[int, float], t: int) -> float:
    seen = [(when, value) for when, value in changes.items() if when <= t]
    return max(seen)[1] if seen else 0.0


def healthy_fleet(times: Iterable[int] | None = None) -> Fleet:
    """Eight busy GPUs of one serving pod and four of a training pod: nothing to report."""
    times = list(times or sample_times())
    gpus, series = [], []
    for i in range(12):
        holder = ("prod", "serve-1") if i < 8 else ("prod", "train-2")
        gpu = Gpu(
            "node-h",
            i,
            cluster="healthy",
            level=_busy(70.0 if i < 8 else 88.0, f"h{i}", 8.0),
            holder=lambda t, h=holder: h,
            temp_offset=(i % 5) - 2.0,
        )
        gpus.append(gpu)
        series += gpu_series(gpu, times)
        series.append(gauge_series(gpu, "DCGM_FI_DEV_XID_ERRORS", times, lambda t: 0.0))
        series.append(
            counter_series(gpu, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", times, {}, from_zero=True)
        )
    return Fleet(series, gpus, Planted())


def mig_fleet(times: Iterable[int] | None = None) -> Fleet:
    """One A100 in MIG mode, as dcgm-exporter 2.x shows it (the A100 fixture): a whole-GPU
    GR_ENGINE_ACTIVE series without pod labels, and one per GPU instance; instance 1 held by a
    busy service (a 4-slice instance), instance 2 by an idle one (3 slices). The GPU counts once:
    24 GPU-hours, shared by slices: 24 × 4/7 and 24 × 3/7."""
    times = list(times or sample_times())
    whole = Gpu("node-m", 0, model=A100, cluster="mig", level=lambda t: 50.0)
    series = [s for s in gpu_series(whole, times) if s.name != "DCGM_FI_PROF_SM_ACTIVE"]
    for gi, pod, level, profile in (
        ("1", "svc-a", 60.0, "4g.20gb"),
        ("2", "svc-b", 0.0, "3g.20gb"),
    ):
        instance = Gpu(
            "node-m",
            0,
            model=A100,
            cluster="mig",
            level=lambda t, level=level: level,
            holder=lambda t, pod=pod: ("team-" + pod[-1], pod),
            extra={"GPU_I_ID": gi, "GPU_I_PROFILE": profile},
        )
        series += [
            s for s in gpu_series(instance, times) if s.name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
        ]
    return Fleet(series, [whole], Planted())


def renamed_fleet(times: Iterable[int] | None = None) -> Fleet:
    """A scrape without honorLabels: the exporter's own pod in namespace/pod, the workload's in
    exported_namespace/exported_pod. GPU 0 is held by team-z/trainer-0, GPU 1 by nobody."""
    times = list(times or sample_times())
    exporter = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x7k2p"}
    held = {**exporter, "exported_namespace": "team-z", "exported_pod": "trainer-0"}
    gpus = [
        Gpu("node-r", 0, cluster="renamed", level=_busy(50.0, "r0"), extra=held),
        Gpu("node-r", 1, cluster="renamed", level=lambda t: 0.0, extra=exporter),
    ]
    series = [s for gpu in gpus for s in gpu_series(gpu, times)]
    return Fleet(series, gpus, Planted())


def replayed_scrape(text: str, times: Iterable[int]) -> list[Series]:
    """A real dcgm-exporter scrape (a fixture) as if the exporter had served it at every time:
    real names and label shapes (pci_bus_id, DCGM_FI_DRIVER_VERSION, container, MIG), constant
    values."""
    from prometheus_client.parser import text_string_to_metric_families

    listed = list(times)
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.append(
                Series(sample.name, dict(sample.labels), [(t, sample.value) for t in listed])
            )
    return out


# ---------------------------------------------------------------- writing


def _label_text(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def _lines(series: Iterable[Series], scale: int) -> Iterator[str]:
    by_name: dict[str, list[Series]] = {}
    for s in series:
        by_name.setdefault(s.name, []).append(s)
    for name, family in by_name.items():
        if scale == 1:
            yield f"# TYPE {name} gauge\n"
        for s in family:
            head = f"{name}{{{_label_text(s.labels)}}} "
            for t, value in s.samples:
                yield f"{head}{value:g} {t * scale}\n"


def write_openmetrics(series: Iterable[Series], path: Path) -> None:
    with path.open("w") as out:
        out.writelines(_lines(series, 1))
        out.write("# EOF\n")


def prometheus_text(series: Iterable[Series]) -> bytes:
    return "".join(_lines(series, 1000)).encode()


# ---------------------------------------------------------------- the oracle

LEVEL_METRICS = ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL")


def _present(
    samples: list[tuple[int, float]], stamps: list[int], m: int, lookback: int
) -> float | None:
    """The last sample in [m − lookback, m], as a series' value at grid minute m."""
    index = bisect.bisect_right(stamps, m) - 1
    if index < 0 or stamps[index] < m - lookback:
        return None
    return samples[index][1]


def _family_of_gpus(series: list[Series], window: tuple[int, int]) -> dict[str, tuple[str, bool]]:
    """UUID → (its family: the first of LEVEL_METRICS with a sample in the window, MIG: whether
    that family has instance series for it)."""
    found: dict[str, dict[str, bool]] = {}
    for s in series:
        if s.name in LEVEL_METRICS and any(window[0] < t <= window[1] for t, _ in s.samples):
            mig = found.setdefault(s.labels["UUID"], {})
            mig[s.name] = mig.get(s.name, False) or "GPU_I_ID" in s.labels
    return {
        uuid: next((name, families[name]) for name in LEVEL_METRICS if name in families)
        for uuid, families in found.items()
    }


def oracle_usage(
    series: Iterable[Series], lookback: int, idle_below: float, window: tuple[int, int] = WINDOW
) -> dict[tuple[str, str | None, str | None], tuple[float, float]]:
    """(UUID, namespace, pod) → (GPU-minutes, idle minutes), by the documented semantics, in
    plain Python: each GPU is read from the first of SM active, GR engine active, GPU_UTIL it
    has in the window (a MIG GPU from its instance series); at each grid minute a series counts
    if it reported within ``lookback``; a GPU's minute is shared among its MIG instances by their
    slices ("4g.20gb": 4), and equally among the series of one instance or of a whole GPU."""
    listed = list(series)
    family = _family_of_gpus(listed, window)
    scale = {
        "DCGM_FI_PROF_SM_ACTIVE": 100,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 100,
        "DCGM_FI_DEV_GPU_UTIL": 1,
    }
    chosen = [
        s
        for s in listed
        if s.name in LEVEL_METRICS
        and s.labels["UUID"] in family
        and family[s.labels["UUID"]] == (s.name, "GPU_I_ID" in s.labels)
    ]
    stamps = [[t for t, _ in s.samples] for s in chosen]
    out: dict[tuple[str, str | None, str | None], list[float]] = {}
    for m in range(window[0] + 60, window[1] + 1, 60):
        present: dict[str, list[tuple[tuple[str, str | None, str | None], float]]] = {}
        for s, times in zip(chosen, stamps, strict=True):
            reading = _present(s.samples, times, m, lookback)
            if reading is not None:
                ident = (s.labels["UUID"], s.labels.get("namespace"), s.labels.get("pod"))
                instance = (s.labels.get("GPU_I_ID"), s.labels.get("GPU_I_PROFILE"))
                present.setdefault(s.labels["UUID"], []).append(
                    (ident, instance, reading * scale[s.name])
                )
        for members in present.values():
            for ident, share, value in _shared(members):
                row = out.setdefault(ident, [0.0, 0.0])
                row[0] += share
                row[1] += share if value < idle_below else 0.0
    return {k: (v[0], v[1]) for k, v in out.items()}


def _shared(members: list[Any]) -> list[tuple[Any, float, float]]:
    """(ident, share of the minute, level) for the series present at one minute of one GPU."""
    instances = {gi: int(profile.split("g.")[0]) for _, (gi, profile), _ in members if gi}
    if len(instances) < 2 or any(gi is None for _, (gi, _), _ in members):
        return [(ident, 1 / len(members), value) for ident, _, value in members]
    total = sum(instances.values())
    per_instance = Counter(gi for _, (gi, _), _ in members)
    return [
        (ident, instances[gi] / total / per_instance[gi], value)
        for ident, (gi, _), value in members
    ]


def expected_count(value: float) -> float:
    return math.floor(value + 0.5)
