"""What `doctor --from` reads: files and directories of captures, each recognised by its content.

A capture is nvidia-smi output (any format `snapshot` reads), a dcgm-exporter scrape, a
`dcgmi diag` report (table or JSON), an `nvidia-smi topo -m` matrix, an `nvidia-smi nvlink -s`
listing or its `nvlink -e` error counters, a kernel log (dmesg, journalctl, syslog, kern.log) or
`/proc/driver/nvidia/version` -- or an `nvidia-bug-report.sh` log, which holds several of them
(`bug_report` splits it). Files named on the command line must be recognised (a clear error
otherwise); files found in a directory that are not captures are listed as skipped, so pointing
doctor at a support bundle works.

Gzip files (nvidia-bug-report.log.gz, a rotated kern.log.2.gz) are read as the text inside them,
recognised by their magic bytes, whatever their name; what is inside is classified like any file,
and the text inside is read up to MAX_GZIP_BYTES (a gzip bomb is refused, never inflated).
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import re
import stat
import time
import zlib
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from gpuwarden.errors import CorruptInputError, InputError
from gpuwarden.files import (
    MAX_CAPTURE_BYTES,
    UTF16_BOMS,
    CaptureTooLargeError,
    decode_text,
    read_capped,
    without_terminal_escapes,
)
from gpuwarden.health.dcgm_diag import looks_like_dcgm_diag
from gpuwarden.health.kernel_log import (
    KERNEL_PROBE_FAILURE,
    KERNEL_RECORD_PREFIX,
    KERNEL_RECORD_STAMP,
)
from gpuwarden.telemetry.smi.detect import SmiFormat, detect_format
from gpuwarden.telemetry.smi.failure import smi_failure_output
from gpuwarden.telemetry.smi.nvlink_counters import (
    holds_nvlink_counters,
    looks_like_nvlink_counters,
)
from gpuwarden.telemetry.smi.paste import strip_terminal
from gpuwarden.telemetry.smi.query_csv import (
    QUERY_GPU_EXTRA,
    QUERY_GPU_FIELDS,
    is_compute_apps_header,
    parse_header,
)
from gpuwarden.telemetry.smi.topo import (
    CAPABILITIES_REFUSAL,
    holds_link_states,
    lists_nvlink_capabilities,
    looks_like_nvlink_status,
    looks_like_topo,
)

# nvidia-smi and dcgm-exporter outputs of a large node are a few MB (files.MAX_CAPTURE_BYTES, as
# `snapshot` reads them); kernel logs can be GBs, of which the newest part matters: their tail.
MAX_KERNEL_LOG_BYTES = 256 << 20
_HEAD_BYTES = 64 << 10
MAX_DIRECTORY_FILES = 2000  # a support bundle has dozens; a home directory is not a capture
# An nvidia-bug-report log is mostly logs (dmesg, journal excerpts, Xorg logs, lspci -xxxx, base64
# dumps): a few MB on a desktop, tens on a busy server. It is read whole, so it gets the kernel
# logs' bound, and each kernel-log section in it is thus within MAX_KERNEL_LOG_BYTES too.
MAX_BUG_REPORT_BYTES = MAX_KERNEL_LOG_BYTES
# The most text a .gz may inflate to; more is refused as too large (a gzip bomb: 1 KB of
# compressed zeros inflates to 1 MB, 10 MB to 10 GB).
MAX_GZIP_BYTES = MAX_KERNEL_LOG_BYTES
# a pipe or device is copied before it is judged: at most the largest capture doctor reads
_MAX_STREAM_BYTES = MAX_KERNEL_LOG_BYTES
_GZIP_MAGIC = b"\x1f\x8b"


class CaptureKind(StrEnum):
    NVIDIA_SMI = "nvidia-smi"
    DCGM = "dcgm-exporter"
    TOPOLOGY = "topo"
    NVLINK = "nvlink-status"
    NVLINK_COUNTERS = "nvlink-counters"  # `nvidia-smi nvlink -e` / `--errorcounters`
    KERNEL_LOG = "kernel-log"
    DRIVER_VERSION = "driver-version"  # /proc/driver/nvidia/version
    SMI_FAILURE = "nvidia-smi-failure"  # what a failed nvidia-smi printed
    BUG_REPORT = "nvidia-bug-report"  # nvidia-bug-report.sh's log: several of the above
    DCGM_DIAG = "dcgmi-diag"  # a `dcgmi diag` report: the table or its -j JSON


class TimeSource(StrEnum):
    """Where a capture's time comes from. A reading that states its time (-q's "Timestamp", a
    CSV's timestamp column, dmon -o T, a kernel log line's date, a bug report's "Date:" line) is
    of that time; one that states none (a default table without its date line, `topo -m`,
    `nvlink -e`, a dcgm-exporter scrape) is of the time the file was last written, which a copy
    or an edit moves: a guess, to be said as one."""

    STATED = "stated"  # the capture prints it
    FILE_MTIME = "file-mtime"  # the file's modification time
    READ_TIME = "read-time"  # a pipe or device: when doctor read it


@dataclass(frozen=True, slots=True)
class Capture:
    path: str
    kind: CaptureKind
    text: str
    written_s: float  # when the file was written (see ``time_source``): the reading's time
    # where the text states none
    truncated: bool = False  # a kernel log's older part was left out
    time_source: TimeSource = TimeSource.FILE_MTIME  # where ``written_s`` comes from
    # the host a part of a kernel log of several hosts' lines is of (hosts.by_host splits it:
    # each part keeps its file's path); None for a whole file
    host: str | None = None
    # the outputs (topo -m, nvlink -e, nvlink -s) classify looked for in the whole text (it fit
    # in the head) and found none of: reading it needs not look for them again (an
    # nvidia_gpu_exporter capture, which classify takes before looking, holds them beside its
    # readings; a paste of nvlink -s may hold nvlink -e after it)
    ruled_out: frozenset[CaptureKind] = frozenset()

    @property
    def shown(self) -> str:
        """The capture as the report names it: its path, and the host of a part of a log."""
        return self.path if self.host is None else f"{self.path} ({self.host})"


def reading_time_source(capture: Capture, stamps: Sequence[float]) -> TimeSource:
    """Where the time of readings taken from ``capture`` comes from: their reader stamps a
    reading that states no time with the capture's ``written_s`` exactly (dmon's blocks with it
    plus their delay), so a first reading stamped otherwise stated its own."""
    if stamps and stamps[0] != capture.written_s:
        return TimeSource.STATED
    return capture.time_source


@dataclass(frozen=True, slots=True)
class SkippedFile:
    path: str
    reason: str
    # where the file is more than "not a capture" (a truncated or corrupt .gz): the error a file
    # named on the command line gets; one found in a directory is only listed as skipped
    refusal: InputError | None = None


_NVRM_VERSION = re.compile(r"^\s*NVRM version:", re.MULTILINE)
# nvidia-bug-report.sh prints this prologue first (every version since 2004), and puts each part
# between separator lines of 44 underscores. A paste of a part of a report has no prologue but
# still the separators and the script's own headers: `*** ls: ` (echo_metadata, the listing of
# each file it appends), its kernel-log scan, or its epilogue.
BUG_REPORT_PROLOGUE = "Start of NVIDIA bug report log file"
BUG_REPORT_EPILOGUE = "End of NVIDIA bug report log file"
BUG_REPORT_SEPARATOR = re.compile(r"^_{40,}[ \t]*$", re.MULTILINE)
_BUG_REPORT_HEADER = re.compile(
    rf"^(?:\*\*\* ls: |Scanning kernel log files for |{BUG_REPORT_EPILOGUE})", re.MULTILINE
)
# dcgm-exporter's series; some pipelines lower-case metric names (dcgm_fi_dev_gpu_temp), and
# dcgm-exporter 1.x named them dcgm_gpu_temp, dcgm_sm_clock, ... (the dcgm reader takes all)
# A series at a line's start; or indented / quoted with "> " / shown as a shell comment under
# its command ("# DCGM_FI_DEV_GPU_UTIL{...} 0", "# # HELP ...") as pastes carry it (the dcgm
# reader takes all three), but then only as a HELP/TYPE line or a whole sample (name, labels,
# value): an indented or commented name alone is as often code, a config or a query quoting it (a
# traceback's "    DCGM_FI_DEV_GPU_UTIL = ...", a ConfigMap's counters CSV) in another capture.
_DCGM_SERIES = re.compile(
    r"^(?:# (?:HELP|TYPE) )?DCGM_[A-Z]+_\w+"
    r"|^[ \t]*(?:>[ \t]*)*(?:#[ \t]+)?(?:# (?:HELP|TYPE) DCGM_[A-Z]+_\w+ "
    r"|DCGM_[A-Z]+_\w+(?:\{[^}\n]*\})?[ \t]+[-+]?(?:\.?\d|nan|inf))",
    re.MULTILINE | re.I,
)
# Kernel-log lines: dmesg "[ 1234.567890]" or "[Wed Jul 31 23:14:18 2024]", syslog/journal
# "Feb 15 17:37:45 host kernel:", a log viewer's time-only "22:39:31 kernel:", dmesg
# --time-format=iso, "kern  :warn  :", or an NVRM or nvidia-modeset message after a prefix of its
# own (remote syslog, an indented paste) -- but not one quoted in Markdown, JSON or a table.
_KERNEL_LINE = re.compile(
    r"^(?:\[\s*\d+\.\d+\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d [\d:]{8} \d{4}\]"
    # dmesg -H: "[Jan29 20:50]" where a minute starts, "[  +0.000844]" after it
    r"|\[[A-Z][a-z]{2}\d{1,2} \d\d:\d\d\]|\[\s*\+\d+\.\d+\]"
    # the NVSwitch driver's SXid record, bare or after a stamp this pattern does not know
    r"|[^`\"|{\n]{0,160}\bnvidia-nvswitch\d+: SXid \(PCI:"
    # the kernel's PCIe AER records (drivers/pci/pcie/aer.c), with or without a stamp: "pcieport
    # 0000:00:01.0: AER: Corrected error received: ...", "nvidia 0000:01:00.0: PCIe Bus Error:"
    r"|[^`\"|{\n]{0,160}?(?<![\w:])[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]: "
    r"(?:AER: |PCIe Bus Error:)"
    # the IOMMU's DMA fault records (health/iommu.py), with or without a stamp: "DMAR: [DMA Read
    # NO_PASID] Request device [41:00.0] fault addr", "AMD-Vi: Event logged [IO_PAGE_FAULT" and
    # its pre-4.x second line "IO_PAGE_FAULT device=05:00.0 domain=", SMMUv3 "event: F_..."
    r"|[^`\"|{\n]{0,160}?(?:DMAR: ?\[DMA (?:Read|Write)[^\]\n]{0,40}\] Request device \["
    r"|AMD-Vi: Event logged \[IO_PAGE_FAULT |(?<![\w=])IO_PAGE_FAULT device="
    r"|arm-smmu-v3 \S+: event: F_\w+ client: )"
    # syslog's month in any locale ("Feb", "kwi", "фев"): the time, host and "kernel:" decide;
    # indented as a tool that shows the journal prints it (ddcutil)
    r"|[ \t]*\w{2,12}\.? +[ \d]\d [\d:]{8} \S+ kernel:"
    r"|\d{4}-\d\d-\d\dT[\d:,.]+\S*\s+\S+\s+kernel:"
    # Talos's kernel log: "<host>: kern: <level>: [<ISO stamp>]: <record>"
    r"|\S{1,64}: kern:\s*\w+\s*: \[\d{4}-\d\d-\d\dT[\d:.,]+Z?\]:"
    # a log viewer's copy with the time only, with or without the host: "22:39:31 kernel: i915"
    r"|\d\d:\d\d:\d\d (?:\S+ )?kernel:"
    r"|kern\s*:\s*\w+\s*:|[^`\"|{\n]{0,160}\bNVRM: "
    # the display driver's (NVKMS) own records, which carry no "NVRM": "nvidia-modeset: ERROR:
    # GPU:0: Idling display engine timed out: ...", bare, indented or after a stamp
    r"|[^`\"|{\n]{0,160}\bnvidia-modeset: (?:ERROR|WARNING): "
    # a tool quoting the line after a prefix of its own (gpud: '(54 minutes ago) "NVRM: Xid (');
    # not a JSON value ('"message": "NVRM: ...') or list item
    r"|[^`\"|{\n]{0,160}(?<!: )(?<!:)(?<!,)(?<!\[)\"NVRM: Xid \("
    # NVIDIA's Kubernetes device plugin: "XidCriticalError: Xid=79 on Device=GPU-..."
    r"|[^`\"|{\n]{0,160}\bXidCriticalError: Xid=\d+ on Device="
    # journalctl -o short-precise / syslog with fractional seconds: "Mar 13 11:01:55.588061 host
    # kernel:"
    r"|[ \t]*\w{2,12}\.? +[ \d]\d [\d:]{8}\.\d{1,9} \S+ kernel:"
    # the kernel module loader's notices for an NVIDIA module (kernel/module/main.c, signing)
    r"|[^`\"|{\n]{0,160}?\bnvidia(?:[-_][a-z]+)?: (?:loading out-of-tree module taints kernel"
    r"|module license '[^'\n]{1,40}' taints kernel|module verification failed: )"
    # nvidia-drm's own error records (DRM_ERROR with the module's prefix), which carry no NVRM
    r"|[^`\"|{\n]{0,160}?\[drm:\w+ \[nvidia_drm\]\] \*ERROR\* \[nvidia-drm\] "
    # journal lines quoted with "> " (a Markdown quote of `journalctl -f`), or with no host
    # ("Sep 06 23:00:03 kernel: ...", a copy that dropped it)
    r"|[ \t]*>[ \t]*\w{2,12}\.? +[ \d]\d [\d:]{8}(?:\.\d{1,9})? \S+ kernel:"
    r"|[ \t]*\w{2,12}\.? +[ \d]\d [\d:]{8}(?:\.\d{1,9})? kernel:"
    # a kernel crash report's own first lines, bare (a paste of the oops alone): the page-fault
    # handler's "BUG: ...", die()'s "Oops: 0002 [#1]" (6.x "Oops: Oops: ..."), the register line
    r"|BUG: (?:unable to handle|kernel NULL pointer dereference|soft lockup)"
    r"|Oops: (?:Oops: )?[0-9a-f]{4} \[#\d+\]|RIP: [0-9a-f]{4}:[\w.$]+\+0x"
    # ... or its call trace alone (a WARN()'s or an oops's, its header cut off): the unwinder's
    # "Call Trace:" (arm64: "Call trace:") then the stack's " <TASK>" / " <IRQ>" marker or a
    # frame as printk's %pS prints it, "<symbol>+0x<offset>/0x<size>"
    r"|[ \t]*Call [Tt]race:[ \t]*\r?\n[ \t]*(?:<(?:TASK|IRQ|NMI|SOFTIRQ)>"
    r"|(?:\? )?[\w.$]+\+0x[0-9a-f]+/0x[0-9a-f]+)"
    # a line that is one Markdown code span holding a driver record, and nothing else
    r"|[ \t]*`(?:\[[^\]`\n]{1,40}\] )?(?:NVRM: |\[drm:\w+ \[nvidia_drm\]\] "
    r"|nvidia-modeset: (?:ERROR|WARNING): )[^`\n]*`[ \t]*$)",
    re.MULTILINE,
)
# A kernel record another tool's line quotes whole, where a JSON value or a prefix of the tool's
# own would hide it from _KERNEL_LINE: journald's MESSAGE field (the export format's
# "MESSAGE=NVRM: ...", as NVSentinel's health events carry it, or journalctl -o json's
# "MESSAGE":"NVRM: ..."), or a syslog kernel record with its dmesg stamp ("kernel: [16450076.435595]
# NVRM: Xid (...", as NVSentinel's node conditions quote it), or kata's containerd shim logging a
# guest's console line with its dmesg stamp ('msg="reading guest console" vmconsole="[ 5.1] NVRM:
# ...'). The stamp or the field name is what a journal or the kernel wrote, not prose mentioning
# NVRM.
_QUOTED_KERNEL_RECORD = re.compile(
    r'MESSAGE=NVRM: |"MESSAGE"\s*:\s*"NVRM: |\bkernel: \[\s*\d+\.\d+\] NVRM: '
    r'|\bvmconsole="\[\s*\d+\.\d+\] NVRM: '
)
# A paste of the command with its output, whose line breaks were lost (a web page, a chat) or
# that has the output right after the command: "user@host:~$ sudo dmesg -T | grep -i nvidia
# [sudo] password: [Mon Aug 25 16:20:28 2025] nvidia 0000:01:00.0: PCIe Bus Error: ...". A shell
# prompt ("user@host:dir$ ", "root@host:~# ", "[user@host dir]$ ", a bare "$ ") starts the line,
# and a kernel record -- its dmesg stamp and record prefix, as the scanner cuts glued lines --
# follows on the same line, not inside Markdown code (a backtick before it).
_SHELL_PROMPT = r"(?:[\w.-]+@[\w.-]+(?::[^\s$#]{0,200})?|\[[\w.-]+@[\w.-]+[^\]\n]{0,80}\])[$#] |\$ "
_PROMPTED_RECORD = re.compile(
    rf"^[ \t]*(?:{_SHELL_PROMPT})[^`\n]{{0,240}}?{KERNEL_RECORD_STAMP}{KERNEL_RECORD_PREFIX}",
    re.MULTILINE,
)
# How `nvidia-smi -q -x` output opens (the declaration, then the DOCTYPE and the root), or a
# paste of it that left the first lines out: the XML reader takes a document whose root is
# <nvidia_smi_log>, and nothing else that starts with "<" is a capture doctor reads as XML.
_SMI_XML_OPENINGS = ("<?xml", "<!DOCTYPE nvidia_smi_log", "<nvidia_smi_log")
# The names nvidia-smi's --query-gpu knows: a CSV whose header has none of them is some other
# table, not a capture.
_QUERY_NAMES = frozenset(name for name, _, _ in QUERY_GPU_FIELDS) | frozenset(QUERY_GPU_EXTRA)


def _smi_csv(head: str) -> bool:
    """A --query-gpu / --query-compute-apps CSV: by its header row, or, pasted without one
    (``noheader``), by the nvidia-smi command line above it that names its fields."""
    paste = strip_terminal(head)
    first = next((line for line in paste.text.splitlines() if line.strip()), "")
    header = parse_header(first.strip())
    if header is not None and (
        is_compute_apps_header(header) or any(c.name in _QUERY_NAMES for c in header)
    ):
        return True
    query = paste.query()
    if query is None:
        return False
    return query.kind == "compute-apps" or any(name in _QUERY_NAMES for name in query.fields)


def _looks_like_kernel_log(head: str) -> bool:
    """Kernel-log lines, coloured or not, or kernel records a tool's line quotes whole."""
    text = without_terminal_escapes(head)
    return (
        _KERNEL_LINE.search(text) is not None
        or _QUOTED_KERNEL_RECORD.search(text) is not None
        or _PROMPTED_RECORD.search(text) is not None
        # the driver core's probe failure, the one line a user may have when no NVRM line came
        or KERNEL_PROBE_FAILURE.search(text) is not None
    )


