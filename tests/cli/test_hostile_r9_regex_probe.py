"""Issue 13, ninth pass: catastrophic backtracking, in every module of the package.

The third sweep (test_hostile_inputs3) timed the patterns of a fixed list of eleven modules; the
readers added since (explain's sets, the doctor's hosts, smi's selection, topology, fleet, the
trace readers …) were never probed. This probe walks the whole package (``pkgutil``), so a new
module is covered without an edit, and reads every regular expression it can name:

* the compiled patterns a module keeps (at its top level, in a tuple, list or dict there, in a
  dataclass's fields, or as a class attribute), and the pattern strings of explain's signatures
  (its matcher compiles them case-insensitively and searches the paste);
* the patterns written inline in a call of ``re`` (``re.search(r"...", text)``), read from the
  module's source, with their flags.

Each one meets long runs of what it repeats (``PROBE_RUNS`` and every punctuation character its
source spells) after a word and before a character no pattern expects, and, when the package
only ever calls ``.match``/``.fullmatch`` with it, also at the start of the text. Every probe is
timed at 20,000 characters, where a linear search takes well under a millisecond; one that takes
more than SUSPECT_S is timed there again, and a timing is the faster of the two (a stall of the
runner — a loaded 2-core CI machine, a neighbour's burst — slows one timing, a backtracking
pattern every one). A suspect still is timed at RUN characters (a linear one takes milliseconds
there, a quadratic one minutes), unless it took PROBE_BUDGET_S both times: that is slow enough to
fail. It fails when it takes more than PROBE_BUDGET_S at RUN, again the faster of two timings,
and grew more than linearly (steady load slows both lengths alike).
A pattern is probed once, in the module that names it first.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import importlib.util
import inspect
import operator
import pkgutil
import re
import string
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import gpuwarden

RUN = 100_000  # characters in the long run of the second timing
PROBE_LENGTH = 20_000
SUSPECT_S = 0.02
PROBE_BUDGET_S = 1.0  # at RUN characters: generous for a loaded 2-core runner
LINEAR_AT_RUN_MAX = 10  # RUN / PROBE_LENGTH is 5
# characters every probe tries, whatever the pattern spells: blanks, digits, table rules, the
# separators of CSV and of the diag table, hex
PROBE_RUNS = (" ", "\t", "0", "7 ", "1,", "9.", "|", "+-", "-", "=", ":", "a", "a ", "0x", ", ")

# Modules not walked, and why: ``python -m gpuwarden`` runs the command line when imported.
NOT_WALKED = {"gpuwarden.__main__": "importing it runs the command line"}
# The optional extras of pyproject.toml, by the package a module imports. A module importing one at
# its top is skipped, naming it, when the package is missing; the torch extra's always: ``plan
# --exact`` runs a model, it reads no text, and torch takes seconds to import in every worker.
OPTIONAL_EXTRAS = {
    **dict.fromkeys(("pynvml",), "nvml"),
    **dict.fromkeys(("prometheus_client", "bcrypt", "grpc"), "exporter"),
    **dict.fromkeys(("kubernetes",), "k8s"),
    **dict.fromkeys(("yaml", "grafana_foundation_sdk"), "deploy"),
    **dict.fromkeys(("msgspec", "orjson", "numpy", "isal"), "trace"),
    **dict.fromkeys(("torch", "transformers", "peft"), "torch"),
}
ALWAYS_SKIPPED_EXTRAS = {"torch"}

_FLAG_ARGUMENT = {  # where a call of re takes its flags when they are not given by keyword
    "compile": 1,
    "search": 2,
    "match": 2,
    "fullmatch": 2,
    "findall": 2,
    "finditer": 2,
    "split": 3,
    "sub": 4,
    "subn": 4,
}
_ANCHORED_CALLS = {"match", "fullmatch"}
_START = re.compile(r"(?<!\\)\^|\\A")  # an unescaped ^ (start, or line start) or \A


@dataclasses.dataclass(frozen=True)
class Probe:
    name: str
    pattern: re.Pattern[str]
    anchored: bool  # the package only ever calls .match/.fullmatch: one start, not every one
    inline: bool = False  # written in a call of re, not kept by the module


def _walked_names() -> list[str]:
    found = pkgutil.walk_packages(gpuwarden.__path__, "gpuwarden.")
    return sorted(info.name for info in found if info.name not in NOT_WALKED)


def _top_level_imports(name: str) -> set[str]:
    """The packages a module imports when it is imported (not inside a function)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return set()
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".", 1)[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".", 1)[0])
    return found


