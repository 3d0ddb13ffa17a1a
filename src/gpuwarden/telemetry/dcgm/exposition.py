"""A small, tolerant reader of the Prometheus text exposition format (what dcgm-exporter serves).

Written here rather than using ``prometheus_client.parser``: errors must name the line, the core
must read a scrape without the [exporter] extra, and real scrapes lack HELP/TYPE lines or repeat
a family (tests check this reader against prometheus_client on every fixture).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpuwarden.errors import ReaderError, naming, quoted, shown
from gpuwarden.telemetry.dcgm.fields import pre_dcgm46_name

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
    # the name the page printed where it is read by its family's (an OpenMetrics counter's
    # "X_total" as "X"): a page giving one field under both names says it twice
    printed: str | None = field(default=None, compare=False)

    @property
    def spelling(self) -> str:
        """The sample's name as the page printed it."""
        return self.printed or self.name


class ScrapeError(ReaderError):
    """What is wrong with a scrape and at which line, raised plainly ("line 4: ...")."""

    reference = "dcgm-scrape-unreadable"
    hint_text = HINT


def _value(text: str) -> float:
    lowered = text.lower()
    if lowered in ("nan",):
        return math.nan
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    return float(text)


def _is_number(text: str) -> bool:
    try:
        _value(text)
    except ValueError:
        return False
    return True


def _timestamp(text: str) -> None:
    """The optional timestamp after a value: integer milliseconds in the Prometheus text format,
    seconds with a fraction in OpenMetrics (``1520430000.123``, the "timestamp = realnumber" of
    its ABNF). Only checked, not kept: a reading is stamped when it is read."""
    if not math.isfinite(float(text)):
        raise ValueError(text)


def _after_blanks(text: str, i: int) -> int:
    """The first index at or after ``i`` that is no blank (space or tab)."""
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _labels(text: str, start: int, line: int) -> tuple[dict[str, str], int]:
    """Parse ``{a="1",b="2"}`` from ``text[start] == "{"``; returns the labels and the end.
    Blanks may stand around a label's ``=`` and before a ``,`` or ``}``, as Prometheus's own text
    parser reads them (``name2{ labelname = "val1" , }`` is in expfmt's parser tests)."""
    labels: dict[str, str] = {}
    i = start + 1
    while True:
        i = _after_blanks(text, i)
        if i < len(text) and text[i] == "}":
            return labels, i + 1
        match = _LABEL_NAME.match(text, i)
        if match is None:
            raise ScrapeError(line, f"bad label name at column {i + 1}")
        name = match.group()
        equals = _after_blanks(text, match.end())
        quote = _after_blanks(text, equals + 1)
        if text[equals : equals + 1] != "=" or text[quote : quote + 1] != '"':
            raise ScrapeError(line, f'label {shown(name)} without ="value"')
        i = quote + 1
        chars: list[str] = []
        while True:
            if i >= len(text):
                raise ScrapeError(line, f"label {shown(name)}: value not closed")
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
        i = _after_blanks(text, i)
        if i < len(text) and text[i] == ",":
            i += 1
        elif i < len(text) and text[i] == "}":
            continue
        else:
            raise ScrapeError(line, f"expected , or }} after label {shown(name)}")


def _label_set_at(line: str, name_end: int) -> int | None:
    """Where the label set after a metric name opens, or None when the name has none. Blanks
    may stand between the name and its "{": Prometheus's text parser skips them
    (``name {labelname="val2"} 0.23`` is in expfmt's parser tests), and a series copied from
    Prometheus's own listing or a document is often written that way."""
    brace = _after_blanks(line, name_end)
    return brace if line.startswith("{", brace) else None


# dcgm-exporter's value for a field it cannot format as a number (blob fields such as
# DCGM_FI_DEV_VGPU_PER_PROCESS_UTILIZATION): "ERROR - FAILED TO CONVERT TO STRING".
_CONVERSION_FAILURE = "ERROR"


