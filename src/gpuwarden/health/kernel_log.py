"""The kernel-log Xid scanner: text in, ``KernelLogReport`` out. Pure: no files, no clock.

It reads every format a kernel log reaches a person in (see reference/telemetry.md §4 "Quirks"):
plain ``dmesg`` (``[ 1234.567890] NVRM: ...``), ``dmesg -T`` (``[Wed Jul 31 23:14:18 2024]``),
``dmesg --time-format=iso`` and ``dmesg -x`` (``kern  :warn  : 2025-01-21T04:41:44,283302+00:00``),
journalctl (``kernel:`` with and without a syslog date and host; ``-o short-iso``,
``short-precise``, ``short-monotonic``, ``short-unix``), ``/dev/kmsg`` records, syslog and
kern.log (``Feb 15 17:37:45 host kernel: [..] NVRM: ...``: the year comes from ``year``), remote
syslog (Talos: ``192.168.x.y: kern: warning: [2026-04-22T21:30:51.5Z]: NVRM: ...``), bare
``NVRM:`` lines, redacted PCI ids (``PCI:...``), indented continuation lines (a record wrapped
by a terminal, an issue tracker or journalctl, joined to it where it visibly stops short:
``with_continuation``), ``dmesg
--color=always`` colour sequences, tools' lines quoting several kernel records (each
"NVRM: Xid (" is one driver message), and pastes that lost their line breaks or hold the command
line before its output (a line is cut before each record stamp after its first:
``kernel_records``).

Only lines that say ``NVRM`` or ``Xid`` reach Python: a regex with a literal prefix finds the
driver's Xid lines over the whole buffer in C, ``str.find`` skips the noise between them, and
each Xid folds into its (GPU, Xid) group as it is read (a repeated message is decoded once).
``KernelLogScanner`` takes the text in chunks, so a big log is scanned in bounded memory;
``scan_kernel_log`` is the one-call form.

Times: a calendar stamp without a zone (``dmesg -T``, syslog) is the host's local time, turned
into Unix seconds with ``tz_offset_s`` (seconds east of UTC); ISO stamps with a zone are exact.
"""

from __future__ import annotations

import calendar
import itertools
import re
from collections import Counter, deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import NamedTuple

from gpuwarden import files
from gpuwarden.catalog.pci_bus import normalize_pci_bus_id
from gpuwarden.catalog.xid import GPU_LOST_XID
from gpuwarden.health.iommu import IOMMU_MARKERS, IommuAccumulator
from gpuwarden.health.pcie_aer import AER_MARKERS, TIE_MARKERS, AerAccumulator, NvidiaTies
from gpuwarden.health.xid_groups import GPU_LOST_MARKERS, XidGroupBuilder, build_groups
from gpuwarden.health.xid_nvswitch import SXID_WORD, NvSwitchGroupBuilder, parse_sxid_line
from gpuwarden.types.health import Confidence, DriverCrash, KernelLogReport, XidOccurrence
from gpuwarden.units import whole_number

# An Xid record as the other logs of a node know it (health/xid_repeats.py): (Xid, normalised
# bus id, the text after the Xid's number, Unix seconds, uptime seconds)
XidRecord = tuple[int, str | None, str, float | None, float | None]
# A "line" with no newline for this long is not a kernel log line: scan what came so far.
MAX_CARRY_CHARS = 1 << 20
FALLEN_OFF_LOOKBACK_LINES = 3  # "The NVIDIA GPU <bus>" ... "fallen off the bus": 3 lines
# The driver prints an Xid (and a PID) as a 32-bit number: a longer run of digits is not one
# (and int() refuses more than 4300 digits).
MAX_NUMBER_DIGITS = 10

# Kinds driver_messages turns into findings: the GSP firmware's crash report (kernel_gsp_tu102.c,
# kgspHealthCheck), nvidia-modeset's display-engine timeouts (nvkms-dma.c, nvkms-evo*.c) and the
# driver's own request for a reset
GSP_CRASH_KIND = "gsp-crash"
DISPLAY_TIMEOUT_KIND = "display-engine-timeout"
RESET_REQUIRED_KIND = "gpu-reset-required"
GSP_INIT_KIND = "gsp-init-failed"  # the GSP firmware did not boot (driver_messages)
GSP_TIMEOUT_KIND = "gsp-rpc-timeout"  # the GSP firmware stopped answering an RPC
PCI_BAR_UNBRIDGED_KIND = "pci-bar-no-bridge-window"  # nv-pci.c: a 64-bit BAR no bridge forwards
GPU_UNSUPPORTED_KIND = "gpu-not-supported"  # nv-pci.c: this driver release does not take the GPU
# nv-pci.c: the open kernel module does not take a GPU without a GSP (before Turing)
OPEN_MODULE_UNSUPPORTED_KIND = "gpu-not-supported-by-open-module"
SUSPEND_RESUME_KIND = "suspend-resume-failed"  # the driver could not suspend or resume a GPU
# One failure of RmInitAdapter is two lines: osinit.c's "NVRM: GPU <bus>: RmInitAdapter failed!
# (0x..:0x..:N)" inside rm_init_adapter(), then nv.c's "NVRM: rm_init_adapter failed, device minor
# number N" when it returns false. A paste may cut either at its edge, so the failures are the
# more of the two lines' counts (``finish``), not their sum.
RM_INIT_ADAPTER_KIND = "rm-init-adapter-failed"
_RM_INIT_ADAPTER_SAID_AGAIN = "rm-init-adapter-failed:nv.c"
# Other NVRM messages worth a line in the report: (kind, text the driver prints).
NOTABLE_MESSAGES: tuple[tuple[str, str], ...] = (
    (RM_INIT_ADAPTER_KIND, "RmInitAdapter failed"),
    (_RM_INIT_ADAPTER_SAID_AGAIN, "rm_init_adapter failed"),
    ("fallen-off-bus", "fallen off the bus"),
    (GSP_TIMEOUT_KIND, "rpcRecvPoll timedout"),
    (GSP_TIMEOUT_KIND, "GSP RPC timeout"),
    (GSP_TIMEOUT_KIND, "Timeout waiting for RPC"),
    # the falcon core dump the GSP timeout path prints (kernel_gsp.c's timeout logging calls
    # kflcnCoreDumpNondestructive): a GSP that stopped answering, with or without its Xid 119
    (GSP_TIMEOUT_KIND, "kflcnCoreDumpNondestructive"),
    # the GSP firmware did not boot (kernel_gsp.c / kernel_gsp_fmc.c / kernel_gsp_booter.c):
    # the reason the driver could not take the GPU (WPR2 left up, a VBIOS the firmware cannot
    # boot from, firmware files that do not match the module, the host out of memory)
    (GSP_INIT_KIND, "Cannot initialize GSP firmware RM"),
    (GSP_INIT_KIND, "reported an error while attempting to boot GSP"),
    (GSP_INIT_KIND, "Max GSP-RM boot attempts exceeded"),
    (GSP_INIT_KIND, "failed to prepare interface data for FWSEC"),
    (GSP_INIT_KIND, "Error preparing GSP-RM image"),
    ("xid-prints-rate-limited", "Rate limiting"),
    (RESET_REQUIRED_KIND, "needs to be reset"),
    (RESET_REQUIRED_KIND, "marked for reset"),
    # the driver's status NV_ERR_RESET_REQUIRED ("Reset required", nvstatuscodes.h 0x62), named
    # in the assertion and RPC lines of a GPU that only a reset brings back
    (RESET_REQUIRED_KIND, "NV_ERR_RESET_REQUIRED"),
    # nv_pci_probe's "NVRM: GPU 0000:3b:00.0: GPU is lost, skipping nv_pci_probe" (the GPU's
    # state check returned NV_ERR_GPU_IS_LOST): a GPU lost without an Xid or "fallen off" line
    ("gpu-lost", "GPU is lost"),
    ("probe-failed", "probe routine failed"),
    ("no-gpu-probed", "No NVIDIA GPU found"),
    ("no-gpu-probed", "No NVIDIA devices probed"),
    ("no-gpu-probed", "No NVIDIA graphics adapter found"),  # older drivers' wording
    # nv.c's nvidia_init_module when it probed GPUs but none came up (each probe failed):
    # "NVRM: None of the NVIDIA devices were initialized." -- printed with or without "The
    # NVIDIA probe routine failed for N device(s)"; older drivers (2008-2009 pastes) said
    # "None of the NVIDIA graphics adapters were initialized!"
    ("no-gpu-initialised", "None of the NVIDIA devices were initialized"),
    ("no-gpu-initialised", "None of the NVIDIA graphics adapters were initialized"),
    # nv-pci.c's probe refusing a GPU whose BAR the firmware left without an address or size
    # ("NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:" then "NVRM: BAR1
    # is 0M @ 0x0 (PCI:...)"): Above 4G decoding / MMIO space; the first line, counted once.
    # Old pastes wrap it after "is" (an 80-column terminal): the words before the wrap decide
    ("pci-bar-invalid", "I/O region assigned to your NVIDIA device"),
    # the same check's refusal of a 64-bit BAR mapped above 4 GB behind a bridge that forwards no
    # prefetchable window for it ("NVRM: This is a 64-bit BAR mapped above 4GB by the system" /
    # "NVRM: BIOS or the Linux kernel, but the PCI bridge" / "NVRM: immediately upstream of this
    # GPU does not define" / "NVRM: a matching prefetchable memory window.", then the README's
    # 64-bit BAR section): the line that names the missing window, once a message. Drivers of
    # 2008 printed the first line with another ending (no bridge named): not this kind
    (PCI_BAR_UNBRIDGED_KIND, "a matching prefetchable memory window"),
    # nv-pci.c's probe when another driver (rivatv, a framebuffer) holds the GPU's registers:
    # "NVRM: request_mem_region failed for 16M @ 0xc6000000. This can occur when a driver such
    # as rivatv is loaded and claims ownership of the device's registers."
    ("request-mem-region-failed", "request_mem_region failed"),
    # nv-pci.c's probe refusing a GPU the module does not support: "NVRM: The NVIDIA GPU
    # 0000:02:00.0 (PCI ID: 10de:2331)" / "NVRM: installed in this system is not supported by
    # the" / "NVRM: NVIDIA 575.64.03 driver release." (older releases: "...by the 304.116" /
    # "NVRM: NVIDIA Linux driver release.  Please see 'Appendix A - Supported NVIDIA GPU
    # Products'..."; the open module: "...by open nvidia.ko" when the GPU has no GSP): the
    # second line, once a message, whatever the release's name after it. The open module's
    # refusal ends that line with "open" ("...not supported by open" / "NVRM: nvidia.ko because it
    # does not include the required GPU" / "NVRM: System Processor (GSP)."): a kind of its own,
    # first, for the alternation takes the first text matching where both start
    (OPEN_MODULE_UNSUPPORTED_KIND, "installed in this system is not supported by open"),
    (GPU_UNSUPPORTED_KIND, "installed in this system is not supported by"),
    ("api-mismatch", "API mismatch"),
    ("assertion-failed", "Assertion failed"),
    # mem_mgr's memmgrRestorePowerMgmtState_KERNEL when a resume finds no framebuffer state a
    # suspend saved: "NVRM: memmgrRestorePowerMgmtState_KERNEL: !!!!! Calling Resume on an active
    # GPU or the previous Suspend call might have failed !!!!!!" then "...: !!!!! So ignoring the
    # resume request !!!!!!" (it returns NV_ERR_INVALID_STATE): the GPU's memory is not
    # restored, a blank display after resume. The first line, once a message
    (SUSPEND_RESUME_KIND, "Calling Resume on an active GPU"),
    # kernel_gsp.c's kgspHealthCheck when the GSP firmware reported a crash (it marks GSP-RM
    # unhealthy): the banner before the report ("...** GSP-CrashCat Report **..."), with or
    # without the Xid 120 line the report may carry. Recent drivers print a task watchdog's
    # report under its own banner and count it a timeout, not an error (GSP-RM stays healthy,
    # no GspFirmwareFault event): a kind of its own
    (GSP_CRASH_KIND, "GSP-CrashCat Report"),
    ("gsp-watchdog", "LibOS Task Watchdog Report"),
    ("driver-loaded", "loading NVIDIA UNIX"),
)
# The display driver (nvidia-modeset, NVKMS) logs its own errors, without "NVRM":
# "nvidia-modeset: ERROR: GPU:0: Idling display engine timed out: 0x0000c67e:0:0:1060" (the
# display engine did not go idle), and "...: Error while waiting for GPU progress: 0x0000ca7d:0
# 2:0:200:192" (a display channel that stopped taking methods, nvEvoMakeRoom): the display
# engine hung. (kind, text the module prints after its prefix)
MODESET_ERROR = "nvidia-modeset: ERROR"
MODESET_MESSAGES: tuple[tuple[str, str], ...] = (
    (DISPLAY_TIMEOUT_KIND, "Idling display engine timed out"),
    (DISPLAY_TIMEOUT_KIND, "Error while waiting for GPU progress"),
)

