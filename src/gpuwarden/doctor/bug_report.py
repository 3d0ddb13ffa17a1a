"""An `nvidia-bug-report.sh` log read as the captures it holds.

The script (shipped with every NVIDIA driver) writes its parts one after the other, each opened
by a separator line of 44 underscores and a blank line, then a header saying what follows:

- ``*** /path`` then ``*** ls: <ls -l of it>`` then the file (``append``, ``append_silent``,
  ``append_glob``); ``*** /path does not exist`` / ``is not readable`` with nothing after (the
  2009-2010 versions print the bare path, with no ``*** `` and no ``ls`` line);
- a command line (``/usr/bin/nvidia-smi --query``, ``journalctl -b -0 _COMM=Xorg``, ``ldd ...``),
  a blank line and its output; the nvidia-smi part holds several commands one after the other
  with no separator between them (``report_command``: the command, a blank line, its output);
- ``dmesg:`` and the kernel ring buffer; ``Scanning kernel log files for NVRM messages:`` (later
  ``... for NVIDIA kernel messages:``) with one indented ``  /var/log/kern.log:`` or
  ``  journalctl -b -1:`` line before the NVRM lines grepped from each log (the host's logs
  under a root where the script runs in a container: ``  /.bottlerocket/rootfs/var/log/kern.log:``);
- ``base64 "file"`` and a dump, ``Skipping ...`` / ``Skipping: ...`` where a tool is missing.

The prologue ("Start of NVIDIA bug report log file", the script's version, ``Date:`` and
``uname:``) comes first and ``End of NVIDIA bug report log file.`` last. Each part doctor has a
reader for becomes a ``Capture`` named ``<file>#<header as printed>``; the rest is counted and
left alone. What decides a part's kind is its header; its text must then be what that kind's
reader takes (``classify``), else it is listed as unread with what it says instead; an
nvidia-smi part that holds nvidia-smi's own failure message ("couldn't communicate with the
NVIDIA driver", "Driver/library version mismatch") is read as that failure.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import NamedTuple

from gpuwarden.doctor.captures import (
    BUG_REPORT_EPILOGUE,
    BUG_REPORT_PROLOGUE,
    BUG_REPORT_SEPARATOR,
    MAX_KERNEL_LOG_BYTES,
    Capture,
    CaptureKind,
    SkippedFile,
    kind_and_ruled_out,
)

# A command report_command printed: nvidia-smi by its full path (`which nvidia-smi`) or name.
_SMI_COMMAND = re.compile(r"^(?:/[^\s]*/)?nvidia-smi(?P<args>(?: +[-\w=,.:/]+)*) *$")
# The kernel-log scan names each log it greps on a line of its own, indented by two spaces.
_SCANNED_LOG = re.compile(r"^  (?P<name>/\S+|journalctl -b -?\d+):\s*$")
_SCAN_HEADER = "Scanning kernel log files for"
# `append` printed "*** /path" since ~2011; before, the bare path ("/etc/issue").
_FILE_HEADER = re.compile(
    r"^(?:\*\*\* (?P<any>.+?)|(?P<path>/\S+?))(?P<missing> does not exist| is not readable)?$"
)
_LISTING = "*** ls: "
# How much of a part classify reads to tell its kind (its 64 KiB head of a file)
_HEAD_CHARS = 1 << 16

# The parts of a report that are doctor's captures, by header: nvidia-smi's arguments (the
# script printed `-q`/`-q -u` until ~2012 and `--query`/`--query --unit` since; `--unit` is the
# S-class unit query, not the GPUs; the 2025 script runs `nvlink --errorcounters` beside
# `--status`), the kernel logs and the module's version file.
_SMI_KINDS = {
    ("-q",): CaptureKind.NVIDIA_SMI,
    ("--query",): CaptureKind.NVIDIA_SMI,
    ("topo", "-m"): CaptureKind.TOPOLOGY,
    ("topo", "--matrix"): CaptureKind.TOPOLOGY,
    ("nvlink", "-s"): CaptureKind.NVLINK,
    ("nvlink", "--status"): CaptureKind.NVLINK,
    ("nvlink", "-e"): CaptureKind.NVLINK_COUNTERS,
    ("nvlink", "--errorcounters"): CaptureKind.NVLINK_COUNTERS,
}
_KERNEL_LOG_FILES = frozenset(
    ("/var/log/messages", "/var/log/kern.log", "/var/log/kernel.log", "/var/log/syslog")
)
_KERNEL_LOG_COMMAND = re.compile(r"^(?:dmesg|journalctl -b -?\d+|/var/log/dmesg)$")
# A host's log read from inside a container, under the root the host is mounted at: the
# Bottlerocket admin container's copy of the script ($Change: 37062940) greps
# `${HOST_ROOT}/var/log/kern.log` with HOST_ROOT "/.bottlerocket/rootfs" (or the caller's), so
# its scan names "  /.bottlerocket/rootfs/var/log/kern.log:"; a root of "/" names
# "//var/log/kern.log" (a path's leading "//" stays as POSIX allows it, normpath keeps it).
_LOG_UNDER_A_ROOT = re.compile(r"^/\S*?(?P<log>/var/log/[^/\s]+)$")
_DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"

# `date` as the script ran it, in the locale of the shell: "Thu Jul 14 14:11:55 IST 2011", "Thu Oct
# 27 08:50:11 PM -03 2022" (a 12-hour locale); glibc's zh_CN / ja_JP date_fmt "%Y年 %m月 %d日 %A
# %H:%M:%S %Z" ("2024年 12月 20日 星期五 18:35:26 CST"); the day-first date_fmt of fr_FR, es_ES,
# pt_BR ("%a %d %b %Y %H:%M:%S %Z": "jeu. 25 août 2022 20:30:39 CEST"); de_DE's "%a %e. %b
# %H:%M:%S %Z %Y" ("Fr 10. Sep 04:31:01 CEST 2010": the year after the zone). Others ("mar 13 set
# 2011, 23.11.55, CEST": a dotted time) are not read: the file's modification time stands in.
_ZONE = r"(?P<zone>[A-Za-z]{1,6}|[+-]\d{2,4})"
_DATE = re.compile(
    r"^Date: +[A-Z][a-z]{2},? +(?P<month>[A-Z][a-z]{2}) +(?P<day>\d{1,2}),? +"
    rf"(?P<hms>\d{{1,2}}:\d\d:\d\d)(?: +(?P<half>AM|PM))? +{_ZONE}? *"
    r"(?P<year>\d{4})\s*$",
    re.MULTILINE,
)
_CJK_DATE = re.compile(
    r"^Date: +(?P<year>\d{4})年 *(?P<month>\d{1,2})月 *(?P<day>\d{1,2})日 +\S+ +"
    rf"(?P<hms>\d{{1,2}}:\d\d:\d\d)(?: +{_ZONE})?\s*$",
    re.MULTILINE,
)
_DAY_FIRST_DATE = re.compile(
    r"^Date: +\S+ +(?P<day>\d{1,2}) +(?P<month>[^\W\d_]{3,5})\.? +(?P<year>\d{4}) +"
    rf"(?P<hms>\d{{1,2}}:\d\d:\d\d)(?: +{_ZONE})?\s*$",
    re.MULTILINE,
)
_DAY_FIRST_YEAR_LAST_DATE = re.compile(
    r"^Date: +\S+ +(?P<day>\d{1,2})\. +(?P<month>[^\W\d_]{3,5})\.? +"
    rf"(?P<hms>\d{{1,2}}:\d\d:\d\d)(?: +{_ZONE})? +(?P<year>\d{{4}})\s*$",
    re.MULTILINE,
)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# glibc's abmon of the day-first locales above (and de_DE, it_IT, nl_NL), without the trailing
# dot; an abbreviation several of them share names the same month in each.
_LOCAL_MONTHS: dict[str, int] = {
    name: number
    for names in (
        tuple(name.lower() for name in _MONTHS),  # C / en_US
        # fr_FR
        ("janv", "févr", "mars", "avr", "mai", "juin", "juil", "août", "sept", "oct", "nov", "déc"),
        # de_DE
        ("jan", "feb", "mär", "apr", "mai", "jun", "jul", "aug", "sep", "okt", "nov", "dez"),
        # es_ES
        ("ene", "feb", "mar", "abr", "may", "jun", "jul", "ago", "sep", "oct", "nov", "dic"),
        # pt_BR
        ("jan", "fev", "mar", "abr", "mai", "jun", "jul", "ago", "set", "out", "nov", "dez"),
        # it_IT
        ("gen", "feb", "mar", "apr", "mag", "giu", "lug", "ago", "set", "ott", "nov", "dic"),
        # nl_NL
        ("jan", "feb", "mrt", "apr", "mei", "jun", "jul", "aug", "sep", "okt", "nov", "dec"),
    )
    for number, name in enumerate(names, start=1)
}
_UTC_NAMES = frozenset(("UTC", "GMT", "Z", "UCT"))
_VERSION = re.compile(r"^nvidia-bug-report\.sh Version: *(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Section:
    """One part of a report: its header as printed (a path, a command, "dmesg") and its text."""

    name: str
    body: str
    line: int  # where its header is, counting from 1


@dataclass(frozen=True, slots=True)
class BugReportReading:
    """What doctor takes from a report: its captures, the parts of a known kind it could not
    read (and why), and how many parts are of no kind doctor reads."""

    captures: tuple[Capture, ...]
    unread: tuple[SkippedFile, ...]
    sections: int
    ignored: int
    dated: bool  # the capture time is the report's Date: line (else the file's mtime)
    script_version: str | None


# ---- splitting ----------------------------------------------------------------------------------


def _blocks(lines: Sequence[str]) -> Iterator[tuple[int, list[str]]]:
    """The runs of lines between separators, with the index of each run's first line."""
    start = 0
    for index, line in enumerate(lines):
        if BUG_REPORT_SEPARATOR.match(line):
            yield start, list(lines[start:index])
            start = index + 1
    yield start, list(lines[start:])