def looks_like_bug_report(head: str) -> bool:
    """An nvidia-bug-report log, or a paste of part of one, from its first 64 KiB."""
    if BUG_REPORT_PROLOGUE in head[:8192]:
        return True
    separators = BUG_REPORT_SEPARATOR.findall(head, 0, 1 << 16)
    return len(separators) >= 2 and _BUG_REPORT_HEADER.search(head) is not None


def _smi_format(head: str) -> SmiFormat | None:
    """The nvidia-smi format ``detect_format`` sees in the text under any prompt lines, where it
    is one: its XML is only a document ``parse_xml`` can read, opened by the declaration, the
    DOCTYPE or the ``nvidia_smi_log`` root -- not any text that starts with "<" (a kernel call
    trace's " <TASK>" line once the paste's "Call Trace:" and indent are taken off)."""
    paste = strip_terminal(head).text
    smi = detect_format(paste)
    if smi is SmiFormat.XML and not paste.lstrip("\ufeff \t\r\n").startswith(_SMI_XML_OPENINGS):
        return None
    return smi


def classify(head: str) -> CaptureKind | None:
    """The kind of capture a text is, from its first 64 KiB; None when it is none of them."""
    return kind_and_ruled_out(head)[0]


def kind_and_ruled_out(head: str) -> tuple[CaptureKind | None, frozenset[CaptureKind]]:
    """``classify``, and the outputs it looked for in ``head`` and found none of (see
    ``Capture.ruled_out``)."""
    if _NVRM_VERSION.search(head[:4096]) and "Xid" not in head:
        return CaptureKind.DRIVER_VERSION, frozenset()
    # its table headings and JSON root key are dcgmi's own: no other capture prints them
    if looks_like_dcgm_diag(head):
        return CaptureKind.DCGM_DIAG, frozenset()
    smi = _smi_format(head)
    # an nvidia_gpu_exporter capture holds -q, topo and nvlink sections: doctor reads them all;
    # a -q -x document (its opening checked) is nothing else, and needs no other detector's scan
    if smi in (SmiFormat.CAPTURE, SmiFormat.XML):
        return CaptureKind.NVIDIA_SMI, frozenset()
    if looks_like_topo(head):
        return CaptureKind.TOPOLOGY, frozenset()
    # before `nvlink -s`: its GPU lines are the same, its link lines are counters, not states
    if looks_like_nvlink_counters(head):
        return CaptureKind.NVLINK_COUNTERS, frozenset({CaptureKind.TOPOLOGY})
    if looks_like_nvlink_status(head):
        return CaptureKind.NVLINK, frozenset({CaptureKind.TOPOLOGY, CaptureKind.NVLINK_COUNTERS})
    return _classify_other(head, smi), _TOPO_AND_NVLINK


