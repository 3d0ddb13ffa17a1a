"""The core works with no extras installed (DESIGN.md: `import gpuwarden` and `gpuwarden plan`).

Each check runs in a fresh interpreter whose meta-path finders are wrapped so that the extras'
packages look not installed: ``import torch`` raises ``ModuleNotFoundError`` ("No module named
'torch'"), ``importlib.util.find_spec("torch")`` is ``None`` and ``importlib.metadata`` does not
list the distribution — what a plain ``pip install gpuwarden`` gives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Import names of every optional dependency (pyproject.toml extras), and their distributions.
EXTRAS_MODULES = (
    "torch",
    "transformers",
    "numpy",
    "orjson",
    "msgspec",
    "pynvml",
    "prometheus_client",
    "httpx",
    "kubernetes",
    "grpc",
    "yaml",
    "bcrypt",
)
EXTRAS_DISTRIBUTIONS = (
    "torch",
    "transformers",
    "numpy",
    "orjson",
    "msgspec",
    "nvidia-ml-py",
    "prometheus-client",
    "httpx",
    "kubernetes",
    "grpcio",
    "pyyaml",
    "bcrypt",
)

# Runs first in the child. Every finder on sys.meta_path (the path finder, the editable-install
# finder, ...) is wrapped: hidden top-level names are "not found", everything else is unchanged.
# Hidden imports that were attempted are printed to stderr at exit, for the checks below.
_PREAMBLE = f"""
import atexit, sys

_HIDDEN = frozenset({EXTRAS_MODULES!r})
_HIDDEN_DISTS = frozenset({EXTRAS_DISTRIBUTIONS!r})
_attempted = []


class _NoExtras:
    def __init__(self, inner):
        self._inner = inner

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in _HIDDEN:
            _attempted.append(fullname)
            return None
        find = getattr(self._inner, "find_spec", None)
        return None if find is None else find(fullname, path, target)

    def find_distributions(self, *args, **kwargs):
        find = getattr(self._inner, "find_distributions", None)
        if find is None:
            return iter(())
        return (
            dist
            for dist in find(*args, **kwargs)
            if (dist.metadata["Name"] or "").lower().replace("_", "-") not in _HIDDEN_DISTS
        )

    def invalidate_caches(self):
        invalidate = getattr(self._inner, "invalidate_caches", None)
        if invalidate is not None:
            invalidate()


for _name in [m for m in sys.modules if m.partition(".")[0] in _HIDDEN]:
    del sys.modules[_name]
sys.meta_path[:] = [_NoExtras(finder) for finder in sys.meta_path]
atexit.register(lambda: print("NO-EXTRAS attempted:", sorted(set(_attempted)), file=sys.stderr))
"""


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")  # nothing here may touch the network
    return subprocess.run(
        [sys.executable, "-c", _PREAMBLE + code],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def python_without_extras(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return _run(code, cwd)


def gpuwarden_without_extras(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m gpuwarden ARGS`` with the extras hidden."""
    return _run(
        f"import runpy, sys\nsys.argv = ['gpuwarden', *{list(args)!r}]\n"
        "runpy.run_module('gpuwarden', run_name='__main__', alter_sys=True)\n",
        cwd,
    )


