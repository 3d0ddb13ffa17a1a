"""Issue 13, a hostile user's fourth pass: `plan OWNER/NAME` reading huggingface_hub's cache.

A FIFO in a cache (a ref, a snapshot's config.json, or gpuwarden's own cached config) held the
plan forever: the open of a FIFO blocks until a writer comes. A cache entry is a regular file
(or a link to one, as huggingface_hub's snapshots link to blobs); anything else is no entry.
The runs are children with a deadline, since the failure is a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

CONFIG = FIXTURES / "models" / "Llama-2-7b-hf.json"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
HUB_ID = "meta/tiny"
DEADLINE_S = 30


def _plan_offline(hf_cache: Path, own_cache: Path) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "XDG_"))
    }
    env |= {
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(hf_cache),
        "GPUWARDEN_CACHE_DIR": str(own_cache),
    }
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", "plan", HUB_ID, "--gpu", "H100", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=DEADLINE_S,
        check=False,
    )


def _hf_repo(root: Path) -> Path:
    """huggingface_hub's layout for HUB_ID: refs/main names COMMIT, whose snapshot links its
    config.json to a blob."""
    repo = root / "models--meta--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    (repo / "blobs").mkdir()
    (repo / "blobs" / "a1b2").write_bytes(CONFIG.read_bytes())
    (repo / "snapshots" / COMMIT).mkdir(parents=True)
    (repo / "snapshots" / COMMIT / "config.json").symlink_to(Path("../../blobs/a1b2"))
    return repo


def _fifo_in_place_of(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def test_a_healthy_hf_cache_answers_offline(tmp_path: Path) -> None:
    _hf_repo(tmp_path / "hf")
    run = _plan_offline(tmp_path / "hf", tmp_path / "own")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["model"]["name"]


@pytest.mark.parametrize("entry", ["refs/main", f"snapshots/{COMMIT}/config.json"])
def test_a_fifo_in_the_hf_cache_is_no_entry_not_a_hang(tmp_path: Path, entry: str) -> None:
    repo = _hf_repo(tmp_path / "hf")
    _fifo_in_place_of(repo / entry)
    run = _plan_offline(tmp_path / "hf", tmp_path / "own")  # timed out before
    assert run.returncode == 4, run.stderr
    error = json.loads(run.stderr)
    assert error["reference"] == "model-hub-unreachable"
    assert "HF_HUB_OFFLINE" in error["message"] and error["hint"]


def test_a_fifo_in_gpuwardens_own_cache_lets_the_hf_cache_answer(tmp_path: Path) -> None:
    _hf_repo(tmp_path / "hf")
    ours = tmp_path / "own" / "hub" / "huggingface.co" / "meta" / "tiny" / "main"
    ours.mkdir(parents=True)
    os.mkfifo(ours / "config.json")
    run = _plan_offline(tmp_path / "hf", tmp_path / "own")  # timed out before
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["model"]["name"]


def _make_dangling(path: Path) -> None:
    path.unlink()
    path.symlink_to(Path("../../blobs/deleted"))  # `huggingface-cli delete-cache` took its blob


def _make_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _make_too_large(path: Path) -> None:
    path.unlink()
    with path.open("wb") as sparse:
        sparse.truncate(1 << 30)


def _make_array(path: Path) -> None:
    path.unlink()
    path.write_text("[1, 2]")


BROKEN_SNAPSHOTS = {
    "a link to a missing file": _make_dangling,
    "not a regular file": _make_folder,
    "larger than 16 MiB": _make_too_large,
    "not a config's JSON object": _make_array,
}


@pytest.mark.parametrize("why", BROKEN_SNAPSHOTS)
def test_an_unusable_snapshot_config_is_named_with_why(tmp_path: Path, why: str) -> None:
    """It was named as if nothing were there ("not in the hub cache")."""
    repo = _hf_repo(tmp_path / "hf")
    snapshot_config = repo / "snapshots" / COMMIT / "config.json"
    BROKEN_SNAPSHOTS[why](snapshot_config)
    run = _plan_offline(tmp_path / "hf", tmp_path / "own")
    assert run.returncode == 4, run.stderr
    context = json.loads(run.stderr)["context"]
    assert f"{snapshot_config} ({why})" in context, context