_NOTABLE = re.compile("|".join(re.escape(text) for _, text in NOTABLE_MESSAGES))
_NOTABLE_KIND = {text: kind for kind, text in NOTABLE_MESSAGES}
_MODESET = re.compile("|".join(re.escape(text) for _, text in MODESET_MESSAGES))
_MODESET_KIND = {text: kind for kind, text in MODESET_MESSAGES}
# The kernel driver core's own line when a driver's probe returns an error (drivers/base/dd.c):
# "nvidia: probe of 0000:01:00.0 failed with error -1", since Linux 6.x "nvidia 0000:01:00.0:
# probe with driver nvidia failed with error -1". The literal every form holds reaches Python.
KERNEL_PROBE_FAILED = " failed with error "
KERNEL_PROBE_FAILURE = re.compile(
    r"\bnvidia: probe of \S+ failed with error -?\d+"
    r"|\bprobe with driver nvidia failed with error -?\d+"
)
# A PCI device's address as dev_printk prints it (pci_name), "[domain:]bus:device.function"
_PCI_DEVICE_ADDRESS = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
# The PCI core's line when it powers a device up and reads its power-management control register
# as all ones (drivers/pci/pci.c pci_power_up, PCI_POSSIBLE_ERROR): "nvidia 0000:01:00.0: Unable
# to change power state from D3cold to D0, device inaccessible". The device does not answer on the
# bus: the condition the driver calls fallen off the bus (nv_pci_probe's all-ones register read).
# Read for the nvidia driver's own devices only: "nvidia-gpu" (the kernel's driver of a GPU board's
# USB-C controller) prints it for boards that have none, and vfio-pci's line names no vendor.
PCI_INACCESSIBLE = "device inaccessible"
_NVIDIA_INACCESSIBLE = re.compile(
    rf"(?<![\w-])nvidia (?P<bus>{_PCI_DEVICE_ADDRESS}): "
    r"(?P<message>Unable to change power state from \S+ to D0, device inaccessible)"
)
# The kernel's own report of a crash (x86: arch/x86/kernel/dumpstack.c __show_regs, traps.c; the
# lockup detector: kernel/watchdog.c), read for a crash inside an NVIDIA module
# (driver_messages' ``driver-crashed``). Only its register line reaches Python, "RIP:
# 0010:<function>+0x../0x.. [<module>]" (pre-4.15 kernels: "RIP: 0010:[<addr>]  [<addr>]
# <function>+0x../0x.. [<module>]"); the report's header before it and its call trace after it
# are read from the text around that rare line (``_CrashReader``), so a log's other lines pay
# for one marker, not five. See ``CRASH_HEADER`` for the headers.
CRASH_RIP = "RIP: "
# What a line that reaches Python holds: the driver's words, the kernel's probe failure, the
# kernel's PCIe AER lines, the IOMMU's DMA faults, the PCI core's enumeration of an NVIDIA
# function (it ties a bus to NVIDIA), a crash report's register line, the PCI core's device it
# could not power up. "Xid" is the second (a word check follows its find).
MARKERS = (
    "NVRM",
    "Xid",
    KERNEL_PROBE_FAILED,
    MODESET_ERROR,
    *AER_MARKERS,
    *IOMMU_MARKERS,
    *TIE_MARKERS,
    CRASH_RIP,
    PCI_INACCESSIBLE,
)
# Any of them, in one pass of the regex engine: over the line or two between two standard Xid
# lines (a burst) one search beats a find per marker; over longer text the finds are faster
# (each a fast search of its own; the regex tries every place a marker's first letter stands).
# Ours, measured on benchmarks/diagnosis.py's logs: 2 KiB is a few lines of a burst's gap, and
# far below the tens of KiB of noise between two Xid lines of the 1 %-Xid log.
_ANY_MARKER = re.compile("|".join(re.escape(marker) for marker in MARKERS))
SHORT_GAP_CHARS = 2048
# NVRM messages that say why the driver could not take a GPU: a kernel probe-failure line
# after one of them is that failure said again, not another one.
PROBE_FAILURE_REASONS = frozenset(
    {
        "rm-init-adapter-failed",
        GSP_INIT_KIND,
        "probe-failed",
        "no-gpu-initialised",
        "pci-bar-invalid",
        PCI_BAR_UNBRIDGED_KIND,
        "request-mem-region-failed",
        GPU_UNSUPPORTED_KIND,
        OPEN_MODULE_UNSUPPORTED_KIND,
        "gpu-lost",
        "fallen-off-bus",
    }
)
# The driver's status NV_ERR_GPU_IS_LOST (nvstatuscodes.h: 0x0000000F, "GPU lost from the bus"),
# by name in its check lines ("nvCheckOkFailedNoLog: GPU lost from the bus
# [NV_ERR_GPU_IS_LOST]") or as the number its GSP RPC lines print (rpc.c's _issueRpcAndWait:
# "rpcSendMessage failed with status 0x0000000f for fn 10 sequence 12303!"; "GspRmFree failed:
# ...; status=0x0000000f"). Lowercase "status", a word of its own: "paramsStatus=" is the
# call's own result, and a register dump's "mstatus=" or "intr_status " another value. An
# NV_STATUS prints as 8 hex digits ("0x%08x"): "0x0000000f00000020" is a 64-bit register's. The
# lines name the GPU by the driver's instance ("GPU0"), not its bus.
_LOST_STATUS = re.compile(r"\bNV_ERR_GPU_IS_LOST\b|(?<![\w.])status[ =]0x0000000f(?![0-9A-Fa-f])")
# Open kernel modules before R520 print "NVRM <function>: <message>" (no colon after NVRM):
# "NVRM nvAssertOkFailedNoLog: Assertion failed: ...". Later drivers print "NVRM: <function>: ".
_NVRM_FUNCTION = re.compile(r"NVRM (?=[A-Za-z_]\w{0,80}: )")
# The driver's own form, "NVRM: Xid (PCI:0000:3b:00): 13, ...": a literal prefix, so the
# regex engine finds it at memchr speed. An empty number is an unreadable Xid.
_STANDARD_XID = re.compile(r"NVRM: Xid \(([^)\n]*)\)[ \t]*:?[ \t]*(\d*)")
# "Xid" as a word where str.find saw it ("SXid" is NVSwitch's)
_XID_WORD_AT = re.compile(r"Xid(?![A-Za-z0-9])(?<![A-Za-z0-9]Xid)")
# "Xid (PCI:0000:3b:00): 13, ..." right after "NVRM:", or anywhere (pastes)
_XID_AT = re.compile(r"\s*Xid\s*\(([^)]*)\)\s*:?\s*(\d+)?")
_XID = re.compile(r"\bXid\s*\(([^)]*)\)\s*:?\s*(\d+)?")
_XID_WORD = re.compile(r"\bXid\b")
# NVIDIA's Kubernetes device plugin logs the Xid events NVML gave it, by GPU UUID (no bus id):
# "XidCriticalError: Xid=69 on Device=GPU-<uuid>, the device will go unhealthy." (older) and
# "...; marking device as unhealthy." (internal/rm/health.go); MIG devices are "MIG-<uuid>".
_PLUGIN_XID = re.compile(
    r"XidCriticalError: Xid=(?P<xid>\d+) on Device=(?P<uuid>(?:GPU|MIG)-[0-9a-fA-F-]+)"
)
_PID = re.compile(r"\bpid='?(?P<pid>\d+|<unknown>)'?\s*,\s*name=(?P<name>[^,]*)")
_GPU_AT_UUID = re.compile(
    r"GPU at (?:PCI:)?(?P<bus>[0-9a-fA-F:.]+?)\s*:\s*(?P<uuid>GPU-[0-9a-fA-F-]+)"
)
_FALLEN_HEAD = re.compile(r"The NVIDIA GPU\s+(?:PCI:)?(?P<bus>[0-9a-fA-F:.]+)")
_KMSG = re.compile(r"\d+,\d+,(\d{1,20}),[^;]*;")  # microseconds: a u64
_UNIX_TIME = re.compile(r"(\d{9,11}\.\d{1,9})\s")
_UPTIME = re.compile(r"\[\s*(\d+\.\d+)\]")
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_MONTH = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
# ISO 8601 / RFC 3339: dmesg --time-format=iso, journalctl -o short-iso, RFC 5424, Talos.
# Groups: date, time, fraction, zone.
_ISO = re.compile(
    r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,](\d+))?"
    r"\s?(Z|[+-]\d{2}:?\d{2}(?!\d)|UTC\b|GMT\b)?"
)
# dmesg -T / --ctime: [Wed Jul 31 23:14:18 2024]. Groups: month, day, time, fraction, year.
_CTIME = re.compile(
    rf"\[(?:[A-Z][a-z]{{2}}\s+)?({_MONTH})\s+(\d{{1,2}})\s+(\d{{2}}:\d{{2}}:\d{{2}})"
    r"(?:[.,](\d+))?\s+(\d{4})\]"
)
# syslog / kern.log / journalctl short: Feb 15 17:37:45 (no year), or with the month as a
# Chinese / Japanese locale prints it: 12月 20 13:22:20. Groups: month, day, time, fraction.
_SYSLOG = re.compile(
    rf"\s*(?:<\d+>)?({_MONTH}|\d{{1,2}}月)\s+(\d{{1,2}})\s+(\d{{2}}:\d{{2}}:\d{{2}})"
    r"(?:[.,](\d+))?"
)