_TOPO_AND_NVLINK = frozenset(
    {CaptureKind.TOPOLOGY, CaptureKind.NVLINK_COUNTERS, CaptureKind.NVLINK}
)


def _classify_other(head: str, smi: SmiFormat | None) -> CaptureKind | None:
    """``classify`` of a text whose head holds no topo -m or nvlink output."""
    if _DCGM_SERIES.search(head):
        return CaptureKind.DCGM
    # nvidia-smi's own formats are unmistakable; a CSV counts only with query names in its
    # header, or under the pasted command that names them (a bare header-less CSV is
    # `snapshot --query-fields`' business, not a bundle's).
    if smi is not None and smi not in (SmiFormat.QUERY_GPU, SmiFormat.COMPUTE_APPS):
        return CaptureKind.NVIDIA_SMI
    if _looks_like_kernel_log(head):
        return CaptureKind.KERNEL_LOG
    if _smi_csv(head):
        return CaptureKind.NVIDIA_SMI
    if smi_failure_output(strip_terminal(head).text) is not None:
        return CaptureKind.SMI_FAILURE
    return None


def _read_head(path: Path) -> tuple[bytes, bool]:
    """The first 64 KiB of the text, inflated if the file is a .gz; and whether it was."""
    with path.open("rb") as handle:
        head = handle.read(_HEAD_BYTES)
    if not head.startswith(_GZIP_MAGIC):
        return head, False
    return _gunzip(path, _HEAD_BYTES)[0], True