# The string-typed fields (DCGM_FT_STRING in DCGM's dcgm_fields.h) that dcgm-exporter serves
# with their text as the value ("Tesla T4") when a counters file lists them (under these names or
# their DCGM 4.6 ones). Only these: any other family's non-number is a damaged line.
DCGM_STRING_FIELDS = frozenset(
    {
        "DCGM_FI_DRIVER_VERSION",
        "DCGM_FI_NVML_VERSION",
        "DCGM_FI_PROCESS_NAME",
        "DCGM_FI_DEV_NAME",
        "DCGM_FI_DEV_BRAND",
        "DCGM_FI_DEV_SERIAL",
        "DCGM_FI_DEV_UUID",
        "DCGM_FI_DEV_PCI_BUSID",
        "DCGM_FI_DEV_VBIOS_VERSION",
        "DCGM_FI_DEV_INFOROM_IMAGE_VER",
        "DCGM_FI_DEV_OEM_INFOROM_VER",
        "DCGM_FI_DEV_ECC_INFOROM_VER",
        "DCGM_FI_DEV_POWER_INFOROM_VER",
    }
)


@dataclass(slots=True)
class Tally:
    """What a reading of the exposition saw besides its samples (filled as it goes)."""

    types: dict[str, str] = field(default_factory=dict)  # the ``# TYPE`` of each family
    metadata: int = 0  # HELP/TYPE/UNIT/EOF lines: exposition too, though no sample
    unconverted: dict[str, int] = field(default_factory=dict)  # family → conversion errors
    text_values: dict[str, int] = field(default_factory=dict)  # family → samples of text
    foreign_count: int = 0  # lines that are no exposition at all
    first_foreign: tuple[int, str] | None = None  # (line, text) of the first
    samples: int = 0
    cut: tuple[int, str] | None = None  # (line, text) of a last sample line the paste cut short

    def notes(self) -> list[str]:
        """What was skipped, in words, for the reading's events."""
        said = [
            f"dcgm-exporter could not convert {count} sample(s) of {shown(family)} to a number "
            "(it wrote ERROR - FAILED TO CONVERT TO STRING); skipped"
            for family, count in self.unconverted.items()
        ]
        said.extend(
            f"dcgm-exporter wrote {count} sample(s) of {shown(family)} as text (a DCGM string "
            "field such as the device name); skipped"
            for family, count in self.text_values.items()
        )
        if self.cut is not None:
            line, text = self.cut
            said.append(
                f"the page ends in the middle of a sample (line {line}: {text[:50]!r}...): "
                "cut short where it was copied; skipped"
            )
        if self.first_foreign is not None:
            line, text = self.first_foreign
            said.append(
                f"skipped {self.foreign_count} line(s) that are not Prometheus exposition "
                f"(line {line}: {text[:50]!r})"
            )
        return said


@dataclass(frozen=True, slots=True)
class Exposition:
    samples: list[Sample]
    tally: Tally

    @property
    def types(self) -> dict[str, str]:
        return self.tally.types


def _is_sample_shaped(line: str, name: str, rest_at: int, declared: set[str]) -> bool:
    """Does ``line`` try to be a sample (then a flaw in it is corruption, e.g. a truncated last
    line), or is it text a terminal mixed in, such as kubectl port-forward's "Handling
    connection for 9400"?"""
    if rest_at == len(line) or _label_set_at(line, rest_at) is not None:
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


# The metadata lines of the Prometheus text format (HELP, TYPE) and of OpenMetrics (also UNIT;
# the page ends with "# EOF").
_METADATA = ("TYPE", "HELP", "UNIT")


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """(number, line) without splitting the whole text at once: a long page costs no second
    copy of itself."""
    start, number = 0, 1
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        yield number, text[start:end]
        start, number = end + 1, number + 1


# Blockquote markers at a line's start, each with the blanks after it (one match: a line of a
# million ">" costs one pass, not one copy of the line per marker).
_BLOCKQUOTE_MARKERS = re.compile(r"(?:>\s*)*")


def _unquoted(line: str) -> str:
    """The line without Markdown blockquote markers: a scrape pasted into a GitHub issue or
    forum post as a quote keeps ``> `` before each line it quoted. No exposition line starts
    with ``>`` (a metric name cannot, and comments start with ``#``), so the marker is never
    part of the page."""
    markers = _BLOCKQUOTE_MARKERS.match(line)
    return line[markers.end() :] if markers else line


# A Markdown code fence (``` or ~~~, with an optional info string such as ``text`` or
# ``bash``): the markup of the issue or page a scrape was pasted into, like a blockquote marker.
_FENCE = re.compile(r"(```+|~~~+)[\w.+-]*")