def _month_number(name: str) -> int:
    """An English month abbreviation's number, or a CJK "12月"'s."""
    return int(name[:-1]) if name.endswith("月") else _MONTHS[name]


# Pastes that lost their line breaks (a web page, a mail, a chat) or hold the command line they
# ran glue kernel records onto one line: "$ dmesg | grep nvidia[  12.3] NVRM: ... [  12.4] NVRM:
# ...". A record starts with its dmesg stamp -- "[ 1234.567890]", dmesg -H's "[  +0.000844]", or
# dmesg -T's "[Mon Jan  1 00:00:00 2024]" in any locale ("[一 8月 25 16:20:28 2025]") -- then
# an optional printk caller id ("[  T511]") and the prefix the kernel prints before a message:
# "NVRM: " (or an old open module's "NVRM <function>: "), "<driver> <bus id>: " (nvidia,
# pcieport, nvme ...: dev_printk), "nvidia-nvswitchN: ", "nvidia-modeset: ", the IOMMUs'
# "DMAR: " / "AMD-Vi: ". A stamp a record's text quotes is not followed by such a prefix.
KERNEL_RECORD_STAMP = (
    r"\[(?:[ \t]*\+?\d{1,12}\.\d{1,9}"
    r"|[^\[\]\n]{0,24}?\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})? \d{4})\]"
)
KERNEL_RECORD_PREFIX = (
    r"[ \t]*(?:\[[ \t]*[TC]\d{1,7}\][ \t]*)?"
    r"(?:NVRM[: ]|nvidia-nvswitch\d{1,4}: |nvidia-modeset: |DMAR: |AMD-Vi: "
    rf"|[\w.-]{{1,40}} {_PCI_DEVICE_ADDRESS}: )"
)
_RECORD_START = re.compile(f"{KERNEL_RECORD_STAMP}(?={KERNEL_RECORD_PREFIX})")
# The most records one physical line is cut into; the rest of a longer line stays one piece. A
# page that lost its breaks holds tens to hundreds of records; this bounds the cutting's list.
MAX_RECORDS_PER_LINE = 4096
# Terminals, issue trackers and ``dmesg`` without -x wrap a long record onto indented lines with no
# prefix, and journalctl indents a multi-line message's later lines: such a line finishes the
# record before it when that record visibly stops short ("...changed from 0x0 (None)" /
# "      to 0x2 (Node Reboot Required)"). At most this many lines join one record; the scanner
# holds back as many complete lines of a chunk, so a record's continuation is always all there.
MAX_CONTINUATION_LINES = 3
_INDENTS = (" ", "\t")
_INDENT_CHARS = frozenset(_INDENTS)
# A record that ends on one of these stopped mid-way: a list or a field waiting for its value
# (", ", ": ", "="), an open parenthesis, an identifier cut at its separator ("GPU-", "0x0_")
_OPEN_ENDS = frozenset(",:=(-_")
# ... or on a word no sentence ends with ("... the client has the version 367.44, but")
_DANGLING_WORDS = frozenset(
    {"a", "an", "and", "at", "but", "by", "for", "from", "has", "in", "is", "of", "on", "or"}
    | {"the", "to", "was", "with"}
)
# Xid 154's "GPU recovery action changed from 0x0 (None)" without its " to <new action>"
_TO_WORD = re.compile(r"\bto\b", re.IGNORECASE)
# What an indented line that starts another record, or a shell prompt, opens with (after its
# indentation): a dmesg stamp or syslog priority, a Markdown quote, a prompt ("$ ", "# ",
# "user@host:~$"), an ISO or syslog date, a time, a /dev/kmsg header, a "<subsystem>: " or
# "<driver> <device>: " prefix. Such a line is never a continuation.
_RECORD_OR_PROMPT = re.compile(
    rf"[\[<>$#%]|[\w.-]{{1,64}}@[\w.-]{{1,253}}[:$#]|\d{{4}}-\d{{2}}-\d{{2}}|{_MONTH}\s+\d"
    r"|\d{1,2}:\d{2}:\d{2}"
    r"|\d+,\d+,\d+,|[\w.-]+(?: [\w.:-]+)?: "
)
_MAX_NAMES = 4096  # device spellings remembered (a log names a few GPUs; fuzz input many)
_MAX_SPELLING_CHARS = 128  # the longest spelling of a GPU remembered ("GPU at <bus>: GPU-<uuid>")
_SECONDS_CACHE = 1024  # distinct seconds remembered before the cache starts over
_PREFIX_CACHE = 256  # whole-second prefixes remembered before the cache starts over
_UPTIME_START = frozenset(" 0123456789")
_MISSING = -1.0e300  # a cache sentinel no epoch equals


def _xid_match(line: str, nvrm: int) -> re.Match[str] | None:
    """The "Xid (<device>): <number>" of a line whose "NVRM:" is at ``nvrm`` (-1: none)."""
    if "Xid" not in line:  # what both patterns need: most driver messages are not Xids
        return None
    found = _XID_AT.match(line, nvrm + 5) if nvrm >= 0 else None
    return found if found is not None else _XID.search(line, max(nvrm, 0))


def _number(digits: str | None) -> int | None:
    """The Xid or PID a line states, or None when it states none a driver could print."""
    return whole_number(digits, max_digits=MAX_NUMBER_DIGITS)


def _zone_offset_s(zone: str) -> float:
    if zone in ("Z", "UTC", "GMT"):
        return 0.0
    sign = -1.0 if zone[0] == "-" else 1.0
    digits = zone[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)