def _gunzip(path: Path, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of the text inside a .gz (every member: nvidia-bug-report.sh
    appends one per part) and whether there is more. Never inflates more than limit + 1."""
    try:
        with gzip.open(path, "rb") as stream:
            raw = stream.read(limit + 1)
    except EOFError:
        raise CorruptInputError(
            "the gzip data ends before its end marker (a truncated download or copy)",
            reference="capture-gzip-truncated",
            hint="copy the .gz again (`gzip -t FILE` checks it), or pass what `zcat FILE` prints",
        ) from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise CorruptInputError(
            f"not valid gzip data ({exc})",
            reference="capture-gzip-corrupt",
            hint="copy the .gz again (`gzip -t FILE` checks it), or pass what `zcat FILE` prints",
        ) from None
    return raw[:limit], len(raw) > limit


def _kernel_log_tail(path: Path) -> tuple[bytes, bool]:
    """A kernel log's newest part (its Xids since the last boot), cut to start on a whole line."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size <= MAX_KERNEL_LOG_BYTES:
            return handle.read(MAX_KERNEL_LOG_BYTES), False
        handle.seek(size - MAX_KERNEL_LOG_BYTES)
        raw = handle.read(MAX_KERNEL_LOG_BYTES)
    return raw[raw.find(b"\n") + 1 :], True


def _too_large(path: Path, limit: int, kind: CaptureKind) -> InputError:
    hint = "pass the capture itself (nvidia-smi -q > smi.txt), not a log that contains it"
    if kind is CaptureKind.BUG_REPORT:
        hint = "pass its parts as separate files (the nvidia-smi --query output, dmesg)"
    elif kind is CaptureKind.KERNEL_LOG:
        hint = "pass its newest part: `zcat FILE | tail -c 100M > kern.log`"
    return InputError(
        f"{path}: larger than {limit >> 20} MiB, too large for a {kind.value} capture",
        reference="capture-too-large",
        hint=hint,
    )


def _read_gzip(path: Path, kind: CaptureKind) -> tuple[bytes, bool]:
    raw, more = _gunzip(path, MAX_GZIP_BYTES)
    if more:
        raise _too_large(path, MAX_GZIP_BYTES, kind)
    return raw, False


def _read(path: Path, kind: CaptureKind, compressed: bool) -> tuple[bytes, bool]:
    """The bytes doctor judges: a whole capture, or a kernel log's newest part."""
    if compressed:
        return _read_gzip(path, kind)
    if kind is CaptureKind.KERNEL_LOG:
        return _kernel_log_tail(path)
    limit = MAX_BUG_REPORT_BYTES if kind is CaptureKind.BUG_REPORT else MAX_CAPTURE_BYTES
    try:
        raw, _ = read_capped(str(path), limit)
    except CaptureTooLargeError:
        raise _too_large(path, limit, kind) from None
    return raw, False


def _decode(raw: bytes) -> str:
    return decode_text(raw)


class CaptureUnreadableError(InputError):
    """A capture or folder the system does not let doctor read (no permission, a link to
    nothing or in a loop); ``reason`` is why, without the path: a bundle's listing of what it
    skipped names the file in front of it."""

    reference = "capture-unreadable"

    def __init__(self, path: str, exc: OSError) -> None:
        self.reason = f"cannot be read ({exc.strerror or exc})"
        super().__init__(f"{path}: {self.reason}", hint="check the path and its permissions")


def read_capture(path: str) -> Capture | SkippedFile:
    """One file as a capture, or why it is not one (binary, empty, unrecognised, a broken .gz)."""
    file = Path(path)
    try:
        if not stat.S_ISREG(file.stat().st_mode):
            return _read_stream(path)
        return _read_file(file, path, file.stat().st_mtime)
    except OSError as exc:
        raise CaptureUnreadableError(path, exc) from None
    except CorruptInputError as exc:
        return SkippedFile(path, exc.message, exc.about(path))


def _read_file(
    file: Path, name: str, written: float, source: TimeSource = TimeSource.FILE_MTIME
) -> Capture | SkippedFile:
    """``file`` (a regular file: read twice, its head then the part doctor judges) as ``name``,
    written at ``written`` (known from ``source``)."""
    head, compressed = _read_head(file)
    if b"\0" in head and not head.startswith(UTF16_BOMS):
        return SkippedFile(name, "binary file")
    text_head = _decode(head)
    if not text_head.strip():
        return SkippedFile(name, "empty file")
    kind, ruled_out = (
        (CaptureKind.BUG_REPORT, frozenset())
        if looks_like_bug_report(text_head)
        else kind_and_ruled_out(text_head)
    )
    if kind is None and lists_nvlink_capabilities(text_head):
        return SkippedFile(name, CAPABILITIES_REFUSAL)
    if kind is None:
        first = next((line for line in text_head.splitlines() if line.strip()), "")
        return SkippedFile(name, f"not a capture doctor reads ({first.strip()[:50]!r})")
    raw, truncated = _read(file, kind, compressed)
    whole = len(raw) <= len(head)  # classify read all of it
    ruled_out = ruled_out if whole else frozenset()
    return Capture(name, kind, _decode(raw), written, truncated, source, ruled_out=ruled_out)


def _read_stream(path: str) -> Capture | SkippedFile:
    """A pipe or a device (``--from <(nvidia-smi -q)``) can be read only once: its head shows
    whether it is text, then it is copied to a temporary file (at most the largest capture
    doctor reads) and judged as a file written now."""
    import tempfile  # only for pipes and devices: off doctor's start-up path

    with open(path, "rb") as stream, tempfile.TemporaryDirectory(prefix="gpuwarden-") as tmp:
        head = stream.read(_HEAD_BYTES)
        if b"\0" in head and not head.startswith((_GZIP_MAGIC, *UTF16_BOMS)):
            return SkippedFile(path, "binary file")
        copy = Path(tmp) / "capture"
        with copy.open("wb") as out:
            out.write(head)
            room = _MAX_STREAM_BYTES - len(head)
            while room >= 0 and (chunk := stream.read(min(room + 1, 1 << 20))):
                out.write(chunk)
                room -= len(chunk)
        if room < 0:
            raise InputError(
                f"{path}: more than {_MAX_STREAM_BYTES >> 20} MiB from a pipe or device, more "
                "than any capture doctor reads",
                reference="capture-too-large",
                hint="save the capture to a file and pass the file",
            )
        return _read_file(copy, path, time.time(), TimeSource.READ_TIME)


# How deep a directory named is read: its files, its folders' (one per host) and theirs
_DEPTH = 2
_TOO_DEEP = f"a folder more than {_DEPTH} levels below the directory named: not read"


def _walk(directory: Path, unread: list[SkippedFile]) -> Iterator[Path]:
    """Regular files under ``directory`` (two levels deep, sorted, hidden ones left out): a
    FIFO or a device in a bundle would block or never end. A folder inside that cannot be
    listed goes to ``unread`` (os.walk would pass over it without a word). The directory named
    itself unlistable (no read or search permission), or empty (a mount not there yet, a copy
    that did not happen), is an InputError: judged, it would be a bundle of nothing — no
    capture, an UNKNOWN verdict and exit 0."""

    def not_listed(exc: OSError) -> None:
        if Path(exc.filename) == directory:
            raise CaptureUnreadableError(str(directory), exc)
        unread.append(SkippedFile(str(exc.filename), f"folder not readable ({exc.strerror})"))

    for root, dirs, files in os.walk(directory, onerror=not_listed):
        if Path(root) == directory and not dirs and not files:
            raise InputError(
                f"{directory}: an empty directory, no capture in it",
                reference="capture-not-found",
                hint="point --from at the folder the captures were saved in",
            )
        depth = len(Path(root).relative_to(directory).parts)
        shown = sorted(d for d in dirs if not d.startswith("."))
        dirs[:] = shown if depth < _DEPTH else []
        if depth >= _DEPTH:  # said, not passed over: a bundle nested deeper reads as nothing
            unread += (SkippedFile(str(Path(root) / d), _TOO_DEEP) for d in shown)
        for name in sorted(files):
            path = Path(root) / name
            if not name.startswith(".") and _is_regular(path):
                yield path


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:  # a dangling link: read_capture says why
        return True


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise CaptureUnreadableError(str(path), exc) from None


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError as exc:
        raise CaptureUnreadableError(str(path), exc) from None


# the two `nvidia-smi nvlink` listings doctor reads: whether a text holds one, and the name of
# its part in a paste that holds both
_NVLINK_LISTINGS = {
    CaptureKind.NVLINK: (holds_link_states, "nvlink -s"),
    CaptureKind.NVLINK_COUNTERS: (holds_nvlink_counters, "nvlink -e"),
}


def nvlink_parts(capture: Capture) -> tuple[Capture, ...]:
    """A paste of `nvlink -s` and `nvlink -e` outputs (one under the other, with or without
    their command lines): the capture ``classify`` found, and the other listing as a part of
    it, "<path>#nvlink -e" (or "#nvlink -s"). Each is read by its own reader from the paste;
    a part its reader refuses is listed as unread and the rest is still read, as a bug
    report's parts are."""
    if capture.kind not in _NVLINK_LISTINGS:
        return (capture,)
    other = next(kind for kind in _NVLINK_LISTINGS if kind is not capture.kind)
    holds, name = _NVLINK_LISTINGS[other]
    if not holds(capture.text, looked=other in capture.ruled_out):
        return (capture,)
    part = dataclasses.replace(capture, path=f"{capture.path}#{name}", kind=other)
    return capture, part


# `--from -` is standard input, as for most tools that take a file (`dmesg | gpuwarden doctor
# --from -`): read as the pipe it is
STDIN = "-"
STDIN_DEVICE = "/dev/stdin"


def _read_in_bundle(file: Path) -> Capture | SkippedFile:
    """A file of a directory named: one that cannot be opened (a link in a loop or to nothing,
    no read permission) is listed as unread, as a folder that cannot be listed is, and the
    rest of the bundle is still judged; a file named alone that cannot be read is the error."""
    try:
        return read_capture(str(file))
    except CaptureUnreadableError as exc:
        return SkippedFile(str(file), exc.reason)


def collect_captures(paths: Sequence[str]) -> tuple[tuple[Capture, ...], tuple[SkippedFile, ...]]:
    """Every capture named or found under the directories named. A named file that is not a
    capture is an error; a file in a directory that is not one is skipped with its reason."""
    captures: list[Capture] = []
    skipped: list[SkippedFile] = []
    seen: set[str] = set()
    for named in distinct_inputs(paths):
        given = STDIN_DEVICE if named == STDIN else named
        path = Path(given)
        if _is_dir(path):
            passed_over, found_before = len(skipped), len(captures)
            reached = list(_walk(path, skipped))
            files = [file for file in reached if _first_time(file, seen)]
            if len(files) > MAX_DIRECTORY_FILES:
                raise InputError(
                    f"{given}: more than {MAX_DIRECTORY_FILES} files",
                    reference="capture-directory-too-large",
                    hint="point --from at the folder of captures (a support bundle), "
                    "not a whole tree",
                )
            for file in files:
                found = _read_in_bundle(file)
                if isinstance(found, Capture):
                    captures += nvlink_parts(found)
                else:
                    skipped.append(found)
            # a folder inside one named before (``--from nest --from nest/node-b``) whose files
            # were read already holds captures within reach: it adds nothing, refuses nothing
            if len(captures) == found_before and len(files) == len(reached):
                _refuse_nested(given, skipped[passed_over:])
            continue
        if not _exists(path):
            raise InputError(
                f"{given}: no such file or directory",
                reference="capture-not-found",
                hint="pass saved nvidia-smi / dcgm-exporter / topo / kernel-log outputs, "
                "or a directory of them",
            )
        if not _first_time(path, seen):
            continue
        found = read_capture(given)
        if isinstance(found, SkippedFile) and found.refusal is not None:
            raise found.refusal
        if isinstance(found, SkippedFile):
            raise InputError(
                f"{given}: {found.reason}",
                reference="capture-not-recognised",
                hint="doctor reads nvidia-smi (-q, -q -x, --query-gpu CSV, dmon, the table), "
                "dcgm-exporter scrapes, `dcgmi diag` reports (table or -j JSON), `nvidia-smi "
                "topo -m`, `nvidia-smi nvlink -s` / `nvlink -e`, kernel logs (dmesg, "
                "journalctl -k, kern.log), /proc/driver/nvidia/version and "
                "nvidia-bug-report.log(.gz); gzip files are read as the text inside",
            )
        captures += nvlink_parts(found)
    return tuple(captures), _passed_over_once(skipped, seen)


def distinct_inputs(paths: Sequence[str]) -> tuple[str, ...]:
    """The paths named, each file or folder once, as first spelled: ``nest``, ``nest/``,
    ``./nest`` and a link to it are one folder (read twice, a second spelling would find only
    files read already), and standard input named twice is read once."""
    spelled: dict[str, str] = {}
    for named in paths:
        spelled.setdefault(named if named == STDIN else real_path(named), named)
    return tuple(spelled.values())


def _passed_over_once(
    skipped: Sequence[SkippedFile], reached: Collection[str]
) -> tuple[SkippedFile, ...]:
    """Each file or folder passed over, said once: a folder inside another named reaches the
    same folders (and, one level down, the folders inside those already said), and a folder
    too deep for one input is not passed over where another input read files in it
    (``reached``: the real paths of every file read)."""
    real = [real_path(passed.path) for passed in skipped]
    too_deep = {
        path
        for path, passed in zip(real, skipped, strict=True)
        if passed.reason == _TOO_DEEP and not any(is_within(file, path) for file in reached)
    }
    said: dict[str, SkippedFile] = {}
    for path, passed in zip(real, skipped, strict=True):
        if passed.reason == _TOO_DEEP and (
            path not in too_deep or any(is_within(path, folder) for folder in too_deep)
        ):
            continue
        said.setdefault(path, passed)
    return tuple(said.values())


def real_path(path: str) -> str:
    """``path`` with its links and "."/".." resolved; as given where it cannot be (a NUL in a
    name passed through the API: no file is named so)."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def is_within(path: str, folder: str) -> bool:
    """Whether ``path`` lies inside ``folder`` (both real paths), not being it."""
    return path.startswith(folder.rstrip(os.sep) + os.sep)


def _refuse_nested(given: str, passed_over: Sequence[SkippedFile]) -> None:
    """A directory with no capture within reach but folders beyond it: the captures are nested
    deeper than doctor reads (a bundle in a folder in a folder), and judged it would be a
    bundle of nothing (UNKNOWN, exit 0)."""
    deeper = [s.path for s in passed_over if s.reason == _TOO_DEEP]
    if deeper:
        raise InputError(
            f"{given}: no capture within {_DEPTH} levels of folders, {len(deeper)} folder(s) "
            f"deeper not read (e.g. {deeper[0]})",
            reference="capture-not-found",
            hint=f"point --from at the folder that holds the hosts' folders, e.g. "
            f"{Path(deeper[0]).parent.parent}",
        )


def _first_time(path: Path, seen: set[str]) -> bool:
    """Whether ``path`` is a file not reached before (``--from a --from a``, a folder and a file
    in it, a link to a file beside it): read twice, it would be listed twice as an input."""
    real = real_path(str(path))
    if real in seen:
        return False
    seen.add(real)
    return True
