"""Dashboards: well-formed Grafana JSON (ids, layout, variables, datasources), every query valid
PromQL, and every query of every panel returning data from a real Prometheus that scrapes a sim
fleet of gpuwarden exporters with the deployed rules loaded. NVIDIA's dashboard 12239's queries
run unchanged on the same fleet."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest

from gpuwarden.deploy.dashboards import DASHBOARDS, PRICE_VARIABLE
from gpuwarden.deploy.grafana import dashboards
from gpuwarden.deploy.rules import rule_set, rules_document
from gpuwarden.deploy.yaml_text import to_yaml
from tests.deploy.servers import (
    exporter,
    needs_prometheus,
    prometheus,
    query,
    wait_until,
    write_prometheus_config,
)

DOCUMENTS = dashboards()
# What Grafana substitutes before a query reaches Prometheus ("All" = the variables' allValue).
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__range_s": "300",
    "$__range": "5m",
    "$Hostname": ".*",
    "$gpu": ".*",
    f"${PRICE_VARIABLE}": "2.5",
}


def _substituted(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def _panels(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in document["panels"] if p["type"] != "row"]


def _queries() -> list[tuple[str, str, str]]:
    return [
        (name, panel["title"], target["expr"])
        for name, document in DOCUMENTS.items()
        for panel in _panels(document)
        for target in panel["targets"]
    ]


def test_one_dashboard_per_failure_mode_plus_an_overview() -> None:
    modes = {spec.mode for spec in DASHBOARDS}
    assert None in modes and len(DOCUMENTS) == len(DASHBOARDS) == 6
    assert {d["uid"] for d in DOCUMENTS.values()} == {s.uid for s in DASHBOARDS}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_dashboard_structure(name: str) -> None:
    document = DOCUMENTS[name]
    assert document["schemaVersion"] >= 36
    ids = [p["id"] for p in document["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in document["templating"]["list"]}
    assert {"datasource", "Hostname", "gpu"} <= set(variables)
    assert variables["datasource"]["query"] == "prometheus"
    cells: set[tuple[int, int]] = set()
    for panel in document["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        mine = {(pos["x"] + dx, pos["y"] + dy) for dx in range(pos["w"]) for dy in range(pos["h"])}
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
    for panel in _panels(document):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"] and panel["description"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)) and all(refs)
        for target in panel["targets"]:
            # "$1" is label_replace's capture group: Grafana leaves a reference to no variable
            # as written (@grafana/runtime VariableInterpolation: "equal match when variable
            # not found"), and a variable's name is no number
            used = set(re.findall(r"\$([A-Za-z_]\w*)", target["expr"])) - {
                "__range",
                "__range_s",
                "__rate_interval",
            }
            assert used <= set(variables), f"{panel['title']} uses an undefined variable"


@pytest.mark.parametrize(("name", "title", "expr"), _queries())
def test_every_query_is_valid_promql(name: str, title: str, expr: str) -> None:
    promql_parser.parse(_substituted(expr))


# NVIDIA's dashboard 12239 (fleet.md §5.1): its queries, with its variables set to "All".
DASHBOARD_12239 = (
    'DCGM_FI_DEV_GPU_TEMP{instance=~".*", gpu=~".*"}',
    'avg(DCGM_FI_DEV_GPU_TEMP{instance=~".*", gpu=~".*"})',
    'DCGM_FI_DEV_POWER_USAGE{instance=~".*", gpu=~".*"}',
    'sum(DCGM_FI_DEV_POWER_USAGE{instance=~".*", gpu=~".*"})',
    'DCGM_FI_DEV_SM_CLOCK{instance=~".*", gpu=~".*"} * 1000000',
    'DCGM_FI_DEV_GPU_UTIL{instance=~".*", gpu=~".*"}',
    'DCGM_FI_DEV_FB_USED{instance=~".*", gpu=~".*"}',
    'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{instance=~".*", gpu=~".*"}',
)
# A sim fleet with a fault of each kind the panels show: a lost GPU (Xid 79) and hung peers,
# a double-bit ECC error (Xid 48) on A100s, NVLink errors, a power cap (a clock event).
FLEET = ("gpu-fallen-off-bus", "ecc-double-bit", "nvlink-down", "power-capping")


@needs_prometheus
def test_every_panel_query_returns_data_from_a_sim_fleet(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(to_yaml(rules_document(rule_set())))
    config = tmp_path / "prometheus.yml"

    def node(i: int) -> Any:  # one seed per node: a GPU's UUID is unique in a real fleet
        args = ("--backend", "sim", "--scenario", FLEET[i], "--sim-speed", "20", "--seed", str(i))
        return exporter(tmp_path, FLEET[i], *args)

    with node(0) as a, node(1) as b, node(2) as c, node(3) as d:
        write_prometheus_config(config, {"gpuwarden-exporter": [a, b, c, d]}, [rules], None)
        with prometheus(tmp_path, config) as prom:
            wait_until(
                lambda: len(query(prom, 'up{job="gpuwarden-exporter"} == 1')) == 4,
                20,
                "4 targets up",
            )
            # the Xids of both faults counted, and a recording rule evaluated over them
            wait_until(
                lambda: len(query(prom, "gpuwarden_xid_total")) >= 2, 20, "both Xids scraped"
            )
            wait_until(lambda: query(prom, 'ALERTS{alertstate="firing"}'), 20, "an alert firing")
            empty = []
            for name, title, expr in _queries():
                if not wait_until(
                    lambda e=expr: query(prom, _substituted(e)), 10, f"{name}: {title}"
                ):
                    empty.append((name, title))
            for expr in DASHBOARD_12239:
                assert query(prom, expr), f"12239: {expr}"
    assert empty == []
