"""Reading typed fields out of an HF ``config.json``, with errors that name the field.

Configs come from users and the Hub, so every value is checked before it is used: a wrong type, a
negative size or a non-finite number becomes an ``InvalidConfigError`` naming the field, never a
``TypeError`` three calls later. ``configs.normalise`` adds the file's name to the message, once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from gpuwarden.errors import InvalidConfigError

Config = Mapping[str, Any]
T = TypeVar("T")
D = TypeVar("D")

# Layer counts become tuples of that length; beyond this a config is garbage, not a model.
MAX_LAYERS = 100_000

_HINT = "check the config.json against the model's published config"


# transformers' per-block attention kinds (config.layer_types) most families know
ATTENTION_KINDS = frozenset({"full_attention", "sliding_attention"})


def layer_types(
    cfg: Config,
    n_layers: int,
    known: frozenset[str] = ATTENTION_KINDS,
    *,
    name: str = "layer_types",
) -> list[str] | None:
    """An explicit per-block list (``layer_types``, or another ``name`` such as GLM's
    ``mlp_layer_types``): one kind per block, each a kind the family models (``known``); None
    when the config has none (the family's default pattern applies)."""
    value: object = cfg.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise invalid(f"field {name!r} must be a list of strings, got {value!r}")
    if len(value) != n_layers:
        raise invalid(f"field {name!r} has {len(value)} entries but num_hidden_layers={n_layers}")
    unknown = sorted(set(value) - known)
    if unknown:
        raise invalid(
            f"field {name!r} has unknown layer kinds {unknown}",
            hint=f"this model type knows {', '.join(sorted(known))}",
        )
    return list(value)


# the per-block ``mlp_layer_types`` of GLM-4.5-style configs (Glm4MoeLiteConfig and its heirs)
MLP_KINDS = frozenset({"dense", "sparse"})


def routed_blocks(cfg: Config, n_layers: int, first_dense: int) -> list[bool]:
    """Which blocks route: an explicit ``mlp_layer_types`` list ("sparse" routes), else every
    block from ``first_dense`` on (the config classes' __post_init__ default)."""
    kinds = layer_types(cfg, n_layers, MLP_KINDS, name="mlp_layer_types")
    if kinds is None:
        return [index >= first_dense for index in range(n_layers)]
    return [kind == "sparse" for kind in kinds]


def whole_numbers(cfg: Config, name: str, *, most: int | None = None) -> list[int] | None:
    """A list of non-negative whole numbers (layer indices, or per-layer 0/1 flags) of at most
    ``most`` entries; None when the config has none."""
    value: object = cfg.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise invalid(f"field {name!r} must be a list of non-negative integers, got {value!r}")
    if most is not None and len(value) > most:
        raise invalid(f"field {name!r} has {len(value)} entries but num_hidden_layers={most}")
    return list(value)


@contextmanager
def within(field: str) -> Iterator[None]:
    """A field that a nested config (a multimodal model's ``text_config``) misses or gets wrong
    is named with the object it lives in: "text_config: required field 'hidden_size' ..."."""
    try:
        yield
    except InvalidConfigError as exc:
        raise exc.about(field) from None


def invalid(message: str, *, hint: str = _HINT) -> InvalidConfigError:
    """An ``InvalidConfigError`` with the shared reference (``normalise`` names the config)."""
    return InvalidConfigError(message, reference="config-field-invalid", hint=hint)


def _as_int(value: object) -> int | None:
    """``value`` as an int when it is a whole number (4096 or 4096.0), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


# No dimension, count or length of a real model config comes near 2**31 (vocabularies are ~10^5,
# contexts ~10^7); a bigger number is a damaged file, and would overflow the planner's floats.
MAX_CONFIG_INT = 2**31 - 1


def field_int(
    cfg: Config,
    *names: str,
    default: int | None = None,
    minimum: int = 1,
    maximum: int = MAX_CONFIG_INT,
) -> int:
    """The first of ``names`` present (not null) in ``cfg`` as an int in [minimum, maximum]."""
    for name in names:
        value = cfg.get(name)
        if value is None:
            continue
        number = _as_int(value)
        if number is None:
            raise invalid(f"field {name!r} must be an integer, got {value!r}")
        if number < minimum:
            bound = "positive" if minimum == 1 else f"at least {minimum}"
            raise invalid(f"field {name!r} must be {bound}, got {value!r}")
        if number > maximum:
            raise invalid(f"field {name!r} must be at most {maximum}, got {value!r}")
        return number
    if default is not None:
        return default
    raise InvalidConfigError(
        f"required field {' or '.join(repr(n) for n in names)} is missing",
        reference="config-field-missing",
        hint="a config.json needs the architecture fields (hidden size, layers, heads, vocab)",
    )


def layer_count(cfg: Config, *names: str, default: int | None = None) -> int:
    """A number of transformer blocks (bounded, since one entry per block is built)."""
    return field_int(cfg, *names, default=default, maximum=MAX_LAYERS)


def core_sizes(
    cfg: Config,
    *,
    hidden: tuple[str, ...] = ("hidden_size",),
    layers: tuple[str, ...] = ("num_hidden_layers",),
    heads: tuple[str, ...] = ("num_attention_heads",),
) -> tuple[int, int, int]:
    """(hidden size, blocks, attention heads), read in that order under each family's spellings."""
    return (
        field_int(cfg, *hidden),
        layer_count(cfg, *layers),
        field_int(cfg, *heads),
    )


def optional_int(cfg: Config, name: str, default: int | None = None) -> int | None:
    """A positive int, or: absent → ``default`` (the HF default), explicit null → None."""
    if cfg.get(name) is None:
        return default if name not in cfg else None
    return field_int(cfg, name)


def _field_of(cfg: Config, name: str, default: D, kind: type[T], what: str) -> T | D:
    """``cfg[name]`` when it is a ``kind``; absent or null gives ``default``."""
    value = cfg.get(name)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise invalid(f"field {name!r} must be {what}, got {value!r}")
    return value


def sub_config(cfg: Config, name: str) -> Config | None:
    """A nested config object (``text_config``, ``vision_config`` ...); absent or null: None."""
    return _field_of(cfg, name, None, dict, "an object")


def field_bool(cfg: Config, name: str, default: bool) -> bool:
    """A JSON boolean; absent or null gives the family's HF default."""
    return _field_of(cfg, name, default, bool, "true or false")


def field_str(cfg: Config, name: str, default: str) -> str:
    return _field_of(cfg, name, default, str, "a string")


def checkpoint_dtype(cfg: Config) -> str | None:
    """``torch_dtype`` (transformers < 5) or ``dtype`` (≥ 5) of the published weights."""
    for name in ("torch_dtype", "dtype"):
        value = cfg.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise invalid(f"field {name!r} must be a dtype name, got {value!r}")
        return value
    return None


def divisible(numerator: tuple[str, int], denominator: tuple[str, int]) -> None:
    """Raise unless ``numerator`` is a multiple of ``denominator`` (both named fields)."""
    (num_name, num), (den_name, den) = numerator, denominator
    if num % den:
        raise invalid(
            f"{num_name}={num} is not a multiple of {den_name}={den}",
            hint=f"the model splits {num_name} evenly across {den_name}",
        )