def _trimmed(lines: Sequence[str]) -> str:
    """The lines as text, blank lines at both ends left out."""
    first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip()), -1)
    return "\n".join(lines[first : last + 1])


def _header_and_body(lines: Sequence[str]) -> tuple[str, list[str]] | None:
    """The header of a block and the lines after it (a file's `ls` line left out)."""
    at = next((i for i, line in enumerate(lines) if line.strip()), None)
    if at is None:
        return None
    header = lines[at].strip()
    body = list(lines[at + 1 :])
    file = _FILE_HEADER.match(header)
    if file is not None:
        if body and body[0].startswith(_LISTING):
            body = body[1:]
        return file.group("any") or file.group("path"), [] if file.group("missing") else body
    if header.startswith(BUG_REPORT_PROLOGUE):
        return "prologue", list(lines[at:])
    if header.startswith(BUG_REPORT_EPILOGUE):
        return "epilogue", body
    return header.removesuffix(":").strip(), body


def _split_at(lines: Sequence[str], offset: int, starts: re.Pattern[str]) -> Iterator[Section]:
    """Sections opened by the lines ``starts`` matches (the nvidia-smi commands, the logs of
    the kernel-log scan); lines before the first one are not a section of their own."""
    opened: tuple[str, int] | None = None
    body: list[str] = []
    for index, line in enumerate(lines):
        match = starts.match(line)
        if match is None:
            body.append(line)
            continue
        if opened is not None:
            yield Section(opened[0], _trimmed(body), opened[1])
        name = match.groupdict().get("name") or line.strip()
        opened, body = (name, offset + index + 1), []
    if opened is not None:
        yield Section(opened[0], _trimmed(body), opened[1])


