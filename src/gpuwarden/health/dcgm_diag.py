"""`dcgmi diag` reports (DCGM's active diagnostics), read into typed results.

Two forms, both what dcgmi prints:

- the boxed table (``dcgmi diag -r 1|2|3|4``): a ``| Diagnostic | Result |`` header, sections
  headed ``|-----  Deployment  ---...|`` / ``+-----  Hardware  ---...+`` (Metadata, Deployment,
  Integration, Hardware, Stress, ...), one row per test with ``Pass``/``Fail``/``Warn``/``Skip``
  (DCGM 2.x/3.x: ``Pass - All``, ``Fail - GPU: 0``; DCGM 4.x: a test's overall status, then
  ``GPU0: Pass`` rows), and ``Warning``/``Error``/``Info`` rows under a test whose text DCGM wraps
  at a fixed column width (mid-word);
- the JSON (``dcgmi diag -j``): ``"DCGM GPU Diagnostic"`` (2.x/3.x) or ``"DCGM Diagnostic"`` (4.x)
  holding ``test_categories`` → ``category``/``tests`` → ``name``/``results`` (per GPU:
  ``gpu_ids``/``gpu_id`` in 3.x, ``entity_group``/``entity_id`` in 4.x) with ``warnings`` (text, or
  objects carrying DCGM's ``error_id``) and ``info``; 4.x adds ``test_summary`` and ``metadata``.

Pure: text in, :class:`DiagReport` out; :mod:`gpuwarden.health.dcgm_diag_findings` judges it.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from gpuwarden.documents import DocumentError, load_json_text
from gpuwarden.errors import CorruptInputError
from gpuwarden.files import LINE_INDENT


class DiagStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    NOT_RUN = "not-run"

    @property
    def rank(self) -> int:
        return _STATUS_RANK[self]


_STATUS_RANK = {
    DiagStatus.SKIP: 0,
    DiagStatus.NOT_RUN: 0,
    DiagStatus.PASS: 1,
    DiagStatus.WARN: 2,
    DiagStatus.FAIL: 3,
}
# DCGM's words for a result (Diag.cpp, JSON output across versions), lower-cased
_STATUS_WORDS = {
    "pass": DiagStatus.PASS,
    "passed": DiagStatus.PASS,
    "fail": DiagStatus.FAIL,
    "failed": DiagStatus.FAIL,
    "warn": DiagStatus.WARN,
    "warning": DiagStatus.WARN,
    "skip": DiagStatus.SKIP,
    "skipped": DiagStatus.SKIP,
    "not run": DiagStatus.NOT_RUN,
    "not_run": DiagStatus.NOT_RUN,
}

# DCGM's error codes (dcgm_errors.h, dcgmError_t; new codes are only appended): the number a
# JSON warning carries as error_id, and its name.
DCGM_ERROR_NAMES: dict[int, str] = {
    3: "DCGM_FR_PCI_REPLAY_RATE",
    4: "DCGM_FR_VOLATILE_DBE_DETECTED",
    5: "DCGM_FR_VOLATILE_SBE_DETECTED",
    6: "DCGM_FR_PENDING_PAGE_RETIREMENTS",
    7: "DCGM_FR_RETIRED_PAGES_LIMIT",
    8: "DCGM_FR_RETIRED_PAGES_DBE_LIMIT",
    9: "DCGM_FR_CORRUPT_INFOROM",
    10: "DCGM_FR_CLOCK_THROTTLE_THERMAL",
    12: "DCGM_FR_CLOCK_THROTTLE_POWER",
    13: "DCGM_FR_NVLINK_ERROR_THRESHOLD",
    14: "DCGM_FR_NVLINK_DOWN",
    15: "DCGM_FR_NVSWITCH_FATAL_ERROR",
    16: "DCGM_FR_NVSWITCH_NON_FATAL_ERROR",
    20: "DCGM_FR_DEVICE_COUNT_MISMATCH",
    23: "DCGM_FR_DENYLISTED_DRIVER",
    25: "DCGM_FR_GRAPHICS_PROCESSES",
    28: "DCGM_FR_BAD_CUDA_ENV",
    29: "DCGM_FR_PERSISTENCE_MODE",
    30: "DCGM_FR_LOW_BANDWIDTH",
    31: "DCGM_FR_HIGH_LATENCY",
    40: "DCGM_FR_THERMAL_VIOLATIONS",
    41: "DCGM_FR_THERMAL_VIOLATIONS_TS",
    42: "DCGM_FR_TEMP_VIOLATION",
    43: "DCGM_FR_THROTTLING_VIOLATION",
    44: "DCGM_FR_INTERNAL",
    45: "DCGM_FR_PCIE_GENERATION",
    46: "DCGM_FR_PCIE_WIDTH",
    50: "DCGM_FR_STRESS_LEVEL",
    51: "DCGM_FR_CUDA_API",
    52: "DCGM_FR_FAULTY_MEMORY",
    55: "DCGM_FR_ECC_DISABLED",
    56: "DCGM_FR_MEMORY_ALLOC",
    57: "DCGM_FR_CUDA_DBE",
    58: "DCGM_FR_MEMORY_MISMATCH",
    59: "DCGM_FR_CUDA_DEVICE",
    62: "DCGM_FR_MEMORY_BANDWIDTH",
    63: "DCGM_FR_TARGET_POWER",
    66: "DCGM_FR_CUDA_CONTEXT",
    70: "DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD",
    71: "DCGM_FR_NVLINK_ERROR_CRITICAL",
    72: "DCGM_FR_ENFORCED_POWER_LIMIT",
    79: "DCGM_FR_L1TAG_MISCOMPARE",
    80: "DCGM_FR_ROW_REMAP_FAILURE",
    81: "DCGM_FR_UNCONTAINED_ERROR",
    83: "DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS",
    84: "DCGM_FR_UNCORRECTABLE_ROW_REMAP",
    85: "DCGM_FR_PENDING_ROW_REMAP",
    86: "DCGM_FR_BROKEN_P2P_MEMORY_DEVICE",
    87: "DCGM_FR_BROKEN_P2P_WRITER_DEVICE",
    95: "DCGM_FR_EUD_TEST_FAILED",
    98: "DCGM_FR_PCIE_H_REPLAY_VIOLATION",
    99: "DCGM_FR_GPU_EXPECTED_NVLINKS_UP",
    101: "DCGM_FR_XID_ERROR",
    102: "DCGM_FR_SBE_VIOLATION",
    103: "DCGM_FR_DBE_VIOLATION",
    104: "DCGM_FR_PCIE_REPLAY_VIOLATION",
    105: "DCGM_FR_SBE_THRESHOLD_VIOLATION",
    106: "DCGM_FR_DBE_THRESHOLD_VIOLATION",
    107: "DCGM_FR_PCIE_REPLAY_THRESHOLD_VIOLATION",
    108: "DCGM_FR_CUDA_FM_NOT_INITIALIZED",
    109: "DCGM_FR_SXID_ERROR",
}

MAX_TESTS = 512  # dcgmi runs a few dozen tests; more is not a report
MAX_MESSAGE_CHARS = 4000  # a wrapped warning is a few hundred characters


@dataclass(frozen=True, slots=True)
class DiagMessage:
    """One warning, error or info text DCGM attached to a test."""

    kind: str  # "warning", "error" or "info"
    text: str
    gpu_index: int | None = None  # the GPU the result it came with is about, where given
    error_id: int | None = None  # DCGM's dcgmError_t number (JSON only)

    @property
    def error_name(self) -> str | None:
        return DCGM_ERROR_NAMES.get(self.error_id) if self.error_id is not None else None


@dataclass(frozen=True, slots=True)
class DiagTest:
    name: str  # as printed ("GPU Memory", "memory", "Page Retirement/Row Remap")
    category: str | None  # the section: Deployment, Integration, Hardware, Stress, ...
    status: DiagStatus  # the test's overall result
    gpu_status: tuple[tuple[int, DiagStatus], ...] = ()  # per GPU index, where the report says
    messages: tuple[DiagMessage, ...] = ()


@dataclass(frozen=True, slots=True)
class DiagReport:
    form: str  # "table" or "json"
    tests: tuple[DiagTest, ...]
    dcgm_version: str | None = None
    driver_version: str | None = None
    device_ids: tuple[str, ...] = ()  # PCI device ids DCGM detected, one per GPU


# ---- recognising ------------------------------------------------------------------------------

# the table's documented headings: its header row and its section separators (Diag.cpp's
# DIAG_DEPLOYMENT etc.: "|-----  Deployment  --------+---...---|"). A page that renders the table
# as a Markdown table re-lays each `|`-delimited row with padding inside its border, one space
# or more as its formatter aligns the columns ("|  -----  Deployment  -----+---...---  |"), so
# blanks of the line are allowed there.
_TABLE_HEADER = re.compile(rf"{LINE_INDENT}\|\s*Diagnostic\s*\|\s*Result\s*\|", re.MULTILINE)
_SECTIONS = "Metadata|Deployment|Integration|Hardware|Stress|Performance|Custom|Plugin"
_BLANKS = r"[^\S\n]*"
_SECTION = re.compile(
    rf"{LINE_INDENT}[|+]{_BLANKS}-{{3,}}\s+({_SECTIONS})\s+-+\+[-+|]*(?:{_BLANKS}\|)?\s*$",
    re.MULTILINE | re.I,
)
_JSON_ROOT = re.compile(r'"DCGM (?:GPU )?Diagnostic"\s*:')
# a paste of one test's object without the root (JsonOutput.cpp's keys: a result names its GPU
# by gpu_ids/gpu_id (2.x/3.x) or entity_group/entity_id (4.x), next to the test's "results")
_JSON_TEST_KEYS = (
    re.compile(r'"results"\s*:\s*\['),
    re.compile(r'"(?:gpu_ids?|entity_group)"\s*:'),
    re.compile(r'"status"\s*:\s*"'),
)


def looks_like_dcgm_diag(head: str) -> bool:
    """A dcgmi diag table (its header row, a section heading above a result row, or a result
    row in dcgmi's own fixed widths) or JSON (its root key)."""
    if _JSON_ROOT.search(head):
        return True
    if head.lstrip().startswith("{") and all(key.search(head) for key in _JSON_TEST_KEYS):
        return True
    if "|" not in head:  # every table form is drawn with "|": no need to search a text without
        return False
    if _TABLE_HEADER.search(head):
        return True
    if _STENCIL_RESULT_ROW.search(head) is not None:
        return True
    return _SECTION.search(head) is not None and _RESULT_ROW.search(head) is not None


# ---- the table ----------------------------------------------------------------------------------

_ROW = re.compile(r"^\s*\|(?P<name>[^|]*)\|(?P<value>.*?)(?:\|\s*)?$")
_RESULT_WORD = r"Pass|Fail|Warn|Skip|Not Run"
_RESULT_ROW = re.compile(
    rf"{LINE_INDENT}\|[^|]*\|\s*(?:GPU\s*\d+:\s*)?(?:{_RESULT_WORD})\b", re.M | re.I
)
# a result row as dcgmi lays it out (Diag.cpp's DIAG_DATA stencil: "| " + the name in 25 columns
# + " | " + the result in 46 + " |"), which an excerpt cut below the header and the section
# headings still holds; another tool's table with these words has other widths
_STENCIL_RESULT_ROW = re.compile(
    rf"{LINE_INDENT}\| [^|]{{25}} \| (?=(?:GPU\s*\d+:\s*)?(?:{_RESULT_WORD})\b)[^|]{{46}} \|\s*$",
    re.M | re.I,
)
# "Pass", "Fail - All", "Pass - GPU: 1", "Skip - GPU 3", "Fail - GPU: 0, 1"
_STATUS_CELL = re.compile(
    rf"^(?P<word>{_RESULT_WORD})(?:\s*-\s*(?:(?P<all>All)|GPUs?:?\s*(?P<gpus>[\d,\s]+)))?\s*$",
    re.I,
)
_GPU_STATUS_CELL = re.compile(rf"^GPU\s*(?P<gpu>\d{{1,4}}):\s*(?P<word>{_RESULT_WORD})\s*$", re.I)
# a GPU index in a list ("0, 1", "0,1"): a longer run of digits is no index
_GPU_NUMBER = re.compile(r"(?<!\d)\d{1,4}(?!\d)")
_MESSAGE_KINDS = {"warning": "warning", "error": "error", "info": "info"}
_METADATA = {
    "dcgm version": "dcgm_version",
    "driver version detected": "driver_version",
    "gpu device ids detected": "device_ids",
}
_HEADER_NAMES = {"diagnostic"}


@dataclass
class _TestBuilder:
    name: str
    category: str | None
    status: DiagStatus
    gpu_status: dict[int, DiagStatus] = field(default_factory=dict)
    messages: list[tuple[str, list[str]]] = field(default_factory=list)  # (kind, chunks)

    def overall(self) -> DiagStatus:
        return _worst_that_ran([self.status, *self.gpu_status.values()])

    def build(self) -> DiagTest:
        messages = tuple(
            DiagMessage(kind, _join_chunks(chunks)[:MAX_MESSAGE_CHARS])
            for kind, chunks in self.messages
        )
        return DiagTest(
            self.name,
            self.category,
            self.overall(),
            tuple(sorted(self.gpu_status.items())),
            messages,
        )


def _status_key(word: str) -> str:
    return " ".join(word.lower().split())


def _status(word: str) -> DiagStatus:
    """A word the table's result regexes matched (so one of DCGM's) as a status."""
    return _STATUS_WORDS[_status_key(word)]


def _status_of(word: str | None) -> DiagStatus | None:
    """A JSON status word as a status; None for a word DCGM does not use."""
    return _STATUS_WORDS.get(_status_key(word)) if word else None


# the results a later run of the same test does not replace (see ``_TableReader._test_row``)
_FAILED = frozenset({DiagStatus.FAIL, DiagStatus.WARN})


def _worst_that_ran(statuses: Sequence[DiagStatus]) -> DiagStatus:
    """A test's status from its overall and per-GPU ones: the worst of Pass/Warn/Fail; Skip or
    Not Run only when nothing ran."""
    ran = [s for s in statuses if s not in (DiagStatus.SKIP, DiagStatus.NOT_RUN)]
    return max(ran or statuses, key=lambda s: s.rank)


def _join_chunks(chunks: Sequence[str]) -> str:
    """One message from the cell chunks DCGM wrapped it into. DCGM cuts the text every N
    characters, mid-word; a chunk shorter than the widest one ended where its trailing
    space was trimmed, so a space goes back there."""
    width = max((len(c) for c in chunks), default=0)
    text = previous = ""
    for chunk in chunks:
        if text and len(previous) < width:
            text += " "
        text += chunk
        previous = chunk
    return " ".join(text.split())


def _cell(raw: str) -> str:
    """A cell's text: dcgmi prints ``| `` then the text padded; a second leading space is
    part of the text (the wrap fell on a space)."""
    text = raw[1:] if raw.startswith(" ") else raw
    return text.rstrip()


def _apply_status_cell(test: _TestBuilder, value: str) -> bool:
    """A "Pass - GPU: 1" / "GPU0: Pass" cell under a test: its per-GPU result."""
    match = _STATUS_CELL.match(value)
    if match is not None:
        status = _status(match["word"])
        if match["gpus"]:
            for gpu in _GPU_NUMBER.findall(match["gpus"]):
                test.gpu_status[int(gpu)] = status
        else:
            test.status = max(test.status, status, key=lambda s: s.rank)
        return True
    per_gpu = _GPU_STATUS_CELL.match(value)
    if per_gpu is not None:
        test.gpu_status[int(per_gpu["gpu"])] = _status(per_gpu["word"])
        return True
    return False


@dataclass
class _TableReader:
    """The table's rows in order, with what a row needs from those above it: the section it is
    under, the test a per-GPU or message row belongs to, the message a wrapped row continues."""

    metadata: dict[str, str] = field(default_factory=dict)
    tests: list[_TestBuilder] = field(default_factory=list)
    category: str | None = None
    current: _TestBuilder | None = None
    chunks: list[str] | None = None  # the message being continued

    def read(self, line: str) -> None:
        section = _SECTION.match(line)
        if section is not None:
            self.category, self.current, self.chunks = section[1].title(), None, None
            return
        row = _ROW.match(line)
        if row is None:
            # other text ends a wrapped message; a blank line inside a paste does not
            self.chunks = None if line.strip() else self.chunks
            return
        name = " ".join(row["name"].split())
        value = _cell(row["value"])
        if name:
            self.chunks = None
            self._named_row(name, value)
        else:
            self._unnamed_row(value)

    def _unnamed_row(self, value: str) -> None:
        """A row with an empty name cell: a per-GPU result of the test above, or the next chunk
        of the message DCGM wrapped."""
        if self.current is not None and _apply_status_cell(self.current, value.strip()):
            self.chunks = None
        elif self.chunks is not None and value.strip():
            self.chunks.append(value)

    def _named_row(self, name: str, value: str) -> None:
        key = name.lower()
        cell = value.strip()
        if key in _HEADER_NAMES and self.current is None and cell.lower() == "result":
            return
        if key in _METADATA:
            self.metadata[_METADATA[key]] = cell
            return
        if key in _MESSAGE_KINDS and self.current is not None:
            self.chunks = [value]  # kept unstripped: _join_chunks reads the chunks' widths
            self.current.messages.append((_MESSAGE_KINDS[key], self.chunks))
            return
        self._test_row(name, cell)

    def _test_row(self, name: str, cell: str) -> None:
        match = _STATUS_CELL.match(cell)
        if match is None:
            return  # a row of another kind (a heading, a value dcgmi added): not a test
        self.current = _TestBuilder(name, self.category, _status(match["word"]))
        if match["gpus"]:
            _apply_status_cell(self.current, cell)
        # dcgmi prints each test once per run: a name seen before is a later run pasted after
        # an earlier one (`-r 1` then `-r 2`, a job's output printed twice), and the later
        # result is the GPU's state now. An earlier failure stays beside it: the table cannot
        # tell a rerun from a run on other GPUs (`-i 0`, then `-i 1`: "All" names no GPU, and
        # "GPU Device IDs Detected" is the model's PCI id), and a later pass must not hide it.
        self.tests = [t for t in self.tests if t.name != name or t.overall() in _FAILED]
        self.tests.append(self.current)
        if len(self.tests) > MAX_TESTS:
            raise _corrupt(f"more than {MAX_TESTS} tests: not one dcgmi diag report")


def parse_diag_table(text: str) -> DiagReport:
    """The boxed table dcgmi diag prints (whole, or a paste of part of it)."""
    reader = _TableReader()
    for line in text.splitlines():
        reader.read(line)
    if not reader.tests:
        raise _corrupt("no test result row (| <test> | Pass/Fail/Warn/Skip |) in the table")
    metadata = reader.metadata
    ids = tuple(i.strip() for i in metadata.get("device_ids", "").split(",") if i.strip())
    return DiagReport(
        "table",
        tuple(t.build() for t in reader.tests),
        dcgm_version=metadata.get("dcgm_version") or None,
        driver_version=metadata.get("driver_version") or None,
        device_ids=ids,
    )


# ---- the JSON -----------------------------------------------------------------------------------


def _json_document(text: str) -> object:
    """The JSON dcgmi printed, after whatever it (or the shell) printed before it."""
    start = text.find("{")
    end = text.rfind("}")
    if start < 0:
        raise _corrupt("no JSON object in the text")
    if end <= start:
        raise _corrupt("the JSON ends before its closing brace (a cut paste?)")
    try:
        return load_json_text(text[start : end + 1])
    except DocumentError as exc:
        raise _corrupt(f"the JSON does not parse ({exc.problem}{_at(exc)})") from None


def _at(exc: DocumentError) -> str:
    return f" at {exc.place}" if exc.place else ""


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def _items(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


# an id DCGM prints (a GPU index, an error id) has a few digits; a longer run is not one
_MAX_DIGITS = 9


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdecimal() and len(value.strip()) <= _MAX_DIGITS:
        return int(value.strip())
    return None


def _result_gpus(result: Mapping[str, object]) -> list[int]:
    """The GPUs one JSON result is about: 3.x gpu_ids ("0,1" or 0) / gpu_id, 4.x GPU
    entities (another entity group, an NvSwitch, is no GPU)."""
    if "entity_id" in result:
        group = _text(result.get("entity_group"))
        if group is not None and group.upper() != "GPU":
            return []
        entity = _int(result.get("entity_id"))
        return [entity] if entity is not None else []
    for key in ("gpu_ids", "gpu_id"):
        value = result.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]
        if isinstance(value, str):
            return [int(g) for g in _GPU_NUMBER.findall(value)]
    return []


def _json_messages(result: Mapping[str, object], gpu: int | None) -> Iterator[DiagMessage]:
    for key, kind in (("warnings", "warning"), ("errors", "error"), ("info", "info")):
        value = result.get(key)
        entries = value if isinstance(value, list) else [value]
        for entry in entries:
            if isinstance(entry, dict):
                said = _text(entry.get("warning")) or _text(entry.get("message"))
                error_id = _int(entry.get("error_id", entry.get("error_code")))
            else:
                said, error_id = _text(entry), None
            if said is not None:
                yield DiagMessage(kind, said[:MAX_MESSAGE_CHARS], gpu, error_id)


def _json_test(test: Mapping[str, object], category: str | None) -> DiagTest | None:
    name = _text(test.get("name"))
    if name is None:
        return None
    per_gpu: dict[int, DiagStatus] = {}
    messages: list[DiagMessage] = []
    statuses: list[DiagStatus] = []
    for entry in _items(test.get("results")):
        result = _mapping(entry)
        status = _status_of(_text(result.get("status")))
        gpus = _result_gpus(result)
        if status is not None:
            statuses.append(status)
            per_gpu.update((gpu, status) for gpu in gpus)
        messages += _json_messages(result, gpus[0] if len(gpus) == 1 else None)
    summary = _mapping(test.get("test_summary"))
    summary_status = _status_of(_text(summary.get("status")))
    if summary_status is not None:
        statuses.append(summary_status)
    messages += _json_messages(summary, None)
    if not statuses:
        return None
    status = _worst_that_ran(statuses)
    return DiagTest(name, category, status, tuple(sorted(per_gpu.items())), tuple(messages))


def _json_categories(root: Mapping[str, object]) -> Iterator[tuple[str | None, object]]:
    """(category, test) pairs: under test_categories, or 4.x tests at the top."""
    for entry in _items(root.get("test_categories")):
        group = _mapping(entry)
        for test in _items(group.get("tests")):
            yield _text(group.get("category")), test
    for test in _items(root.get("tests")):
        yield None, test


_DRIVER_KEYS = ("Driver Version Detected", "driver_version_detected", "driver_version")


def _json_root(document: Mapping[str, object]) -> Mapping[str, object]:
    """The object holding the tests: under the 2.x/3.x or 4.x root key, the document itself
    when a paste dropped that key, or a paste of one test's object (its name and results)."""
    root = _mapping(document.get("DCGM GPU Diagnostic") or document.get("DCGM Diagnostic"))
    if not root and "tests" in document:
        root = document
    if not root and "name" in document and isinstance(document.get("results"), list):
        root = {"tests": [document]}
    if not root:
        raise _corrupt('no "DCGM GPU Diagnostic" / "DCGM Diagnostic" object in the JSON')
    return root


def _json_driver(*places: Mapping[str, object]) -> str | None:
    """The driver version, under any of the keys DCGM versions used, first place first."""
    return next(
        (
            _text(where.get(key))
            for where in places
            for key in _DRIVER_KEYS
            if _text(where.get(key))
        ),
        None,
    )


# a test's object inside the JSON ({"name": ..., "results": [...]}, JsonOutput.cpp), and the
# category heading above it; read one by one from a paste that does not parse as a whole
_TEST_OBJECT = re.compile(r'\{\s*"name"\s*:')
_CATEGORY_KEY = re.compile(r'"category"\s*:\s*"([^"\\]{1,64})"')
# each failed attempt may scan to the end of the text: a bound keeps a hostile text linear
_MAX_SALVAGE_MISSES = 64


def _decoded_object(decoder: json.JSONDecoder, text: str, start: int) -> tuple[object, int] | None:
    try:
        return decoder.raw_decode(text, start)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return None


def _salvaged_tests(text: str) -> list[tuple[str | None, object]]:
    """(category, test object) pairs read one object at a time, for a paste whose whole does
    not parse: an excerpt that elides parts (`{"..."}`, `...`) or is cut before its end. Each
    test object that is whole is read as dcgmi wrote it; the cut one is left out."""
    decoder = json.JSONDecoder()
    headings = [(m.start(), m[1]) for m in _CATEGORY_KEY.finditer(text)]
    places = [place for place, _ in headings]
    found: list[tuple[str | None, object]] = []
    resume = misses = 0
    for match in _TEST_OBJECT.finditer(text):
        if match.start() < resume:
            continue  # inside a test object already read
        decoded = _decoded_object(decoder, text, match.start())
        if decoded is None:
            misses += 1
            if misses > _MAX_SALVAGE_MISSES:
                break
            continue
        value, resume = decoded
        heading = bisect_right(places, match.start()) - 1
        found.append((headings[heading][1] if heading >= 0 else None, value))
        if len(found) > MAX_TESTS:
            break
    return found


def _salvaged_report(text: str, problem: CorruptInputError) -> DiagReport:
    tests = [
        test
        for category, entry in _salvaged_tests(text)
        if (test := _json_test(_mapping(entry), category)) is not None
    ]
    if not tests:
        raise problem
    if len(tests) > MAX_TESTS:
        raise _corrupt(f"more than {MAX_TESTS} tests: not one dcgmi diag report")
    return DiagReport("json", tuple(tests))


def parse_diag_json(text: str) -> DiagReport:
    """``dcgmi diag -j``: the DCGM 2.x/3.x ("DCGM GPU Diagnostic") and 4.x ("DCGM Diagnostic",
    entity results, test_summary, metadata) layouts; a paste that does not parse as a whole
    (elided, cut) gives the test objects it holds whole."""
    try:
        document = _mapping(_json_document(text))
    except CorruptInputError as problem:
        return _salvaged_report(text, problem)
    root = _json_root(document)
    tests = [
        test
        for category, entry in _json_categories(root)
        if (test := _json_test(_mapping(entry), category)) is not None
    ]
    if len(tests) > MAX_TESTS:
        raise _corrupt(f"more than {MAX_TESTS} tests: not one dcgmi diag report")
    if not tests:
        runtime = _text(root.get("runtime_error"))
        said = f": DCGM says {runtime!r}" if runtime else ""
        raise _corrupt(f"the report holds no test result{said}")
    metadata = _mapping(document.get("metadata"))
    version = _text(root.get("version")) or _text(metadata.get("version"))
    driver = _json_driver(root, metadata)
    return DiagReport("json", tuple(tests), dcgm_version=version, driver_version=driver)


def parse_dcgm_diag(text: str) -> DiagReport:
    """A dcgmi diag report, table or JSON, whichever the text is."""
    if _JSON_ROOT.search(text) or text.lstrip().startswith("{"):
        return parse_diag_json(text)
    return parse_diag_table(text)


def _corrupt(problem: str) -> CorruptInputError:
    return CorruptInputError(
        f"not a readable dcgmi diag report: {problem}",
        reference="dcgm-diag-unreadable",
        hint="pass the whole output of `dcgmi diag -r N` (the table) or `dcgmi diag -r N -j` "
        "(the JSON), as dcgmi printed it",
    )
