"""`deploy alertmanager --webhook-credentials-file PATH` against a hostile PATH (issue 13).

Alertmanager opens the credentials file when it sends a notification, not when it loads the
configuration: amtool check-config took an empty path, a relative one (read from the folder of
the configuration file, not where the Secret is mounted), one with a newline, and one of 64 KB,
and every notification would then have gone without the token. Before the check these were
written with exit 0; now they are refused with exit 2 and a hint. A path of YAML specials and
quotes is a path Linux holds: written, it stays one string amtool reads back."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.deploy.alertmanager import credentials_file_problem
from gpuwarden.deploy.yaml_text import from_yaml
from tests.deploy.servers import amtool, needs_amtool

URL = "http://127.0.0.1:9/gpu"


def _deploy(path: str, output: Path) -> int:
    argv = ["deploy", "alertmanager", "--webhook-url", URL, "-o", str(output)]
    return main([*argv, "--webhook-credentials-file", path])


_UNOPENABLE = {
    "empty": "",
    "blank": "   ",
    "a bare name": "token",
    "relative": "secrets/token",
    "dot-relative": "./token",
    "a newline": "/etc/secrets/a\nb",
    "a tab": "/etc/\ttoken",
    "a folder": "/etc/secrets/",
    "64 KB": "/" + "a" * 65536,
    "a 256-byte name": "/etc/" + "n" * 256 + "/token",
}


@pytest.mark.parametrize("path", list(_UNOPENABLE.values()), ids=list(_UNOPENABLE))
def test_a_path_alertmanager_cannot_open_is_refused_with_a_hint(
    path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "alertmanager.yml"
    assert _deploy(path, output) == 2
    err = capsys.readouterr().err
    assert "--webhook-credentials-file" in err
    assert "absolute path as the Alertmanager pod mounts it" in err
    assert "Traceback" not in err and len(err) < 2000  # the 64 KB path is not echoed whole
    assert not output.exists()


# path segments of YAML's specials, quotes, a '#' and non-ASCII letters: a file name Linux holds
_SEGMENT = st.text(
    alphabet=st.sampled_from(list("ab-_.:#&*!|>'\"%@`{}[],?= ~é")), min_size=1, max_size=12
).filter(lambda s: s not in (".", ".."))


@needs_amtool
@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(segments=st.lists(_SEGMENT, min_size=1, max_size=4))
def test_a_path_of_yaml_specials_is_written_as_one_string_amtool_reads(
    segments: list[str], tmp_path: Path
) -> None:
    path = "/" + "/".join(segments)
    assert credentials_file_problem(path) is None
    output = tmp_path / "alertmanager.yml"
    assert _deploy(path, output) == 0
    hooks = [h for r in from_yaml(output.read_text())["receivers"] for h in r["webhook_configs"]]
    assert {h["http_config"]["authorization"]["credentials_file"] for h in hooks} == {path}
    checked = amtool("check-config", str(output))
    assert checked.returncode == 0, checked.stdout + checked.stderr
