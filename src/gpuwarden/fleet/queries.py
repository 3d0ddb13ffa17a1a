"""Every PromQL expression the fleet report sends, as named templates.

Names and labels are dcgm-exporter's (reference/telemetry.md §2), which gpuwarden's exporter keeps,
plus gpuwarden's own families. A GPU is its ``UUID`` (a placeholder UUID such as "index:0" with
its node: collect.gpu_key, ``gpu_keyed``; a MIG instance adds ``GPU_I_ID``); the node
is ``Hostname``, renamed ``hostname`` in dcgm-exporter's newest release, or the scrape's
``node``: all are grouped by, and the first a series carries names its node.

Conventions every template follows, so Prometheus (2.x and 3.x) and VictoriaMetrics give the same
numbers (fleet.md §1.1/§6):

* The grid: one evaluation per minute on whole minutes (subqueries ``[R:1m]``); a bucket ending at
  ``t`` covers the grid minutes in ``(t − bucket, t]``: the subquery range is the bucket minus one
  millisecond, so a minute on the edge is never counted twice, whichever side of a range an
  engine includes.
* A reading counts at a grid minute if the exporter reported it within ``$lookback`` (an explicit
  ``last_over_time``, not the engines' different default lookbacks).
* Each GPU is read from one utilisation family over the window (SM active, else GR engine
  active, else GPU_UTIL: ``LEVEL_SOURCES``), found by a cheap probe first; a MIG GPU from its
  instances' series only. The GPUs of one family are one *group*, selected by ``UUID`` matchers
  when the family holds GPUs that belong to another group.
* A GPU's minute weighs 1 however many series it has (two pods time-slicing it, MIG instances, a
  pod ending while the next starts, a GPU scraped twice): each series gets 1/n of it. Counting
  minutes per series is cheap; the weights need a join, so only the minutes where a GPU has
  several series are fetched (``OVERLAPS``, sparse) and the counts corrected by the collector.
* Only aggregates come back: per series and bucket, or the few minutes where something happened.

``$matchers`` carry the user's ``--selector`` and the group's own matchers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from string import Template

# --- metric names (dcgm-exporter's; gpuwarden's exporter serves the same)
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"  # ratio 0..1: cycles an SM has a warp (profiling)
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0..1: graphics engine busy time
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent: a kernel ran (time-based, overstates work)
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # °C
POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
XID_LAST = "DCGM_FI_DEV_XID_ERRORS"  # gauge: the value of the LAST Xid (sticky)
XID_COUNT_WINDOW = "DCGM_EXP_XID_ERRORS_COUNT"  # {xid}: Xids within the exporter's window
XID_TOTAL_DCGM = "DCGM_EXP_XID_ERRORS_TOTAL"  # {xid}: counter (dcgm-exporter's newest)
XID_TOTAL_GPUWARDEN = "gpuwarden_xid_total"  # {xid}: counter since the exporter started
FINDING_GPUWARDEN = "gpuwarden_finding"  # {code, severity}: 1 while a finding is active
ECC_DBE_VOLATILE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"  # uncorrectable since the last reset
ECC_DBE_AGGREGATE = "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"  # uncorrectable over the board's life
ECC_SBE_VOLATILE = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"  # corrected since the last reset
REMAPPED_ROWS_UNCORRECTABLE = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"  # 1 once a remap failed (Ampere+)
ROW_REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"  # 1 while a remap waits for a reset
RETIRED_PENDING = "DCGM_FI_DEV_RETIRED_PENDING"  # pages waiting for retirement (pre-Ampere)
RETIRED_DBE = "DCGM_FI_DEV_RETIRED_DBE"  # pages retired for double-bit errors

# Utilisation families, most faithful first (fleet.md §3.2: GPU_UTIL is "a kernel ran"):
# (name in the report, metric, factor to percent).
LEVEL_SOURCES = (
    ("sm_active", SM_ACTIVE, 100),
    ("gr_engine_active", GR_ENGINE_ACTIVE, 100),
    ("gpu_util", GPU_UTIL, 1),
)

# --- labels
# The node, most exact first: ``node`` where the scrape adds the pod's node name (gpuwarden's
# ServiceMonitor relabels __meta_kubernetes_pod_node_name to it), else the exporter's own, which
# is the exporter pod's host name where NODE_NAME is not set (dcgm-exporter issue #188:
# Hostname="dcgm-exporter-6ldbb").
NODE_LABELS = ("node", "Hostname", "hostname")
GPU_LABELS = (*NODE_LABELS, "instance", "UUID", "gpu", "modelName")
MIG_LABELS = ("GPU_I_ID", "GPU_I_PROFILE")
# A ServiceMonitor without honorLabels renames the exporter's pod labels exported_*, and the
# target's own namespace and pod (the exporter's) take their place: dcgm-exporter issues #27
# (pod="…-dcgm-exporter-vfbhl") and #85 ("exported_pod … is made by the prometheus").
POD_LABELS = ("namespace", "pod")
RENAMED_BY_SCRAPE = "exported_"
WORKLOAD_LABELS = (*POD_LABELS, *(RENAMED_BY_SCRAPE + label for label in POD_LABELS))
SERIES_LABELS = (*GPU_LABELS, *MIG_LABELS, *WORKLOAD_LABELS)
GPU_BY = ", ".join(GPU_LABELS)
# What a GPU's key (collect.gpu_key) is made of: its UUID, and for a placeholder UUID its node
KEY_LABELS = ("UUID", *NODE_LABELS, "instance")
# The key spelled in PromQL, for the joins that must not take two nodes' "index:0" for one GPU
GPU_KEY = "gw_gpu"
_KEY_NODE = "gw_node"
# A label value is any text, a newline too (the text format escapes it as \n), and collect.py
# takes it whole; RE2's "." stops at a newline unless the s flag is set
_ANY = "(?s:.+)"
# collect.gpu_of's node: the first node label set, else the instance without its port (one ":",
# or an IPv6 address in brackets: "[fd00::4]:9400"); applied in order, a later match wins
BRACKETED_INSTANCE = r"(\[[^\]]*\]):[0-9]*"
_NODE_FROM_INSTANCE = (f"({_ANY})", "([^:]*):[^:]*", BRACKETED_INSTANCE)
# types.telemetry.real_uuid (any UUID starting so) and placeholder_names_host (a fullmatch of
# ".+/index:[0-9]+", whose "." stops at a newline as RE2's does): a UUID that is its key alone
_KEY_ALONE = "((?:GPU-|MIG-)(?s:.*)|.+/index:[0-9]+)"
SERIES_BY = ", ".join(SERIES_LABELS)

# --- probes (instant queries at the window's end over the whole window: raw, cheap)
# Per GPU as the collector keys it (collect.gpu_key: a placeholder UUID with its node), so the
# labels it is keyed from, and per MIG instance.
SERIES_PER_GPU = Template(
    f"count by ({', '.join(KEY_LABELS)}, GPU_I_ID) (count_over_time($metric{{$matchers}}[$window]))"
)
SERIES_WITH_LABEL = Template("count(count_over_time($metric{$matchers}[$window]))")
# gpuwarden's exporter serves gpuwarden_gpu_lost for every GPU it reads (0 or 1): one series per
# GPU. A range function drops the metric name, so counting every gpuwarden_* family at once made
# series of two families with the same labels one labelset twice (collections_total and
# collection_errors_total {backend}: HTTP 422 "vector cannot contain metrics with the same
# labelset" on every Prometheus that scrapes the exporter).
GPUWARDEN_FAMILIES = Template("count(count_over_time(gpuwarden_gpu_lost{$matchers}[$window]))")
READINGS_PER_HOUR = Template("quantile(0.5, $counts)")
# A series' readings in the last span it covers whole (it had readings in the span before),
# scaled to an hour: a series younger than an hour (a fresh Prometheus, a new node) is counted
# over 10 minutes or one, not as an hour's readings (65 s of 5 s scrapes read as 277 s).
READING_SPANS_S = (3600, 600, 60)
READINGS_IN_SPAN = Template(
    "$per_hour * (count_over_time($metric{$matchers}[$span]) "
    "and count_over_time($metric{$matchers}[$span] offset $span))"
)
# A family with events in the window: it changed, or it appeared above 0 after the window began
# (a counter created at its first event; a new pod's series of a GPU at 0 is no event).
CHANGED = Template(
    "count by (UUID) (changes($metric{$matchers}[$window]) > 0 or "
    "(max_over_time($metric{$matchers}[$window]) > 0 unless "
    "last_over_time($metric{$matchers}[$lookback] offset $window)))"
)
STATE_SEEN = Template("count by (UUID) (max_over_time($metric{$matchers}[$window]) > 0)")
TAGGED = Template('label_replace($expr, "$label", "$value", "", "")')
COPIED = Template('label_replace($expr, "$label", "$$1", "$source", $regex)')
JOINED = Template('label_join($expr, "$label", "/", $sources)')
MAX_OVER_WINDOW = Template(f"max by ({GPU_BY}) (max_over_time($metric{{$matchers}}[$window]))")

# --- per bucket (range query, step = bucket; $bucket = bucket − 1 ms)
_READING = Template("last_over_time($metric{$matchers}[$lookback])")
_READING_BEFORE = Template("last_over_time($metric{$matchers}[$lookback] offset 1m)")
LEVEL = Template("($factor$reading >= 0)")  # percent; ">= 0" drops NaN
PRESENT_MINUTES = Template(f"sum by ({SERIES_BY}) (count_over_time(($level)[$bucket:1m]))")
IDLE_MINUTES = Template(f"sum by ({SERIES_BY}) (count_over_time(($level < $idle)[$bucket:1m]))")
MEAN_LEVEL = Template(
    f"avg by ({SERIES_BY}) ($factor avg_over_time($metric{{$matchers}}[$bucket]))"
)
MEAN_TEMPERATURE = Template(
    f"avg by ({GPU_BY}) (avg_over_time({GPU_TEMP}{{$matchers}}[$bucket]) > 0)"  # 0 °C: no sensor
)
MEAN_POWER = Template(f"avg by ({GPU_BY}) (avg_over_time({POWER}{{$matchers}}[$bucket]) >= 0)")

# --- per minute (range query, step = 1 minute): only the minutes where something happened
# The minutes a GPU has several series, with each series' level (for the 1/n weights).
OVERLAPS = Template(f"$level and on({GPU_KEY}) (count by ({GPU_KEY}) ($level) > 1)")
# A counter's increase since the minute before: a rise, a series that appeared (an exporter
# creates a per-code counter at its first event), or a reset (the value since the restart).
COUNTER_STEP = Template(
    "(($now - $before) > 0) or ($now unless $before) or ($now and ($now < $before))"
)
# A windowed count (DCGM_EXP_XID_ERRORS_COUNT) falls as its window slides: rises only.
WINDOW_COUNT_STEP = Template("(($now - $before) > 0) or ($now unless $before)")
# The last-Xid gauge: a new non-zero value (repeats of the same Xid are invisible to it).
LAST_VALUE_STEP = Template("($now > 0) unless ($now == $before)")
# max, not sum: a GPU scraped twice reports the same events twice
EVENTS = Template("max by ($by) ($step)")
TURNED_ON = Template("($now > 0) unless ($before > 0)")
TURNED_OFF = Template("($before > 0) unless ($now > 0)")
STATE_NOW = Template("max by ($by) ($now > 0)")


@dataclass(frozen=True, slots=True)
class EventSource:
    name: str  # in the report (Event.source, Incident.source)
    kind: str  # the incident it counts toward (Incident.kind)
    metric: str
    step: Template
    by: str = ""  # an extra label it is grouped by

    @property
    def last_value(self) -> bool:
        """The last-Xid gauge: its value is the Xid, and repeats of one Xid are invisible."""
        return self.step is LAST_VALUE_STEP


# Most exact first within a kind: the analysis reads each GPU's events of a kind from the first
# source it has (a counter before a windowed count before the last-Xid gauge; volatile DBE before
# aggregate).
EVENT_SOURCES = (
    EventSource("xid:gpuwarden_xid_total", "xid", XID_TOTAL_GPUWARDEN, COUNTER_STEP, "xid"),
    EventSource("xid:DCGM_EXP_XID_ERRORS_TOTAL", "xid", XID_TOTAL_DCGM, COUNTER_STEP, "xid"),
    EventSource("xid:DCGM_EXP_XID_ERRORS_COUNT", "xid", XID_COUNT_WINDOW, WINDOW_COUNT_STEP, "xid"),
    EventSource("xid:DCGM_FI_DEV_XID_ERRORS", "xid", XID_LAST, LAST_VALUE_STEP),
    EventSource("ecc-dbe:volatile", "ecc-uncorrectable", ECC_DBE_VOLATILE, COUNTER_STEP),
    EventSource("ecc-dbe:aggregate", "ecc-uncorrectable", ECC_DBE_AGGREGATE, COUNTER_STEP),
    EventSource("ecc-sbe:volatile", "ecc-correctable", ECC_SBE_VOLATILE, COUNTER_STEP),
    EventSource(
        "remapped-rows:uncorrectable",
        "remapped-rows-uncorrectable",
        REMAPPED_ROWS_UNCORRECTABLE,
        COUNTER_STEP,
    ),
)
EVENT_SOURCE = {source.name: source for source in EVENT_SOURCES}
# (state name in the report, metric, extra labels it is grouped by)
STATE_SOURCES = (
    ("row-remap-failure", ROW_REMAP_FAILURE, ""),
    ("row-remap-pending", ROW_REMAP_PENDING, ""),
    ("retired-pages-pending", RETIRED_PENDING, ""),
    ("gpuwarden-finding", FINDING_GPUWARDEN, "code, severity"),
)

_LABEL_VALUE_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def string(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.translate(_LABEL_VALUE_ESCAPES) + '"'


def one_of(label: str, values: Iterable[str], *, negate: bool = False) -> str:
    """``label=~"a|b"`` (or ``!~``) matching exactly these values (regex-escaped)."""
    pattern = "|".join(re.escape(v) for v in sorted(values))
    return f"{label}{'!~' if negate else '=~'}{string(pattern)}"


def matchers(*parts: str) -> str:
    return ", ".join(p for p in parts if p)


def tagged(expr: str, label: str, value: str) -> str:
    return TAGGED.substitute(expr=expr, label=label, value=value)


def copied(expr: str, label: str, source: str, regex: str) -> str:
    """``expr`` with ``label`` set to regex's first group where ``source`` matches it whole."""
    return COPIED.substitute(expr=expr, label=label, source=source, regex=string(regex))


