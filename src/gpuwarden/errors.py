"""The one exception tree of gpuwarden.

Every error a user can see carries a stable kebab-case ``reference`` (searchable, scriptable) and a
``hint`` (what to do next). ``gpuwarden.cli`` is the only place that turns them into exit codes.

* GpuwardenError                 exit 1
  x InputError                   exit 2  bad input named by the user: value, file, name
    + UnknownNameError                   a name not in the catalog, with close matches
      - AmbiguousNameError               a name that matches several catalog entries
    + InvalidConfigError                 settings that cannot run together (TP not dividing heads)
    + CorruptInputError                  a file that cannot be parsed
  x MissingExtraError            exit 3  an optional dependency is not installed
  x EnvironmentProblemError      exit 4  something on the machine stops us (offline, no driver, ...)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Self

_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# How much of a value an error repeats: a 5,000-digit option or a whole line of a file is no
# message; its start and its length are.
SHOWN_CHARS = 40


def shown(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` as an error repeats it: as given, or its first ``limit`` characters and how long
    it is."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def quoted(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` repr'd as an error quotes it, cut like ``shown``."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text):,} characters)"


class GpuwardenError(Exception):
    """Root of every error gpuwarden raises on purpose."""

    reference: str = "gpuwarden-error"
    exit_code: int = 1

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        reference: str | None = None,
        context: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.context = context
        if reference is not None:
            self.reference = reference
        if not _KEBAB.match(self.reference):
            raise ValueError(f"error reference {self.reference!r} is not kebab-case")

    def about(self, source: str) -> Self:
        """This error with its input named in front of the message ("smi.txt: ..."): helpers
        raise plainly, and the boundary that knows the file adds its name once."""
        self.message = f"{source}: {self.message}"
        self.args = (self.message,)
        return self

    def to_dict(self) -> dict[str, str | None]:
        return {
            "reference": self.reference,
            "message": self.message,
            "context": self.context,
            "hint": self.hint,
        }


class InputError(GpuwardenError):
    """The user gave us something we cannot use."""

    reference = "invalid-input"
    exit_code = 2


class UnknownNameError(InputError):
    """A name that is not in the catalog; suggests the closest ones."""

    reference = "unknown-name"

    def __init__(
        self,
        kind: str,
        name: str,
        suggestions: Sequence[str] = (),
        *,
        reference: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.kind = kind
        self.name = name
        self.suggestions = tuple(suggestions)
        if hint is None:
            hint = (
                f"did you mean {', '.join(repr(s) for s in self.suggestions)}?"
                if self.suggestions
                else f"run `gpuwarden catalog {kind}s` to list the known names"
            )
        super().__init__(
            f"unknown {kind} {quoted(name)}",
            hint=hint,
            reference=reference or f"unknown-{kind}",
        )


class AmbiguousNameError(UnknownNameError):
    """A short name that matches several entries (``A100``: 40GB or 80GB?); lists them."""

    def __init__(
        self,
        kind: str,
        name: str,
        matches: Sequence[str],
        *,
        hint: str,
        descriptions: Sequence[str] = (),
    ) -> None:
        super().__init__(kind, name, matches, reference=f"ambiguous-{kind}", hint=hint)
        listing = ", ".join(descriptions or matches)
        self.message = f"{kind} {quoted(name)} is ambiguous: it matches {listing}"
        self.args = (self.message,)


class CommandNotRunnableError(InputError):
    """The job a wrapper (``record -- CMD``) was to run could not start: the exit code a shell,
    env(1), time(1) and timeout(1) give — 127 when the command is not found, 126 when it is
    found but cannot run — so a script checking the job's code reads the same."""

    reference = "command-not-runnable"

    def __init__(self, message: str, *, found: bool, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = 126 if found else 127


class InvalidConfigError(InputError):
    """A combination of settings that cannot run (names the value and the constraint)."""

    reference = "invalid-config"


class CorruptInputError(InputError):
    """A file or stream that cannot be parsed; names the input and where it broke."""

    reference = "corrupt-input"


class ReaderError(CorruptInputError):
    """What is wrong with an input and at which line, raised plainly by its reader ("line 4:
    ..."): the entry point that knows the input names it once (``naming``: "smi.txt, line 4:
    ..."). A reader's subclass gives its reference and the hint its inputs share."""

    hint_text: str | None = None

    def __init__(
        self,
        line: int | None,
        problem: str,
        *,
        reference: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(
            problem if line is None else f"line {line}: {problem}",
            reference=reference,
            hint=self.hint_text if hint is None else hint,
        )
        self.line = line

    def about(self, source: str) -> Self:
        if self.line is None:
            return super().about(source)
        # the line is counted in that input: "smi.txt, line 4", as an editor or a compiler says
        self.message = f"{source}, {self.message}"
        self.args = (self.message,)
        return self


@contextmanager
def naming(source: str) -> Iterator[None]:
    """The one place an entry point that knows its input (a file, a URL, a capture) adds its
    name to an error raised inside: the readers raise plainly."""
    try:
        yield
    except GpuwardenError as exc:
        raise exc.about(source) from None


class MissingExtraError(GpuwardenError):
    """An optional dependency is missing; the hint names the extra to install."""

    reference = "missing-extra"
    exit_code = 3

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs the optional package {module!r}, which is not installed",
            hint=f"pip install 'gpuwarden[{extra}]'",
        )
        self.extra = extra


class EnvironmentProblemError(GpuwardenError):
    """Something outside gpuwarden stops the command (no network, no driver, ...)."""

    reference = "environment-problem"
    exit_code = 4
