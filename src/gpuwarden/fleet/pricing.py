"""What a GPU-hour costs: a flat price, the catalog's instance prices, or a prices file.

The prices file (``--prices FILE``) is TOML, for contract prices::

    # USD per GPU-hour, by GPU model: any name the catalog knows (its key, its display name,
    # or the modelName dcgm-exporter reports, e.g. "NVIDIA H100 80GB HBM3")
    [usd_per_gpu_hour]
    "h100-sxm5-80gb" = 2.49
    "NVIDIA A100-SXM4-40GB" = 1.10

    default_usd_per_gpu_hour = 1.50   # optional: models not listed
    usd_per_kwh = 0.12                # optional: what the energy costs

Catalog prices (the default) are the median, over the instances that carry the model and have a
public on-demand price, of the instance price divided by its GPU count; the report names the
instances and the price date. A model with no price is left out of the dollars (its GPU-hours are
reported as unpriced), never priced at 0.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from gpuwarden.catalog import instances_for_gpu, resolve_gpu
from gpuwarden.catalog.gpu_names import compact
from gpuwarden.documents import DocumentError, load_toml_text
from gpuwarden.errors import GpuwardenError, InputError
from gpuwarden.fleet.model import Costs, ModelPrice

MAX_PRICE_USD = 10_000.0  # per GPU-hour or kWh: a larger number is a typo (cents? a year?)
_HINT = (
    'a prices file is TOML: a [usd_per_gpu_hour] table of "GPU model" = price, and optional '
    "default_usd_per_gpu_hour and usd_per_kwh numbers (see `gpuwarden fleet report --help`)"
)
_TOP_KEYS = frozenset({"usd_per_gpu_hour", "default_usd_per_gpu_hour", "usd_per_kwh"})


@dataclass(frozen=True, slots=True)
class PriceBook:
    """Where prices come from; ``price(model)`` answers per GPU model."""

    basis: str  # "flat", "catalog", "file"
    flat_usd_per_gpu_hour: float | None = None
    by_model: tuple[tuple[str, float], ...] = ()  # the file's (name as written, price)
    default_usd_per_gpu_hour: float | None = None
    usd_per_kwh: float | None = None

    def price(self, model: str | None) -> ModelPrice:
        name = model or "(unknown model)"
        if self.basis == "flat":
            return ModelPrice(name, self.flat_usd_per_gpu_hour, "--price-per-gpu-hour")
        if self.basis == "file":
            return _file_price(self, name)
        return catalog_price(name)


def flat(usd_per_gpu_hour: float, usd_per_kwh: float | None = None) -> PriceBook:
    return PriceBook(
        "flat",
        _checked(usd_per_gpu_hour, "--price-per-gpu-hour"),
        usd_per_kwh=_energy_price(usd_per_kwh),
    )


def catalog(usd_per_kwh: float | None = None) -> PriceBook:
    return PriceBook("catalog", usd_per_kwh=_energy_price(usd_per_kwh))


def with_energy_price(book: PriceBook, usd_per_kwh: float) -> PriceBook:
    """``book`` with --price-per-kwh in place of its own (a prices file's usd_per_kwh)."""
    return replace(book, usd_per_kwh=_energy_price(usd_per_kwh))


def _energy_price(usd_per_kwh: float | None) -> float | None:
    return None if usd_per_kwh is None else _checked(usd_per_kwh, "--price-per-kwh")


def _checked(value: float, what: str) -> float:
    if not (math.isfinite(value) and 0 <= value <= MAX_PRICE_USD):
        raise InputError(
            f"{what} {value!r} is not a price in USD between 0 and {MAX_PRICE_USD:g}",
            reference="fleet-price-invalid",
            hint="prices are US dollars per GPU-hour (or per kWh), e.g. 2.49",
        )
    return value


def _same_gpu(a: str, b: str) -> bool:
    if compact(a) == compact(b):
        return True
    try:
        return resolve_gpu(a).key == resolve_gpu(b).key
    except GpuwardenError:  # not in the catalog, or ambiguous: only the exact name matches
        return False


def _file_price(book: PriceBook, model: str) -> ModelPrice:
    for name, usd in book.by_model:
        if _same_gpu(name, model):
            return ModelPrice(model, usd, f"prices file: {name!r}")
    if book.default_usd_per_gpu_hour is not None:
        return ModelPrice(model, book.default_usd_per_gpu_hour, "prices file: default")
    return ModelPrice(model, None, "not in the prices file (and no default_usd_per_gpu_hour)")


def catalog_price(model: str) -> ModelPrice:
    """The median per-GPU on-demand price of the catalog's instances with this GPU."""
    try:
        gpu = resolve_gpu(model)
    except GpuwardenError:
        return ModelPrice(
            model, None, "not in gpuwarden's GPU catalog: give --prices or a flat price"
        )
    priced = [
        (i.usd_per_hour / i.gpu_count, i)
        for i in instances_for_gpu(gpu.key)
        if i.usd_per_hour is not None and i.gpu_count
    ]
    if not priced:
        return ModelPrice(model, None, f"catalog: no instance with {gpu.key} has a public price")
    median = statistics.median(p for p, _ in priced)
    names = ", ".join(f"{i.provider} {i.instance_type}" for _, i in priced)
    dates = sorted({i.price_date for _, i in priced if i.price_date})
    dated = f"; prices dated {', '.join(dates)}" if dates else ""
    return ModelPrice(
        model,
        median,
        f"catalog: median of {len(priced)} on-demand list prices ({names}){dated}",
    )


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(
            f"{where} is {value!r}, not a number", reference="fleet-prices-invalid", hint=_HINT
        )
    return _checked_file(float(value), where)


def _checked_file(value: float, where: str) -> float:
    if not (math.isfinite(value) and 0 <= value <= MAX_PRICE_USD):
        raise InputError(
            f"{where} = {value!r} is not a price between 0 and {MAX_PRICE_USD:g} USD",
            reference="fleet-prices-invalid",
            hint=_HINT,
        )
    return value


def parse_prices(text: str) -> PriceBook:
    """A prices file's text → ``PriceBook`` (the caller names the file in errors)."""
    try:
        document = load_toml_text(text)
    except DocumentError as exc:
        raise InputError(str(exc), reference="fleet-prices-invalid", hint=_HINT) from None
    unknown = sorted(set(document) - _TOP_KEYS)
    if unknown:
        raise InputError(
            f"unknown key {unknown[0]!r}", reference="fleet-prices-invalid", hint=_HINT
        )
    table = document.get("usd_per_gpu_hour", {})
    if not isinstance(table, dict):
        raise InputError(
            'usd_per_gpu_hour must be a table of "GPU model" = price',
            reference="fleet-prices-invalid",
            hint=_HINT,
        )
    by_model = tuple(
        (str(name), _number(value, f"usd_per_gpu_hour.{name!r}")) for name, value in table.items()
    )
    default = document.get("default_usd_per_gpu_hour")
    kwh = document.get("usd_per_kwh")
    if not by_model and default is None:
        raise InputError(
            "the file prices no GPU: it has no [usd_per_gpu_hour] entry and no default",
            reference="fleet-prices-invalid",
            hint=_HINT,
        )
    return PriceBook(
        "file",
        by_model=by_model,
        default_usd_per_gpu_hour=None
        if default is None
        else _number(default, "default_usd_per_gpu_hour"),
        usd_per_kwh=None if kwh is None else _number(kwh, "usd_per_kwh"),
    )


def costs(
    book: PriceBook, models: Iterable[str | None]
) -> tuple[Costs, Mapping[str | None, float | None]]:
    """The report's price table and each model's price per GPU-hour (None: unpriced)."""
    prices = {model: book.price(model) for model in sorted(set(models), key=lambda m: m or "")}
    table = Costs(
        basis=book.basis,
        price_per_gpu_hour=book.flat_usd_per_gpu_hour,
        usd_per_kwh=book.usd_per_kwh,
        prices=tuple(prices.values()),
    )
    return table, {model: p.usd_per_gpu_hour for model, p in prices.items()}
