from __future__ import annotations

import gpuwarden.catalog


def test_catalog_exports_are_pinned_and_sorted() -> None:
    assert gpuwarden.catalog.__all__ == [
        "gpu_catalog",
        "instance_catalog",
        "instances_for_gpu",
        "model_names",
        "resolve_gpu",
        "resolve_model",
    ]
    assert all(callable(getattr(gpuwarden.catalog, name)) for name in gpuwarden.catalog.__all__)


def test_package_data_ships() -> None:
    from importlib import resources

    data = resources.files("gpuwarden.catalog.data")
    assert data.joinpath("gpus.csv").is_file()
    assert data.joinpath("instances.csv").is_file()
    from gpuwarden.catalog import model_names

    shipped = [p for p in data.joinpath("models").iterdir() if p.name.endswith(".json")]
    assert len(shipped) == len(model_names()) == 65  # the 46 shared fixtures and 19 added since