def scanned_logs(name: str, text: str) -> tuple[Section, ...]:
    """A paste of the report's kernel-log scan without its part header: the logs it grepped,
    each under the script's own header ("  /var/log/dmesg:", "  journalctl -b -0:"), and the
    lines above the first header (the end of the log before it) as a log named ``name``; ()
    when the text holds no such header."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if _SCANNED_LOG.match(line)), None)
    if first is None:
        return ()
    above = lines[:first]
    head = [Section(name, _trimmed(above), 1)] if any(line.strip() for line in above) else []
    return (*head, *_split_at(lines[first:], first, _SCANNED_LOG))


def _block_sections(start: int, block: list[str]) -> Iterator[Section]:
    found = _header_and_body(block)
    if found is None:
        return
    header, body = found
    at = start + next(i for i, line in enumerate(block) if line.strip())
    if _SMI_COMMAND.match(header):
        yield from _split_at(block, start, _SMI_COMMAND)
    elif header.startswith(_SCAN_HEADER):
        scanned = list(_split_at(body, at + 1, _SCANNED_LOG))
        yield from scanned or [Section(header, _trimmed(body), at + 1)]
    else:
        yield Section(header, _trimmed(body), at + 1)


def _opens_a_part(block: Sequence[str]) -> bool:
    """Whether text before the first separator is one of the script's parts: the prologue, or a
    paste that starts at a part's header without its separator."""
    found = _header_and_body(block)
    if found is None:
        return False
    header = found[0]
    return header == "prologue" or section_kind(header) is not None