def gpu_keyed(expr: str) -> str:
    """``expr`` with its GPU's key as label ``gw_gpu``, as collect.gpu_key spells it: the UUID
    when it is a real one or a placeholder naming its node, else "NODE/UUID" (the UUID alone
    without a node), the node as collect.gpu_of reads it (its first node label set, else the
    instance without its port)."""
    for regex in _NODE_FROM_INSTANCE:
        expr = copied(expr, _KEY_NODE, "instance", regex)
    for name in reversed(NODE_LABELS):  # the first one set wins: it is copied last
        expr = copied(expr, _KEY_NODE, name, f"({_ANY})")
    expr = JOINED.substitute(expr=expr, label=GPU_KEY, sources=f'"{_KEY_NODE}", "UUID"')
    expr = copied(expr, GPU_KEY, GPU_KEY, "/((?s:.*))")  # no node: the UUID alone
    return copied(expr, GPU_KEY, "UUID", _KEY_ALONE)


def union(exprs: Iterable[str]) -> str:
    return " or ".join(f"({e})" for e in exprs)


def reading(metric: str, where: str, lookback: str, *, before: bool = False) -> str:
    template = _READING_BEFORE if before else _READING
    return template.substitute(metric=metric, matchers=where, lookback=lookback)


def level(metric: str, factor: int, where: str, lookback: str) -> str:
    """A series' busy level in percent at a grid minute."""
    scale = f"{factor} * " if factor != 1 else ""
    return LEVEL.substitute(factor=scale, reading=reading(metric, where, lookback))


