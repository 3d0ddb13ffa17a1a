"""A process the host's out-of-memory killer ended: host RAM (or a cgroup's limit), not the GPU.

When a machine, a container's memory cgroup, a Kubernetes pod or a Slurm job runs out of RAM, the
kernel's OOM killer (mm/oom_kill.c) ends a process with SIGKILL: no CUDA error and no Python
traceback, only what the process's parent saw — the shell's "Killed", exit status 137 (128 + 9),
torchrun's "exitcode: -9", DataLoader's "worker … is killed by signal: Killed". The records that
name the cause are elsewhere: the kernel log ("Out of memory: Killed process N", "oom-kill:
constraint=CONSTRAINT_MEMCG", "Memory cgroup out of memory"), the container runtime ("OOMKilled"),
Slurm ("Detected N oom-kill event(s) … killed by the cgroup out-of-memory handler"), and Ray's
memory monitor, which kills a worker itself before the kernel would ("Task was killed due to the
node running low on memory"). The kubelet's eviction ("The node was low on resource: memory") is
the same shortage.

A paste with such a record states the cause. A bare SIGKILL (the shell's "Killed", exit 137, a
DataLoader worker killed) is usually the OOM killer on a training or serving node but not always:
a scheduler's time limit, a preemption, a failed liveness probe or a user's `kill -9` send the
same signal — so it is the usual reading, and the records above decide. Where the paste itself
names another killer, the signal is left to it; where the runtime says it recorded no OOM kill
(Kubernetes' "Reason: Error", Docker's "OOMKilled": false), it is one candidate.

A launcher's report of a SIGKILLed rank alone stays ``rank-killed`` (signatures.py); with one of
the OOM records beside it, this cause ranks first.

The same shortage without a kill: PyTorch's CPU allocator (c10/core/impl/alloc_cpu.cpp) raises
when the operating system refuses host memory — "DefaultCPUAllocator: can't allocate memory: you
tried to allocate N bytes. Error code 12 (Cannot allocate memory)" where posix_memalign fails
(Linux: RAM and swap, an overcommit or ulimit limit), "DefaultCPUAllocator: not enough memory: you
tried to allocate N bytes" where _aligned_malloc fails (Windows: the commit limit, RAM plus the
page file, reached — Task Manager can show free RAM while the commit charge is at its limit);
PyTorch ≤ 1.1 ended it with "Buy new RAM!". NumPy says the same of an array: "Unable to allocate
3.58 GiB for an array with shape (…) and data type float64" (numpy/core/_exceptions.py,
_ArrayMemoryError, the MemoryError its allocator raises when malloc fails). The message states
the cause: host memory, not the GPU's (a CUDA allocation says "CUDA out of memory"). A request
larger than the machine's RAM is still this shortage; what decides is the request against the RAM
(or commit limit) free.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.match import quoted, reading_vote
from gpuwarden.health.explain.text import Paste, strip_decorations
from gpuwarden.health.explain.votes import Vote

CAUSE = "host-out-of-memory"
# A paste mentions one (lower case) before the patterns are tried.
WORDS = (
    "kill",
    "oom",
    "137",
    "low on memory",
    "low on resource",
    "cpuallocator",
    "unable to allocate",
    "failcnt",
)

# Weights (rank.py: ≥ 0.85 high, ≥ 0.55 medium): a record of the OOM kill states the cause; a
# bare SIGKILL is the usual reading; a kill the runtime says was not an OOM kill is a candidate.
STATED = 0.9
SIGNAL = 0.6
UNRECORDED = 0.35

# The records that name an out-of-memory kill: the kernel (mm/oom_kill.c, older kernels' "Kill
# process N … or sacrifice child", the memory cgroup's variant), Slurm's cgroup plugin, systemd's
# unit result and systemd-oomd, the container runtimes and the kubelet, Ray's memory monitor.
# The kernel's report of a memory cgroup's OOM (dump_header → mem_cgroup_print_oom_meminfo,
# mm/memcontrol.c; mem_cgroup_print_oom_info in older kernels) prints the group's counter as
# "memory: usage NkB, limit NkB, failcnt N" only there, before the kill it reports.
_STATED = re.compile(
    r"Out of memory: Kill(?:ed)? process \d+|"
    r"\bmemory: usage \d+kB, limit \d+kB, failcnt \d+|"
    r"\boom-kill:\s*constraint=|\binvoked oom-killer\b|oom_reaper: reaped process|"
    r"Detected \d+ oom[-_]kill events?|killed by the cgroup out-of-memory handler|"
    r"has been killed by the OOM killer|"
    r"systemd-oomd\S*\s+Killed \S+ due to memory (?:pressure|used)|"
    r"\bOOMKilled\b(?!\"?\s*:\s*false)|"
    r"The node was low on resource: memory|"
    r"Task was killed due to the node running low on memory|"
    r"killed due to memory pressure \(OOM\)|"
    r"exceeds the memory usage threshold of [\d.]+\. Ray killed this worker",
    re.IGNORECASE,
)

# PyTorch's CPU allocator refused host memory (alloc_cpu.cpp; CPUAllocator.cpp in PyTorch ≤ 1.9):
# posix_memalign's "can't allocate memory", _aligned_malloc's "not enough memory", the old "Buy
# new RAM!" wording.
_ALLOCATOR_REFUSED = re.compile(
    r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)"
    r"(?:: you tried to allocate \d+\s*(?:bytes|GB))?",
    re.IGNORECASE,
)
# NumPy's _ArrayMemoryError: its allocator (malloc) refused host memory for an array.
_ARRAY_REFUSED = re.compile(
    r"Unable to allocate [\d.]+\s*[KMGTPE]?i?B for an array with shape", re.IGNORECASE
)

# A process ended by SIGKILL, as its parent reports it. Over lines: the shell's job status
# ("bash: line 27: 318 Killed  cmd", zsh's "[1]  55263 killed  cmd", a line that is only
# "Killed", or one ending a progress bar "…it/s]Killed"), srun's "task 0: Killed".
_SHELL_KILLED_LINE = re.compile(
    r"^\**Killed\**$|[\]|]\s*Killed$|"
    r"(?:^|:)\s*\d+\s+Killed\s+\S|"
    r"^\[\d+\]\s*[+-]?\s*\d+\s+killed\s+\S|"
    r"\btasks? [\d,\-]+: Killed$"
)
# Over the flat text: DataLoader's report of a worker SIGKILLed, exit status 137 (128 + SIGKILL)
# as shells, Docker (Compose, `docker ps`, inspect), Kubernetes and IDEs print it.
_SIGNALLED = re.compile(
    r"DataLoader worker \(pid\(?s?\)? [\d, ]+\) is killed by signal: Killed|"
    r"\bexit(?:ed|s)?\s+(?:with\s+)?(?:status\s+|return\s+)?code[:=]?\s*137\b|"
    r"\bexit\s*code\s*:\s*137\b|\"ExitCode\"\s*:\s*137\b|\bexit status 137\b|"
    r"\bExited \(137\)",
    re.IGNORECASE,
)
# The runtime recorded the SIGKILL and says it was not an OOM kill.
_NOT_RECORDED_AS_OOM = re.compile(r"\bReason:\s*Error\b|\"OOMKilled\"\s*:\s*false", re.IGNORECASE)
# Another sender of the same SIGKILL named in the paste: a scheduler's time limit, preemption or
# requeue, a failed liveness probe, the kubelet killing the container, `docker stop` (SIGKILL after
# its grace period) or `docker kill`.
_OTHER_KILLER = re.compile(
    r"DUE TO (?:TIME LIMIT|PREEMPTION|JOB REQUEUE|NODE FAILURE)|\bpreempted\b|"
    r"Liveness probe failed|Killing container with id|\bdocker (?:stop|kill)\b|"
    r"exceeded (?:its |the )?(?:time|walltime|wall-clock) limit",
    re.IGNORECASE,
)

_MEANINGS = {
    STATED: "a record of an out-of-memory kill: the host's RAM (or the cgroup / pod / job "
    "memory limit) ran out, not the GPU's memory",
    SIGNAL: "a process ended by SIGKILL with no error of its own: usually the host's OOM killer",
    UNRECORDED: "a SIGKILL the runtime did not record as an out-of-memory kill",
}
_ALLOCATOR_MEANING = (
    "PyTorch's CPU allocator was refused host memory: the host's RAM (on Windows the commit "
    "limit, RAM plus the page file) ran out, not the GPU's memory"
)
_ARRAY_MEANING = (
    "NumPy was refused host memory for an array (_ArrayMemoryError): the host's RAM (on Windows "
    "the commit limit, RAM plus the page file) ran out, not the GPU's memory"
)
ALLOCATOR_DECIDES = (
    "the bytes it tried to allocate against the host's free memory at that moment: `free -g` "
    "(and `ulimit -v`, `cat /proc/sys/vm/overcommit_memory`) on Linux; on Windows Task Manager's "
    "Committed (used / limit) and the page file size — a request larger than the machine's RAM "
    "= the input, batch or model is too big for this host"
)
DECIDES = (
    "the OOM killer's record at that time: `dmesg -T | grep -iE 'killed process|oom-kill'` (or "
    "`journalctl -k`) on the node; `kubectl describe pod` (Last State: Reason OOMKilled); "
    "`sacct -j JOB -o JobID,State,MaxRSS,ReqMem` (OUT_OF_MEMORY); `docker inspect -f "
    "'{{.State.OOMKilled}}'` — none of them = another SIGKILL (a time limit, preemption, a "
    "probe, a `kill -9`)"
)


def _shell_killed(paste: Paste) -> str | None:
    """The first line where a shell or srun reports a process ended by SIGKILL."""
    for line in paste.raw.split("\n"):
        stripped = strip_decorations(line)
        if "illed" in stripped and _SHELL_KILLED_LINE.search(stripped) is not None:
            return stripped
    return None


def _signal_evidence(paste: Paste) -> tuple[str, float] | None:
    """A bare SIGKILL in the paste and its weight; None without one, or where the paste names
    another sender."""
    flat = paste.flat
    if _OTHER_KILLER.search(flat) is not None:
        return None
    match = _SIGNALLED.search(flat)
    if match is not None:
        unrecorded = "137" in match[0] and _NOT_RECORDED_AS_OOM.search(flat) is not None
        return match[0], UNRECORDED if unrecorded else SIGNAL
    line = _shell_killed(paste)
    return None if line is None else (line, SIGNAL)


def host_oom_votes(paste: Paste) -> list[Vote]:
    """The vote for ``host-out-of-memory`` in a paste (at most one): a record of the kill first,
    then PyTorch's or NumPy's allocator refused host memory, then a bare SIGKILL."""
    stated = _STATED.search(paste.flat)
    if stated is not None:
        return reading_vote(CAUSE, (stated[0], STATED), _MEANINGS, DECIDES)
    for pattern, meaning in (
        (_ALLOCATOR_REFUSED, _ALLOCATOR_MEANING),
        (_ARRAY_REFUSED, _ARRAY_MEANING),
    ):
        refused = pattern.search(paste.flat)
        if refused is not None:
            return [Vote(CAUSE, STATED, quoted(refused[0], meaning), ALLOCATOR_DECIDES)]
    return reading_vote(CAUSE, _signal_evidence(paste), _MEANINGS, DECIDES)