class _Clock:
    """Kernel-log prefixes → (Unix seconds, uptime seconds). Remembers a bounded number of
    whole seconds, so its memory does not grow with the log."""

    def __init__(
        self, year: int | None, tz_offset_s: float, written_s: float | None = None
    ) -> None:
        # a log written at ``written_s`` holds no line after it: its first syslog date without a
        # year is in the year it was written, or the one before when that date comes later in
        # the year (rsyslog and journalctl's reading; a day of slack for the host's zone)
        written = None if written_s is None else datetime.fromtimestamp(written_s, UTC)
        self._year = year if written is None else written.year
        self._written = None if written is None else (written.month, written.day + 1)
        self._tz_offset_s = tz_offset_s
        self._last_month: int | None = None
        self._prefixes: dict[str, tuple[float | None, float | None]] = {}
        # the text stating a whole second → Unix seconds (None: not a real date)
        self._seconds: dict[tuple[str, ...], float | None] = {}
        # dmesg -T and bursts repeat a prefix line after line: the scanner checks these first
        self.last_prefix: str | None = None
        self.last: tuple[float | None, float | None] = (None, None)
        # The last ISO stamp read with a fraction, as (text before the fraction, text after it,
        # where the fraction starts, whole seconds, uptime): the next lines of that second
        # differ only in the fraction's digits, and a prefix that is that text around other
        # digits reads the same whole second and uptime (none of the patterns ``_read`` tries
        # can take those digits into another field; tests/health/test_kernel_log_speedpath.py).
        self._iso: tuple[str, str, int, float | None, float | None] | None = None
        # what the last ``_read`` saw: (fraction start, fraction end, whole seconds) of an ISO
        # stamp with a fraction, else None
        self._fraction: tuple[int, int, float | None] | None = None

    def stamp(self, prefix: str) -> tuple[float | None, float | None]:
        if prefix == self.last_prefix:
            return self.last
        close = prefix.find("]") if prefix[:1] == "[" and prefix[1:2] in _UPTIME_START else -1
        # plain dmesg, the common case: "[ 1234.567890] ", maybe a printk caller id after it;
        # a wall clock after the uptime (dmesg 2.40's stacked --time-format raw,ctime,iso: "[
        # 1234.5] [Fri Dec 22 12:26:24 2023] 2023-12-22T12:26:24,559615-08:00 ") has its
        # hh:mm:ss colons, and goes the long way, which reads both
        if close > 0 and prefix.find(":", close) < 0:
            result = self._uptime_only(prefix, close)
        else:
            seen = self._prefixes.get(prefix)
            if seen is None:
                seen = self._same_second(prefix) or self._read_and_remember(prefix)
                if seen[1] is None and (seen[0] is None or seen[0].is_integer()):
                    # whole-second stamps (dmesg -T, syslog) recur for every line of a second;
                    # fractional ones never do, so only these are remembered
                    if len(self._prefixes) >= _PREFIX_CACHE:
                        self._prefixes.clear()
                    self._prefixes[prefix] = seen
            result = seen
        self.last_prefix, self.last = prefix, result
        return result

    def _uptime_only(self, prefix: str, close: int) -> tuple[float | None, float | None]:
        """A prefix "[<uptime>]" with no wall clock after it. The bracket holds what the long
        way's ``_UPTIME`` takes (spaces, digits, a point, digits) or whole seconds (NVSentinel's
        "[123]"), not all ``float`` takes: "[ nan]", "[ 1e3]" or "[ T511]" go the long way."""
        inside = prefix[1:close].lstrip()
        # dmesg -H's "[  +0.000844]" is the time since the line before, not an uptime
        relative = inside[:1] == "+"
        whole, point, fraction = (inside[1:] if relative else inside).partition(".")
        # isdecimal: the characters re's \d takes
        if not (whole.isdecimal() and (fraction.isdecimal() if point else not fraction)):
            return self._read(prefix)
        if relative:  # the long way reads an uptime in a later bracket
            return (None, None) if prefix.find("[", close) < 0 else self._read(prefix)
        return None, float(inside)

    def _same_second(self, prefix: str) -> tuple[float | None, float | None] | None:
        """The stamp of an ISO prefix of the last ISO stamp's second, or None."""
        if self._iso is None:
            return None
        head, tail, begin, whole, uptime = self._iso
        if not (prefix.startswith(head) and prefix.endswith(tail)):
            return None
        fraction = prefix[begin : len(prefix) - len(tail)]
        if not fraction.isdecimal():  # the characters the pattern's \d takes (Unicode Nd)
            return None
        return (None if whole is None else whole + float("0." + fraction)), uptime

    def _read_and_remember(self, prefix: str) -> tuple[float | None, float | None]:
        seen = self._read(prefix)
        if self._fraction is not None and "\x1b" not in prefix:
            begin, end, whole = self._fraction
            self._iso = (prefix[:begin], prefix[end:], begin, whole, seen[1])
        return seen

    def _read(self, prefix: str) -> tuple[float | None, float | None]:
        self._fraction = None
        if not prefix or prefix.isspace():
            return None, None
        if "\x1b" in prefix:
            prefix = files.TERMINAL_ESCAPE.sub("", prefix)
        if prefix[:1].isdigit():
            record = _KMSG.match(prefix)
            if record is not None:  # /dev/kmsg: "<level>,<seq>,<microseconds>,<flags>;"
                return None, int(record[1]) / 1e6
            unix = _UNIX_TIME.match(prefix)
            if unix is not None:  # journalctl -o short-unix
                return float(unix[1]), None
        found = _UPTIME.search(prefix) if "[" in prefix and "." in prefix else None
        uptime = None if found is None else float(found[1])
        return self._calendar(prefix), uptime

    def _calendar(self, prefix: str) -> float | None:
        """The calendar stamp of a prefix: ISO, dmesg -T or syslog; whole seconds are cached
        by the text that states them, so a line only parses its fraction."""
        key: tuple[str, ...]
        dash = prefix.find("-")
        dated = None
        iso_fraction = None  # where an ISO stamp's fraction stands
        if dash >= 0:  # try where the first dash says the date starts, then anywhere
            dated = (_ISO.match(prefix, dash - 4) if dash >= 4 else None) or _ISO.search(prefix)
        if dated is not None:
            date, hms, fraction, zone = dated.groups()
            key = (date, hms, zone or "")
            iso_fraction = dated.span(3) if fraction else None
        else:
            dated = _CTIME.search(prefix) if "[" in prefix else None
            if dated is not None:
                name, day, hms, fraction, year_text = dated.groups()
                key = (name, day, hms, year_text)
            else:
                dated = _SYSLOG.match(prefix)
                if dated is None:
                    return None
                month = _month_number(dated[1])
                if not 1 <= month <= 12:
                    return None
                year = self._syslog_year(month, int(dated.group(2)))
                if year is None:
                    return None
                name, day, hms, fraction = dated.groups()
                key = (name, day, hms, str(year))
        whole = self._seconds.get(key, _MISSING)
        if whole is _MISSING:
            whole = self._epoch(key)
            if len(self._seconds) >= _SECONDS_CACHE:
                self._seconds.clear()
            self._seconds[key] = whole
        if iso_fraction is not None:
            self._fraction = (*iso_fraction, whole)
        if whole is None or not fraction:
            return whole
        return whole + float("0." + fraction)

    def _epoch(self, key: tuple[str, ...]) -> float | None:
        """Unix seconds of (date, time, zone) or (month name, day, time, year); a zone of ""
        is the host's local time."""
        if len(key) == 3:
            date, hms, zone = key
            year, month, day = int(date[0:4]), int(date[5:7]), int(date[8:10])
        else:
            name, day_text, hms, year_text = key
            year, month, day, zone = int(year_text), _month_number(name), int(day_text), ""
        hour, minute, second = int(hms[0:2]), int(hms[3:5]), int(hms[6:8])
        if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59):
            return None
        try:  # a leap second (:60) is the next second
            epoch = calendar.timegm((year, month, day, hour, minute, min(second, 59), 0, 0, 0))
        except (ValueError, OverflowError):
            return None
        offset = _zone_offset_s(zone) if zone else self._tz_offset_s
        return epoch + (second > 59) - offset

    def _syslog_year(self, month: int, day: int) -> int | None:
        """``year`` is the first syslog line's year; December → January moves to the next."""
        if self._year is None:
            return None
        if self._last_month is None and self._written is not None and (month, day) > self._written:
            self._year -= 1
        if self._last_month is not None and self._last_month - month >= 6:
            self._year += 1
        self._last_month = month
        return self._year


class _Recent(NamedTuple):  # one per driver message: a tuple is built faster than a dataclass
    number: int
    line: str


# --- a crash inside an NVIDIA module -------------------------------------------------------------

