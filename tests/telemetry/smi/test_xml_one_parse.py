"""A `nvidia-smi -q -x` document is parsed once, whole or cut short (review r21: a cut one was
parsed twice, first by the plain parse that failed at its end, then again following its events).
The parses are counted as the expat parsers ElementTree builds for it."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from gpuwarden.telemetry.smi.xml_document import parse_document
from tests.telemetry.smi.heldout import DATA_ROOT

A10G = DATA_ROOT / "smi_xml_public" / "telegraf__a10g-aws__v11__515.105.01.xml"


def _parses(monkeypatch: pytest.MonkeyPatch, text: str) -> int:
    """How many XML parsers reading ``text`` took (``fromstring`` and ``XMLPullParser`` each
    build theirs from the module's ``XMLParser``)."""
    built = 0

    class CountedParser(ET.XMLParser):
        def __init__(self, *args: object, **kwargs: object) -> None:
            nonlocal built
            built += 1
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ET, "XMLParser", CountedParser)
    parse_document(text)
    return built


def test_a_whole_document_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _parses(monkeypatch, A10G.read_text()) == 1


@pytest.mark.parametrize(
    "cut_after",
    ["</product_name>", "<gpu_temp>1", "</gpu>\n", "<fb_memory_usage>\n            <to"],
)
def test_a_cut_document_is_parsed_once(monkeypatch: pytest.MonkeyPatch, cut_after: str) -> None:
    """Fails before h188 (2 parses). Cut after a closing tag, inside a value, after the GPU's
    report, inside a tag."""
    text = A10G.read_text()
    cut = text[: text.index(cut_after) + len(cut_after)]
    assert _parses(monkeypatch, cut) == 1
    assert parse_document(cut).cut is not None


def test_an_element_named_as_its_root_closed_last_is_still_a_cut() -> None:
    """A text whose last closing tag has its root's name is not whole for that: the root's own
    closing tag is missing (the plain parse says so, and the events are followed): the inner
    element, closed, is read."""
    document = parse_document("<a><b>1</b><a><c>2</c></a>")
    assert document.cut is not None
    assert [child.tag for child in document.root] == ["b", "a"]
