"""A small, tolerant reader of the Prometheus text exposition format (what dcgm-exporter serves).

Written here rather than using ``prometheus_client.parser``: errors must name the line, the core
must read a scrape without the [exporter] extra, and real scrapes lack HELP/TYPE lines or repeat
a family (tests check this reader against prometheus_client on every fixture).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpuwarden.errors import CorruptInputError

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}

HINT = (
    "pass the saved output of `curl -s http://<node>:9400/metrics` (dcgm-exporter's endpoint) "
    "unchanged, or the URL itself"
)


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float
    line: int


def scrape_error(source: str, line: int | None, problem: str) -> CorruptInputError:
    where = f"{source}, line {line}" if line is not None else source
    return CorruptInputError(f"{where}: {problem}", reference="dcgm-scrape-unreadable", hint=HINT)


def _value(text: str) -> float:
    lowered = text.lower()
    if lowered in ("nan",):
        return math.nan
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    return float(text)


def _labels(text: str, start: int, source: str, line: int) -> tuple[dict[str, str], int]:
    """Parse ``{a="1",b="2"}`` from ``text[start] == "{"``; returns the labels and the end."""
    labels: dict[str, str] = {}
    i = start + 1
    while True:
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == "}":
            return labels, i + 1
        match = _LABEL_NAME.match(text, i)
        if match is None:
            raise scrape_error(source, line, f"bad label name at column {i + 1}")
        name = match.group()
        i = match.end()
        if text[i : i + 2] != '="':
            raise scrape_error(source, line, f'label {name} without ="value"')
        i += 2
        chars: list[str] = []
        while True:
            if i >= len(text):
                raise scrape_error(source, line, f"label {name}: value not closed")
            char = text[i]
            if char == "\\" and i + 1 < len(text):
                chars.append(_ESCAPES.get(text[i + 1], "\\" + text[i + 1]))
                i += 2
                continue
            if char == '"':
                i += 1
                break
            chars.append(char)
            i += 1
        labels[name] = "".join(chars)
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == ",":
            i += 1
        elif i < len(text) and text[i] == "}":
            continue
        else:
            raise scrape_error(source, line, f"expected , or }} after label {name}")


# dcgm-exporter's value for a field it cannot format as a number (blob fields such as
# DCGM_FI_DEV_VGPU_PER_PROCESS_UTILIZATION): "ERROR - FAILED TO CONVERT TO STRING".
_CONVERSION_FAILURE = "ERROR"


@dataclass(frozen=True, slots=True)
class Exposition:
    samples: list[Sample]
    types: dict[str, str]  # the ``# TYPE`` of each family that declared one
    unconverted: dict[str, int]  # family → samples the exporter wrote as a conversion error
    foreign: list[tuple[int, str]]  # (line, text) of lines that are no exposition at all

    def notes(self) -> list[str]:
        """What was skipped, in words, for the reading's events."""
        said = [
            f"dcgm-exporter could not convert {count} sample(s) of {family} to a number "
            "(it wrote ERROR - FAILED TO CONVERT TO STRING); skipped"
            for family, count in self.unconverted.items()
        ]
        if self.foreign:
            line, text = self.foreign[0]
            said.append(
                f"skipped {len(self.foreign)} line(s) that are not Prometheus exposition "
                f"(line {line}: {text[:50]!r})"
            )
        return said


def _is_sample_shaped(line: str, name: str, rest_at: int, declared: set[str]) -> bool:
    """Does ``line`` try to be a sample (then a flaw in it is corruption, e.g. a truncated last
    line), or is it text a terminal mixed in, such as kubectl port-forward's "Handling
    connection for 9400"?"""
    if rest_at == len(line) or line[rest_at] == "{":
        return True
    if name in declared or name.startswith("DCGM_"):
        return True
    if line[rest_at] not in " \t":
        return False
    rest = line[rest_at:].split()
    if len(rest) > 2:
        return False
    try:
        _value(rest[0])
    except ValueError:
        return False
    return True


def parse_exposition(text: str, source: str) -> Exposition:
    """Samples in file order. Lines that are not exposition are skipped while they stay a
    minority; a sample whose value the exporter could not convert is skipped and counted."""
    samples: list[Sample] = []
    types: dict[str, str] = {}
    declared: set[str] = set()
    unconverted: dict[str, int] = {}
    foreign: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("TYPE", "HELP"):
                declared.add(parts[2])
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        match = _NAME.match(line)
        if match is None or not _is_sample_shaped(line, match.group(), match.end(), declared):
            foreign.append((number, line))
            continue
        name = match.group()
        rest_at = match.end()
        labels: dict[str, str] = {}
        if rest_at < len(line) and line[rest_at] == "{":
            labels, rest_at = _labels(line, rest_at, source, number)
        rest = line[rest_at:].split()
        if rest and rest[0] == _CONVERSION_FAILURE:
            unconverted[name] = unconverted.get(name, 0) + 1
            continue
        if not rest or len(rest) > 2 or (rest_at < len(line) and line[rest_at] not in " \t"):
            raise scrape_error(source, number, f"{name}: expected a value after the labels")
        try:
            value = _value(rest[0])
            if len(rest) == 2:
                int(rest[1])  # optional timestamp in ms
        except ValueError:
            raise scrape_error(
                source, number, f"{name}: {' '.join(rest)!r} is not a number"
            ) from None
        samples.append(Sample(name, labels, value, number))
    if foreign and len(foreign) >= len(samples):
        number, line = foreign[0]
        raise scrape_error(source, number, f"not a metric line: {line[:60]!r}")
    return Exposition(samples, types, unconverted, foreign)
