"""The document loaders (gpuwarden.documents) and the shared terminal-escape pattern (files).

Every failure of a parser, its own error type or Python's (the 4,300-digit int() limit, a
RecursionError), comes out as one DocumentError in our words, with the place when the parser
gives it; real documents load as the standard parsers load them.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.documents import DocumentError, load_json_text, load_toml_text, load_yaml_text
from gpuwarden.files import TERMINAL_ESCAPE

HUGE = "1" + "0" * 5000  # past CPython's default int_max_str_digits (4300)
DEEP = 20_000  # far past the default recursion limit (1000)


def _load(kind: str, text: str) -> object:
    if kind == "JSON":
        return load_json_text(text)
    if kind == "TOML":
        return load_toml_text(text)
    return load_yaml_text(text, yaml)


def _refusal(load: Callable[[], object]) -> DocumentError | None:
    try:
        load()
    except DocumentError as error:
        return error
    return None


# --- real documents load as the standard parsers load them -------------------------------------


def test_every_real_model_config_loads_as_json_loads_it(fixtures: Path) -> None:
    configs = sorted((fixtures / "models").glob("*.json"))
    assert len(configs) >= 10
    for path in configs:
        raw = path.read_bytes()
        assert load_json_text(raw) == json.loads(raw), path.name
        assert load_json_text(raw.decode()) == json.loads(raw), path.name


def test_a_byte_order_mark_is_passed_over() -> None:
    assert load_json_text(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}


# --- the parser's own errors, with the place it gives ------------------------------------------


@pytest.mark.parametrize(
    ("kind", "text", "line", "column"),
    [
        ("JSON", '{\n  "a": 1,\n  "b": \n}', 4, 1),
        ("JSON", '{"model_type": "qwen2", ', 1, 25),
        ("TOML", "a = 1\nb = \n", 2, 5),
        ("TOML", '[usd_per_gpu_hour\n"H100" = 3', 1, 18),
        ("YAML", "rules:\n  - match: {code: xid\n    actions: [cordon]", 3, 12),
        ("YAML", "tls_server_config: [\n", 2, 1),
    ],
)
def test_a_syntax_error_names_its_line_and_column(
    kind: str, text: str, line: int, column: int
) -> None:
    with pytest.raises(DocumentError) as caught:
        _load(kind, text)
    error = caught.value
    assert (error.kind, error.line, error.column) == (kind, line, column)
    assert str(error).startswith(f"not valid {kind} (line {line}, column {column}: ")
    assert error.place == f"line {line}, column {column}"


def test_toml_at_the_end_of_the_document_has_no_line() -> None:
    with pytest.raises(DocumentError) as caught:
        load_toml_text("a = [")
    assert caught.value.line is None and caught.value.place == ""
    assert str(caught.value) == "not valid TOML: Invalid value (at end of document)"


@pytest.mark.parametrize(
    ("text", "says", "line"),
    [
        ("a: !!python/object/apply:os.system [ls]", "could not determine a constructor", 1),
        ("? [a]\n: b", "found unhashable key", 1),
        ("a: b\x00", "unacceptable character #x0000", None),  # a ReaderError: no mark
    ],
)
def test_yaml_refuses_what_safe_load_refuses(text: str, says: str, line: int | None) -> None:
    with pytest.raises(DocumentError) as caught:
        load_yaml_text(text, yaml)
    assert says in caught.value.problem and caught.value.line == line
    assert "\n" not in str(caught.value)


# --- what the standard parsers raise beside their own error types ------------------------------


@pytest.mark.parametrize(
    ("kind", "text"),
    [("JSON", f'{{"n": {HUGE}}}'), ("TOML", f"n = {HUGE}"), ("YAML", f"n: {HUGE}")],
)
def test_a_number_past_the_int_limit_is_a_number_too_long(kind: str, text: str) -> None:
    with pytest.raises(DocumentError) as caught:
        _load(kind, text)
    assert str(caught.value) == f"not valid {kind}: a number too long (more than 4,300 digits)"
    assert "sys.set_int_max_str_digits" not in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("JSON", "[" * DEEP + "]" * DEEP),
        ("TOML", "a = " + "[" * DEEP + "]" * DEEP),
        ("YAML", "[" * DEEP + "]" * DEEP),
    ],
)
def test_deep_nesting_is_nested_too_deeply(kind: str, text: str) -> None:
    with pytest.raises(DocumentError) as caught:
        _load(kind, text)
    assert str(caught.value) == f"not valid {kind}: nested too deeply"


def test_a_yaml_date_python_cannot_hold_is_out_of_range_not_too_long() -> None:
    # the YAML timestamp pattern takes month 13; datetime() refuses it with a ValueError
    with pytest.raises(DocumentError) as caught:
        load_yaml_text("max_findings_age: 2024-13-01", yaml)
    assert caught.value.problem == "a value out of range (month must be in 1..12)"


@pytest.mark.parametrize(
    "raw", [b'{"a": "\xff"}', '{"a": 1}'.encode("utf-16"), b"\xff\xfe\x00garbage"]
)
def test_json_bytes_that_are_not_utf8_are_refused_as_such(raw: bytes) -> None:
    with pytest.raises(DocumentError, match=r"^not valid JSON: not UTF-8 text \("):
        load_json_text(raw)


# --- fuzz: any text either loads or raises DocumentError ----------------------------------------

_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)
# the characters that make these formats' structure, so the fuzz reaches past the first token
_STRUCTURE = st.text(alphabet="[]{}\":,=\n -#&*!?|>0123456789.eE+atrufnl_x'\\", max_size=300)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["JSON", "TOML", "YAML"]), st.one_of(_TEXT, _STRUCTURE))
def test_any_text_loads_or_is_a_document_error(kind: str, text: str) -> None:
    error = _refusal(lambda: _load(kind, text))  # any other exception fails the test
    assert error is None or str(error).startswith(f"not valid {kind}")
    assert error is None or error.line is None or error.line >= 1


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_load_as_json_or_are_a_document_error(raw: bytes) -> None:
    error = _refusal(lambda: load_json_text(raw))
    assert error is None or str(error).startswith("not valid JSON")


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _VALUES, max_size=5))
def test_a_document_loads_as_the_standard_parsers_load_it(value: dict[str, object]) -> None:
    text = json.dumps(value)
    assert load_json_text(text) == json.loads(text)
    assert load_yaml_text(text, yaml) == yaml.safe_load(text)  # JSON is YAML 1.2 flow style


def test_toml_loads_as_tomllib_loads_it() -> None:
    text = '# prices\n[usd_per_gpu_hour]\n"H100 80GB HBM3" = 2.49\n"A100" = 1_000\n'
    assert load_toml_text(text) == tomllib.loads(text)


# --- the terminal escapes every reader strips --------------------------------------------------


def test_a_real_topology_copy_loses_its_underline_and_nothing_else(fixtures: Path) -> None:
    coloured = [
        path
        for path in sorted((fixtures / "topo").glob("*.topo-m.txt"))
        if "\x1b" in path.read_text()
    ]
    assert len(coloured) >= 5
    for path in coloured:
        text = path.read_text()
        plain = TERMINAL_ESCAPE.sub("", text)
        assert "\x1b" not in plain, path.name
        # only the escapes went: every other character is kept, in order
        assert plain == re.sub(r"\x1b\[[0-9;]*m", "", text), path.name
        assert "\tGPU0\t" in plain.splitlines()[0] or plain.startswith("\tGPU0"), path.name


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("\x1b[1;32mNVRM: Xid\x1b[0m (PCI:0000:3b:00)", "NVRM: Xid (PCI:0000:3b:00)"),
        ("\x1b[?25lGPU0\x1b[?25h", "GPU0"),  # private mode (cursor hidden and shown)
        ("\x1b[38;2;255;0;0mred\x1b[m", "red"),  # 24-bit colour, bare reset
        ("\x1b]0;user@node: ~\x07RuntimeError", "RuntimeError"),  # window title, BEL
        ("\x1b]8;;https://x.io\x1b\\link\x1b]8;;\x1b\\", "link"),  # hyperlink, ST
        ("\x1b]never ended", "\x1b]never ended"),  # no terminator: not a sequence
        ("a [1;2m b", "a [1;2m b"),  # no ESC
    ],
)
def test_terminal_escapes_are_the_ecma48_csi_and_osc(text: str, plain: str) -> None:
    assert TERMINAL_ESCAPE.sub("", text) == plain


def test_unterminated_escapes_are_left_as_they_are() -> None:
    hostile = ("\x1b]" + "x" * 10) * 50_000 + ("\x1b[" + "1" * 10) * 50_000
    assert TERMINAL_ESCAPE.sub("", hostile) == hostile


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("\x1b]cut\x1b]0;user@node: ~\x07RuntimeError", "\x1b]cutRuntimeError"),
        ("\x1b[1\x1b[31mred\x1b[0m", "\x1b[1red"),
    ],
)
def test_an_unterminated_escape_ends_at_the_next_escape(text: str, plain: str) -> None:
    """What keeps a text of unterminated escapes one scan, checked without a clock (a wall-clock
    bound fails under load): a sequence's body holds no ESC (ECMA-48: an OSC string's
    characters are 08-0D and 20-7E; a CSI's parameters and intermediates are 20-3F), so a search
    from an escape that is never terminated stops at the next ESC. A body that ran on past an
    ESC (".*?" up to a terminator) rescanned the rest of the text from each escape
    (quadratic), and would take the unterminated escape and the next one for one sequence."""
    assert TERMINAL_ESCAPE.sub("", text) == plain
