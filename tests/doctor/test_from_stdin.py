"""`doctor --from -` reads standard input (`dmesg | gpuwarden doctor --from -`), as most tools
that take a file do: it was "-: no such file or directory"."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import FIXTURES


def test_a_kernel_log_piped_in_is_judged() -> None:
    log = FIXTURES / "xid" / "gpud__dmesg-decode-iso-xid13-43.log"
    done = subprocess.run(
        [sys.executable, "-m", "gpuwarden", "doctor", "--from", "-", "--json"],
        input=log.read_bytes(), capture_output=True, check=False,
    )  # fmt: skip
    assert done.returncode != 2, done.stderr
    document = json.loads(done.stdout)
    assert [i["kind"] for i in document["inputs"]] == ["kernel-log"]
    assert any(f["code"] == "xid" for f in document["findings"])
