"""`gpuwarden deploy grafana --format configmap`: one ConfigMap per dashboard, labelled for the
grafana Helm chart's dashboard sidecar (``sidecar.dashboards.label`` grafana_dashboard, "1" as
kube-prometheus-stack's own dashboards), its folder as the sidecar's annotation; real kubectl
applies them (client and server dry runs), and each stays far below the size limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwarden.cli.main import main
from gpuwarden.deploy.grafana import (
    CONFIGMAP_MAX_BYTES,
    SIDECAR_FOLDER_ANNOTATION,
    dashboard_configmaps,
    dashboards,
)
from gpuwarden.deploy.yaml_text import from_yaml_stream
from tests.deploy.servers import kubectl, needs_kubectl
from tests.fakes.kube_api import FakeKubeApi, unknown_fields

# kubectl's client-side apply keeps the whole object in the last-applied-configuration
# annotation, and Kubernetes limits a object's annotations to 256 KiB in total
# (apimachinery's TotalAnnotationSizeLimitB): the tighter bound of the two.
ANNOTATIONS_MAX_BYTES = 256 * 1024


@pytest.fixture
def configmap_file(tmp_path: Path) -> Path:
    path = tmp_path / "dashboards.yml"
    args = ["deploy", "grafana", "--format", "configmap", "--folder", "GPU", "-o", str(path)]
    assert main(args) == 0
    return path


def test_one_configmap_per_dashboard_for_the_sidecar(configmap_file: Path) -> None:
    configmaps = from_yaml_stream(configmap_file.read_text())
    documents = dashboards()
    assert len(configmaps) == len(documents) == 6
    for configmap in configmaps:
        metadata = configmap["metadata"]
        assert metadata["namespace"] == "monitoring"
        assert metadata["labels"]["grafana_dashboard"] == "1"
        assert metadata["annotations"] == {SIDECAR_FOLDER_ANNOTATION: "GPU"}
        ((file_name, text),) = configmap["data"].items()
        assert json.loads(text) == documents[file_name]  # the same JSON as --format json
        assert metadata["name"] == documents[file_name]["uid"]
        assert unknown_fields(configmap, "V1ConfigMap") == []


def test_every_configmap_is_far_below_the_limits() -> None:
    sizes = {c["metadata"]["name"]: len(json.dumps(c).encode()) for c in dashboard_configmaps()}
    largest = max(sizes.values())
    assert largest < ANNOTATIONS_MAX_BYTES < CONFIGMAP_MAX_BYTES, sizes
    assert max(sizes, key=sizes.__getitem__) == "gpuwarden-health"


def test_labels_and_folder_annotation_follow_the_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["deploy", "grafana", "--format", "configmap", "--namespace", "grafana"]
    args += ["--label", "grafana_dashboard=gpu", "--folder", "GPU fleet"]
    args += ["--folder-annotation", "grafana_folder"]
    assert main(args) == 0
    (first, *_) = from_yaml_stream(capsys.readouterr().out)
    assert first["metadata"]["namespace"] == "grafana"
    assert first["metadata"]["labels"]["grafana_dashboard"] == "gpu"
    assert first["metadata"]["annotations"] == {"grafana_folder": "GPU fleet"}
    assert main(["deploy", "grafana", "--format", "configmap"]) == 0
    (plain, *_) = from_yaml_stream(capsys.readouterr().out)
    assert "annotations" not in plain["metadata"]  # no folder: the provider's own


@pytest.mark.parametrize("folder", ["a/b", "..", ""])
def test_a_folder_that_is_no_directory_name_is_an_argument_error(
    folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["deploy", "grafana", "--format", "configmap", "--folder", folder]) == 2
    assert "folder" in capsys.readouterr().err


@needs_kubectl
@pytest.mark.parametrize("mode", ["client", "server"])
def test_kubectl_applies_the_configmaps(tmp_path: Path, configmap_file: Path, mode: str) -> None:
    with FakeKubeApi() as api:
        done = kubectl(api, tmp_path, "apply", f"--dry-run={mode}", "-f", str(configmap_file))
    assert done.returncode == 0, done.stderr
    suffix = "(server dry run)" if mode == "server" else "(dry run)"
    for name in ("overview", "health", "throughput", "bottlenecks", "distributed", "cost"):
        assert f"configmap/gpuwarden-{name} created {suffix}" in done.stdout
