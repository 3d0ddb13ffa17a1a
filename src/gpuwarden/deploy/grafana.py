"""Dashboard JSON from ``dashboards``, built with grafana-foundation-sdk's typed builders (the
one module that imports it; fleet.md §1.3). Variables: ``datasource`` (any Prometheus),
``Hostname`` and ``gpu`` (multi-select, "All" = ``.*``), and the cost dashboard's price.

``dashboard_configmaps``: the same dashboards as ConfigMaps for Grafana's dashboard sidecar
(kiwigrid/k8s-sidecar, which the grafana Helm chart and kube-prometheus-stack run): it loads
every ConfigMap carrying the chart's ``sidecar.dashboards.label`` (default ``grafana_dashboard``;
kube-prometheus-stack's own dashboards set it to "1") and writes each data key as a file;
the folder comes from an annotation (the sidecar's default name ``k8s-sidecar-target-directory``,
the chart's ``sidecar.dashboards.folderAnnotation`` when set) where the chart's
``provider.foldersFromFilesStructure`` is on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from gpuwarden.deploy.dashboards import DASHBOARDS, PRICE_VARIABLE, DashboardSpec, PanelSpec
from gpuwarden.errors import InvalidConfigError, MissingExtraError

try:
    from grafana_foundation_sdk.builders import dashboard, prometheus, stat, table, timeseries
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import dashboard as models
except ImportError:  # pragma: no cover - exercised by the no-extras test
    raise MissingExtraError(
        "gpuwarden deploy grafana", "deploy", "grafana-foundation-sdk"
    ) from None

SCHEMA_TAGS = ("gpuwarden", "gpu")
REFRESH = "1m"
# PanelSpec.kind → its builder (three classes with the same fluent methods but no common type)
_PANELS: dict[str, Callable[[], Any]] = {
    "timeseries": timeseries.Panel,
    "stat": stat.Panel,
    "table": table.Panel,
}


def _variables(spec: DashboardSpec) -> list[Any]:
    source = models.DataSourceRef(type_val="prometheus", uid="${datasource}")
    found = [
        dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"),
        dashboard.QueryVariable("Hostname")
        .label("Node")
        .datasource(source)
        .query("label_values(DCGM_FI_DEV_GPU_TEMP, Hostname)")
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED),
        dashboard.QueryVariable("gpu")
        .label("GPU")
        .datasource(source)
        .query('label_values(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname"}, gpu)')
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED),
    ]
    if any(PRICE_VARIABLE in q.expr for _, panels in spec.rows for p in panels for q in p.queries):
        found.append(
            dashboard.TextBoxVariable(PRICE_VARIABLE)
            .label("$ per GPU-hour")
            .description("your cost of one GPU-hour; 1 = the cost panels read in GPU-hours")
            .default_value("1")
        )
    return found


PANEL_HEIGHT = 8
GRID_WIDTH = 24


def layout(rows: tuple[tuple[str, tuple[PanelSpec, ...]], ...]) -> list[tuple[int, int, int, int]]:
    """(x, y, w, h) of every row header and panel, in order: panels fill a row of the 24-column
    grid left to right and wrap (the SDK's own packing lets a wide panel run past column 24)."""
    places: list[tuple[int, int, int, int]] = []
    y = 0
    for _, panels in rows:
        places.append((0, y, GRID_WIDTH, 1))
        y, x = y + 1, 0
        for panel in panels:
            if x + panel.width > GRID_WIDTH:
                y, x = y + PANEL_HEIGHT, 0
            places.append((x, y, panel.width, PANEL_HEIGHT))
            x += panel.width
        y += PANEL_HEIGHT
    return places


def _panel(panel: PanelSpec, panel_id: int, place: tuple[int, int, int, int]) -> Any:
    built = (
        _PANELS[panel.kind]()
        .id(panel_id)
        .title(panel.title)
        .description(panel.description)
        .datasource(models.DataSourceRef(type_val="prometheus", uid="${datasource}"))
        .grid_pos(_grid(place))
    )
    if panel.unit:
        built = built.unit(panel.unit)
    for i, query in enumerate(panel.queries):
        target = (
            prometheus.Dataquery().expr(query.expr).legend_format(query.legend).ref_id(chr(65 + i))
        )
        built = built.with_target(target.instant() if query.instant else target.range())
    return built


def _grid(place: tuple[int, int, int, int]) -> models.GridPos:
    x, y, w, h = place
    return models.GridPos(h=h, w=w, x=x, y=y)


def dashboard_json(spec: DashboardSpec) -> dict[str, Any]:
    builder = (
        dashboard.Dashboard(spec.title)
        .uid(spec.uid)
        .description(spec.description)
        .tags([*SCHEMA_TAGS, spec.mode.value if spec.mode else "overview"])
        .refresh(REFRESH)
        .time("now-6h", "now")
        .timezone("browser")
        .editable()
    )
    for variable in _variables(spec):
        builder = builder.with_variable(variable)
    places = iter(enumerate(layout(spec.rows), start=1))
    for title, panels in spec.rows:
        panel_id, place = next(places)
        builder = builder.with_row(dashboard.Row(title).id(panel_id).grid_pos(_grid(place)))
        for panel in panels:
            panel_id, place = next(places)
            builder = builder.with_panel(_panel(panel, panel_id, place))
    document: dict[str, Any] = json.loads(JSONEncoder(sort_keys=False).encode(builder.build()))
    return document


def dashboards() -> dict[str, dict[str, Any]]:
    """File name → dashboard JSON, for every dashboard."""
    return {f"{spec.uid}.json": dashboard_json(spec) for spec in DASHBOARDS}


SIDECAR_LABEL = ("grafana_dashboard", "1")
SIDECAR_FOLDER_ANNOTATION = "k8s-sidecar-target-directory"
# Kubernetes refuses a ConfigMap whose data exceeds 1 MiB (its object size in etcd)
CONFIGMAP_MAX_BYTES = 1024 * 1024


def _configmap(
    file_name: str, document: dict[str, Any], placement: dict[str, Any]
) -> dict[str, Any]:
    """One dashboard as a ConfigMap for the sidecar: its JSON under its file name, named by its
    uid, with the ``placement`` every dashboard shares (namespace, labels, annotations)."""
    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    size = len(text.encode("utf-8"))
    if size > CONFIGMAP_MAX_BYTES:
        raise InvalidConfigError(
            f"the dashboard {file_name} is {size} bytes: a ConfigMap holds at most "
            f"{CONFIGMAP_MAX_BYTES} (1 MiB)",
            reference="configmap-too-large",
            hint="write the JSON files (--format json) and provision them from a volume",
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": str(document["uid"]), **placement},
        "data": {file_name: text},
    }


def dashboard_configmaps(
    *,
    namespace: str = "monitoring",
    labels: Sequence[tuple[str, str]] = (SIDECAR_LABEL,),
    folder: str | None = None,
    folder_annotation: str = SIDECAR_FOLDER_ANNOTATION,
) -> list[dict[str, Any]]:
    """Every dashboard as its own ConfigMap (each well under the 1 MiB limit alone), labelled
    for the sidecar, in ``folder`` (an annotation) when one is given."""
    placement: dict[str, Any] = {
        "namespace": namespace,
        "labels": {
            "app.kubernetes.io/name": "gpuwarden",
            "app.kubernetes.io/component": "dashboards",
            **dict(labels),
        },
    }
    if folder:
        placement["annotations"] = {folder_annotation: folder}
    return [_configmap(name, document, placement) for name, document in dashboards().items()]
