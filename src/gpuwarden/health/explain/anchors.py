"""Literal prefilters for the regular expressions: a pattern runs only when one of its
literals is in the text.

Case-insensitive regular expressions cost ~20 ms per MB of text each; a substring test on the
lower-cased text costs well under 1 ms. Every top-level alternative of a pattern must begin
with a literal (its ``anchor``) for the pattern to get a prefilter; a pattern with an
alternative that begins with a class, a group or an escape always runs.
"""

from __future__ import annotations

from functools import cache

MIN_ANCHOR = 4  # shorter literals ("sm_", "oom") match too much text to save anything
_META = set(".^$*+?{}[]\\|()")
_QUANTIFIERS = set("?*{")


def _alternatives(pattern: str) -> list[str]:
    """The top-level branches of ``pattern`` (``a|b(c|d)`` → ``a``, ``b(c|d)``)."""
    branches: list[str] = []
    depth, start, i, in_class = 0, 0, 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            branches.append(pattern[start:i])
            start = i + 1
        i += 1
    branches.append(pattern[start:])
    return branches


def _leading_literal(branch: str) -> str:
    literal: list[str] = []
    for i, char in enumerate(branch):
        if char in _META:
            if char in _QUANTIFIERS and literal:
                literal.pop()  # "couldn'?t": the quantified character is optional
            break
        nxt = branch[i + 1] if i + 1 < len(branch) else ""
        if nxt in _QUANTIFIERS:
            break
        literal.append(char)
    return "".join(literal).lower()


@cache
def anchors(pattern: str) -> tuple[str, ...] | None:
    """Lower-case literals one of which any match contains; None when the pattern has none."""
    found = []
    for branch in _alternatives(pattern):
        literal = _leading_literal(branch)
        if len(literal.strip()) < MIN_ANCHOR:
            return None
        found.append(literal)
    return tuple(found)


def may_match(pattern: str, lowered: str, needs: tuple[str, ...] = ()) -> bool:
    """False only when ``pattern`` cannot match the text whose lower-case form is ``lowered``
    (``needs``: the literals to test when the pattern gives none of its own)."""
    literals = anchors(pattern) or needs or None
    return literals is None or any(literal in lowered for literal in literals)