# A crash report's place (``CrashSeen``) is counted once per report into
# ``KernelLogReport.driver_crashes``, so the finding can name where the driver crashed.
# "high": the report's header says the kernel caught a fault or a lockup and its RIP is in an
# NVIDIA module; "medium": the RIP is in an NVIDIA module but the header is not in the log (a
# paste cut above it: a WARN()'s registers look the same), or the header is there and only the
# call trace's top frames are in an NVIDIA module (a kernel helper the driver called: a
# spinlock, memcpy).
# The modules of NVIDIA's driver (the GPU, unified memory, display, DRM, GPUDirect RDMA, GPUDirect
# Storage, vGPU host): "nvidia" is not "nvidia_wmi_ec_backlight" (a laptop backlight driver)
NVIDIA_MODULES = frozenset(
    {"nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem", "nvidia_fs"}
    | {"nvidia_vgpu_vfio"}
)
# __show_regs's kernel-mode "RIP: 0010:<function>+0x../0x.. [<module> <build id>]" (a user-mode
# RIP, "RIP: 0033:0x7f...", names no function); pre-4.15 kernels print the address twice first
_CRASH_RIP = re.compile(
    r"RIP: [0-9a-f]{4}:(?:\[<[0-9a-f]+>\]\s+\[<[0-9a-f]+>\]\s+)?"
    r"(?P<where>[\w.$]+\+0x[0-9a-f]+/0x[0-9a-f]+)(?:\s+\[(?P<module>\w+)[^\]]*\])?"
)
# A call trace's frame, "[  155.44] <prefix>  ? <function>+0x../0x.. [<module> <build id>]": "? "
# marks an address found on the stack that the unwinder could not confirm (not a frame it took)
_CRASH_FRAME = re.compile(
    r"(?:^|\s)(?P<unsure>\?\s+)?(?P<where>[\w.$]+\+0x[0-9a-f]+/0x[0-9a-f]+)"
    r"(?:\s+\[(?P<module>\w+)[^\]]*\])?\s*$"
)
# The headers a crash report opens with: the page-fault handler's "BUG: unable to handle page
# fault / kernel paging request / kernel NULL pointer dereference" and "BUG: kernel NULL pointer
# dereference", die()'s "<what>: <error code> [#<n>]" (Oops, general protection fault, invalid
# opcode after "kernel BUG at", divide error, stack segment; 6.x: "Oops: Oops: 0000 [#1]"), the
# watchdog's "BUG: soft lockup - CPU#N stuck for Ns!" and "Watchdog detected hard LOCKUP"
CRASH_HEADER = re.compile(
    r"BUG: (?:unable to handle|kernel NULL pointer dereference|soft lockup)"
    r"|: [0-9a-f]{4} \[#\d+\]|Watchdog detected hard LOCKUP"
)
# The headers of reports that are not a crash (the kernel goes on): WARN() ("WARNING: CPU: N PID:
# N at <file>:<line> <function>", before 3.x "WARNING: at ..."), the other "BUG: " reports
# (scheduling while atomic, a bad page state), and each CPU's registers an RCU stall or sysrq
# has printed ("NMI backtrace for cpu N": where every CPU was, the one in the driver included):
# a RIP after one of them is not a crash's
_OTHER_HEADER = re.compile(r"WARNING: (?:CPU: \d+ PID: \d+ at |at )|BUG: |NMI backtrace for cpu")
# Where a report ends: its trailer, or the next report's register line
_REPORT_END = ("---[ end trace", CRASH_RIP)
# A header is at most this many lines above its RIP line (a page fault's five lines, die()'s
# line, "Modules linked in" wrapped, CPU, Tainted, Hardware name, lockdep's irq event stamps)
CRASH_HEADER_LINES = 16
# The call trace's top frames: the first this many frames the unwinder took, read within this
# many lines after the RIP line (the registers' 10-13 lines, "Call Trace:", "<TASK>")
TOP_FRAMES = 4
TOP_FRAME_LINES = 24
_MAX_CRASH_KINDS = 64  # distinct crash places kept (a log holds a few; fuzz input many)


def _lines_back(text: str, start: int) -> Iterator[str]:
    """The lines of ``text`` above the one at ``start`` (a line's start), nearest first."""
    end = start - 1
    while end >= 0:
        begin = text.rfind("\n", 0, end) + 1
        yield text[begin:end]
        end = begin - 1


def _opens_report(line: str) -> bool:
    """Whether ``line`` is a report's header: a crash's (``CRASH_HEADER``) or another's."""
    return bool(CRASH_HEADER.search(line) or _OTHER_HEADER.search(line))


def _ends_report(line: str) -> bool:
    """Whether ``line`` ends a report: its trailer, or the next report's register line."""
    return any(stop in line for stop in _REPORT_END)


class CrashSeen(NamedTuple):
    """A crash in an NVIDIA module as the scan counts it (a ``DriverCrash`` in the report)."""

    confidence: Confidence  # HIGH or MEDIUM
    module: str  # the NVIDIA module it is in
    where: str  # "<function>+0x../0x..": the RIP's, or the top frame's in the module
    rip: str  # the register line from "RIP: "
    frame: str | None  # the top frame in the module when the RIP is outside it


def driver_crashes(seen: Counter[CrashSeen]) -> tuple[DriverCrash, ...]:
    """The report's crashes: the surest first, else in the order they were read."""
    ordered = sorted(seen.items(), key=lambda pair: pair[0].confidence is not Confidence.HIGH)
    return tuple(DriverCrash(*crash, count=n) for crash, n in ordered)


class _CrashReader:
    """The crash reports whose RIP line reached Python: their header looked up in the lines
    before (this chunk's, and the last ``CRASH_HEADER_LINES`` of the chunks before), their top
    frames in the complete lines after (on into the next chunk when this one ends first)."""

    def __init__(self) -> None:
        self.seen: Counter[CrashSeen] = Counter()
        self._tail: deque[str] = deque(maxlen=CRASH_HEADER_LINES)  # the lines scanned last
        self._counted: set[int] = set()  # the header lines of the crashes counted
        # a crash whose top frames are still to read: (RIP line, its number, its header's
        # number, lines read after it, frames read)
        self._pending: tuple[str, int, int, int, int] | None = None

    def rip(self, text: str, start: int, end: int, line: str, number: int) -> None:
        """A line holding "RIP: " at ``text[start:end]`` (line ``number``)."""
        found = _CRASH_RIP.search(line)
        if found is None:  # a user-mode RIP, or the words in prose
            return
        header, at = self._header(text, start, number)
        if header is not None and not CRASH_HEADER.search(header):
            return  # a WARN()'s registers, or another report that is no crash
        if header is not None and at in self._counted:
            return  # the report's RIP said again
        module = found["module"] or ""
        rip = found[0][:512]
        if module in NVIDIA_MODULES:
            confidence = Confidence.HIGH if header is not None else Confidence.MEDIUM
            self._count(CrashSeen(confidence, module, found["where"][:256], rip, None), at)
        elif header is not None:
            self._pending = (rip, number, at, 0, 0)
            self._frames(text, end + 1, number + 1)

    def scanned(self, text: str, stop: int) -> None:
        """Remember the last lines of ``text[:stop]`` (which ends with a newline)."""
        last = itertools.islice(_lines_back(text, stop), CRASH_HEADER_LINES)
        self._tail.extend(reversed([line.rstrip("\r") for line in last]))

    def resume(self, text: str, first_number: int) -> None:
        """Go on reading the top frames of a crash the chunk before ended in; ``text`` is the
        next chunk, its first line numbered ``first_number``."""
        if self._pending is not None:
            self._frames(text, 0, first_number)

    def _lines_above(self, text: str, start: int) -> Iterator[str]:
        """The lines above the one at ``start``, nearest first, on into the chunks before."""
        yield from _lines_back(text, start)
        yield from reversed(self._tail)

    def _header(self, text: str, start: int, number: int) -> tuple[str | None, int]:
        """The nearest report header above line ``number`` (at ``start``) and its line number;
        (None, -1) when there is none within ``CRASH_HEADER_LINES`` or a report ends first."""
        above = itertools.islice(self._lines_above(text, start), CRASH_HEADER_LINES)
        for back, line in enumerate(above, 1):
            if _opens_report(line):
                return line, number - back
            if _ends_report(line):
                break
        return None, -1

    def _frames(self, text: str, begin: int, number: int) -> None:
        """The pending crash's complete lines from ``text[begin:]`` (line ``number``): a top
        frame in an NVIDIA module counts it (medium)."""
        assert self._pending is not None
        rip, rip_number, at, read, frames = self._pending
        skip = rip_number + 1 + read - number  # lines the chunk before already read
        while read < TOP_FRAME_LINES and frames < TOP_FRAMES:
            end = text.find("\n", begin)
            if end < 0:  # the rest is in the next chunk
                self._pending = (rip, rip_number, at, read, frames)
                return
            line, begin = text[begin:end], end + 1
            if skip > 0:
                skip -= 1
                continue
            read += 1
            if _opens_report(line) or _ends_report(line):
                break
            frame = _CRASH_FRAME.search(line)
            if frame is None or frame["unsure"]:
                continue
            if frame["module"] in NVIDIA_MODULES:
                where = frame["where"][:256]
                top = frame[0].strip()
                self._count(CrashSeen(Confidence.MEDIUM, frame["module"], where, rip, top), at)
                break
            frames += 1
        self._pending = None

    def _count(self, crash: CrashSeen, at: int) -> None:
        if at < 0:  # no header: a RIP said again after its report's end counts once
            if any(seen.rip == crash.rip for seen in self.seen):
                return
        elif len(self._counted) < _MAX_NAMES:
            self._counted.add(at)
        if crash in self.seen or len(self.seen) < _MAX_CRASH_KINDS:
            self.seen[crash] += 1


def kernel_records(line: str) -> list[str]:
    """The kernel records one physical line holds: the line cut before each record stamp after
    the first (the text before the first, a prompt or a syslog prefix, stays with it); ``[line]``
    when it holds one. At most ``MAX_RECORDS_PER_LINE`` pieces, in one pass over the line."""
    if line.count("[") < 2:  # a record stamp opens with "[": one line, one stamp at most
        return [line]
    starts = []
    for found in _RECORD_START.finditer(line):
        starts.append(found.start())
        if len(starts) == MAX_RECORDS_PER_LINE:
            break
    if len(starts) < 2:
        return [line]
    cuts = [0, *starts[1:], len(line)]
    return [line[begin:end].rstrip(" \t") for begin, end in itertools.pairwise(cuts)]