def _is_fence(line: str) -> bool:
    """Is ``line`` a Markdown code fence? No exposition line starts with a backquote or a tilde
    (a metric name cannot, comments start with ``#``), so a fence is never part of the page and
    neither counts as a sample nor votes as prose against the samples it encloses."""
    return _FENCE.fullmatch(line) is not None


# How many terminal-wrapped pieces one sample line may be rejoined from (a label value of a few
# hundred characters wraps a few times at 80 columns); bounds the memory a bad file can cost.
_MAX_WRAPPED_PIECES = 8
# How many lines one series written a label a line may be rejoined from: a document or a
# Prometheus UI lays a series out that way, a label per line (two dozen labels with pod, DRA
# and relabelling ones), blank lines between them in some renderings.
_MAX_LABEL_LINES = 64
# A line that goes on with an open label set: a label pair (``gpu="0",``), its closing brace
# (``} 0``), or a blank line between them.
_LABEL_SET_GOES_ON = re.compile(r"(?:[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*\"|\}|$)")


def _stops_before_its_value(line: str) -> bool:
    """Does a sample line end inside its name or label set, or right after the label set? That
    is where a paste that cut the page mid-line leaves it; a value that is there but is no
    number is damage of another kind."""
    name = _NAME.match(line)
    if name is None:
        return False
    if name.end() == len(line):
        return True
    brace = _label_set_at(line, name.end())
    if brace is None:
        return False
    end, _ = _label_set_end(line, brace)
    return end < 0 or not line[end + 1 :].strip()


# Where a scan of a label set stops: outside a quoted value at a quote or the closing brace,
# inside one at a quote or an escape. Searched for rather than stepped to, so a long value or a
# long run of other characters is skipped at the regex engine's speed.
_STOP_OUTSIDE_VALUE = re.compile(r'["}]')
_STOP_INSIDE_VALUE = re.compile(r'["\\]')


@dataclass(frozen=True, slots=True)
class _LabelSetScan:
    """How far the label set of a line has been read: where it closes ("}" outside a quoted
    value; -1 when the line ends first), whether the line ended inside a quoted value, and
    where reading goes on when more text is joined to the line (past its end when it ended in
    an escape's backslash: the joined text's first character is the escaped one)."""

    end: int
    inside: bool
    resume_at: int

    def joined(self, line: str) -> _LabelSetScan:
        """The scan of ``line``, this scan's line with more text joined to it: only the new
        text is read, so a series rejoined from many pieces costs one pass over them."""
        return _scan_label_set(line, self.resume_at, self.inside)

    @property
    def inside_value(self) -> bool:
        """Does the line end inside a quoted label value? dcgm-exporter escapes a newline in a
        value as ``\\n``, so a sample whose value runs to the end of its line was wrapped by a
        terminal or a document (a long pod name in a pasted scrape), not written that way."""
        return self.end < 0 and self.inside

    def open_after(self, line: str) -> bool:
        """Does ``line`` (the scanned one) end outside a quoted value before its label set
        closes, after its "{", a "," or a whole label pair, as a series written a label a line
        does?"""
        return self.end < 0 and not self.inside and line.endswith(("{", ",", '"'))


def _scan_label_set(line: str, at: int, inside: bool) -> _LabelSetScan:
    """Read a label set from ``at`` on, ``inside`` a quoted value or not."""
    while True:
        stop = (_STOP_INSIDE_VALUE if inside else _STOP_OUTSIDE_VALUE).search(line, at)
        if stop is None:
            return _LabelSetScan(-1, inside, max(at, len(line)))
        char, at = stop.group(), stop.end()
        if char == "\\":
            at += 1  # the escaped character, whatever it is
        elif char == '"':
            inside = not inside
        else:
            return _LabelSetScan(stop.start(), False, stop.start())


def _label_set_end(line: str, start: int) -> tuple[int, bool]:
    """Where the label set that opens at ``start`` closes (its "}" outside a quoted value; -1
    when the line ends first), and whether the line ended inside a quoted value."""
    scan = _scan_label_set(line, start, False)
    return scan.end, scan.inside


def _label_set_scan(line: str) -> _LabelSetScan | None:
    """The scan of a sample line's label set when the line may go on on the next line (it ends
    inside a quoted value, or after a "{", a "," or a '"'); None when it has no label set or
    cannot (the usual whole sample, whose value or "}" ends it: not scanned)."""
    name = _NAME.match(line)
    brace = None if name is None else _label_set_at(line, name.end())
    if brace is None:
        return None
    maybe_inside = line.count('"') % 2 == 1 or "\\" in line
    if not maybe_inside and not line.endswith(("{", ",", '"')):
        return None
    return _scan_label_set(line, brace, False)


