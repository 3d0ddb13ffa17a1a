"""Issue 13, round 6: what `deploy alertmanager --webhook-url` and `deploy grafana --format
configmap` take from the command line either reaches a file the real tool accepts as written
(amtool check-config; kubectl apply against the stand-in API server), or is refused with exit
2 naming the flag — never a config Alertmanager refuses to load or reads another URL from."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.deploy.yaml_text import from_yaml, from_yaml_stream
from tests.deploy.servers import amtool, kubectl, needs_amtool, needs_kubectl
from tests.fakes.kube_api import FakeKubeApi


def _alertmanager(url: str, path: Path) -> int:
    path.unlink(missing_ok=True)
    return main(["deploy", "alertmanager", "--webhook-url", url, "-o", str(path)])


# each one amtool refused ("invalid userinfo", "invalid control character in URL", "invalid URL
# escape", "invalid character in host name", "invalid port") in a config `deploy alertmanager` wrote
REFUSED_BY_ALERTMANAGER = [
    "http://user:pa ss@alerts.example.com/hook",
    "http://alerts.example.com/hook\nreceivers: []",
    "http://alerts.example.com/\thook",
    "http://alerts.example.com/hook/%zz",
    "http://alerts.example.com/hook#%zz",
    "http://alerts%41.example.com/hook",
    "http://alerts\\evil.example.com/",
    "http://alerts{x}.example.com/",
    "http://[fe80::1%eth0]:9093/hook",
    "http://[::1]x/hook",
]


@needs_amtool
@pytest.mark.parametrize("url", REFUSED_BY_ALERTMANAGER)
def test_a_url_alertmanager_refuses_is_refused_naming_the_flag(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "am.yml"
    assert _alertmanager(url, path) == 2
    assert "--webhook-url" in capsys.readouterr().err
    assert not path.exists()


@needs_amtool
@pytest.mark.parametrize(
    "url",
    [
        "https://user:p%40ss@alerts.example.com:8443/hooks/gpu?key=a&b=*#top",
        "http://[fe80::1%25eth0]:9093/hook",
        "http://alerts.example.com/'quoted'/[x]/$(cmd)/a:b/-",
        "http://alerts.example.com/" + "a" * 10_000,
    ],
)
def test_a_url_alertmanager_reads_is_written_as_given(url: str, tmp_path: Path) -> None:
    path = tmp_path / "am.yml"
    assert _alertmanager(url, path) == 0
    done = amtool("check-config", str(path))
    assert done.returncode == 0, done.stderr + done.stdout
    receivers = from_yaml(path.read_text())["receivers"]
    assert {r["webhook_configs"][0]["url"] for r in receivers} == {url}


_URL_PARTS = st.lists(
    st.sampled_from(
        [*"aZ09-._~:/?#[]@!$&'()*+,;=%", " ", "\n", "\t", "\\", '"', "{", "ü", "%41", "%zz"]
    ),
    max_size=12,
).map("".join)


@needs_amtool
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(userinfo=_URL_PARTS, host=_URL_PARTS, path=_URL_PARTS)
def test_any_url_is_refused_or_read_by_alertmanager_as_written(
    userinfo: str, host: str, path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://{userinfo + '@' if userinfo else ''}h{host}.example.com/{path}"
    output = tmp_path / "am.yml"
    code = _alertmanager(url, output)
    capsys.readouterr()
    assert code in {0, 2}
    if code == 0:
        done = amtool("check-config", str(output))
        assert done.returncode == 0, done.stderr + done.stdout
        receivers = from_yaml(output.read_text())["receivers"]
        assert {r["webhook_configs"][0]["url"] for r in receivers} == {url}


def _configmaps(args: list[str], path: Path) -> int:
    path.unlink(missing_ok=True)
    return main(["deploy", "grafana", "--format", "configmap", *args, "-o", str(path)])


def test_a_folder_no_file_system_holds_is_refused_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the sidecar makes a directory of it: 255 bytes is the longest name Linux holds
    path = tmp_path / "cm.yml"
    assert _configmaps(["--folder", "ü" * 128], path) == 2  # 256 bytes in UTF-8
    assert "--folder" in capsys.readouterr().err
    assert _configmaps(["--folder", "a" * 255], path) == 0
    (first, *_) = from_yaml_stream(path.read_text())
    assert first["metadata"]["annotations"] == {"k8s-sidecar-target-directory": "a" * 255}


@needs_kubectl
def test_kubectl_applies_the_longest_names_and_labels_we_take(tmp_path: Path) -> None:
    path = tmp_path / "cm.yml"
    args = ["--namespace", "n" * 63, "--label", f"{'d' * 253}/{'k' * 63}={'v' * 63}"]
    args += ["--folder", "a" * 255, "--folder-annotation", f"{'e' * 200}.io/{'f' * 63}"]
    assert _configmaps(args, path) == 0
    with FakeKubeApi() as api:
        done = kubectl(api, tmp_path, "apply", "--dry-run=server", "-f", str(path))
    assert done.returncode == 0, done.stderr


@needs_kubectl
@pytest.mark.parametrize(
    "args",
    [
        ["--folder", "y"],
        ["--folder", "1e3"],
        ["--folder", "0o17"],
        ["--folder", "2026-01-02"],
        ["--namespace", "y"],
        ["--label", "a=N"],
    ],
    ids=["folder-y", "folder-1e3", "folder-0o17", "folder-date", "namespace-y", "label-N"],
)
def test_kubectl_reads_every_value_as_the_string_we_wrote(args: list[str], tmp_path: Path) -> None:
    path = tmp_path / "cm.yml"
    assert _configmaps(args, path) == 0
    with FakeKubeApi() as api:
        done = kubectl(api, tmp_path, "apply", "--dry-run=server", "-f", str(path))
    assert done.returncode == 0, done.stderr