def _unfinished(line: str) -> bool:
    """Whether a record visibly stops before its end: an open end (``_OPEN_ENDS``), a dangling
    word, a field list whose last field has no value ("..., Offset 00000000, Data"), or Xid
    154's change without its target."""
    tail = line.rstrip()
    if not tail:
        return False
    if tail[-1] in _OPEN_ENDS:
        return True
    head, _, last = tail.rpartition(" ")
    if last.lower() in _DANGLING_WORDS or (head.endswith(",") and last.isalpha()):
        return True
    # the last "changed from" without a "to" after it (one look, not one per occurrence)
    changed = tail.lower().rfind("changed from")
    return changed >= 0 and _TO_WORD.search(tail, changed + len("changed from")) is None


def with_continuation(text: str, at: int, line: str) -> str:
    """``line`` with the continuation lines of ``text`` from ``at`` (where the line after it
    starts) that finish it: each indented deeper than the record, with no prefix or prompt and
    no marker of a record of its own, joined while the record is still ``_unfinished``."""
    indent = len(line) - len(line.lstrip(" \t"))
    for _ in range(MAX_CONTINUATION_LINES):
        if not text.startswith(_INDENTS, at) or not _unfinished(line):
            break
        end = text.find("\n", at)
        if end < 0:  # not all here: only a last line (the scanner holds complete lines back)
            break
        candidate = text[at:end].rstrip("\r")
        body = candidate.lstrip(" \t")
        if (
            len(candidate) - len(body) <= indent
            or not body.strip()
            or _RECORD_OR_PROMPT.match(body)
            or _holds_marker(body)
        ):
            break
        line = f"{line.rstrip()} {body.rstrip()}"
        at = end + 1
    return line


def _own_message(line: str, begin: int) -> str:
    """An Xid's message (from ``begin``) up to the next driver record a tool joined onto its
    line (NVSentinel's ';'): the driver prints one Xid per message, so the words after it are
    another Xid's. Only the message is sliced: a line of many joined records stays linear."""
    joined = line.find("NVRM: Xid (", begin)
    if joined < 0:
        return line[begin:].lstrip(" ,")
    return line[begin:joined].lstrip(" ,").rstrip(" ;,")