def present_minutes(level_expr: str, bucket: str) -> str:
    return PRESENT_MINUTES.substitute(level=level_expr, bucket=bucket)


def idle_minutes(level_expr: str, bucket: str, idle_below_percent: float) -> str:
    return IDLE_MINUTES.substitute(level=level_expr, bucket=bucket, idle=f"{idle_below_percent:g}")


def overlaps(level_expr: str) -> str:
    return OVERLAPS.substitute(level=gpu_keyed(level_expr))


def mean_level(metric: str, factor: int, where: str, bucket: str) -> str:
    scale = f"{factor} * " if factor != 1 else ""
    return MEAN_LEVEL.substitute(factor=scale, metric=metric, matchers=where, bucket=bucket)


def mean_temperature(where: str, bucket: str) -> str:
    return MEAN_TEMPERATURE.substitute(matchers=where, bucket=bucket)


def mean_power(where: str, bucket: str) -> str:
    return MEAN_POWER.substitute(matchers=where, bucket=bucket)


def series_per_gpu(metric: str, where: str, window: str) -> str:
    return SERIES_PER_GPU.substitute(metric=metric, matchers=where, window=window)


def _by(extra: str) -> str:
    return f"{GPU_BY}, {extra}" if extra else GPU_BY


def changed(where: str, lookback: str, window: str) -> str:
    """Per event source, the GPUs whose series changed in the window (``gw_source``)."""
    return union(
        tagged(
            CHANGED.substitute(metric=s.metric, matchers=where, window=window, lookback=lookback),
            "gw_source",
            s.name,
        )
        for s in EVENT_SOURCES
    )