@dataclass(frozen=True, slots=True)
class _HeldPiece:
    """The start of a sample line held while the lines that go on with it are joined to it."""

    number: int
    line: str
    scan: _LabelSetScan
    pieces: int

    @property
    def open_label_set(self) -> bool:
        return self.scan.open_after(self.line)


def _unwrapped(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """(number, line) with a sample line that a terminal wrapped inside a label value joined
    back to its continuation lines (joined as they are: a wrap cuts mid-word), and a series
    written a label a line joined back into one line; numbered by its first piece. A line that
    cannot go on with an open label set (a fence, a comment, the next series) ends it: the
    held piece is then read as it stands (a paste cut there)."""
    held: _HeldPiece | None = None
    for read_number, raw in lines:
        number, line = read_number, _unquoted(raw.strip())
        if held is not None and held.open_label_set and not _LABEL_SET_GOES_ON.match(line):
            yield held.number, held.line
            held = None
        if held is None:
            pieces, scan = 0, _label_set_scan(line)
        else:
            number, line = held.number, held.line + line
            pieces, scan = held.pieces, held.scan.joined(line)
        if scan is not None and (
            (scan.inside_value and pieces < _MAX_WRAPPED_PIECES)
            or (scan.open_after(line) and pieces < _MAX_LABEL_LINES)
        ):
            held = _HeldPiece(number, line, scan, pieces + 1)
            continue
        held = None
        yield number, line
    if held is not None:
        yield held.number, held.line


class _LineReader:
    """Reads a page's lines one at a time into samples; what else it sees goes to ``tally``."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.declared: set[str] = set()
        # A damaged sample line is corruption, unless nothing but blank lines and fences follow
        # it: then it is where a paste (an issue, a document, a terminal's scrollback) cut the
        # page mid-line, and the lines before it are whole.
        self.damaged: ScrapeError | None = None
        # (number, line) of comment lines that hold exposition once their "# " is taken off;
        # None once they are being read
        self.commented: list[tuple[int, str]] | None = []

    def read(self, number: int, line: str) -> Iterator[Sample]:
        tally = self.tally
        if not line or _is_fence(line):
            return
        if self.damaged is not None:
            raise self.damaged
        if line.startswith("#"):
            self._comment(number, line)
            return
        match = _NAME.match(line)
        if match is None or not _is_sample_shaped(line, match.group(), match.end(), self.declared):
            tally.foreign_count += 1
            tally.first_foreign = tally.first_foreign or (number, line)
            return
        try:
            sample = _sample(line, match, number, tally)
        except ScrapeError as exc:
            if not _stops_before_its_value(line):
                raise
            self.damaged, tally.cut = exc, (number, line)
            return
        if sample is not None:
            tally.samples += 1
            named = _named_by_family(sample, tally.types)
            if named is not None:
                yield named

    def _comment(self, number: int, line: str) -> None:
        tally = self.tally
        parts = line.split(None, 3)
        if parts[1:] == ["EOF"] or _is_metadata(parts):
            tally.metadata += 1
        if _is_metadata(parts):
            self.declared.add(parts[2])
        if len(parts) >= 4 and parts[1] == "TYPE":
            tally.types[parts[2]] = parts[3].strip()
        # gathered only while no live sample has been read: after one, they stay comments
        inner = line[1:].lstrip()
        if self.commented is not None and not tally.samples and _is_exposition(inner):
            self.commented.append((number, inner))

    def take_commented(self) -> list[tuple[int, str]]:
        """The commented exposition lines, uncommented; no more are gathered after."""
        commented, self.commented = self.commented or [], None
        return commented

    def finish(self) -> None:
        tally = self.tally
        if self.damaged is not None and tally.samples == 0:  # nothing whole before: damage
            raise self.damaged
        # A page grep'd down to one family on a one-GPU node is a prompt line, HELP, TYPE and
        # one sample: its metadata lines count as exposition, or the prompt would outvote the
        # sample. A tie reads: each sample parsed whole (name, labels, number), which no
        # sentence does by chance, as a series quoted above the reporter's one sentence about it.
        if tally.first_foreign is not None and tally.foreign_count > tally.samples + tally.metadata:
            number, line = tally.first_foreign
            raise ScrapeError(number, f"not a metric line: {line[:60]!r}")


# OpenMetrics names a counter's samples by a suffix to its family's name: the count is
# "<family>_total", the time the counter was created "<family>_created" (OpenMetrics spec,
# "Counter"; Prometheus' OpenMetrics encoder in expfmt writes every counter family so, and
# dcgm-exporter declares its counters, energy, PCIe replays, ECC and remapped rows, as
# counter). Read by their family's name only where "# TYPE <family> counter" declared it.
COUNT_SUFFIX = "_total"
_CREATED_SUFFIX = "_created"


def _named_by_family(sample: Sample, types: dict[str, str]) -> Sample | None:
    """An OpenMetrics counter's count under its family's name (``X_total`` → ``X``); None for
    its creation time (``X_created``: a Unix time, no reading of the GPU). Any other sample,
    and any name declared as a family of its own, as it is."""
    name = sample.name
    if name in types:
        return sample
    for suffix in (COUNT_SUFFIX, _CREATED_SUFFIX):
        family = name.removesuffix(suffix)
        if family != name and types.get(family) == "counter":
            if suffix != COUNT_SUFFIX:
                return None
            return dataclasses.replace(sample, name=family, printed=name)
    return sample


def _is_metadata(parts: list[str]) -> bool:
    """Are a "#" line's first words (split at most 3 times) a HELP, TYPE or UNIT line's?"""
    return len(parts) >= 3 and parts[1] in _METADATA


def _is_exposition(line: str) -> bool:
    """Is ``line`` a HELP/TYPE line or a whole sample (name, labels, a number)?"""
    if line.startswith("#"):
        return _is_metadata(line.split(None, 3))
    match = _NAME.match(line)
    if match is None:
        return False
    try:
        _sample(line, match, 0, Tally())
    except ScrapeError:
        return False
    return True


def read_exposition(text: str, tally: Tally) -> Iterator[Sample]:
    """Samples in file order, one at a time; what else was seen goes to ``tally``. Lines that
    are not exposition are skipped while they stay a minority (checked when the text ends); a
    sample whose value the exporter could not convert is skipped and counted. Bad input raises
    ``ScrapeError`` naming the line, not the page."""
    reader = _LineReader(tally)
    for number, line in _unwrapped(_lines(text)):
        yield from reader.read(number, line)
    if tally.samples == 0:
        # A document that shows a command's output as shell comments under it ("# " before
        # each line printed, so the exporter's "# HELP" reads "# # HELP"). No exporter writes
        # a comment that holds a sample or a second "#": such lines are the page's markup.
        # Read only where the page has no live sample, never mixed with one.
        for number, line in reader.take_commented():
            yield from reader.read(number, line)
    reader.finish()


def _sample(line: str, match: re.Match[str], number: int, tally: Tally) -> Sample | None:
    name = match.group()
    rest_at = match.end()
    labels: dict[str, str] = {}
    brace = _label_set_at(line, rest_at)
    if brace is not None:
        labels, rest_at = _labels(line, brace, number)
    rest = line[rest_at:].split()
    if rest and rest[0] == _CONVERSION_FAILURE:
        tally.unconverted[name] = tally.unconverted.get(name, 0) + 1
        return None
    if not rest or (rest_at < len(line) and line[rest_at] not in " \t"):
        raise ScrapeError(number, f"{shown(name)}: expected a value after the labels")
    if pre_dcgm46_name(name) in DCGM_STRING_FIELDS and not _is_number(rest[0]):
        tally.text_values[name] = tally.text_values.get(name, 0) + 1
        return None
    if len(rest) > 2:
        raise ScrapeError(
            number, f"{shown(name)}: more than a value and a timestamp after the labels"
        )
    try:
        value = _value(rest[0])
        if len(rest) == 2:
            _timestamp(rest[1])
    except ValueError:
        raise ScrapeError(
            number, f"{shown(name)}: {quoted(' '.join(rest))} is not a number"
        ) from None
    return Sample(name, labels, value, number)


def parse_exposition(text: str, source: str) -> Exposition:
    """Every sample of a page named ``source``, in file order (``read_exposition`` reads one at a
    time); its errors name it."""
    tally = Tally()
    with naming(source):
        return Exposition(list(read_exposition(text, tally)), tally)
