"""What a pasted log looks like once its decorations are gone.

People paste errors with the decorations of wherever they came from: torchrun's ``[rank0]:``,
Ray's ``(RayWorker pid=12)``, syslog and ISO timestamps, dmesg uptimes, glog headers, markdown
quotes, the container log prefixes (docker compose, the CRI log files, ``kubectl logs --prefix``),
ANSI colours; and terminals wrap long messages. The matchers read one flat text: every line
without its prefixes, joined by single spaces, so a message wrapped over lines or split by
``[rank3]:`` reads as it was printed; a line the container runtime split (a CRI partial line) is
joined to its continuation with nothing between, as the runtime wrote it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuwarden.files import without_terminal_escapes

# A paste bigger than this is read at its head and tail (tracebacks end with the error; logs
# start with the versions): the regular expressions stay fast on a 50 MB log.
SCAN_CHARS = 1_000_000
_HEAD_CHARS = SCAN_CHARS // 4

# The container log prefixes, as the tools print them:
# - the CRI log file line (/var/log/containers/*.log; the CRI logging format of kubelet,
#   kubernetes/design-proposals-archive node/kubelet-cri-logging.md, read by kubelet's
#   pkg/kubelet/kuberuntime/logs/logs.go): an RFC 3339Nano timestamp, the stream (stdout or
#   stderr), the tags separated by ":" (the first is ``P``: the runtime split a long line and it
#   goes on in the next one, or ``F``: the line is complete), one space, then the content:
#   "2016-10-06T00:17:09.669794202Z stdout P First line of log entry 2";
# - docker compose logs / up (docs.docker.com/reference/cli/docker/compose/logs, whose
#   --no-log-prefix drops it): the container's name padded to the longest name plus one, then
#   "| " (compose's cmd/formatter/logs.go: "%-<width>s | "). A container of a service is named
#   <service>-<replica> (compose v2) or <project>_<service>_<replica> (v1): "trainer-1  | ...";
#   the replica number keeps a pasted shell pipe ("dmesg | grep Xid") whole;
# - kubectl logs --prefix (kubernetes.io/docs/reference/kubectl/generated/kubectl_logs: "Prefix
#   each log line with the log source (pod name and container name)"; kubectl's logs.go prints
#   "[pod/%s/%s] "): "[pod/trainer-0/pytorch] ...".
_CRI_LOG_LINE = r"""
        \s*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)\s(?:stdout|stderr)\s
        (?P<cri_tag>[PF])(?::\S*)?(?:\s|$)                  # CRI: <time> stdout F <content>"""
_CRI_PARTIAL = "P"
_CONTAINER_PREFIXES = (
    r"""
      | """
    + _CRI_LOG_LINE  # before the ISO timestamp, which would take the CRI line's time alone
    + r"""
      | \s*[\w.-]+[-_]\d+\s+\|(?:\s|$)                   # docker compose: trainer-1  |
      | \s*\[pod/[\w.-]+/[\w.-]*\](?:\s|$)                # kubectl logs --prefix: [pod/p/c]"""
)

_PREFIX = re.compile(
    r"""^(?:
        \s*\[(?:rank|RANK)\s*\d+\]\s*:?             # torchrun --tee / DDP: [rank0]:
      | \s*\[default\d+\]\s*:                       # torch.distributed.launch: [default0]:
      | \s*\[(?:PG\s+(?:ID\s+)?\d+\s+)?(?:PG\s+GUID\s+\S+\s+)?Rank\s+\d+\]\s*  # [PG 0 Rank 1]
      | \s*\((?:\w+\s+)?pid=\d+(?:,\s*ip=[\d.]+)?\)\s*   # Ray: (RayWorker pid=12, ip=1.2.3.4)
"""
    + _CONTAINER_PREFIXES
    + r"""
      | \s*\[?\d{4}-\d\d-\d\d[T\s]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s*  # ISO
      | \s*[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+[\w.-]+\s+[\w.\-/\[\]]+:\s*  # syslog
      | \s*\[\s*\d+\.\d+\]\s*                       # dmesg: [ 1234.567890]
      | \s*\[[A-Z][a-z]{2}\s+[A-Z][a-z]{2}\s+\d{1,2}\s+[\d:]+\s+\d{4}\]\s*  # dmesg -T
      | [IWEF]\d{4}\s+\d\d:\d\d:\d\d\.\d+\s+\d+\s+\S+:\d+\]\s*  # glog: E0612 12:00:00.1 42 f.cc:7]
      | \s*(?:>\s*)+                                 # markdown quote
      | \s*[|│]\s                                    # table or box border
      | \s*\d{1,4}:\s(?=\S)                          # srun --label: "3: "
    )""",
    re.VERBOSE,
)
_MAX_PREFIXES = 4  # "[rank0]: 2024-01-01T00:00:00 ..." carries several
_CRI_LINE = re.compile("^(?:" + _CRI_LOG_LINE + "\n)", re.VERBOSE)