def states_seen(where: str, window: str) -> str:
    """Per state, the GPUs on which it was on at some time in the window (``gw_state``)."""
    return union(
        tagged(STATE_SEEN.substitute(metric=metric, matchers=where, window=window), "gw_state", s)
        for s, metric, _ in STATE_SOURCES
    )


def events(where_by_source: dict[str, str], lookback: str) -> str:
    """The per-minute events of the sources given (with each one's matchers), one query,
    labelled ``gw_source``; the value is how many happened (for the last-Xid gauge: the Xid)."""
    parts = []
    for source in EVENT_SOURCES:
        if source.name not in where_by_source:
            continue
        where = where_by_source[source.name]
        now, before = (
            reading(source.metric, where, lookback),
            reading(source.metric, where, lookback, before=True),
        )
        step = source.step.substitute(now=now, before=before)
        parts.append(
            tagged(EVENTS.substitute(by=_by(source.by), step=step), "gw_source", source.name)
        )
    return union(parts)


def edges(where_by_state: dict[str, str], lookback: str) -> str:
    """On/off changes (``gw_edge``) of the states given (``gw_state``)."""
    parts = []
    for state, metric, extra in STATE_SOURCES:
        if state not in where_by_state:
            continue
        where = where_by_state[state]
        now, before = (
            reading(metric, where, lookback),
            reading(metric, where, lookback, before=True),
        )
        for edge, step in (("on", TURNED_ON), ("off", TURNED_OFF)):
            body = EVENTS.substitute(by=_by(extra), step=step.substitute(now=now, before=before))
            parts.append(tagged(tagged(body, "gw_edge", edge), "gw_state", state))
    return union(parts)