def _from_the_prologue(start: int, block: list[str]) -> tuple[int, list[str]]:
    """The first block from its prologue line on: a paste may carry text before it on the
    first block's lines (a forum's quote marker on the first separator, "> ____", or a prompt
    on the same line), which is not the report's."""
    at = next((i for i, line in enumerate(block) if line.startswith(BUG_REPORT_PROLOGUE)), None)
    return (start, block) if at is None else (start + at, block[at:])


def split_bug_report(text: str) -> tuple[Section, ...]:
    """The parts of an nvidia-bug-report log (or of a paste of some of it), in order; what
    comes before the first separator (a shell prompt, a forum post's words) is left out when
    it is not one of the script's parts."""
    blocks = _blocks(text.splitlines())
    start, first = _from_the_prologue(*next(blocks))
    sections = list(_block_sections(start, first)) if _opens_a_part(first) else []
    for start, block in blocks:
        sections += _block_sections(start, block)
    return tuple(sections)


# ---- kinds --------------------------------------------------------------------------------------


def section_kind(name: str) -> CaptureKind | None:
    """The capture kind a part's header announces, or None for the parts doctor does not read
    (Xorg logs, lspci, `--query --unit`, journalctl of Xorg, ...)."""
    smi = _SMI_COMMAND.match(name)
    if smi is not None:
        return _SMI_KINDS.get(tuple(smi.group("args").split()))
    name = _as_path(name)
    if name == _DRIVER_VERSION_FILE:
        return CaptureKind.DRIVER_VERSION
    log = _host_log(name)
    if log in _KERNEL_LOG_FILES or _KERNEL_LOG_COMMAND.match(log):
        return CaptureKind.KERNEL_LOG
    return None


def _host_log(path: str) -> str:
    """A log's path as the host names it: ``/var/log/kern.log`` for a path under the root a
    container mounts the host at (``/.bottlerocket/rootfs/var/log/kern.log``); any other path
    as it is."""
    under = _LOG_UNDER_A_ROOT.match(path)
    return under.group("log") if under else path


def _as_path(name: str) -> str:
    """A file header as the path it names: the script appends
    ``/proc/driver/nvidia/$proc_module_dirs/version`` with ``proc_module_dirs=.`` on a single
    instance driver, so reports since ~2015 print ``/proc/driver/nvidia/./version``."""
    if not name.startswith("/") or " " in name:
        return name
    return posixpath.normpath(name)


def _newest_part(body: str) -> tuple[str, bool]:
    """A kernel log's newest MAX_KERNEL_LOG_BYTES, from the start of a line (as files are cut)."""
    if len(body) <= MAX_KERNEL_LOG_BYTES:
        return body, False
    tail = body[-MAX_KERNEL_LOG_BYTES:]
    return tail[tail.find("\n") + 1 :], True


def _first_words(body: str) -> str:
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    return repr(first[:60]) if first else "nothing"


def _as_capture(
    section: Section, kind: CaptureKind, source: str, written_s: float
) -> Capture | SkippedFile:
    where = f"{source}#{section.name}"
    if not section.body.strip():
        return SkippedFile(where, f"the report holds no {kind.value} text here")
    if kind is CaptureKind.KERNEL_LOG:
        # the NVRM lines grepped from a log may be few and of any format: the header decides
        text, truncated = _newest_part(section.body)
        return Capture(where, kind, text, written_s, truncated)
    head = section.body[:_HEAD_CHARS]
    found, ruled_out = kind_and_ruled_out(head)
    if kind is CaptureKind.NVIDIA_SMI and found is CaptureKind.SMI_FAILURE:
        return Capture(where, found, section.body, written_s)  # what a failed nvidia-smi said
    if found is not kind:
        said = _first_words(section.body)
        return SkippedFile(where, f"not {kind.value} output: it says {said}")
    whole = len(head) == len(section.body)  # classify read all of it
    ruled_out = ruled_out if whole else frozenset()
    return Capture(where, kind, section.body, written_s, ruled_out=ruled_out)