@dataclass(frozen=True, slots=True)
class Paste:
    """The text ``explain`` reads: ``raw`` (bounded) for line-based scanners, ``flat`` for the
    message patterns."""

    raw: str
    flat: str
    truncated: bool  # longer than SCAN_CHARS: the middle was not read
    lowered: str = ""  # flat, lower-cased: for the literal prefilters (anchors.may_match)

    def mentions(self, *words: str) -> bool:
        """Whether any of the lower-case ``words`` occurs in the text."""
        return any(word in self.lowered for word in words)

    def shows(self, words: tuple[str, ...], pattern: re.Pattern[str]) -> bool:
        """Whether ``pattern`` matches the flat text; the lower-case ``words`` (one of which any
        match contains) are a cheap literal test first."""
        return self.mentions(*words) and pattern.search(self.flat) is not None


def _bounded(text: str) -> tuple[str, bool]:
    if len(text) <= SCAN_CHARS:
        return text, False
    head = text[:_HEAD_CHARS]
    tail = text[-(SCAN_CHARS - _HEAD_CHARS) :]
    return head[: head.rfind("\n") + 1] + tail[tail.find("\n") + 1 :], True


def strip_decorations(line: str) -> str:
    for _ in range(_MAX_PREFIXES):
        match = _PREFIX.match(line)
        if match is None or not match.group(0):
            break
        line = line[match.end() :]
    return line.strip()


# Typographic quotes that blogs, chat tools and word processors put in place of ASCII ones
# ("couldn‘t", “Address”): the messages are matched in ASCII.
_QUOTES = (("\u2018", "'"), ("\u2019", "'"), ("\u201c", '"'), ("\u201d", '"'), ("\u00b4", "'"))


def _ascii_quotes(text: str) -> str:
    for fancy, plain in _QUOTES:
        if fancy in text:
            text = text.replace(fancy, plain)
    return text


def _join_partial_lines(raw: str) -> str:
    """``raw`` with each CRI partial line joined to the line that goes on with it, as kubelet
    serves them: a ``P`` line's content ends without a newline and the next line's content
    follows it directly (a split may fall inside a word)."""
    lines: list[list[str]] = []  # each line as its pieces: a long one split many times stays linear
    continues = False
    for line in raw.split("\n"):
        match = _CRI_LINE.match(line)
        if continues and match is not None:
            lines[-1].append(line[match.end() :])
        else:
            lines.append([line])
        continues = match is not None and match.group("cri_tag") == _CRI_PARTIAL
    return "\n".join(map("".join, lines))


# The metadata lines of a pasted /metrics page (prometheus.io/docs/instrumenting/
# exposition_formats: "# HELP <metric> <docstring>", "# TYPE <metric> <type>"; OpenMetrics adds
# "# UNIT <metric> <unit>"): they describe a family ("Total number of double-bit volatile ECC
# errors."), they report nothing, so the matchers never read them. A series line is a reading
# and stays. Markdown turns a "# " line into a heading and the "#" is lost in the copy: a TYPE
# line still shows its kind from the format's list; a HELP line is one only where the paste
# types the same family.
_METRIC_NAME = r"[A-Za-z_:][A-Za-z0-9_:]*"
_METRIC_KINDS = "counter|gauge|histogram|summary|untyped|unknown|info|stateset|gaugehistogram"
_EXPOSITION_METADATA = re.compile(rf"(?:#\s*)+(?:HELP|TYPE|UNIT)\s+{_METRIC_NAME}(?:\s|$)")
_TYPE_LINE = re.compile(rf"(?:#\s*)*TYPE\s+(?P<name>{_METRIC_NAME})\s+(?:{_METRIC_KINDS})")
_HASH_LOST_HELP = re.compile(rf"HELP\s+(?P<name>{_METRIC_NAME})(?:\s|$)")


def _without_exposition_metadata(lines: list[str]) -> list[str]:
    """``lines`` (decorations stripped) without a pasted /metrics page's HELP, TYPE and UNIT
    lines."""
    type_lines = {line: m["name"] for line in lines if (m := _TYPE_LINE.fullmatch(line))}
    typed = set(type_lines.values())

    def describes(line: str) -> bool:
        if line in type_lines or _EXPOSITION_METADATA.match(line) is not None:
            return True
        help_line = _HASH_LOST_HELP.match(line)
        return help_line is not None and help_line["name"] in typed

    return [line for line in lines if not describes(line)]


def read_paste(text: str) -> Paste:
    raw, truncated = _bounded(text.replace("\r\n", "\n").replace("\r", "\n"))
    raw = _ascii_quotes(without_terminal_escapes(raw))
    raw = _join_partial_lines(raw)
    lines = [strip_decorations(line) for line in raw.split("\n")]
    if "HELP" in raw or "TYPE" in raw:
        lines = _without_exposition_metadata(lines)
    flat = " ".join(" ".join(line for line in lines if line).split())
    return Paste(raw=raw, flat=flat, truncated=truncated, lowered=flat.lower())
