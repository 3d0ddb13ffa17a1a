"""Issue 13, ninth pass (b): the seven patterns r9's probe found backtracking, rewritten.

test_hostile_r9_regex_probe times the rewrites (its main test, with no KNOWN_SLOW entry left).
This module holds each rewrite to what the pattern it replaced matched: the same spans and groups
(for a substitution, the same text out; for a findall, the same list) on generated strings of the
pattern's own alphabet and on every real input that reaches it — the cells of the catalog's CSVs
(versions, GPU variants, compute-capability lists), the instances' network column, and the
messages tomllib gives for broken TOML. The public functions then answer long runs at once.
"""

from __future__ import annotations

import csv
import dataclasses
import random
import re
import time
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest

from gpuwarden import documents
from gpuwarden.catalog import compat, instance_catalog
from gpuwarden.catalog.compat import parse_version
from gpuwarden.documents import DocumentError, load_toml_text
from gpuwarden.planner import roofline
from gpuwarden.types.hardware import InstanceSpec

SAMPLES = 200_000  # generated strings per pattern, seeded (a failure reproduces)
LONG_RUN = 100_000  # a quadratic search takes minutes here, a linear one milliseconds
FAST_S = 0.5  # generous for a loaded 2-core runner

# The patterns as they were before the rewrite, as each call site used them
_OLD_VERSION_AT_START = re.compile(r"^\s*(?:>=|≥)?\s*[vV]?(\d{1,9}(?:\.\d{1,9})*)(?![\d])")
_OLD_TOML_PLACE = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)$")
_OLD_LINKS_TIMES_GBIT = re.compile(r"(\d+)\s*x\s*(\d+)\s*Gb")
_OLD_GBIT = re.compile(r"(\d+)\s*Gb")


def _found(match: re.Match[str] | None) -> object:
    if match is None:
        return None
    spans = tuple(match.span(k) for k in range(1 + (match.re.groups or 0)))
    return spans, match.groups()


def _old_parenthesis_removed(text: str) -> str:
    return re.sub(r"\(.*?\)", "", text)


def _old_parenthesized(text: str) -> list[str]:
    return re.findall(r"\(([^)]*)\)", text)


def _old_decimals(text: str) -> list[tuple[tuple[int, int], str]]:
    return [(m.span(), m.group(0)) for m in re.finditer(r"\d+\.\d", text)]


def _new_decimals(text: str) -> list[tuple[tuple[int, int], str]]:
    return [(m.span(), m.group(0)) for m in compat._DECIMAL.finditer(text)]


_DIGITS = ["0", "1", "9", "٣"]  # an Arabic-Indic digit: \d is Unicode in a str pattern
_BLANKS = [" ", "\t", "\n", "\u00a0"]
_PARENTHESES = ["(", ")", "\n", " ", "a", "SXM", "x"]
_TOML_TOKENS = [
    *_BLANKS,
    *("(", ")", "(at ", "at ", "line ", "1", "12", ", ", "column ", "x", "end of document"),
    *("(at line 3, column 7)", "(at end of document)", ")\n"),
]
# name: (before, after, the alphabet its strings are drawn from)
REWRITES: dict[str, tuple[Callable[[str], object], Callable[[str], object], list[str]]] = {
    "compat._VERSION_AT_START": (
        lambda t: _found(_OLD_VERSION_AT_START.match(t)),
        lambda t: _found(compat._VERSION_AT_START.match(t)),
        [*_DIGITS, *_BLANKS, ">=", ">", "=", "≥", "v", "V", ".", "x", "+", "(", "R"],
    ),
    "compat: sub of a parenthesis": (
        _old_parenthesis_removed,
        lambda t: compat._PARENTHESIS_ON_LINE.sub(compat._closed_removed, t),
        _PARENTHESES,
    ),
    "compat: findall in parentheses": (_old_parenthesized, compat._parenthesized, _PARENTHESES),
    "compat: findall of decimals": (
        _old_decimals,
        _new_decimals,
        [*_DIGITS, ".", ",", " ", "\n", "a"],
    ),
    "documents._TOML_PLACE": (
        lambda t: _found(_OLD_TOML_PLACE.search(t)),
        lambda t: _found(documents._TOML_PLACE.search(t)),
        _TOML_TOKENS,
    ),
    "roofline: links × Gbit/s": (
        lambda t: _found(_OLD_LINKS_TIMES_GBIT.search(t)),
        lambda t: _found(roofline._LINKS_TIMES_GBIT.search(t)),
        [*_DIGITS, *_BLANKS, "8x", "400 Gb", " x ", "x", "X", "Gb", "G", "b", "/s", "Gbps"],
    ),
    "roofline: Gbit/s": (
        lambda t: _found(_OLD_GBIT.search(t)),
        lambda t: _found(roofline._GBIT.search(t)),
        [*_DIGITS, *_BLANKS, "x", "Gb", "G", "b", "/s", "Gbps"],
    ),
}