# ---- the report's date --------------------------------------------------------------------------


def _zone(name: str | None) -> timezone | None:
    """A numeric offset ("-03", "+0530") or UTC; None for a zone named by letters."""
    if name is None or name.upper() in _UTC_NAMES:
        return UTC
    if name[0] not in "+-":
        return None
    digits = name[1:]
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    offset = timedelta(hours=hours, minutes=minutes)
    return timezone(-offset if name[0] == "-" else offset)


class _DateFields(NamedTuple):
    """A ``Date:`` line's parts, whichever locale printed them."""

    year: int
    month: int
    day: int
    hms: str  # "H:M:S"
    half: str | None  # "AM" / "PM" of a 12-hour locale
    zone: str | None  # a zone's letters or its numeric offset, as printed


def _english_date(head: str) -> _DateFields | None:
    found = _DATE.search(head)
    if found is None or found.group("month") not in _MONTHS:
        return None
    month = _MONTHS.index(found.group("month")) + 1
    year, day, hms, half, zone = found.group("year", "day", "hms", "half", "zone")
    return _DateFields(int(year), month, int(day), hms, half, zone)


def _cjk_date(head: str) -> _DateFields | None:
    found = _CJK_DATE.search(head)
    if found is None:
        return None
    year, month, day = (int(found.group(name)) for name in ("year", "month", "day"))
    return _DateFields(year, month, day, found.group("hms"), None, found.group("zone"))


def _day_first_date(head: str) -> _DateFields | None:
    found = _DAY_FIRST_DATE.search(head) or _DAY_FIRST_YEAR_LAST_DATE.search(head)
    if found is None or found.group("month").lower() not in _LOCAL_MONTHS:
        return None
    month = _LOCAL_MONTHS[found.group("month").lower()]
    year, day = int(found.group("year")), int(found.group("day"))
    return _DateFields(year, month, day, found.group("hms"), None, found.group("zone"))


def _date_fields(head: str) -> _DateFields | None:
    """The fields of the prologue's ``Date:`` line, in whichever layout above it is printed."""
    for read in (_english_date, _cjk_date, _day_first_date):
        fields = read(head)
        if fields is not None:
            return fields
    return None


def report_time(text: str) -> float | None:
    """When the report was written, from its prologue's ``Date:`` line (None where it has none
    this can read). A zone named by letters (IST, EDT, CEST) is ambiguous (IST is India, Israel
    or Ireland; CST China or the US): it is read as UTC, at most 14 h off, which is what the time
    is used for here (the year of syslog lines, the time of readings that carry none)."""
    fields = _date_fields(text[:8192])
    if fields is None:
        return None
    year, month, day, hms, half, zone = fields
    hour, minute, second = (int(part) for part in hms.split(":"))
    if half is not None:
        hour = hour % 12 + (12 if half == "PM" else 0)
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=_zone(zone) or UTC)
    except ValueError:  # "Feb 31", "25:00:00": not a date
        return None
    return moment.timestamp()


# ---- the report as captures ---------------------------------------------------------------------


def read_bug_report(source: str, text: str, written_s: float) -> BugReportReading:
    """The captures in a report, the parts of a known kind that hold something else, and how
    many parts doctor has no reader for."""
    dated = report_time(text)
    when = dated if dated is not None else written_s
    sections = split_bug_report(text)
    captures: list[Capture] = []
    unread: list[SkippedFile] = []
    for section in sections:
        kind = section_kind(section.name)
        if kind is None:
            continue
        found = _as_capture(section, kind, source, when)
        if isinstance(found, Capture):
            captures.append(found)
        else:
            unread.append(found)
    version = _VERSION.search(text[:8192])
    return BugReportReading(
        captures=tuple(captures),
        unread=tuple(unread),
        sections=len(sections),
        ignored=len(sections) - len(captures) - len(unread),
        dated=dated is not None,
        script_version=version.group(1) if version else None,
    )
