"""The package's names load their module on first use (catalog/__init__.py, PEP 562) and still
behave as plain imports: star import, dir(), an unknown name's error, the same objects."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gpuwarden.catalog
from gpuwarden.catalog import gpus, instances, models


def test_a_star_import_gives_every_exported_name() -> None:
    names: dict[str, object] = {}
    exec("from gpuwarden.catalog import *", names)  # the statement under test
    assert sorted(name for name in names if not name.startswith("__")) == sorted(
        gpuwarden.catalog.__all__
    )


def test_dir_lists_the_names_not_yet_loaded() -> None:
    assert set(gpuwarden.catalog.__all__) <= set(dir(gpuwarden.catalog))


def test_each_name_is_its_modules_own_object() -> None:
    assert gpuwarden.catalog.resolve_gpu is gpus.resolve_gpu
    assert gpuwarden.catalog.instances_for_gpu is instances.instances_for_gpu
    assert gpuwarden.catalog.model_names is models.model_names


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(
        AttributeError, match=r"'gpuwarden\.catalog' has no attribute 'resovle_gpu'"
    ):
        getattr(gpuwarden.catalog, "resovle_gpu")  # noqa: B009 -- a name mypy would refuse
    with pytest.raises(ImportError, match="resovle_gpu"):
        exec("from gpuwarden.catalog import resovle_gpu", {})


def test_a_gpu_submodule_does_not_load_the_model_catalog() -> None:
    code = (
        "import sys, gpuwarden.catalog.gpus, gpuwarden.catalog.xid; "
        "print('gpuwarden.catalog.models' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.strip() == "False"
