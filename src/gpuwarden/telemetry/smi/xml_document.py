"""The element tree of a ``nvidia-smi -q -x`` document, whole or cut short.

A paste cut inside an element (a forum's size limit, a terminal's scroll-back) is not well-formed
XML, yet the elements closed before the cut were printed whole: they are read, and what was open
where the text ends is not (a value cut mid-text, a list or a sum missing its end). A document that
is not well-formed before its end is still refused. Entities are refused by the caller before
expat sees the text; ElementTree never fetches an external DTD.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast
from xml.parsers.expat import errors as expat_errors

from gpuwarden.telemetry.smi import cells

# The errors expat gives when the text ends before the document does (nothing malformed before).
_ENDED_TOO_SOON = frozenset(
    expat_errors.codes[message]
    for message in (
        expat_errors.XML_ERROR_NO_ELEMENTS,  # elements still open
        expat_errors.XML_ERROR_UNCLOSED_TOKEN,  # inside a tag or a comment
        expat_errors.XML_ERROR_PARTIAL_CHAR,  # inside a multi-byte character
        expat_errors.XML_ERROR_UNCLOSED_CDATA_SECTION,
    )
)

# The blocks nothing here reads and that posters cut by hand ("....More of these
# <supported_graphics_clock> tags"), leaving an unclosed tag: hundreds of clock pairs per GPU.
_UNREAD_BLOCK = re.compile(r"<supported_clocks>.*?</supported_clocks>", re.DOTALL)

_GPU = "gpu"


@dataclass(frozen=True, slots=True)
class Cut:
    """Where a document cut short ends: its last line, the GPU it ends in or after (None: before
    any GPU's report), the last element of that GPU closed before the cut, and whether that GPU
    was left out (cut before its name: no GPU to name its readings by)."""

    line: int
    gpu: str | None
    last_closed: str | None
    gpu_left_out: bool

    def note(self) -> str:
        gpu = f"GPU {self.gpu}"
        if self.gpu is None:
            told = "before any GPU's report"
        elif self.gpu_left_out:
            told = f"inside {gpu}'s report, before its product name: that GPU is not reported"
        elif self.last_closed is None:
            told = f"after {gpu}'s report; what came after is not reported"
        else:
            told = (
                f"{gpu}'s report ends after <{self.last_closed}>; what came after is not reported"
            )
        return f"the nvidia-smi -q -x document is cut short: {told}"


@dataclass(frozen=True, slots=True)
class Document:
    root: ET.Element
    cut: Cut | None  # None: the document is whole


def parse_document(text: str) -> Document:
    """The document's tree, its elements open where the text ends left out; a document that is
    not well-formed before its end raises ``cells.SmiOutputError`` naming the line."""
    try:
        return _read(text, text)
    except ET.ParseError as exc:
        rescued = _without_unread_blocks(text)
        if rescued is None:
            line, _column = exc.position
            raise cells.SmiOutputError(line, f"XML is not well-formed ({exc})") from None
        return rescued


def _without_unread_blocks(text: str) -> Document | None:
    """The document parsed without the blocks it does not read; None when it is still not
    well-formed (the error then names the original document's line)."""
    trimmed, cut = _UNREAD_BLOCK.subn("", text)
    if not cut:
        return None
    try:
        return _read(trimmed, text)
    except ET.ParseError:
        return None


# The first start tag of a document (a declaration, a comment or a DOCTYPE before it is none:
# "<?", "<!"): the root's name.
_FIRST_START_TAG = re.compile(r"<([^\s/>!?]+)")
# How much of a document's end is looked at for its root's closing tag (blanks after it too).
_END_LOOKED_AT = 512


def _ends_its_root(text: str) -> bool:
    """Whether the text ends with the closing tag of the element it opens first: a whole
    document does (nvidia-smi prints nothing after its root); a cut one cannot, but where an
    element inside the root has the root's name."""
    first = _FIRST_START_TAG.search(text)
    return first is not None and text[-_END_LOOKED_AT:].rstrip().endswith(f"</{first[1]}>")


def _read(text: str, given: str) -> Document:
    """Raises ET.ParseError unless the text is a document, whole or cut short; ``given``: the
    text as given, whose last line a cut is said on (``text`` may have had blocks taken out).
    The text is parsed once: a whole document by the plain parse (no events to follow), any
    other with the events that tell which elements the cut left open."""
    if _ends_its_root(text):
        try:
            return Document(ET.fromstring(text), None)
        except ET.ParseError as ended:
            if ended.code not in _ENDED_TOO_SOON:
                raise
            # the element closed last only had the root's name: the text ends inside the root
    return _read_following_events(text, given)


def _read_following_events(text: str, given: str) -> Document:
    """``_read`` of a text that may be cut short, following the elements opened and closed."""
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    parser.feed(text)
    opened: list[ET.Element] = []
    try:
        parser.close()
    except ET.ParseError as ended:
        _follow(parser, opened)  # an error before the end (a mismatched tag) is raised here
        if not opened or ended.code not in _ENDED_TOO_SOON:
            raise
        return Document(opened[0], _closed_before_the_cut(opened, len(given.splitlines()) or 1))
    (root,) = _follow(parser, opened)  # expat closed the document: it has one root, closed
    return Document(root, None)


def _follow(parser: ET.XMLPullParser[ET.Element], opened: list[ET.Element]) -> list[ET.Element]:
    """Tracks the elements open (``opened``, root first) through the parser's events; the ones
    that opened with nothing open (the root)."""
    roots = []
    # only start and end events are asked for: each carries its element
    events = cast(Iterator[tuple[str, ET.Element]], parser.read_events())
    for kind, element in events:
        if kind == "start":
            if not opened:
                roots.append(element)
            opened.append(element)
        else:
            opened.pop()
    return roots


def _closed_before_the_cut(opened: list[ET.Element], line: int) -> Cut:
    """Leaves out of the tree the elements open where the text ends (on ``line``), but the root
    and the GPU the cut is in when its name was printed; what the cut left."""
    root, *inside = opened
    gpu = inside[0] if inside and inside[0].tag == _GPU else None
    for parent, child in zip(opened, inside, strict=False):
        if child is not gpu:
            parent.remove(child)
    if gpu is not None and gpu.find("product_name") is None:
        root.remove(gpu)
        return Cut(line, _bus_id(gpu), None, gpu_left_out=True)
    if gpu is not None:
        return Cut(line, _bus_id(gpu), gpu[-1].tag, gpu_left_out=False)
    gpus = root.findall(_GPU)
    return Cut(line, _bus_id(gpus[-1]) if gpus else None, None, gpu_left_out=False)


def _bus_id(gpu: ET.Element) -> str:
    return gpu.get("id") or "(bus id not printed)"