@functools.cache
def _skip_reason(name: str) -> str | None:
    for package in sorted(_top_level_imports(name) & set(OPTIONAL_EXTRAS)):
        extra = OPTIONAL_EXTRAS[package]
        if extra in ALWAYS_SKIPPED_EXTRAS:
            return f"{name} imports {package} (the {extra} extra): it reads no text"
        if importlib.util.find_spec(package) is None:
            return f"{name} needs {package}, of the optional extra {extra}, not installed"
    return None


def _anchored_only(source: str, name: str) -> bool:
    if re.search(rf"\b{re.escape(name)}\.(?:search|finditer|findall|sub|subn|split)\(", source):
        return False
    return re.search(rf"\b{re.escape(name)}\.(?:match|fullmatch)\(", source) is not None


def _patterns(value: object, name: str, depth: int = 0) -> Iterator[tuple[str, re.Pattern[str]]]:
    if isinstance(value, re.Pattern):
        if isinstance(value.pattern, str):
            yield name, value
        else:  # a bytes pattern backtracks as its text does: probed as one
            yield name, re.compile(value.pattern.decode("latin-1"), value.flags & ~re.ASCII)
    elif depth < 4 and isinstance(value, tuple | list | frozenset):
        for k, item in enumerate(value):
            yield from _patterns(item, f"{name}[{k}]", depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for key, item in value.items():
            yield from _patterns(item, f"{name}[{key!r}]", depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if isinstance(item, str) and field.name in ("pattern", "context", "unless"):
                # explain's matcher compiles these case-insensitively and searches the paste
                yield f"{name}.{field.name}", re.compile(item, re.IGNORECASE)
            elif depth < 4:
                yield from _patterns(item, f"{name}.{field.name}", depth + 1)


def _flags(node: ast.expr | None, namespace: dict[str, object]) -> int | None:
    """The value of a flags argument written with re's names, ``|`` and module constants."""
    if node is None:
        return 0
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        owner = re if node.value.id == "re" else namespace.get(node.value.id)
        value = getattr(owner, node.attr, None)
        return int(value) if isinstance(value, int) else None
    if isinstance(node, ast.Name):
        value = namespace.get(node.id)
        return int(value) if isinstance(value, int) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _flags(node.left, namespace), _flags(node.right, namespace)
        return None if left is None or right is None else operator.or_(left, right)
    return None


def _inline_patterns(source: str, namespace: dict[str, object]) -> Iterator[Probe]:
    """The patterns given to a call of ``re`` as a literal or a module's string constant."""
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in _FLAG_ARGUMENT
            and node.args
        ):
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant):
            text = first.value
        elif isinstance(first, ast.Name):
            text = namespace.get(first.id)
        else:
            continue
        if not isinstance(text, str):
            continue
        keyword = next((k.value for k in node.keywords if k.arg == "flags"), None)
        at = _FLAG_ARGUMENT[node.func.attr]
        flags = _flags(keyword or (node.args[at] if len(node.args) > at else None), namespace)
        if flags is not None:
            anchored = node.func.attr in _ANCHORED_CALLS
            name = f"{node.func.attr}({text!r})"  # its text, not its line: edits move lines
            yield Probe(name, re.compile(text, flags), anchored)


def _module_probes(module_name: str, module: object) -> Iterator[Probe]:
    try:
        source = inspect.getsource(module)  # type: ignore[arg-type]
    except (OSError, TypeError):
        source = ""
    namespace = vars(module)
    for top, value in namespace.items():
        if top.startswith("__") or inspect.ismodule(value):
            continue
        if inspect.isclass(value) and value.__module__ == module_name:
            for attribute, item in vars(value).items():
                for name, pattern in _patterns(item, f"{top}.{attribute}"):
                    yield Probe(f"{module_name}.{name}", pattern, anchored=False)
            continue
        for name, pattern in _patterns(value, top):
            anchored = name == top and _anchored_only(source, top)
            yield Probe(f"{module_name}.{name}", pattern, anchored)
    if source:
        for probe in _inline_patterns(source, namespace):
            yield dataclasses.replace(probe, name=f"{module_name}:{probe.name}", inline=True)


@functools.cache
def _probes_by_module() -> dict[str, tuple[Probe, ...]]:
    """Every pattern once, in the first module (in walk order) that names it. A module that
    searches a pattern another matches makes it searched; an inline ``re.compile`` of a pattern
    a module keeps is the same pattern (``re``'s cache), not a search of it."""
    first: dict[tuple[str, int], tuple[str, Probe]] = {}
    for module_name in _walked_names():
        if _skip_reason(module_name) is not None:
            continue  # skipped, with its reason, by its own test
        module = importlib.import_module(module_name)
        for probe in _module_probes(module_name, module):
            key = (probe.pattern.pattern, probe.pattern.flags)
            if key not in first:
                first[key] = (module_name, probe)
            elif not probe.anchored and not probe.inline:
                owner, kept = first[key]
                first[key] = (owner, dataclasses.replace(kept, anchored=False))
    grouped: dict[str, list[Probe]] = {}
    for module_name, probe in first.values():
        grouped.setdefault(module_name, []).append(probe)
    return {name: tuple(probes) for name, probes in grouped.items()}


