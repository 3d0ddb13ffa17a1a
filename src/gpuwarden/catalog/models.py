"""Model catalog: the bundled configs, local ``config.json`` files, and hub ids."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path

from gpuwarden.catalog.configs import normalise, read_config_text
from gpuwarden.documents import DocumentError, load_json_text
from gpuwarden.errors import CorruptInputError, UnknownNameError
from gpuwarden.types.model import ModelSpec

_DATA = "gpuwarden.catalog.data.models"


@cache
def _bundled() -> dict[str, str]:
    """Lower-case name → published name (file name without ``.json``) of every bundled config."""
    names: dict[str, str] = {}
    for entry in resources.files(_DATA).iterdir():
        if entry.name.endswith(".json"):
            display = entry.name[: -len(".json")]
            names[display.lower()] = display
    return names


def model_names() -> list[str]:
    """Catalog names as published (case preserved), sorted."""
    return sorted(_bundled().values())


_CONFIG_HINT = "pass an HF config.json (or a catalog model name)"


def _not_json(message: str, hint: str = _CONFIG_HINT) -> CorruptInputError:
    return CorruptInputError(message, reference="config-not-json", hint=hint)


def parse_config_json(
    text: str | bytes, source: str, hint: str = _CONFIG_HINT
) -> dict[str, object]:
    """The object of a ``config.json`` (text, or UTF-8 bytes); errors start with ``source`` and
    carry ``hint`` (the hub names its URL and what to do when a proxy answered instead)."""
    try:
        cfg = load_json_text(text)
    except DocumentError as exc:
        raise _not_json(f"{source}: {exc}", hint) from None
    if not isinstance(cfg, dict):
        raise _not_json(
            f"{source}: a config.json holds a JSON object, not a {type(cfg).__name__}", hint
        )
    return cfg


@cache
def load_bundled(name: str) -> ModelSpec:
    display = _bundled()[name.lower()]
    text = resources.files(_DATA).joinpath(f"{display}.json").read_text(encoding="utf-8")
    return normalise(
        display, parse_config_json(text, f"catalog model {display}"), f"catalog:{display}"
    )


def _probe(check: Callable[[], bool]) -> bool:
    """A filesystem test (``exists``, ``is_dir``) that is False when the OS refuses to look
    (name too long, no permission) instead of raising; reading the file reports why."""
    try:
        return check()
    except OSError:
        return False


def load_config_file(path: Path) -> ModelSpec:
    """A local HF ``config.json`` (or a folder holding one)."""
    if _probe(path.is_dir):
        path = path / "config.json"
    try:
        text = read_config_text(path)
    except OSError as exc:
        raise CorruptInputError(
            f"cannot read {path}: {exc.strerror or exc}",
            reference="config-unreadable",
            hint="check the path; MODEL is a catalog name or a path to a config.json",
        ) from exc
    except UnicodeDecodeError as exc:
        raise _not_json(f"{path}: not a text file ({exc.reason})") from exc
    return normalise(_model_name(path), parse_config_json(text, str(path)), str(path))


def _model_name(path: Path) -> str:
    """A checkpoint folder's name for its ``config.json`` (``Llama-3-8B/config.json``), the file's
    own stem for a config saved under another name (``Qwen3.5-4B.json``)."""
    if path.name == "config.json" and path.parent.name:
        return path.parent.name
    return path.stem


def load_hub_config(hub_id: str) -> ModelSpec:
    """``owner/name[@revision]`` from the Hugging Face Hub (or its cache); see ``catalog.hub``."""
    from gpuwarden.catalog import hub  # urllib.request and ssl load only when a hub id is asked

    parsed = hub.parse_hub_id(hub_id)
    if parsed is None:
        raise UnknownNameError(
            "model",
            hub_id,
            hint="MODEL is a catalog name, a path to a config.json (that exists) or a hub id "
            "owner/name[@revision]",
        )
    fetched = hub.fetch_config(parsed)
    return normalise(str(parsed), fetched.config, fetched.source)


def resolve_model(name_or_path: str) -> ModelSpec:
    """Catalog name (case-insensitive), path to a config.json, or a hub id (needs the network)."""
    key = name_or_path.strip().lower()
    if key in _bundled():
        return load_bundled(key)
    # Hub ids like "meta-llama/Llama-2-7b-hf" match on their last part when it is bundled.
    tail = key.rsplit("/", 1)[-1]
    if tail in _bundled() and not _probe(Path(name_or_path).exists):
        return load_bundled(tail)
    try:
        path = Path(name_or_path).expanduser()
    except RuntimeError as exc:  # "~user/…" with no such user, or no home directory
        raise CorruptInputError(
            f"cannot read {name_or_path}: its '~' names no home directory",
            reference="config-unreadable",
            hint="check the path; MODEL is a catalog name or a path to a config.json",
        ) from exc
    if path.suffix == ".json" or _probe(path.exists) or name_or_path.startswith((".", "/", "~")):
        return load_config_file(path)
    if "/" in name_or_path:
        return load_hub_config(name_or_path)
    raise UnknownNameError("model", name_or_path, suggest_models(name_or_path))


def _similarity(typed: str, name: str) -> float:
    """How close a typed name is to a catalog name, or to its tail after an organisation-style
    prefix ("Meta-Llama-3-8B" also read as "Llama-3-8B"): the prefix is not what people misspell,
    it is what they leave out."""
    parts = name.split("-")
    tails = ["-".join(parts[i:]) for i in range(len(parts)) if len(parts[i:]) > 1 or i == 0]
    return max(difflib.SequenceMatcher(None, typed, tail).ratio() for tail in tails)


def suggest_models(typed: str, limit: int = 3) -> list[str]:
    """The catalog names closest to ``typed`` (best first), for "did you mean"."""
    key = typed.strip().lower().rsplit("/", 1)[-1]
    scored = sorted(
        ((_similarity(key, low), name) for low, name in _bundled().items()), reverse=True
    )
    return [name for score, name in scored[:limit] if score >= 0.5]
