"""The two cause codes for collective failures (collective-mismatch, rank-killed) on the wordings
the held-out sets do not hold: typed in the launchers' and PyTorch's documented formats, each
asserting the confidence the text alone supports."""

from __future__ import annotations

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence

_CHILD_FAILED = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-02_10:11:12
  host      : node-7
  rank      : 3 (local_rank: 3)
  exitcode  : {code} (pid: 41230)
  error_file: <N/A>
  traceback : Signal {signal} ({name}) received by PID 41230
============================================================"""


def _top(text: str) -> tuple[str, Confidence]:
    first = explain_text(text).diagnoses[0]
    return first.cause, first.confidence


def _causes(text: str) -> list[str]:
    return [d.cause for d in explain_text(text).diagnoses]


def test_a_sigkill_with_the_oom_killer_line_reads_the_host_oom() -> None:
    text = _CHILD_FAILED.format(code=-9, signal=9, name="SIGKILL")
    assert _top(text) == ("rank-killed", Confidence.MEDIUM)
    oom = text + "\n[ 8812.123456] Out of memory: Killed process 41230 (python) total-vm:912345kB"
    assert _top(oom) == ("host-out-of-memory", Confidence.HIGH)
    assert "rank-killed" in _causes(oom)


def test_a_multiprocessing_sigkill_is_medium() -> None:
    text = "RuntimeError: DataLoader worker... process 2 terminated with signal SIGKILL\n" + (
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal "
        "SIGKILL\nException: process 1 died with <Signals.SIGKILL: 9>."
    )
    assert _top(text) == ("rank-killed", Confidence.MEDIUM)


def test_a_segfault_of_a_rank_is_low_and_says_its_own_log_decides() -> None:
    first = explain_text(_CHILD_FAILED.format(code=-11, signal=11, name="SIGSEGV")).diagnoses[0]
    assert (first.cause, first.confidence) == ("rank-killed", Confidence.LOW)


def test_a_watchdog_abort_is_not_a_killed_rank() -> None:
    watchdog = (
        "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9123, "
        "OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600016 "
        "milliseconds before timing out.\n"
    )
    text = watchdog + _CHILD_FAILED.format(code=-6, signal=6, name="SIGABRT")
    assert "rank-killed" not in _causes(text)


def test_the_wrapper_mismatch_messages_are_collective_mismatch() -> None:
    detected = (
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running "
        "collective: CollectiveFingerPrint(OpType=ALLREDUCE, TensorShape=[10], "
        "TensorDtypes=Float), but Rank 1 is running collective: CollectiveFingerPrint("
        "OpType=BROADCAST, TensorShape=[10], TensorDtypes=Float)."
    )
    assert _top(detected) == ("collective-mismatch", Confidence.MEDIUM)
    older = "RuntimeError: Rank 1 is running inconsistent collective: CollectiveFingerPrint(...)"
    assert _top(older) == ("collective-mismatch", Confidence.MEDIUM)