def states_now(where_by_state: dict[str, str], lookback: str) -> str:
    """Which of the states given are on at one instant (the window's start)."""
    return union(
        tagged(
            STATE_NOW.substitute(
                by=_by(extra), now=reading(metric, where_by_state[state], lookback)
            ),
            "gw_state",
            state,
        )
        for state, metric, extra in STATE_SOURCES
        if state in where_by_state
    )


def retired_dbe_max(where: str, window: str) -> str:
    return MAX_OVER_WINDOW.substitute(metric=RETIRED_DBE, matchers=where, window=window)


def readings_per_hour(where: str) -> str:
    """The median series' readings per hour, each from its longest whole span."""
    counts = " or ".join(
        READINGS_IN_SPAN.substitute(
            per_hour=3600 // span_s, metric=m, matchers=where, span=f"{span_s}s"
        )
        for span_s in READING_SPANS_S
        for _, m, _ in LEVEL_SOURCES
    )
    return READINGS_PER_HOUR.substitute(counts=counts)


def series_with_label(label: str, where: str, window: str) -> str:
    """How many level series carry ``label`` (exported_pod, pod)."""
    return " + ".join(
        "("
        + SERIES_WITH_LABEL.substitute(
            metric=m, matchers=matchers(where, f'{label}!=""'), window=window
        )
        + " or vector(0))"
        for _, m, _ in LEVEL_SOURCES
    )


def gpuwarden_families(where: str, window: str) -> str:
    return GPUWARDEN_FAMILIES.substitute(matchers=where, window=window)
