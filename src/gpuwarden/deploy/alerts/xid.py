"""Xids from every source a fleet may have, one alert per GPU and Xid.

Sources, most exact first (a GPU is read from the first it has): gpuwarden's counter
``gpuwarden_xid_total{xid}``; dcgm-exporter's newest counter ``DCGM_EXP_XID_ERRORS_TOTAL{xid}``;
its windowed count ``DCGM_EXP_XID_ERRORS_COUNT{xid}``; and the default ``DCGM_FI_DEV_XID_ERRORS``,
the value of the LAST Xid (telemetry.md §2.2: repeats of the same Xid are invisible, and a later
Xid hides an earlier one). A recording rule turns that gauge into a series labelled ``xid``
while it changed recently, so every source is matched by the same ``xid=~`` selector.

Which Xids are critical, warnings or information comes from the Xid catalog
(``catalog.xid``: DCGM's always-fail set and NVIDIA's resolution buckets); an Xid the catalog does
not list is a warning. Xid 79 (fallen off the bus) is ``gpu-lost``, not ``xid``.
"""

from __future__ import annotations

from gpuwarden.catalog.xid import GPU_LOST_XID, xid_catalog
from gpuwarden.deploy.knobs import AlertKnobs
from gpuwarden.deploy.promql import GPU, alternatives, either, recent_increase, selector
from gpuwarden.types.health import Severity

XID_TOPIC = "xid"  # the rule group of the Xid recording rule and the alerts reading it
XID_LAST_RECORD = "gpuwarden:dcgm_xid_last:recent"
_DCGM_TOTAL = "DCGM_EXP_XID_ERRORS_TOTAL"
_DCGM_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
_DCGM_LAST = "DCGM_FI_DEV_XID_ERRORS"


def xids_of(severity: Severity) -> tuple[int, ...]:
    """The catalog's Xids of one severity, without Xid 79 (its own alert)."""
    return tuple(
        sorted(
            x
            for x, info in xid_catalog().items()
            if info.severity is severity and x != GPU_LOST_XID
        )
    )


def critical_matcher() -> str:
    return "~" + alternatives(xids_of(Severity.CRITICAL))


def warning_matcher() -> str:
    """Everything but the critical, the informational and 79: unlisted Xids are warnings."""
    quiet = (*xids_of(Severity.CRITICAL), *xids_of(Severity.INFO), GPU_LOST_XID)
    return "!~" + alternatives(sorted(quiet))


def last_xid_record(knobs: AlertKnobs) -> str:
    """The recording rule over the last-value gauge: ``xid`` as a label while the value changed
    within the window (or the series is new in it); 0 means no Xid since the exporter started."""
    w = knobs.xid_recent_window
    last = _DCGM_LAST
    recent = f"changes({last}[{w}]) > 0 or ({last} unless {last} offset {w})"
    return f'count_values without() ("xid",\n  {last} > 0\n  and ({recent})\n)'


def dcgm_xids(matcher: str, knobs: AlertKnobs) -> str:
    """GPUs with a recent Xid matching ``matcher`` in dcgm-exporter's own series."""
    w = knobs.xid_recent_window
    total = recent_increase(selector(_DCGM_TOTAL, xid=matcher), w)
    count = f"{selector(_DCGM_COUNT, xid=matcher)} > 0\nunless on({GPU}) {_DCGM_TOTAL}"
    last = (
        f"{selector(XID_LAST_RECORD, xid=matcher)}\n"
        f"unless on({GPU}) ({_DCGM_TOTAL} or {_DCGM_COUNT})"
    )
    return either(total, count, last)


def gpuwarden_xids(matcher: str, knobs: AlertKnobs) -> str:
    return recent_increase(selector("gpuwarden_xid_total", xid=matcher), knobs.xid_recent_window)
