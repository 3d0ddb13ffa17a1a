"""Small builders of PromQL text, so each rule states its logic once and the same idioms (a
recent counter increase, "not watched by gpuwarden", a default label) read the same everywhere.

Label names follow dcgm-exporter (telemetry.md §2.6): a GPU is identified by ``UUID`` (also the
parent GPU's for MIG instances, which add ``GPU_I_ID``); the node is ``Hostname``, renamed
``hostname`` in dcgm-exporter's newest release (PR #655) — joins on the node use both, and a series
carries one of them (gpuwarden's exporter carries both, with the same value).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

GPU = "UUID"
GPU_INSTANCE = "GPU_I_ID"
NODE_LABELS = ("Hostname", "hostname")
NODE = ", ".join(NODE_LABELS)
# A whole GPU, or one MIG instance of it: the same under every exporter and scrape job that
# serves it (dcgm-exporter and gpuwarden's exporter beside it use the same UUID).
EACH_GPU = f"{GPU}, {GPU_INSTANCE}"
# One series per GPU that gpuwarden's exporter watches (0 = answering, 1 = lost): the exporter's
# contract. Where it exists, gpuwarden's health findings are the verdict for that GPU.
WATCHED = "gpuwarden_gpu_lost"

_LABEL_VALUE_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.translate(_LABEL_VALUE_ESCAPES) + '"'


def selector(metric: str, **matchers: str) -> str:
    """``metric{label="value"}``; a value starting with ``~``, ``!~`` or ``!`` is a regex or
    negative matcher: ``selector("X", xid="~48|79")`` → ``X{xid=~"48|79"}``."""
    if not matchers:
        return metric
    parts = [_matcher(label, value) for label, value in matchers.items()]
    return f"{metric}{{{', '.join(parts)}}}"


_OPERATORS = (("!~", "!~"), ("~", "=~"), ("!", "!="))


def _matcher(label: str, spec: str) -> str:
    for prefix, op in _OPERATORS:
        if spec.startswith(prefix):
            return f"{label}{op}{quote(spec.removeprefix(prefix))}"
    return f"{label}={quote(spec)}"


def alternatives(values: Iterable[int | str]) -> str:
    """A regex that matches exactly these label values: 48|79|95."""
    return "|".join(re.escape(str(v)) for v in values)


def recent_increase(series: str, window: str) -> str:
    """A counter that rose within ``window``, or that appeared within it already above 0 (an
    exporter creates a per-code counter at its first event, so ``increase`` alone misses it)."""
    return f"(increase({series}[{window}]) > 0 or ({series} > 0 unless {series} offset {window}))"


def not_watched(expr: str) -> str:
    """``expr`` for GPUs gpuwarden's exporter does not watch (there its findings decide)."""
    return f"({expr})\nunless on({GPU}) {WATCHED}"


def set_label(expr: str, label: str, value: str) -> str:
    """``expr`` with ``label`` set to ``value`` on every series."""
    return f'label_replace(\n  {indent(expr)},\n  {quote(label)}, {quote(value)}, "", ""\n)'


def either(*exprs: str) -> str:
    """The union of the expressions; where two give the same labels, the first wins."""
    return "\n or\n".join(f"({e})" if "\n" in e or " or " in e else e for e in exprs)


def indent(expr: str, by: str = "  ") -> str:
    return expr.replace("\n", "\n" + by)


ONE_NODE_LABEL = NODE_LABELS[0]  # the label node_under_hostname leaves the node under


def node_under_hostname(expr: str) -> str:
    """``expr`` with the node under Hostname, copied from hostname where that names it (the
    newest dcgm-exporter's spelling): one GPU served in both spellings stays one GPU of one
    node."""
    return f'label_replace({expr}, "{ONE_NODE_LABEL}", "$1", "{NODE_LABELS[1]}", "(.+)")'


def per_gpu_on_node(aggregation: str, expr: str) -> str:
    """One series per GPU, labelled with its node under Hostname."""
    return f"{aggregation} by ({GPU}, {ONE_NODE_LABEL}) ({node_under_hostname(expr)})"


def each_gpu_once(expr: str) -> str:
    """One of ``expr``'s series per GPU of a node, with its labels: a MIG GPU publishes its
    board's readings on every instance (dcgm-exporter's default), and a GPU two exporters or
    scrape jobs serve is there twice — either would count as several peers of its node."""
    return f"topk by ({NODE}, {GPU}) (1, {expr})"


def per_node(aggregation: str, expr: str, *extra_labels: str) -> str:
    """``aggregation by (Hostname, hostname, ...) (expr)``."""
    labels = ", ".join((*NODE_LABELS, *extra_labels))
    return f"{aggregation} by ({labels}) ({expr})"
