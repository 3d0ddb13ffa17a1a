"""Cloud instance catalog: ``data/instances.csv`` → ``InstanceSpec``.

Prices are dated facts, not constants (AWS cut P4/P5 on-demand prices by up to 45 % in June
2025): each row keeps its ``price_basis`` and ``price_date``, and an unknown price stays ``None``
(never 0, which would make the instance look free to a cost ranking).
"""

from __future__ import annotations

from functools import cache

from gpuwarden.catalog.gpus import gpu_catalog, resolve_gpu
from gpuwarden.catalog.tables import Row, read_rows
from gpuwarden.errors import CorruptInputError
from gpuwarden.types.hardware import InstanceSpec

_FILE = "instances.csv"
_COLUMNS = (
    "provider",
    "instance_type",
    "gpu_key",
    "gpu_count",
    "vcpus",
    "memory_gib",
    "interconnect",
    "network",
    "region",
    "usd_per_hour",
    "price_basis",
    "price_date",
    "verified",
    "source",
    "notes",
)


def _spec(row: Row, gpu_keys: frozenset[str]) -> InstanceSpec:
    gpu_key = row.text("gpu_key")
    if gpu_key not in gpu_keys:
        raise CorruptInputError(
            f"{row.file} line {row.line}: gpu_key {gpu_key!r} is not in gpus.csv",
            reference="catalog-data-corrupt",
            hint="every instance must name a GPU row by its key",
        )
    gpu_count = row.required_count("gpu_count")
    return InstanceSpec(
        provider=row.text("provider"),
        instance_type=row.text("instance_type"),
        gpu_key=gpu_key,
        gpu_count=gpu_count,
        vcpus=row.count("vcpus"),
        memory_gib=row.number("memory_gib"),
        interconnect=row.text("interconnect"),
        network=row.text("network"),
        region=row.text("region"),
        usd_per_hour=row.number("usd_per_hour"),
        price_basis=row.text("price_basis"),
        price_date=row.optional_text("price_date"),
        source=row.text("source"),
        notes=row.optional_text("notes"),
        extra={"verified": row.text("verified")},
    )


@cache
def _catalog() -> tuple[InstanceSpec, ...]:
    keys = frozenset(g.key for g in gpu_catalog())
    return tuple(_spec(row, keys) for row in read_rows(_FILE, _COLUMNS))


def instance_catalog() -> list[InstanceSpec]:
    """Every cloud instance type gpuwarden knows (AWS, Azure, GCP), in file order."""
    return list(_catalog())


def instances_for_gpu(gpu: str) -> list[InstanceSpec]:
    """Instances carrying that GPU; ``gpu`` is a key or any name ``resolve_gpu`` accepts."""
    key = resolve_gpu(gpu).key
    return [spec for spec in _catalog() if spec.gpu_key == key]