def _catalog_cells() -> set[str]:
    data = resources.files("gpuwarden.catalog.data")
    cells: set[str] = set()
    for entry in data.iterdir():
        if entry.name.endswith(".csv"):
            cells.update(
                c for row in csv.reader(entry.read_text("utf-8").splitlines()) for c in row
            )
    return cells


def _toml_messages() -> set[str]:
    """What tomllib says about each TOML of the repository cut short at fifty places and ended
    with a key, a table or a string left open."""
    root = Path(__file__).resolve().parents[2]
    messages = set()
    for path in sorted(root.glob("**/*.toml")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for cut in range(0, len(text), max(1, len(text) // 50)):
            for broken in (text[:cut] + "=", text[:cut] + "[", text[:cut] + ' = "\n'):
                try:
                    tomllib.loads(broken)
                except tomllib.TOMLDecodeError as exc:
                    messages.add(str(exc))
    return messages


@pytest.mark.parametrize("name", sorted(REWRITES))
def test_a_rewrite_matches_what_its_pattern_matched_on_generated_strings(name: str) -> None:
    before, after, alphabet = REWRITES[name]
    draw = random.Random(f"r9b {name}")
    texts = ["".join(draw.choices(alphabet, k=draw.randint(0, 24))) for _ in range(SAMPLES)]
    differ = [t for t in texts if before(t) != after(t)]
    assert differ == []
    matched = [t for t in texts if before(t) not in (None, [], t)]  # a substitution changes t
    assert len(matched) > SAMPLES // 100


@pytest.mark.parametrize("name", sorted(REWRITES))
def test_a_rewrite_matches_what_its_pattern_matched_on_every_real_input(name: str) -> None:
    before, after, _ = REWRITES[name]
    texts = _catalog_cells() | {i.network for i in instance_catalog()}
    if name == "documents._TOML_PLACE":
        texts |= _toml_messages()
    assert len(texts) > 1000
    assert [t for t in texts if before(t) != after(t)] == []


def test_the_catalog_networks_read_as_before() -> None:
    rates = {i.network: roofline.network_bytes_per_s(i) for i in instance_catalog()}
    assert rates["400 Gbps EFA"] == 400e9 / 8
    assert rates["8x 400 Gb/s NDR InfiniBand"] == 8 * 400e9 / 8
    assert rates["8x 200 Gbps GPUDirect-TCPX (1600 Gbps)"] == 8 * 200e9 / 8
    assert rates["Azure accelerated networking"] == roofline.DEFAULT_NETWORK_BYTES_PER_S


def _timed(call: Callable[[str], object], text: str) -> tuple[object, float]:
    # the process's own CPU: another process's load on the runner does not count
    start = time.process_time()
    answer = call(text)
    return answer, time.process_time() - start


def test_a_version_after_a_long_run_of_blanks_is_read_at_once() -> None:
    assert parse_version(" " * 5 + ">= \t580.65") == (580, 65)
    answer, took = _timed(parse_version, " " * LONG_RUN + "\x01")
    assert answer is None and took < FAST_S
    answer, took = _timed(parse_version, " " * LONG_RUN + "12.4")
    assert answer == (12, 4) and took < FAST_S


def _network_rate(template: InstanceSpec) -> Callable[[str], float]:
    def rate(network: str) -> float:
        return roofline.network_bytes_per_s(dataclasses.replace(template, network=network))

    return rate


def test_a_network_of_a_long_run_of_digits_is_read_at_once() -> None:
    template = next(i for i in instance_catalog() if i.network == "400 Gbps EFA")
    for network in ("0" * LONG_RUN + "\x01", "8x " + "0" * LONG_RUN, "1" + " " * LONG_RUN + "x"):
        answer, took = _timed(_network_rate(template), network)
        assert answer == roofline.DEFAULT_NETWORK_BYTES_PER_S and took < FAST_S


def test_a_toml_error_keeps_its_place_and_a_long_run_of_blanks_is_searched_at_once() -> None:
    with pytest.raises(DocumentError) as caught:
        load_toml_text("a = 1\nb = \n")
    assert (caught.value.line, caught.value.column) == (2, 5)
    answer, took = _timed(documents._TOML_PLACE.search, "Key" + " " * LONG_RUN + "\x01")
    assert answer is None and took < FAST_S
