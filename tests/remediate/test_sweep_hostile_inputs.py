"""`gpuwarden remediate` given hostile-but-realistic inputs: an audit log on a full disk, a
kubeconfig path that no file system accepts or that names no regular file, and a kubeconfig
that is YAML but no mapping. Exit 2 or 4 naming the input, never 70; nothing left behind on the
cluster by a run that stopped."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.cli.main import main
from tests.fakes.kube_api import FakeKubeApi
from tests.remediate.conftest import (
    cordon_drain_inputs,
)

NAMESPACE, NAME = "gpuwarden", "gpuwarden-remediate"  # the policy's state: the run lock's place


@pytest.fixture
def inputs(tmp_path: Path, kube: FakeKubeApi) -> dict[str, Path]:
    return cordon_drain_inputs(tmp_path, kube, nodes=3, failing=1)


def _remediate(
    inputs: dict[str, Path], capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str]:
    code = main(
        [
            "remediate",
            "--policy",
            str(inputs["policy"]),
            "--findings",
            str(inputs["findings"]),
            "--kubeconfig",
            str(inputs["kubeconfig"]),
            "--json",
            *extra,
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


def _error(err: str) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(err)
    assert error["schema"] == "gpuwarden.error/1" and error["hint"]
    return error


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a full disk)")
def test_an_audit_log_on_a_full_disk_gives_the_lock_back(
    inputs: dict[str, Path], kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the Lease was created, the audit line of it failed (ENOSPC) and the run stopped
    holding it: every run for the next 300 s stopped on 'another run holds the lock'."""
    code, _, err = _remediate(inputs, capsys, "--apply", "--audit-log", "/dev/full")
    assert (code, _error(err)["reference"]) == (4, "audit-log-unwritable")
    lease = kube.get("coordination.k8s.io/v1", "Lease", NAME, NAMESPACE)
    assert lease is None or "holderIdentity" not in lease["spec"]
    assert not [w for w in kube.writes() if "/nodes/" in w.path]  # no node was touched
    code, out, err = _remediate(inputs, capsys, "--apply")
    assert code == 0, err
    assert json.loads(out)["dry_run"] is False


@pytest.mark.parametrize(
    "kubeconfig",
    [
        "/tmp/" + "k" * 300 + "/config",  # a component longer than NAME_MAX (255)
        "k" * 300,
    ],
)
def test_a_kubeconfig_path_too_long_is_named(
    inputs: dict[str, Path], capsys: pytest.CaptureFixture[str], kubeconfig: str
) -> None:
    """Before: OSError ENAMETOOLONG, exit 70."""
    inputs["kubeconfig"] = Path(kubeconfig)
    code, _, err = _remediate(inputs, capsys)
    error = _error(err)
    assert (code, error["reference"]) == (2, "kubeconfig-missing")
    assert "File name too long" in error["message"]


@pytest.mark.parametrize(
    ("path", "problem"), [("/tmp", "a directory"), ("/dev/null", "not a regular file")]
)
def test_a_kubeconfig_that_is_no_file_says_what_it_is(
    inputs: dict[str, Path], capsys: pytest.CaptureFixture[str], path: str, problem: str
) -> None:
    """Before: "the kubeconfig '/tmp' does not exist"."""
    inputs["kubeconfig"] = Path(path)
    code, _, err = _remediate(inputs, capsys)
    error = _error(err)
    assert (code, error["reference"]) == (2, "kubeconfig-missing")
    assert problem in error["message"] and "does not exist" not in error["message"]


@pytest.mark.parametrize("text", ["x\n", "- a\n- b\n", "42\n"])
def test_a_kubeconfig_that_is_no_mapping_says_so(
    inputs: dict[str, Path], capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """Before: "cannot be used: TypeError: 'str' object does not support item assignment"."""
    inputs["kubeconfig"].write_text(text)
    code, _, err = _remediate(inputs, capsys)
    error = _error(err)
    assert (code, error["reference"]) == (2, "kubeconfig-invalid")
    assert "TypeError" not in error["message"] and "mapping" in error["message"]


# --- something other than the API server answering 200 (a proxy's page, a Status)

NOT_A_LIST = {"message": "<html>Sign in to the cluster proxy</html>"}


def test_a_node_list_that_is_no_list_stops_the_run(
    inputs: dict[str, Path], kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: read as a cluster without nodes: exit 0, every action 'skipped: no node named'."""
    kube.fail("GET", "^/api/v1/nodes$", 200, **NOT_A_LIST)
    code, _, err = _remediate(inputs, capsys, "--apply")
    error = _error(err)
    assert (code, error["reference"]) == (4, "kubernetes-bad-answer")
    assert "not a NodeList" in error["message"] and "Sign in" in error["message"]
    assert not [w for w in kube.writes() if "/nodes/" in w.path]


def test_a_breaker_config_map_that_is_no_config_map_stops_the_run(
    inputs: dict[str, Path], kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: read as a closed breaker: the run acted without its brake."""
    kube.fail("GET", f"/namespaces/{NAMESPACE}/configmaps/{NAME}$", 200, **NOT_A_LIST)
    code, _, err = _remediate(inputs, capsys, "--apply")
    assert (code, _error(err)["reference"]) == (4, "kubernetes-bad-answer")
    assert not [w for w in kube.writes() if "/nodes/" in w.path]


def test_a_pod_list_that_is_no_list_fails_the_drain(
    inputs: dict[str, Path], kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: read as a node without pods: the drain 'skipped: nothing to evict', exit 0,
    with the workload still on the cordoned node."""
    kube.add_pod("ml", "trainer-0", "gpu-1", owner=("StatefulSet", "trainer"))
    kube.fail("GET", "^/api/v1/pods$", 200, times=100, **NOT_A_LIST)
    code, out, err = _remediate(inputs, capsys, "--apply")
    assert code == 1, err
    drain = next(r for r in json.loads(out)["actions"] if r["action"] == "drain")
    assert drain["status"] == "failed" and "not a PodList" in drain["detail"]
    assert kube.get("v1", "Pod", "trainer-0", "ml") is not None


def test_an_empty_list_is_still_a_list(
    inputs: dict[str, Path], kube: FakeKubeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """Go writes an empty list's items as null: a node without pods drains as before."""
    code, out, err = _remediate(inputs, capsys, "--apply")
    assert code == 0, err
    drain = next(r for r in json.loads(out)["actions"] if r["action"] == "drain")
    assert drain["status"] == "applied" and "PodList" not in drain["detail"]