class KernelLogScanner:
    """Scans a kernel log fed in chunks of any size; ``finish()`` returns the report.

    State is bounded by the number of (GPU, Xid) groups, not by the number of lines."""

    def __init__(
        self,
        *,
        year: int | None = None,
        tz_offset_s: float = 0.0,
        is_copy: Callable[[int, XidRecord], bool] | None = None,
        written_s: float | None = None,
    ) -> None:
        """``is_copy``: asked of each Xid record (with its line number) before it counts; True
        leaves it out, as a copy of a record another log of the node holds
        (health/xid_repeats.py). The record is read once, for both."""
        self._clock = _Clock(year, tz_offset_s, written_s)
        self._is_copy = is_copy
        self._carry = ""
        self._lines_before = 0  # lines fully scanned so far
        self._groups: dict[tuple[str | None, int], XidGroupBuilder] = {}
        self._fallen: dict[str | None, XidGroupBuilder] = {}
        # the GPU lost said only by the driver's status (``_LOST_STATUS``): its first line, read
        # as a GPU lost where no line names the loss itself (``_lost``)
        self._status_lost: XidGroupBuilder | None = None
        self._buses: dict[str, str | None] = {}  # device as printed → normalised bus id
        self._printed: dict[str, XidGroupBuilder] = {}  # "NVRM: Xid (<device>): <n>" → group
        self._uuids: dict[str, str] = {}  # normalised bus id → GPU UUID
        self._recent: deque[_Recent] = deque(maxlen=FALLEN_OFF_LOOKBACK_LINES)
        self._other: Counter[str] = Counter()
        self._unparsed = 0
        # kernel probe failures of the nvidia driver since its last "loading" banner
        self._probes_failed = 0
        # NVSwitch SXid records by (switch bus id, SXid)
        self._switches: dict[tuple[str | None, int], NvSwitchGroupBuilder] = {}
        ties = NvidiaTies()  # buses the kernel's device lines tie to NVIDIA, for both below
        self._aer = AerAccumulator(ties)  # the kernel's PCIe AER lines, by device and severity
        self._iommu = IommuAccumulator(ties)  # the IOMMU's DMA faults, by device
        self._crash = _CrashReader()  # crash reports with their RIP in an NVIDIA module

    def feed(self, chunk: str) -> None:
        """Scan the complete lines of ``chunk`` (a partial last line waits for the next)."""
        text = self._carry + chunk if self._carry else chunk
        cut = _held_back(text)
        if cut == 0 and len(text) <= MAX_CARRY_CHARS:
            self._carry = text
            return
        if cut == 0:  # a megabyte in a few lines: not log lines; scan what is complete
            cut = text.rfind("\n") + 1
        if cut == 0:  # no newline in a megabyte: not a log line, but scan it as one
            self._scan(text + "\n\n", len(text) + 1)
            self._carry = ""
            return
        self._scan(text if cut < len(text) else text + "\n", cut)
        self._carry = text[cut:]

    def finish(self) -> KernelLogReport:
        """The report of everything fed (a last line without a newline included)."""
        carry = self._carry
        if carry:
            # the held-back lines, and a last line without its newline
            text = carry if carry.endswith("\n") else carry + "\n"
            self._scan(text + "\n", len(text))
            self._carry = ""
        # a group whose every record was a copy another log holds (``is_copy``) is no group
        xids = [builder for builder in self._groups.values() if builder.count]
        fallen = self._lost(xids)
        other = self._other.copy()
        said_again = other.pop(_RM_INIT_ADAPTER_SAID_AGAIN, 0)
        if said_again:  # a Counter would keep a kind of count 0: only when there is one
            other[RM_INIT_ADAPTER_KIND] = max(other[RM_INIT_ADAPTER_KIND], said_again)
        if self._probes_failed and not PROBE_FAILURE_REASONS & other.keys():
            other["probe-failed"] += self._probes_failed
        nvidia = self._nvidia_buses()
        return KernelLogReport(
            groups=build_groups(xids, self._uuids, context=fallen),
            fallen_off_bus=build_groups(fallen, self._uuids, context=xids),
            lines_scanned=self._lines_before,
            xid_lines=sum(b.count for b in xids) + self._unparsed,
            unparsed_xid_lines=self._unparsed,
            bus_to_uuid=tuple(sorted(self._uuids.items())),
            other=tuple(sorted(other.items())),
            nvswitch_errors=tuple(b.build() for b in self._switches.values()),
            pcie_errors=self._aer.build(nvidia),
            iommu_faults=self._iommu.build(nvidia),
            driver_crashes=driver_crashes(self._crash.seen),
        )

    def _lost(self, xids: list[XidGroupBuilder]) -> list[XidGroupBuilder]:
        """The GPUs lost without an Xid: those a line says fell off the bus or is lost, else
        the one the driver's status says is lost. After an Xid 79 or a "fallen off the bus"
        line, the failed calls that return NV_ERR_GPU_IS_LOST are that loss said again."""
        fallen = list(self._fallen.values())
        if self._status_lost is None or fallen or any(b.xid == GPU_LOST_XID for b in xids):
            return fallen
        return [self._status_lost]

    def _nvidia_buses(self) -> dict[str, str]:
        """The buses the driver's own lines name (an Xid, a GPU lost, a UUID): NVIDIA GPUs."""
        named = dict.fromkeys(self._uuids, "nvrm")
        named.update((bus, "nvrm") for bus in self._fallen if bus is not None)
        named.update(
            (bus, "xid")
            for (bus, _), builder in self._groups.items()
            if bus is not None and ":" in bus and builder.count
        )
        return named

    def _scan(self, text: str, stop: int) -> None:
        """Every line of ``text[:stop]`` (which ends with a newline) that says NVRM or Xid.
        ``text`` goes on after ``stop`` (lines held back, or a newline): a record's next line is
        looked at for its continuation.

        A regex with a literal prefix finds the driver's standard "NVRM: Xid (<device>): <n>"
        lines, fields included, at memchr speed; ``str.find`` checks the text between two of
        them for any other NVRM or Xid line (a newline in a burst, the noise elsewhere). Only
        those lines reach Python."""
        find, rfind, count = text.find, text.rfind, text.count
        standard = self._standard  # the hot path's names, looked up once a chunk
        self._crash.resume(text, self._lines_before + 1)
        # the number of the line that starts at ``previous`` (the last line read; at first the
        # line at offset 0), and where the text not yet read starts
        number, previous, gap = self._lines_before + 1, 0, 0
        crlf = "\r" in text  # Windows pastes
        start, line, lead, glued = 0, "", "", False
        for found in _STANDARD_XID.finditer(text, 0, stop):
            at = found.start()
            if at < gap:
                # another "NVRM: Xid (" in the line just read: the driver prints one Xid per
                # message, so a tool joined two (NVSentinel's node condition strings its events
                # together with ';'); each counts (a glued line's pieces read them all)
                if not glued:  # its time is the line's: the text before it is other records
                    standard(line, number, at - start, found, lead)
                continue
            start = rfind("\n", 0, at) + 1
            if start > gap:
                if _holds_marker(text[gap:start]):
                    number, previous = self._scan_between(text, gap, start, number, previous)
                number += count("\n", previous, start)
            elif start > previous:  # the line right after the last one read: a burst
                number += 1
            previous = start
            gap = find("\n", at, stop) + 1
            line = text[start : gap - 2 if crlf and text[gap - 2] == "\r" else gap - 1]
            if text[gap] in _INDENT_CHARS:  # the next line opens indented: the record's rest?
                line = with_continuation(text, gap, line)
            glued = line.count("[") > 1 and self._glued(line, number)
            if not glued:
                lead = line[: at - start]
                standard(line, number, at - start, found, lead)
        if gap < stop:
            self._scan_between(text, gap, stop, number, previous)
        self._lines_before += text.count("\n", 0, stop)
        self._crash.scanned(text, stop)

    def _scan_between(
        self, text: str, begin: int, stop: int, number: int, previous: int
    ) -> tuple[int, int]:
        """The lines of ``text[begin:stop]`` that hold one of ``MARKERS``; returns the number
        and start of the last line read."""
        find, rfind, count = text.find, text.rfind, text.count
        next_marker = _marker_finder(text, begin, stop)
        hit = next_marker(begin)
        while hit >= 0:
            xid_not_word = text.startswith("Xid", hit) and not _XID_WORD_AT.match(text, hit)
            if xid_not_word and not _sxid_at(text, hit):
                # "XidCriticalError": the line may still say "Xid" as a word further on
                hit = next_marker(hit + 3)
                continue
            start = rfind("\n", 0, hit) + 1
            end = find("\n", hit, stop)
            if end < 0:
                end = stop
            number += count("\n", previous, start)
            previous = start
            line = text[start:end]
            line = line[:-1] if line.endswith("\r") else line
            if text.startswith(CRASH_RIP, hit):  # a crash report's registers: nothing else
                self._crash.rip(text, start, end, line, number)
                hit = next_marker(end + 1)
                continue
            if text.startswith(_INDENTS, end + 1):
                line = with_continuation(text, end + 1, line)
            if line.count("[") < 2 or not self._glued(line, number):
                self._line(line, number)
            hit = next_marker(end + 1)
        return number, previous

    def _glued(self, line: str, number: int) -> bool:
        """Read each record of a line that holds several (pasted without its line breaks), each
        as a line of the same number; False when the line holds one record."""
        pieces = kernel_records(line)
        if len(pieces) == 1:
            return False
        for piece in pieces:
            standard = _STANDARD_XID.finditer(piece)
            first = next(standard, None)
            if first is None:
                self._line(piece, number)
                continue
            prefix = piece[: first.start()]
            self._standard(piece, number, first.start(), first, prefix)
            # more Xids in one piece: records a tool joined without stamps of their own (';'),
            # or the uncut rest of a line past MAX_RECORDS_PER_LINE
            for found in standard:
                self._standard(piece, number, found.start(), found, prefix)
        return True

    def _standard(
        self, line: str, number: int, nvrm: int, found: re.Match[str], prefix: str
    ) -> None:
        """'<prefix>NVRM: Xid (<device>): <n>, <message>': the hot path of a burst. ``prefix``:
        the text before the line's first record, which a record a tool joined after another on
        the line shares (the text between them is the other records, not a stamp)."""
        if prefix.endswith("`") and _quoted_in_prose(prefix):  # the test inline: the hot path
            self._unparsed += 1
            return
        printed = found[0]
        builder = self._printed.get(printed)
        if builder is None:
            xid = _number(found[2])
            if xid is None:
                self._unparsed += 1
                return
            builder = self._builder(printed, found[1], xid)
        clock = self._clock
        timestamp, uptime = clock.last if prefix == clock.last_prefix else clock.stamp(prefix)
        after = nvrm + len(printed)  # where the Xid's number ends
        if self._is_copy is not None:
            record = (builder.xid, builder.pci_bus_id, line[after:].lstrip(" ,"), timestamp, uptime)
            if self._is_copy(number, record):
                return
        uuid = None
        if builder.count == 0 and builder.pci_bus_id is not None:
            uuid = self._uuids.get(builder.pci_bus_id)
        message = _own_message(line, after) if builder.reads_message else ""
        builder.add(number, line, timestamp, uptime, message, uuid, prefix)

    def _line(self, line: str, number: int) -> None:
        """Any other line that says NVRM or Xid (pastes, unusual spacing, driver messages)."""
        if "\x1b" in line:
            # dmesg --color=always puts SGR sequences between the stamp, the "NVRM: " subsystem
            # prefix and the message: read the text they colour
            line = files.TERMINAL_ESCAPE.sub("", line)
        nvrm = _nvrm_at(line)
        says_xid = "Xid" in line  # what every Xid pattern below needs
        found = _xid_match(line, nvrm)
        xid = None if found is None else _number(found[2])
        if found is None and says_xid and self._device_plugin(line, number):
            return
        if found is None and SXID_WORD in line and self._nvswitch(line, number):
            return
        if found is None or xid is None:
            if found is not None or (says_xid and _XID_WORD.search(line, max(nvrm, 0))):
                self._unparsed += 1
            elif nvrm >= 0:
                self._message(line, number, nvrm)
            elif MODESET_ERROR in line:
                self._modeset(line)
            elif KERNEL_PROBE_FAILURE.search(line):
                self._probes_failed += 1
            elif PCI_INACCESSIBLE in line and self._inaccessible(line, number):
                return
            elif not self._iommu.line(line, number, self._clock.stamp):
                self._aer.line(line, number, self._clock.stamp)
            return
        prefix = line[: nvrm if nvrm >= 0 else found.start()]
        if _quoted_in_prose(prefix):
            self._unparsed += 1
            return
        builder = self._printed.get(found[0]) or self._builder(found[0], found[1], xid)
        timestamp, uptime = self._clock.stamp(prefix)
        message = line[found.end() :].lstrip(" ,")
        record = (xid, builder.pci_bus_id, message, timestamp, uptime)
        if self._is_copy is not None and self._is_copy(number, record):
            return
        uuid = None if builder.pci_bus_id is None else self._uuids.get(builder.pci_bus_id)
        builder.add(number, line, timestamp, uptime, message, uuid, prefix)

    def _device_plugin(self, line: str, number: int) -> bool:
        """The device plugin's "XidCriticalError: Xid=N on Device=GPU-<uuid>": grouped by the
        UUID it names (the plugin prints no bus id). False when the line is not one."""
        found = _PLUGIN_XID.search(line)
        xid = None if found is None else _number(found["xid"])
        if found is None or xid is None:
            return False
        uuid = found["uuid"]
        builder = self._groups.get((uuid, xid))
        if builder is None:
            builder = self._groups[(uuid, xid)] = XidGroupBuilder(xid, None, uuid)
        prefix = line[: found.start()]
        timestamp, uptime = self._clock.stamp(prefix)
        message = line[found.end() :].lstrip(" ,;") if builder.reads_message else ""
        builder.add(number, line, timestamp, uptime, message, uuid, prefix)
        return True

    def _nvswitch(self, line: str, number: int) -> bool:
        """An NVSwitch's "SXid (PCI:<bus>): <n>, ..." line, folded by (switch bus, SXid). False
        when the line is not one."""
        record = parse_sxid_line(line)
        if record is None:
            return False
        bus = normalize_pci_bus_id(record.bus)
        key = (bus, record.sxid)
        builder = self._switches.get(key)
        if builder is None:
            if len(self._switches) >= _MAX_NAMES:  # a log names a few switches; fuzz input many
                return True
            builder = self._switches[key] = NvSwitchGroupBuilder(record.sxid, record.switch, bus)
        at = line.find(record.switch) if record.switch else line.find(SXID_WORD)
        timestamp, uptime = self._clock.stamp(line[: max(at, 0)])
        builder.add(record, number, line, timestamp, uptime)
        return True

    def _bus(self, device: str) -> str | None:
        """The normalised bus id of a GPU as a line names it (an Xid's "PCI:0000:3b:00", a lost
        GPU's "GPU at 0000:3b:00.0 has "); a log repeats a few spellings, remembered."""
        bus = self._buses.get(device, "")
        if bus == "":
            bus = normalize_pci_bus_id(device)
            # a log names a few GPUs in a few short spellings; fuzz input names many, long
            if len(self._buses) < _MAX_NAMES and len(device) <= _MAX_SPELLING_CHARS:
                self._buses[device] = bus
        return bus

    def _builder(self, printed: str, device: str, xid: int) -> XidGroupBuilder:
        """The group of an Xid as printed ("NVRM: Xid (PCI:0000:3b:00): 13"): spellings of
        one bus id share it."""
        bus = self._bus(device)
        builder = self._groups.get((bus, xid))
        if builder is None:
            builder = self._groups[(bus, xid)] = XidGroupBuilder(xid, bus, None)
        if len(self._printed) < _MAX_NAMES:
            self._printed[printed] = builder
        return builder

    def _message(self, line: str, number: int, nvrm: int) -> None:
        """A non-Xid NVRM line: bus → UUID mapping, GPU lost without an Xid, notable kinds."""
        body = line[nvrm + 5 :]
        if "GPU at" in body and "GPU-" in body:  # the words the mapping's pattern needs
            mapping = _GPU_AT_UUID.search(body)
            bus = None if mapping is None else normalize_pci_bus_id(mapping["bus"])
            if bus is not None and mapping is not None and len(self._uuids) < 4096:
                self._uuids[bus] = mapping["uuid"]
        for kind in {_NOTABLE_KIND[text] for text in _NOTABLE.findall(body)}:
            self._other[kind] += 1
            if kind == "driver-loaded":
                # the module prints its banner once a GPU came up: a probe failure before it
                # with no NVRM reason was a device it declined (a chipset co-processor, a GPU
                # of a legacy branch), not a GPU it could not take
                self._probes_failed = 0
        for marker in GPU_LOST_MARKERS:
            if marker in body:
                self._fallen_off(line, number, nvrm, body, marker)
                break
        else:
            if self._status_lost is None and _LOST_STATUS.search(body):
                self._status_lost = self._lost_by_status(line, number, nvrm, body)
        self._recent.append(_Recent(number, line))

    def _lost_by_status(self, line: str, number: int, nvrm: int, body: str) -> XidGroupBuilder:
        """A GPU lost as the driver's status says, once: its calls fail in a burst (every RPC
        in flight, each free that follows) for the one loss."""
        builder = XidGroupBuilder(GPU_LOST_XID, None, None)
        builder.lost_by_status = True
        timestamp, uptime = self._clock.stamp(line[: max(nvrm, 0)])
        builder.add(number, None, timestamp, uptime, body, None)
        builder.add_context([line])
        return builder

    def _modeset(self, line: str) -> None:
        """An nvidia-modeset error line: the display-engine kinds it names."""
        for kind in {_MODESET_KIND[text] for text in _MODESET.findall(line)}:
            self._other[kind] += 1

    def _fallen_off(self, line: str, number: int, nvrm: int, body: str, marker: str) -> None:
        """ "GPU at 0000:01:00.0 has fallen off the bus." names its GPU; the three-line form
        names it on the "The NVIDIA GPU <bus>" line before (NVSentinel issue 155). "GPU is lost"
        counts only where the line names the GPU (it also ends assertion lines of any GPU)."""
        bus = self._bus(body.split(marker, 1)[0])
        context: list[_Recent] = []
        if bus is None and marker != "fallen off the bus":
            return
        if bus is None:
            head = self._fallen_head(number)
            if head is not None:
                context = [r for r in self._recent if r.number >= head[0].number]
                bus = head[1]
        # continuation lines carry no prefix: the message's time is its first line's
        first = context[0].line if context else line
        first_nvrm = first.find("NVRM:") if context else nvrm
        self._record_lost(
            bus, number, first[: max(first_nvrm, 0)], body, [*(r.line for r in context), line]
        )

    def _inaccessible(self, line: str, number: int) -> bool:
        """The PCI core's "nvidia <bus>: Unable to change power state from D3cold to D0, device
        inaccessible" (``_NVIDIA_INACCESSIBLE``): the nvidia driver's GPU lost from the bus, each
        line one failed power-up; a quoted example of the line is read as nothing. False when
        the line is another device's."""
        found = _NVIDIA_INACCESSIBLE.search(line)
        if found is None:
            return False
        prefix = line[: found.start()]
        if _quoted_in_prose(prefix):  # a runbook's or an issue's example, as for an Xid line
            return True
        self._record_lost(self._bus(found["bus"]), number, prefix, found["message"], [line])
        return True

    def _record_lost(
        self, bus: str | None, number: int, stamped: str, message: str, context: list[str]
    ) -> None:
        """One more line saying the GPU at ``bus`` is lost without an Xid, in its group (made
        at its first such line): ``stamped`` is the text before the message, which holds its
        time; ``context`` the lines that said it."""
        builder = self._fallen.get(bus)
        if builder is None:
            if len(self._fallen) >= _MAX_NAMES:  # a log loses a few GPUs; fuzz input names many
                return
            builder = self._fallen[bus] = XidGroupBuilder(GPU_LOST_XID, bus, None)
        timestamp, uptime = self._clock.stamp(stamped)
        uuid = None if bus is None else self._uuids.get(bus)
        builder.add(number, None, timestamp, uptime, message, uuid)
        builder.add_context(context)

    def _fallen_head(self, number: int) -> tuple[_Recent, str | None] | None:
        for recent in reversed(self._recent):
            if number - recent.number > FALLEN_OFF_LOOKBACK_LINES:
                return None
            found = _FALLEN_HEAD.search(recent.line)
            if found is not None:
                return recent, normalize_pci_bus_id(found["bus"])
        return None


