"""YAML text of the deploy documents: the one module that imports PyYAML.

Keys keep the order they were built in; multi-line strings (PromQL) are literal blocks, so a rule
reads as it was written; several documents are joined with ``---`` (kubectl's multi-document
form)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpuwarden.errors import MissingExtraError


def _yaml() -> Any:
    try:
        yaml = importlib.import_module("yaml")  # typed Any: PyYAML ships no annotations
    except ImportError:  # pragma: no cover - exercised by the no-extras test
        raise MissingExtraError("gpuwarden deploy", "deploy", "pyyaml") from None
    return yaml


# Plain scalars YAML 1.1 resolves to something other than a string, as Go's YAML (kubectl,
# sigs.k8s.io/yaml over yaml.v2) reads them, beyond PyYAML's own resolver: y/Y/n/N and the
# other booleans, null, dates, base-60 numbers. Numbers are found by Python's own readers.
_YAML11_NOT_TEXT = re.compile(
    r"(?:[yYnN~]|yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"
    r"|null|Null|NULL|\d{4}-\d\d?-\d\d?(?:[Tt ].*)?|[-+]?\d[\d_]*(?::[0-5]?\d)+(?:\.\d*)?)\Z"
)


def _reads_as_other_than_text(value: str) -> bool:
    """Whether a YAML reader could take ``value`` written plain for a boolean, null, number or
    date (PyYAML's resolver quotes fewer: "y", "1e3" and "0o17" it writes plain)."""
    if _YAML11_NOT_TEXT.match(value):
        return True
    for read in (float, lambda text: int(text, 0)):
        try:
            read(value)
        except ValueError:
            continue
        return True
    return False


def _dumper() -> Any:
    yaml = _yaml()

    class Dumper(yaml.SafeDumper):  # type: ignore[misc,name-defined]
        def ignore_aliases(self, data: Any) -> bool:
            return True  # shared sub-documents are written out, never as &anchors

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else "'" if _reads_as_other_than_text(value) else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def to_yaml(document: Mapping[str, Any]) -> str:
    yaml = _yaml()
    text: str = yaml.dump(
        document, Dumper=_dumper(), sort_keys=False, allow_unicode=True, width=100
    )
    return text


def to_yaml_stream(documents: Iterable[Mapping[str, Any]]) -> str:
    return "---\n" + "---\n".join(to_yaml(d) for d in documents)


def from_yaml(text: str) -> Any:
    """Read YAML back (the tests' round trips; safe loader only)."""
    return _yaml().safe_load(text)


def from_yaml_stream(text: str) -> list[Any]:
    """Every document of a ``---``-separated stream (kubectl's output), empty ones dropped."""
    return [d for d in _yaml().safe_load_all(text) if d is not None]