def _runs_for(pattern: re.Pattern[str]) -> list[str]:
    spelled = {c for c in pattern.pattern if c in string.punctuation or c in "0 \t"}
    return sorted(set(PROBE_RUNS) | spelled)


def _probe_texts(probe: Probe, chars: str, length: int) -> list[str]:
    """The run after a word (a key, a value, a size's unit that never comes), ended by a character
    no pattern expects; a pattern matched at one place, or anchored at the start of the text or a
    line, also meets the run at the start."""
    run = chars * (length // len(chars))
    at_start = probe.anchored or _START.search(probe.pattern.pattern) is not None
    return [f"Key{run}\x01", f"{run}\x01"] if at_start else [f"Key{run}\x01"]


def _seconds(probe: Probe, text: str) -> float:
    start = time.perf_counter()
    (probe.pattern.match if probe.anchored else probe.pattern.search)(text)
    return time.perf_counter() - start


def _steady_seconds(probe: Probe, text: str, limit: float) -> float:
    """How long the search takes: one timing under ``limit``, else the faster of two (a stall
    of the runner slows one of them; a backtracking search is as slow both times)."""
    took = _seconds(probe, text)
    return took if took < limit else min(took, _seconds(probe, text))


def _slow_runs(probe: Probe, length: int = PROBE_LENGTH) -> list[str]:
    slow = []
    for chars in _runs_for(probe.pattern):
        for k, probed in enumerate(_probe_texts(probe, chars, length)):
            text, took = probed, _steady_seconds(probe, probed, SUSPECT_S)
            if took < SUSPECT_S:
                continue
            if took < PROBE_BUDGET_S:  # a suspect: five times the run
                text, short = _probe_texts(probe, chars, RUN)[k], took
                took = _steady_seconds(probe, text, PROBE_BUDGET_S)
                # a linear search takes ~5 times as long (steady load slows both lengths
                # alike), a quadratic one 25 times
                if took < PROBE_BUDGET_S or took < LINEAR_AT_RUN_MAX * short:
                    continue
            slow.append(f"{probe.name} on {text[:5]!r}… ({len(text):,}): {took:.2f} s")
    return slow


def test_the_walk_reaches_every_module_and_the_third_sweeps_parsers() -> None:
    walked = set(_walked_names())
    third_sweep = {
        "gpuwarden.health.dcgm_diag",
        "gpuwarden.health.xid_nvswitch",
        "gpuwarden.health.kernel_log",
        "gpuwarden.telemetry.smi.dmon",
        "gpuwarden.telemetry.smi.query_csv",
        "gpuwarden.telemetry.smi.paste",
        "gpuwarden.telemetry.smi.q_text",
        "gpuwarden.telemetry.smi.xml_format",
        "gpuwarden.health.explain.signatures",
        "gpuwarden.health.explain.oom_parse",
    }
    added_since = {
        "gpuwarden.health.pcie_aer",
        "gpuwarden.fleet.window",
        "gpuwarden.traces.classify",
        "gpuwarden.doctor.hosts",
        "gpuwarden.telemetry.smi.selection",
    }
    assert third_sweep | added_since <= walked
    probed = {
        (p.pattern.pattern, p.pattern.flags) for ps in _probes_by_module().values() for p in ps
    }
    for module_name in third_sweep | added_since:
        module = importlib.import_module(module_name)
        kept = {(p.pattern.pattern, p.pattern.flags) for p in _module_probes(module_name, module)}
        assert kept and kept <= probed, module_name
    probes = _probes_by_module()
    assert sum(len(found) for found in probes.values()) > 600
    # an inline pattern is read with its flags: table.py's "^\|\s*NVIDIA-SMI" is multi-line
    inline = [p for p in probes["gpuwarden.telemetry.smi.table"] if p.inline]
    assert any(p.pattern.flags & re.MULTILINE for p in inline)


@pytest.mark.parametrize("module_name", _walked_names())
def test_no_regex_backtracks_on_long_runs_of_what_it_repeats(module_name: str) -> None:
    reason = _skip_reason(module_name)
    if reason is not None:
        pytest.skip(reason)
    probes = _probes_by_module().get(module_name, ())
    slow = [found for probe in probes for found in _slow_runs(probe)]
    assert slow == []