def _held_back(text: str) -> int:
    """Where the last ``MAX_CONTINUATION_LINES`` complete lines of ``text`` start (0: it holds
    no line before them): a chunk's scan stops there, so the continuation of every record it
    reads is in the text, as it is when the log is read whole."""
    at = len(text)
    for _ in range(MAX_CONTINUATION_LINES + 1):
        at = text.rfind("\n", 0, at)
        if at < 0:
            return 0
    return at + 1


def _holds_marker(text: str) -> bool:
    """Whether ``text`` holds one of ``MARKERS``. Measured: ``in`` on the slice, in a loop that
    stops at the first, beats a bounded find per marker (argument parsing) and one regex (it
    tries each place a marker's first letter stands) on a burst's one-line gaps, and is as fast
    as the finds on the long gaps of a log with few Xid lines."""
    for marker in MARKERS:  # noqa: SIM110 -- any() over a generator is slower here
        if marker in text:
            return True
    return False


def _marker_finder(text: str, begin: int, stop: int) -> Callable[[int], int]:
    """Where the next of ``MARKERS`` starts in ``text[at:stop]`` (-1: none), for an ``at`` that
    only moves forward from ``begin``: one regex search over a short span, a find per marker
    (each kept until passed) over a long one."""
    if stop - begin < SHORT_GAP_CHARS:
        search = _ANY_MARKER.search

        def next_by_regex(at: int) -> int:
            found = search(text, at, stop)
            return -1 if found is None else found.start()

        return next_by_regex
    find = text.find
    cursors = [find(marker, begin, stop) for marker in MARKERS]

    def next_by_find(at: int) -> int:
        for index, place in enumerate(cursors):
            if 0 <= place < at:
                cursors[index] = find(MARKERS[index], at, stop)
        return min((place for place in cursors if place >= 0), default=-1)

    return next_by_find


def _quoted_in_prose(prefix: str) -> bool:
    """The text before an Xid record opens a Markdown code span after other words ("Look for
    `Xid (PCI:...): 79`", "- Kernel message in dmesg: `NVRM: Xid (...): 88, ...`"): a runbook or
    an issue quoting an example, not a record of this log (no kernel or syslog prefix ends in a
    backtick). A paste that is only the quoted line ("`NVRM: Xid ...`") is still read."""
    return prefix.endswith("`") and bool(prefix[:-1].strip())


def _sxid_at(text: str, xid: int) -> bool:
    """The "Xid" found at ``xid`` is the end of an NVSwitch's "SXid"."""
    return xid > 0 and text[xid - 1] == "S" and (xid < 2 or not text[xid - 2].isalnum())


def _nvrm_at(line: str) -> int:
    """Where a line's "NVRM:" (or an old open module's "NVRM <function>:") starts; -1: none."""
    at = line.find("NVRM:")
    if at < 0 and "NVRM " in line:
        found = _NVRM_FUNCTION.search(line)
        at = -1 if found is None else found.start()
    return at


def scan_kernel_log(
    text: str,
    *,
    year: int | None = None,
    tz_offset_s: float = 0.0,
    written_s: float | None = None,
) -> KernelLogReport:
    """Every Xid, GPU-lost message and notable NVRM message of a kernel log, grouped by
    (GPU, Xid). ``year``: the year of a syslog date that prints none ("Feb 15 17:37:45");
    without it those lines have no calendar time. ``written_s``: when the log was written
    (its file's time), which decides that year instead: no line is later. ``tz_offset_s``:
    seconds east of UTC of stamps that carry no zone (dmesg -T, syslog)."""
    scanner = KernelLogScanner(year=year, tz_offset_s=tz_offset_s, written_s=written_s)
    scanner.feed(text)
    return scanner.finish()


def parse_xid_line(
    line: str, *, year: int | None = None, tz_offset_s: float = 0.0
) -> XidOccurrence | None:
    """One Xid line as an ``XidOccurrence`` (line number 1), or None when it holds no Xid."""
    line = line.rstrip("\r\n")
    nvrm = line.find("NVRM:")
    found = _xid_match(line, nvrm)
    xid = None if found is None else _number(found[2])
    if found is None or xid is None:
        return None
    clock = _Clock(year, tz_offset_s)
    timestamp, uptime = clock.stamp(line[: nvrm if nvrm >= 0 else found.start()])
    message = line[found.end() :].lstrip(" ,")
    process = _PID.search(message)
    pid = None if process is None else _number(process["pid"])
    name = None if process is None else process["name"].strip()
    return XidOccurrence(
        xid=xid,
        line_number=1,
        line=line,
        pci_bus_id=normalize_pci_bus_id(found[1]),
        uuid=None,
        message=message,
        timestamp_s=timestamp,
        uptime_s=uptime,
        pid=pid,
        process=None if name in (None, "", "<unknown>") else name,
    )
