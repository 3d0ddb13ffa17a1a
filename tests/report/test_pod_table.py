"""Which Kubernetes pod holds each GPU: read from dcgm-exporter's pod labels (and the kubelet),
shown in the JSON only — a Kubernetes user's first question had no answer in the table."""

from __future__ import annotations

from tests.cli.test_main import run_cli
from tests.conftest import FIXTURES


def _snapshot(path: str) -> str:
    done = run_cli("snapshot", "--backend", "dcgm", "--from", path)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_pods_of_mig_instances_are_listed_under_their_instance() -> None:
    out = _snapshot(
        str(FIXTURES / "dcgm" / "issue-dcgm-exporter-512__h100-80gb-hbm3-mig__excerpt.prom")
    )
    pods = out.split(" pods")[1]
    for pod in (
        "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl",
        "tts-predictor-00011-deployment-5554f75554-8j8pl",
    ):
        # the pod's name whole on its row (an identifier to copy); namespace and container
        # may fold into the width a terminal leaves
        line = next(line for line in pods.splitlines() if pod in line)
        assert "model-playgr" in line and "kserve-conta" in line
        assert "1g.10gb (GI " in line


def test_no_pod_table_where_no_reading_names_a_pod() -> None:
    out = _snapshot(str(FIXTURES / "dcgm" / "datadog-integrations-core__tesla-t4__metrics.prom"))
    assert " pods" not in out