def test_the_extras_really_are_hidden(tmp_path: Path) -> None:
    """The harness itself: without this, every other test here could pass vacuously."""
    code = (
        "import importlib.metadata, importlib.util\n"
        f"for name in {EXTRAS_MODULES!r}:\n"
        "    assert importlib.util.find_spec(name) is None, name\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        assert exc.name == name, exc\n"
        "    else:\n"
        "        raise AssertionError(f'{name} was imported')\n"
        f"for dist in {EXTRAS_DISTRIBUTIONS!r}:\n"
        "    try:\n"
        "        importlib.metadata.version(dist)\n"
        "    except importlib.metadata.PackageNotFoundError:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError(f'{dist} is listed')\n"
        "import json, importlib.metadata\n"
        "print(importlib.metadata.version('gpuwarden'))\n"
    )
    proc = python_without_extras(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0.1.0"  # everything else is still there


@pytest.mark.parametrize("module", ["gpuwarden", "gpuwarden.planner", "gpuwarden.catalog"])
def test_core_modules_import(tmp_path: Path, module: str) -> None:
    proc = python_without_extras(f"import {module}\nprint('ok')\n", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_catalog_models_json(tmp_path: Path) -> None:
    proc = gpuwarden_without_extras("catalog", "models", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["schema"] == "gpuwarden.catalog.models/1"
    by_name = {model["name"]: model for model in document["models"]}
    assert len(by_name) == 65  # the 46 shared fixtures and 19 models added since
    assert by_name["Llama-2-7b-hf"]["parameters"] == 6_738_415_616  # fixtures/models/SOURCES.md


@pytest.mark.parametrize("what", ["gpus", "instances"])
def test_other_catalogs_json(tmp_path: Path, what: str) -> None:
    proc = gpuwarden_without_extras("catalog", what, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"] == f"gpuwarden.catalog.{what}/1"


def test_plan_json(tmp_path: Path) -> None:
    proc = gpuwarden_without_extras("plan", "Llama-2-7b-hf", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["schema"].startswith("gpuwarden.")
    assert "Llama-2-7b-hf" in proc.stdout


def test_plan_exact_names_the_missing_extra(tmp_path: Path) -> None:
    proc = gpuwarden_without_extras("plan", "Llama-2-7b-hf", "--exact", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "error: missing-extra" in proc.stderr
    assert "gpuwarden[torch]" in proc.stderr
    assert "Traceback" not in proc.stderr
    # It failed because torch really was looked for, not for some other reason.
    assert "'torch'" in proc.stderr.rsplit("NO-EXTRAS attempted:", 1)[1]


def test_plan_exact_json_error(tmp_path: Path) -> None:
    proc = gpuwarden_without_extras("plan", "Llama-2-7b-hf", "--exact", "--json", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    error = json.loads(proc.stderr.rsplit("NO-EXTRAS attempted:", 1)[0])
    assert error["schema"] == "gpuwarden.error/1"
    assert error["reference"] == "missing-extra"
    assert "gpuwarden[torch]" in error["hint"]


def test_snapshot_sim_and_smi_need_no_extras(tmp_path: Path, fixtures: Path) -> None:
    proc = gpuwarden_without_extras(
        "snapshot", "--backend", "sim", "--scenario", "fake-load", "--json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["simulated"] is True
    xml = next((fixtures / "nvidia-smi").glob("*.xml"))
    proc = gpuwarden_without_extras(
        "snapshot", "--backend", "smi", "--from", str(xml), "--json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["devices"][0]["uuid"].startswith("GPU-")


def test_record_and_history_need_no_extras(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    proc = gpuwarden_without_extras(
        "record",
        "--backend",
        "sim",
        "--interval",
        "0.05",
        "--db",
        db,
        "--",
        sys.executable,
        "-c",
        "import time; time.sleep(0.3)",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    proc = gpuwarden_without_extras("history", "--db", db, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["samples"]


@pytest.mark.parametrize("backend", ["nvml", "dcgm"])
def test_backends_that_need_an_extra_name_it(tmp_path: Path, backend: str) -> None:
    args = ["snapshot", "--backend", backend]
    if backend == "dcgm":
        args += ["--from", "http://127.0.0.1:9/metrics"]
    proc = gpuwarden_without_extras(*args, cwd=tmp_path)
    assert "Traceback" not in proc.stderr
    if backend == "nvml":
        assert proc.returncode == 3 and "gpuwarden[nvml]" in proc.stderr
    else:  # the scrape parser is our own; only the fetch can fail here
        assert proc.returncode == 4 and "dcgm-exporter-unreachable" in proc.stderr


def test_trace_names_the_missing_extra(tmp_path: Path, fixtures: Path) -> None:
    trace = fixtures / "traces" / "call_stack" / "backward_thread.json"
    proc = gpuwarden_without_extras("trace", "analyze", str(trace), cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "gpuwarden[trace]" in proc.stderr and "Traceback" not in proc.stderr
